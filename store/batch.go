package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Group commit for the fast path.
//
// Measured with limbo bench: once the attempt cycle is one statement per
// call, about half of PostgreSQL's CPU per call is the fixed cost of a
// round trip and a transaction, not the rows; on SQLite, the commit's
// fsync is most of a call's time. So the fast writes of concurrent calls
// go to the database together, their plans (writes.go) one after the
// other in one transaction: on PostgreSQL through limbo_fast_batch, one
// round trip for all; on SQLite in process (execBatchTx). Each call keeps
// its own guard and its own audit event; only the commit is shared, and
// nobody is answered before it.
//
// Batches form on their own: at most batchSlots batches are in flight, and
// calls that arrive meanwhile wait in the queue and leave together with the
// next one. A lone call leaves at once, from its own goroutine, so an idle
// Limbo adds no delay. An error rolls back the whole batch; each of its
// calls is then sent alone, so the error reaches the call that caused it
// and the others succeed as if they had never met.

const (
	// batchSlots bounds the batches in flight. Fewer means larger batches
	// (less database CPU per call) but calls wait longer. limbo bench chose
	// 2 on two cores (docs/benchmarks.md): at 16 clients 1 left a core idle
	// and 4 or 8 made batches of 1.5–2.4 calls instead of 4.3.
	batchSlots = 2
	// maxBatch bounds the calls in one batch.
	maxBatch = 32
	// batchTimeout bounds one batch in the database. A batch belongs to no
	// single caller, so no caller's context cancels it.
	batchTimeout = time.Minute
)

// fastBatchCall is the query that calls limbo_fast_batch (writes.go) with
// the arguments in present, each named — limbo_fast_batch(a_kind => $1,
// a_op_id => $2, …) — and each an array with one element per call of the
// batch. An argument no call of the batch sets is left out (its default
// is NULL): fewer arrays to encode, send and parse. Built once per set.
func fastBatchCall(present uint64) string {
	if q, ok := fastBatchCalls.Load(present); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString("SELECT ops, evidence_id FROM limbo_fast_batch(")
	n := 0
	for p := range nParams {
		if present&(1<<p) == 0 {
			continue
		}
		if n++; n > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "a_%s => $%d", params[p].name, n)
	}
	b.WriteString(")")
	q, _ := fastBatchCalls.LoadOrStore(present, b.String())
	return q.(string)
}

var fastBatchCalls sync.Map // present → query

// fastCall is one call waiting for its batch.
type fastCall struct {
	ctx  context.Context
	a    args                    // its parameters, a[pKind] its plan
	ev   *AuditEvent             // its audit event
	text [nParams]sql.NullString // PostgreSQL: a as text
	set  uint64                  // PostgreSQL: the params it sets (not NULL), a bit each
	res  fastResult
	err  error
	done chan struct{}
}

// fastResult is limbo_fast_batch's row for one call.
type fastResult struct {
	Ops        int64 `db:"ops"` // rows written under the guard: 1, or 0 when it failed
	EvidenceID int64 `db:"evidence_id"`
}

type batcher struct {
	mu      sync.Mutex
	queue   []*fastCall
	running int // batches in flight

	stats BatchStats
}

// BatchStats counts the fast path's group commits.
type BatchStats struct {
	Batches int64 // transactions (on PostgreSQL, each one round trip)
	Calls   int64 // the calls they carried
	// Split counts batches an error rolled back; their calls were then
	// sent one by one.
	Split int64
}

// fast sends one fast-path call through the batcher and waits for its
// commit. a holds its parameters, a[pKind] its plan, ev its audit event.
func (s *Store) fast(ctx context.Context, a *args, ev *AuditEvent) (fastResult, error) {
	c, err := s.newFastCall(ctx, a, ev)
	if err != nil {
		return fastResult{}, err
	}
	b := &s.batch
	b.mu.Lock()
	b.queue = append(b.queue, c)
	var batch []*fastCall
	if b.running < s.batchSlots() {
		// A free slot: this caller sends the batch itself.
		if batch = b.take(); len(batch) > 0 {
			b.running++
		}
	}
	b.mu.Unlock()
	if len(batch) > 0 {
		s.runBatches(batch)
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// The batch may still commit this call; the guards (version,
		// detail_version) catch a snapshot that missed it.
		return fastResult{}, ctx.Err()
	}
}

// newFastCall is a call of a's values and event ev; on PostgreSQL, with
// its values as text for limbo_fast_batch.
func (s *Store) newFastCall(ctx context.Context, a *args, ev *AuditEvent) (*fastCall, error) {
	c := &fastCall{ctx: ctx, a: *a, ev: ev, done: make(chan struct{})}
	if s.engine != Postgres {
		return c, nil
	}
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	ev.At = dbTime(ev.At)
	c.a.event(ev)
	for p, v := range c.a {
		t, err := textArg(v)
		if err != nil {
			return nil, fmt.Errorf("store: limbo_fast_batch argument %s: %w", params[p].name, err)
		}
		if c.text[p] = t; t.Valid {
			c.set |= 1 << p
		}
	}
	return c, nil
}

// batchSlots bounds the batches in flight: SQLite has one writer, so a
// second batch would only wait for the first, and the calls it took would
// not join it.
func (s *Store) batchSlots() int {
	if s.engine == SQLite {
		return 1
	}
	return batchSlots
}

