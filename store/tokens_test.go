package store_test

import (
	"errors"
	"strings"
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

// TestTokenRevokedDuringALookup: a lookup that read the token from the
// database just before an admin revoked it must not put it back in the
// cache after the revocation dropped it. It did, and the instance that
// answered "revoked" went on accepting the token for up to a second.
// The revocation runs inside the lookup's second reading of the clock:
// after its database read, before it caches what it read.
func TestTokenRevokedDuringALookup(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(t0)
		var calls int
		var during func()
		s := storetest.Open(t, e, store.Options{Clock: func() time.Time {
			if during != nil {
				if calls++; calls == 2 {
					f := during
					during = nil
					f()
				}
			}
			return clk.Now()
		}})
		ctx := t.Context()
		op := review.Operator("admin@example.com")
		token, err := s.CreateToken(ctx, op, tenantA, "ci")
		if err != nil {
			t.Fatal(err)
		}
		toks, err := s.ListTokens(ctx, op)
		if err != nil || len(toks) != 1 {
			t.Fatalf("ListTokens = %v, %v", toks, err)
		}
		revoked := false
		during = func() {
			if err := s.RevokeToken(ctx, op, toks[0].ID); err != nil {
				t.Fatal(err)
			}
			revoked = true
		}
		// The lookup in flight read the token before the revocation: it
		// may answer with it, as a request a moment earlier would have.
		if _, err := s.TenantForToken(ctx, token); err != nil || !revoked {
			t.Fatalf("lookup during the revocation: %v (revoked: %v)", err, revoked)
		}
		// Revoked now: the next call is refused, with no second to wait.
		if ti, err := s.TenantForToken(ctx, token); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("after the revocation the token still resolves: %+v, %v", ti, err)
		}
	})
}

// TestTokenNameTrimmed: a token's name is stored trimmed, and a blank one
// (spaces only, or nothing) is refused naming the field, on both engines.
// Before, "  ci  " was stored with its spaces and "   " or "" made a token
// with no name to tell it apart or to confirm its revocation by.
func TestTokenNameTrimmed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s := storetest.Open(t, e, store.Options{})
		ctx := t.Context()
		op := review.Operator("admin@example.com")
		if _, err := s.CreateToken(ctx, op, "acme", "  ci  "); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"", "   ", "\u00a0"} {
			if _, err := s.CreateToken(ctx, op, "acme", name); !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), `field "name": required`) {
				t.Errorf("name %q: %v, want invalid: name required", name, err)
			}
		}
		toks, err := s.ListTokens(ctx, op)
		if err != nil || len(toks) != 1 || toks[0].Name != "ci" {
			t.Fatalf("tokens = %+v, %v; want one named ci", toks, err)
		}
	})
}
