package demo

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCheckDemoDatabase: the demo seeds an empty database, and one it
// seeded before (users and tokens of its own); a database with a user or
// an API token the demo did not make is refused, naming them.
func TestCheckDemoDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		st := storetest.Open(t, engine, store.Options{})
		if err := checkDemoDatabase(ctx, st); err != nil {
			t.Fatalf("an empty database: %v", err)
		}
		if _, err := seedDemoUsers(ctx, st); err != nil {
			t.Fatal(err)
		}
		for _, tenant := range Tenants {
			if _, err := st.CreateToken(ctx, review.Operator("cli:demo"), tenant, "demo traffic"); err != nil {
				t.Fatal(err)
			}
		}
		if err := checkDemoDatabase(ctx, st); err != nil {
			t.Fatalf("a database the demo seeded: %v", err)
		}
		if _, err := st.CreateToken(ctx, review.Operator("cli:ops"), "acme", "billing-agent"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddUser(ctx, review.Operator("cli:ops"), store.NewUser{Email: "ops@example.com", Password: "correct horse battery",
			Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		err := checkDemoDatabase(ctx, st)
		if err == nil || !strings.Contains(err.Error(), "user ops@example.com") || !strings.Contains(err.Error(), `API token "billing-agent" of tenant acme`) {
			t.Fatalf("a real database: %v", err)
		}
	})
}

// TestRevokeEarlierTraffic: a restarted demo revokes the traffic tokens
// of its earlier runs (their secrets died with those runs), audited, and
// leaves the printed demo token alone. Before, each restart added a row
// per tenant to the admin's tokens page, all of them active.
func TestRevokeEarlierTraffic(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		st := storetest.Open(t, engine, store.Options{})
		for _, tenant := range Tenants[1:] {
			if _, err := st.CreateToken(ctx, review.Operator("cli:demo"), tenant, trafficToken); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.CreateToken(ctx, review.Operator("cli:demo"), "demo", "demo"); err != nil {
			t.Fatal(err)
		}
		if err := revokeEarlierTraffic(ctx, st); err != nil {
			t.Fatal(err)
		}
		ts, err := st.ListTokens(ctx, review.Operator("cli:demo"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range ts {
			if revoked := tok.RevokedAt != nil; revoked != (tok.Name == trafficToken) {
				t.Errorf("token %q of %s: revoked %v", tok.Name, tok.Tenant, revoked)
			}
		}
		evs, err := st.AuditEvents(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Action == "token.revoked" && ev.Actor == "cli:demo" {
				n++
			}
		}
		if n != len(Tenants)-1 {
			t.Errorf("%d token.revoked events by cli:demo, want %d", n, len(Tenants)-1)
		}
	})
}
