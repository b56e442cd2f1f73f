package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestTokenRevocation: a revoked token stops at once on the instance that
// revoked it, and within a second (the cache's life) on every other.
func TestTokenRevocation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, nil)
		token, err := a.s.CreateToken(a.ctx, review.Operator("admin@example.com"), tenantA, "ci")
		if err != nil {
			t.Fatal(err)
		}
		for _, inst := range []*bundle{a, b} {
			ti, err := inst.s.TenantForToken(inst.ctx, token)
			if err != nil || ti.Tenant != tenantA {
				t.Fatalf("TenantForToken = %+v, %v; want tenant %s", ti, err, tenantA)
			}
		}
		if _, err := a.s.TenantForToken(a.ctx, token+"0"); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("an unknown token resolves: %v", err)
		}
		toks, err := a.s.ListTokens(a.ctx, review.Operator("admin@example.com"))
		if err != nil || len(toks) != 1 {
			t.Fatalf("ListTokens = %v, %v", toks, err)
		}
		if err := a.s.RevokeToken(a.ctx, review.Operator("admin@example.com"), toks[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := a.s.TenantForToken(a.ctx, token); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("the revoking instance still accepts the token: %v", err)
		}
		// b resolved it before the revocation: trusted until its second is up.
		if _, err := b.s.TenantForToken(b.ctx, token); err != nil {
			t.Errorf("other instance within the second: %v (the cache should still hold it)", err)
		}
		b.clk.Advance(time.Second)
		if _, err := b.s.TenantForToken(b.ctx, token); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("other instance after a second still accepts the revoked token: %v", err)
		}
	})
}
