package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUserAddUnknownTenant: limbo user add with a tenant no tenant has yet
// (a typo, or one ahead of its first token) adds the user and warns on
// stderr that they see nothing there, as the console says it; a known
// tenant, or *, adds without a warning. Before, "acmee" was taken silently.
func TestUserAddUnknownTenant(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "users.db")
	if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, errOut)
	}
	if code, _, errOut := limbo(t, "token", "create", "--tenant", "acme", "--db", db); code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	code, out, errOut := limbo(t, "user", "add", "--email", "typo@example.com", "--role", "support", "--tenants", "acme,acmee,beta", "--db", db)
	if code != 0 || !strings.Contains(out, "typo@example.com") {
		t.Fatalf("user add with an unknown tenant: %d %q %q, want it added", code, out, errOut)
	}
	if want := "warning: no tenant is named acmee, beta yet: typo@example.com sees nothing there"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	for _, tenants := range []string{"acme", "*"} {
		code, _, errOut := limbo(t, "user", "add", "--email", "ok"+strings.Trim(tenants, "*")+"@example.com", "--role", "support", "--tenants", tenants, "--db", db)
		if code != 0 || strings.Contains(errOut, "warning") {
			t.Errorf("user add --tenants %s: %d %q, want no warning", tenants, code, errOut)
		}
	}
}
