package store_test

import (
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSealRebasesAFutureHorizon: a newest checkpoint whose horizon no event
// can have reached yet left every later event unsealed for good
// (heartbeats only), and verify then called them inserted into sealed
// history. Forged (not validly signed), the sealer now seals over it and
// verify names it. Validly signed, on SQLite too (a horizon is a seq
// there); on PostgreSQL such a checkpoint is an honest trail restored into
// another cluster, which is not rebased (its txids would meet the old ones
// again, see Store.unsealed), but the seal lag counts what waits.
func TestSealRebasesAFutureHorizon(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		for _, resign := range []bool{true, false} {
			b := setup(t, e, nil)
			b.newOp(t, "doc-1", review.RiskRead, "plain")
			assertSealed(t, b.s)
			last, err := b.s.LatestCheckpoint(b.ctx)
			if err != nil || last == nil {
				t.Fatalf("LatestCheckpoint = %v, %v", last, err)
			}
			last.Horizon = int64(1) << 50
			if resign {
				store.ResignCheckpoint(last, storetest.AuditKey)
			}
			exec(t, b.s, `UPDATE audit_checkpoints SET horizon = ?, hash = ?, signature = ? WHERE id = ?`,
				last.Horizon, last.Hash, last.Signature, last.ID)
			b.newOp(t, "doc-2", review.RiskRead, "plain")
			b.clk.Advance(store.DefaultSealMax) // SQLite seals past an unreachable horizon with the next heartbeat
			// On PostgreSQL a seal waits for every older transaction of the
			// server (other tests'): seal until nothing is left, or give up.
			wait := 20 * time.Second
			if resign && e == store.Postgres {
				wait = 0 // not rebased: one round says so
			}
			for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
				if err := b.s.SealAll(b.ctx); err != nil {
					t.Fatal(err)
				}
				if lag, err := b.s.SealLag(b.ctx); err != nil || lag == 0 || time.Now().After(deadline) {
					break
				}
			}
			rep, err := b.s.VerifyAudit(b.ctx, store.VerifyOptions{PublicKey: b.s.AuditPublicKey(), SkipAge: true})
			if err != nil {
				t.Fatal(err)
			}
			if resign && e == store.Postgres {
				if lag, err := b.s.SealLag(b.ctx); err != nil || lag == 0 {
					t.Errorf("restored: SealLag = %v, %v; want the events waiting counted", lag, err)
				}
				continue
			}
			if rep.Unsealed != 0 {
				t.Errorf("resigned=%v: %d events left unsealed past a horizon of %d: %+v", resign, rep.Unsealed, last.Horizon, rep)
			}
			if resign && !rep.OK {
				t.Errorf("resigned=%v: the trail does not verify: %+v", resign, rep)
			}
			if !resign && (rep.OK || rep.Problem == "") {
				t.Errorf("resigned=%v: the forged checkpoint is not named: %+v", resign, rep)
			}
			if lag, err := b.s.SealLag(b.ctx); err != nil || lag != 0 {
				t.Errorf("resigned=%v: SealLag = %v, %v; want 0", resign, lag, err)
			}
		}
	})
}