// take removes the next batch from the queue, answering calls whose caller
// has gone; b.mu is held.
func (b *batcher) take() []*fastCall {
	var batch []*fastCall
	for len(b.queue) > 0 && len(batch) < maxBatch {
		c := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		batch = append(batch, c)
	}
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	// A batch takes its locks in one order, so that two batches (of this
	// instance or another) never each hold one the other waits for:
	// limited grants first, by destination (their destination's row, held
	// until the batch commits, before any operation's, as the ordinary
	// path takes them: lockDestinationFirst); then registrations by key
	// (a new key waits for another batch inserting the same one); then the
	// other calls by operation. Calls on one resource keep their order.
	slices.SortStableFunc(batch, func(x, y *fastCall) int {
		rx, kx := x.lockOrder()
		ry, ky := y.lockOrder()
		return cmp.Or(cmp.Compare(rx, ry), strings.Compare(kx, ky))
	})
	return batch
}

// lockOrder is where c's locks come in a batch: its rank, then the
// resource it locks first within the rank.
func (c *fastCall) lockOrder() (rank int, key string) {
	str := func(p param) string { v, _ := c.a[p].(string); return v }
	switch c.a[pKind] {
	case "attempt_limited":
		return 0, str(pDestination)
	case "register":
		return 1, str(pTenant) + "\x00" + str(pKey)
	}
	return 2, str(pOpID)
}

// runBatches sends batch, then hands the slot to a goroutine that sends
// whatever queued meanwhile, so the caller is answered without waiting for
// other people's batches.
func (s *Store) runBatches(batch []*fastCall) {
	s.sendBatch(batch)
	b := &s.batch
	b.mu.Lock()
	next := b.take()
	if len(next) == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go s.runBatches(next)
}

// sendBatch runs the calls of one batch and answers each of them.
func (s *Store) sendBatch(batch []*fastCall) {
	b := &s.batch
	b.mu.Lock()
	b.stats.Batches++
	b.stats.Calls += int64(len(batch))
	b.mu.Unlock()
	ctx := context.WithoutCancel(batch[0].ctx)
	res, err := s.execBatch(ctx, batch)
	// On PostgreSQL a batch is one statement, outside WithTx: a lone
	// call the database refused with nothing committed (a deadlock, a
	// serialisation failure) is run again here, as WithTx would.
	for try := 0; err != nil && len(batch) == 1 && s.engine == Postgres && try < 5 && s.retryable(err); try++ {
		time.Sleep(time.Duration(1+try*try) * 5 * time.Millisecond)
		res, err = s.execBatch(ctx, batch)
	}
	if err != nil && len(batch) > 1 {
		s.retryable(err) // counted: its calls run again, alone
		b.mu.Lock()
		b.stats.Split++
		b.mu.Unlock()
		// Nothing of the batch was written: send each call alone, so the
		// error reaches the call that caused it.
		for _, c := range batch {
			s.sendBatch([]*fastCall{c})
		}
		return
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		close(c.done)
	}
}

func (s *Store) execBatch(ctx context.Context, batch []*fastCall) ([]fastResult, error) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	if s.engine == SQLite {
		return s.execBatchTx(ctx, batch)
	}
	q, args := batchArgs(batch)
	r, err := s.stmt(ctx, nil, q)
	if err != nil {
		return nil, err
	}
	// Scanned by hand: sqlx's reflective scan was 3 % of the attempt
	// cycle's CPU (issue 19's profile).
	rows, err := r.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := make([]fastResult, 0, len(batch))
	for rows.Next() {
		var f fastResult
		if err := rows.Scan(&f.Ops, &f.EvidenceID); err != nil {
			return nil, err
		}
		res = append(res, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("store: limbo_fast_batch answered %d rows for %d calls", len(res), len(batch))
	}
	return res, nil
}

// execBatchTx runs the plans of batch in one transaction, as
// limbo_fast_batch does on PostgreSQL: one commit for all, and a call
// whose guard fails writes nothing and leaves the others alone.
func (s *Store) execBatchTx(ctx context.Context, batch []*fastCall) ([]fastResult, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) ([]fastResult, error) {
		res := make([]fastResult, len(batch))
		for i, c := range batch {
			a := c.a // a try that rolls back leaves c as it was
			evID, err := s.writeCall(ctx, tx, planOf(a[pKind].(string)), &a, c.ev)
			switch {
			case errors.Is(err, errGuard):
			case err != nil:
				return nil, err
			default:
				res[i] = fastResult{Ops: 1, EvidenceID: evID}
			}
		}
		return res, nil
	})
}

// batchArgs is the query and arguments that send batch to
// limbo_fast_batch: per parameter some call sets, an array of the calls'
// values.
func batchArgs(batch []*fastCall) (string, []any) {
	var present uint64
	for _, c := range batch {
		present |= c.set
	}
	args := make([]any, 0, nParams)
	for p := range nParams {
		if present&(1<<p) == 0 {
			continue
		}
		col := make(textArray, len(batch))
		for i, c := range batch {
			col[i] = c.text[p]
		}
		args = append(args, col)
	}
	return fastBatchCall(present), args
}

// FastBatches reports what the fast path's group commit has sent so far
// on either engine.
func (s *Store) FastBatches() BatchStats {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return s.batch.stats
}

// textArg writes v as PostgreSQL reads it back from text; nil is NULL.
func textArg(v any) (sql.NullString, error) {
	var s string
	switch v := v.(type) {
	case nil:
		return sql.NullString{}, nil
	case string:
		s = v
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		s = strconv.FormatBool(v)
	case time.Time:
		s = string(pq.FormatTimestamp(v))
	default:
		return sql.NullString{}, fmt.Errorf("store: fast path argument of type %T", v)
	}
	return sql.NullString{String: s, Valid: true}, nil
}
