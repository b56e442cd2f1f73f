package store

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/jmoiron/sqlx"
)

// InTx is inTx, for the external tests.
func InTx[T any](ctx context.Context, s *Store, fn func(tx *sqlx.Tx) (T, error)) (T, error) {
	return inTx(ctx, s, fn)
}

// CaseChangedForTest is caseChanged, for the external tests: a change
// published in a transaction that then rolls back.
func CaseChangedForTest(ctx context.Context, s *Store, tx *sqlx.Tx, ev CaseEvent) error {
	return s.caseChanged(ctx, tx, ev)
}

// KeysetQueries are the queries that page through a table from a cursor,
// with arguments for a cursor deep in it, for the plan test: each must
// read from its cursor, not from the start of its index.
func KeysetQueries(s *Store) map[string][]any {
	return map[string][]any{
		s.rebind(selectPurgeCandidates + orderPurgeCandidates): {dbTime(s.now()), dbTime(s.now().Add(-time.Hour)), "op_x", purgeBatch},
		s.rebind(selectDecisionsPostgres):                      {"acme", int64(1000), int64(5), 50},
	}
}

// EventHashInSQL is limbo_event_hash(seq, contentHash) on PostgreSQL: the
// SQL twin of hashWithSeq.
func EventHashInSQL(ctx context.Context, s *Store, seq int64, contentHash string) (string, error) {
	var h string
	err := s.db.GetContext(ctx, &h, `SELECT limbo_event_hash($1, $2)`, seq, contentHash)
	return h, err
}

// GuardQueries are the statements that change one operation or attempt
// found by its key and guarded by its state, with arguments for a row:
// each must find the row by primary key, whatever the statistics say.
func GuardQueries(s *Store) map[string][]any {
	now := dbTime(s.now())
	var a args
	a[pOpID], a[pState], a[pStateReason], a[pGuardState], a[pVersion], a[pDetailVersion] = "op_x", "confirmed", "r", "pending", int64(1), int64(0)
	a[pAt], a[pN], a[pGeneration], a[pCost], a[pDetailBump] = now, 1, int64(2), 0.0, 0
	q := map[string][]any{}
	for _, w := range []*write{updateOpInFlight, updateOpOutcome, finishAttempt} {
		q[s.rebind(w.query)] = w.bind(&a)
	}
	q[s.rebind(updateOpState)] = []any{"failed", "r", now, "op_x", "pending", int64(1)}
	q[s.rebind(closeOpenAttempt)] = []any{now, "r", "op_x", 1}
	q[s.rebind(triggerProbe)] = []any{now, "op_x"}
	q[s.rebind(claimOperation)] = []any{"me", now, "op_x", "ambiguous", now}
	q[s.rebind(releaseProbe)] = []any{1, now, "op_x", "me", int64(1)}
	q[s.rebind(releaseJobPoll)] = []any{now, "op_x", "me", int64(1)}
	q[s.rebind(startJobPoll)] = []any{now, "op_x"}
	q[s.rebind(stopJobPoll)] = []any{"op_x"}
	return q
}

// CommonSearch is commonSearch for q over the whole ledger.
func CommonSearch(ctx context.Context, s *Store, q string) (bool, error) {
	cond, vs := s.searchCond(q, false)
	return s.commonSearch(ctx, "1 = 1", nil, cond, vs)
}

// BrowseStatePages are the browser's page queries for one state over the
// whole ledger, its first page and one after a cursor, with their
// arguments.
func BrowseStatePages(s *Store, state string, at time.Time, id string) map[string][]any {
	return map[string][]any{
		s.rebind(browsePage("1 = 1 AND o.state >= ? AND o.state <= ?", true)): {state, state, 51},
		s.rebind(browsePage("1 = 1 AND o.state >= ? AND o.state <= ? AND (o.state, o.created_at, o.id) < (?, ?, ?)", true)): {
			state, state, state, at, id, 51},
	}
}

// BrowsePages are the browser's first page queries over the whole
// ledger, all states and one (as SQLite writes it), with their arguments.
func BrowsePages(s *Store) map[string][]any {
	return map[string][]any{
		s.rebind(browsePage("1 = 1", false)):                 {51},
		s.rebind(browsePage("1 = 1 AND o.state = ?", false)): {"confirmed", 51},
	}
}

// QueuedFastCalls is how many fast calls wait for a batch.
func QueuedFastCalls(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}

// ResignCheckpoint re-signs c with key after its content changed, for the
// external tests: a checkpoint as an honest sealer would have written it.
func ResignCheckpoint(c *Checkpoint, key ed25519.PrivateKey) { signCheckpoint(c, key) }

// SealLockForTest is the sealer's lock statement(s), for the external
// tests: a session that takes it as a sealer would, then pauses.
func SealLockForTest(ctx context.Context, s *Store, tx *sqlx.Tx) (bool, error) {
	return s.sealLock(ctx, tx)
}

// TrailActionsQuery lists the trail's actions but the cycle's.
var TrailActionsQuery = trailActions

// AuditPageQuery is the query of one page of n events f matches, with its
// arguments.
func AuditPageQuery(ctx context.Context, s *Store, f AuditFilter, n int) (string, []any, error) {
	f, err := s.withActions(ctx, f)
	q, args := f.page(n, s.engine)
	return s.rebind(q), args, err
}

// SetConcurrentRowsForTest sets how many rows a table holds before a
// concurrentMark migration builds its indexes concurrently.
func SetConcurrentRowsForTest(s *Store, n int64) { s.concurrentRows = n }
