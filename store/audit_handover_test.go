package store_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestAuditHandover: a store takes the trail over from the key that signed
// it so far (HandOverAudit, audited); checked with the new key the trail
// holds, the old checkpoints carried over. The old key cannot take it back
// (a trail goes to keys that never signed it). A store never refuses to
// seal after a checkpoint naming another key: a forged row would stop
// sealing everywhere, and what was written meanwhile could be erased
// without a trace; sealed over, the forgery stays for verify to name.
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
		// sealed seals s's pending events: on PostgreSQL a seal covers
		// transactions older than every one running in the cluster, so it
		// may take a few rounds.
		sealed := func(s *store.Store, what string) *store.Checkpoint {
			t.Helper()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				c, err := s.Seal(ctx)
				if err != nil {
					t.Fatalf("seal %s: %v", what, err)
				}
				if c != nil && c.EventCount > 0 {
					return c
				}
				if time.Now().After(deadline) {
					t.Fatalf("seal %s: nothing sealed", what)
				}
			}
		}
		event(a, "doc-1")
		first := sealed(a, "with a")
		event(b, "doc-2")
		if err := b.HandOverAudit(ctx, first.KeyID, first.ID); err != nil {
			t.Fatal(err)
		}
		if c := sealed(b, "after taking over"); c.KeyID == first.KeyID {
			t.Fatalf("b seals with a's key: %+v", c)
		}
		event(b, "doc-3")
		if err := a.HandOverAudit(ctx, "whatever", 2); !errors.Is(err, store.ErrKeySignedBefore) {
			t.Errorf("a takes the trail back: %v, want ErrKeySignedBefore", err)
		}
		sealed(b, "again")
		// Carried: every checkpoint a signed, its heartbeat first among them
		// when a seal found nothing committed yet.
		rep, err := b.VerifyAudit(ctx, store.VerifyOptions{PublicKey: b.AuditPublicKey(), SkipAge: true})
		if err != nil || !rep.OK || rep.Carried != first.ID || len(rep.RetiredKeys) != 1 || rep.RetiredKeys[0] != first.KeyID {
			t.Errorf("verify with the new key: %+v, %v", rep, err)
		}
		// A forged newest row is sealed over, not obeyed: sealing goes on,
		// and verify names the forgery.
		if _, err := b.DB().Exec(b.DB().Rebind(`INSERT INTO audit_checkpoints (id, sealed_at, seqs, event_count, horizon, events_digest,
event_hashes, prev_hash, seal_max_ms, key_id, hash, signature)
SELECT id + 1, sealed_at, '', 0, horizon, events_digest, '', hash, seal_max_ms, ?, hash, signature
FROM audit_checkpoints WHERE id = (SELECT MAX(id) FROM audit_checkpoints)`), "ffffffffffffffff"); err != nil {
			t.Fatal(err)
		}
		event(b, "doc-4")
		sealed(b, "after a forged row")
		if rep, err := b.VerifyAudit(ctx, store.VerifyOptions{PublicKey: b.AuditPublicKey(), SkipAge: true}); err != nil || rep.OK {
			t.Errorf("verify after a forged row sealed over: %+v, %v; want it named", rep, err)
		}
	})
}
