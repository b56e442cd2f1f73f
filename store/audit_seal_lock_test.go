package store_test

import (
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSealNotPausedByAForeignLock: the sealer's PostgreSQL advisory lock is
// a key of Limbo's own. It was hashtext(current_schema()), the key any
// other tool locking "the schema" would take: while such a session held
// it, every instance skipped every round, and nothing was sealed.
func TestSealNotPausedByAForeignLock(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		if e == store.Postgres {
			conn, err := b.s.DB().Conn(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(b.ctx, `SELECT pg_advisory_lock(hashtext(current_schema()))`); err != nil {
				t.Fatal(err)
			}
			defer conn.ExecContext(b.ctx, `SELECT pg_advisory_unlock(hashtext(current_schema()))`)
		}
		b.newOp(t, "doc-1", review.RiskRead, "plain")
		b.clk.Advance(time.Minute)
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if err := b.s.SealAll(b.ctx); err != nil {
				t.Fatal(err)
			}
			lag, err := b.s.SealLag(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if lag == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nothing sealed while another session holds pg_advisory_lock(hashtext(current_schema())): lag %s", lag)
			}
		}
	})
}

// TestSealLosesARaceCleanly: a sealer that does not take the same lock (an
// older Limbo during a rolling upgrade) writes the next checkpoint while
// this one seals: this round writes nothing and says no error. Before, the
// unique violation left the PostgreSQL transaction failed, and its commit
// failed the round.
func TestSealLosesARaceCleanly(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		b.newOp(t, "doc-1", review.RiskRead, "plain")
		assertSealed(t, b.s)
		b.newOp(t, "doc-2", review.RiskRead, "plain")
		last, err := b.s.LatestCheckpoint(b.ctx)
		if err != nil || last == nil {
			t.Fatalf("LatestCheckpoint = %v, %v", last, err)
		}
		if e != store.Postgres {
			return // one writer: no race to lose
		}
		other, err := b.s.DB().BeginTxx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Rollback()
		// The other sealer's checkpoint, not committed yet.
		if _, err := other.ExecContext(b.ctx, `INSERT INTO audit_checkpoints (id, sealed_at, seqs, event_count, horizon, events_digest,
    event_hashes, prev_hash, seal_max_ms, key_id, hash, signature)
SELECT id + 1, sealed_at, '', 0, horizon, events_digest, '', hash, seal_max_ms, key_id, hash, signature
FROM audit_checkpoints WHERE id = $1`, last.ID); err != nil {
			t.Fatal(err)
		}
		type result struct {
			c   *store.Checkpoint
			err error
		}
		done := make(chan result, 1)
		go func() {
			c, err := b.s.Seal(b.ctx) // waits on the other's row, then finds it taken
			done <- result{c, err}
		}()
		time.Sleep(200 * time.Millisecond)
		if err := other.Commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r.err != nil || r.c != nil && r.c.ID == last.ID+1 {
				t.Errorf("Seal racing another sealer = %+v, %v; want nothing written and no error", r.c, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Seal did not return")
		}
	})
}

// TestPausedSealerLetsGo: a sealer paused inside its transaction (a frozen
// VM, a stopped process: its connection stays up) held the seal lock, and
// with it every instance's sealing, until it woke. Its session now ends
// once it has sat idle for the seal interval, and the others seal.
func TestPausedSealerLetsGo(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(t0)
		s := storetest.Open(t, e, store.Options{Clock: clk.Now, AuditSealMax: review.MinSealMax})
		ctx := t.Context()
		if e == store.Postgres {
			paused, err := s.DB().BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer paused.Rollback()
			if got, err := store.SealLockForTest(ctx, s, paused); err != nil || !got {
				t.Fatalf("the paused sealer's lock: %v, %v", got, err)
			}
		}
		if _, _, err := s.Register(ctx, intention("doc-1", review.RiskRead, "plain")); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		for deadline := time.Now().Add(4 * review.MinSealMax); ; time.Sleep(50 * time.Millisecond) {
			if err := s.SealAll(ctx); err != nil {
				t.Fatal(err)
			}
			lag, err := s.SealLag(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if lag == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nothing sealed %s after a sealer paused in its transaction: lag %s", 4*review.MinSealMax, lag)
			}
		}
	})
}
