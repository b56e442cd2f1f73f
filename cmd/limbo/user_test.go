package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
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

// TestUserPassword: limbo user password gives a user who lost their
// password a new one (piped, or generated and printed once); the old one
// stops working. There was no way back in: user add refuses an existing
// email. An unknown email or a short password is refused, exit 2.
func TestUserPassword(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "users.db")
	if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, errOut)
	}
	ctx := context.Background()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"user", "add", "--email", "rev@example.com", "--role", "reviewer", "--db", db},
		strings.NewReader("the first long password\n"), &out, &errb); code != 0 {
		t.Fatalf("user add: %d %s", code, errb.String())
	}
	out.Reset()
	if code := run(ctx, []string{"user", "password", "--email", "REV@example.com", "--db", db},
		strings.NewReader("the second long password\n"), &out, &errb); code != 0 || !strings.Contains(out.String(), "password changed") {
		t.Fatalf("user password from stdin: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	code := run(ctx, []string{"user", "password", "--email", "rev@example.com", "--db", db}, strings.NewReader(""), &out, &errb)
	m := regexp.MustCompile(`new password \(shown once\): (\S{20,});`).FindStringSubmatch(out.String())
	if code != 0 || m == nil {
		t.Fatalf("user password, generated: %d %q", code, out.String())
	}
	st, err := store.Open(ctx, db, store.Options{MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Login(ctx, "rev@example.com", "the second long password", "127.0.0.1", store.SessionPolicy{}); err == nil {
		t.Error("the replaced password still signs in")
	}
	if _, _, err := st.Login(ctx, "rev@example.com", m[1], "127.0.0.1", store.SessionPolicy{}); err != nil {
		t.Errorf("the generated password: %v", err)
	}
	if code, _, errOut := limbo(t, "user", "password", "--email", "nobody@example.com", "--db", db); code == 0 || !strings.Contains(errOut, "no user has the email") {
		t.Errorf("an unknown email: %d %q", code, errOut)
	}
	if code := run(ctx, []string{"user", "password", "--email", "rev@example.com", "--db", db}, strings.NewReader("short\n"), &out, &errb); code == 0 {
		t.Error("a short password was taken")
	}
}
