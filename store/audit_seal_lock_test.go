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
