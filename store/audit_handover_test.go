package store_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestAuditHandover: two instances on one database, one key each. The one
// whose key did not sign the newest checkpoint seals nothing until it
// takes the trail over (HandOverAudit, audited); once it has, the other
// seals nothing — sealing on would break the trail under both keys — and
// cannot take it back (a trail goes to keys that never signed it). Checked
// with the new key the trail holds, the old checkpoints carried over.
func TestAuditHandover(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		url := storetest.URL(t, e)
		open := func(seed string) *store.Store {
			k := ed25519.NewKeyFromSeed([]byte(strings.Repeat(seed, ed25519.SeedSize)))
			s, err := store.Open(ctx, url, store.Options{AuditKey: k, MaxConns: storetest.MaxConns, Resolve: storetest.Resolver(nil)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, b := open("a"), open("b")
		event := func(s *store.Store, ref string) {
			if _, _, err := s.Register(ctx, review.Registration{Tenant: "acme", SourceRef: ref, LogicalVersion: "1", Action: "render",
				Destination: "files", Risk: review.RiskIdempotentWrite, Payload: []byte(`{}`), Actor: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		event(a, "doc-1")
		first, err := a.Seal(ctx)
		if err != nil || first == nil {
			t.Fatalf("a seals: %v, %v", first, err)
		}
		event(b, "doc-2")
		if _, err := b.Seal(ctx); !errors.Is(err, store.ErrAuditKeyReplaced) {
			t.Fatalf("b seals after a's checkpoint without taking over: %v, want ErrAuditKeyReplaced", err)
		}
		if err := b.HandOverAudit(ctx, first.KeyID, first.ID); err != nil {
			t.Fatal(err)
		}
		if c, err := b.Seal(ctx); err != nil || c == nil || c.KeyID == first.KeyID {
			t.Fatalf("b seals after taking over: %+v, %v", c, err)
		}
		event(a, "doc-3")
		if _, err := a.Seal(ctx); !errors.Is(err, store.ErrAuditKeyReplaced) {
			t.Errorf("a seals after the handover: %v, want ErrAuditKeyReplaced", err)
		}
		if err := a.HandOverAudit(ctx, "whatever", 2); !errors.Is(err, store.ErrKeySignedBefore) {
			t.Errorf("a takes the trail back: %v, want ErrKeySignedBefore", err)
		}
		if _, err := b.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := b.VerifyAudit(ctx, store.VerifyOptions{PublicKey: b.AuditPublicKey(), SkipAge: true})
		if err != nil || !rep.OK || rep.Carried != 1 || len(rep.RetiredKeys) != 1 || rep.RetiredKeys[0] != first.KeyID {
			t.Errorf("verify with the new key: %+v, %v", rep, err)
		}
	})
}
