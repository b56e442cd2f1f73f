package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// twoInstances opens two stores on one fresh database, as two server
// instances would share it, with the same clock and configuration.
func twoInstances(t *testing.T, e store.Engine, cfg *review.Config) (a, b *bundle) {
	t.Helper()
	clk := storetest.NewClock(t0)
	url := storetest.URL(t, e)
	open := func() *bundle {
		s, err := store.Open(context.Background(), url, store.Options{Config: cfg, Clock: clk.Now, Rand: fixedRand(0.5), AuditKey: storetest.AuditKey, MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return &bundle{ctx: context.Background(), s: s, clk: clk}
	}
	a, b = open(), open()
	if err := a.s.Migrate(a.ctx); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// sameAsStored fails unless got, an answer of the store, is what another
// instance reads from the database for the same operation, field by field
// as the API would send it.
func sameAsStored(t *testing.T, other *bundle, got *review.Operation, what string) {
	t.Helper()
	stored, err := other.s.GetOperation(other.ctx, got.Tenant, got.ID, "")
	if err != nil {
		t.Fatalf("%s: GetOperation: %v", what, err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(stored)
	if string(g) != string(w) {
		t.Errorf("%s: the answer differs from the database\nanswer: %s\nstored: %s", what, g, w)
	}
}

// hits counts the calls answered by the fast path since the last call.
func hits(s *store.Store, last *int64) int64 {
	h, _ := s.FastPath()
	d := h - *last
	*last = h
	return d
}

// TestFastPathAnswersWhatTheDatabaseHolds runs attempt cycles that the fast
// path covers and checks that every answer is exactly what the database
// holds afterwards, read by another instance, and that the audit trail
// verifies.
func TestFastPathAnswersWhatTheDatabaseHolds(t *testing.T) {
	t.Parallel()
	budget := 2.5
	cfg := &review.Config{Destinations: map[string]review.Destination{"keyed": {HonoursKeys: true}, "quick": {Lease: 5 * time.Second}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, cfg)
		var last int64
		for _, tt := range []struct {
			name  string
			risk  review.Risk
			dest  string
			cost  *float64
			out   review.Outcome
			state review.State
		}{
			{"success", review.RiskCompensableWrite, "quick", nil, success("file:1"), review.Confirmed},
			{"success without resource", review.RiskRead, "files", nil, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 200}, review.Confirmed},
			{"rejected", review.RiskCompensableWrite, "files", nil, httpError(400), review.Failed},
			{"transient, retried", review.RiskIdempotentWrite, "keyed", &budget, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 503, Cost: 0.5, RetryAfter: "3", ProviderCode: "overloaded", ProviderRequestID: "req-9"}, review.RetryWait},
			{"timeout after send, reconcile", review.RiskCompensableWrite, "files", nil, timeoutAfterSend, review.Ambiguous},
		} {
			r := intention("fast-"+tt.name, tt.risk, tt.dest)
			r.CostBudget = tt.cost
			op := a.register(t, r)
			sameAsStored(t, b, op, tt.name+": register")
			g, err := a.tryStart(op, "cred-1", "model-x")
			if err != nil {
				t.Fatalf("%s: StartAttempt: %v", tt.name, err)
			}
			stored := b.get(t, op)
			if g.Generation != stored.Version || g.Key != stored.Key || !g.LeaseExpiresAt.Equal(stored.Attempts[0].LeaseExpiresAt) {
				t.Errorf("%s: grant %+v does not match the stored operation (version %d)", tt.name, g, stored.Version)
			}
			a.clk.Advance(1500 * time.Millisecond)
			res := a.report(t, op, 1, tt.out)
			wantState(t, res.Operation, tt.state)
			sameAsStored(t, b, res.Operation, tt.name+": outcome")
			if n := hits(a.s, &last); n != 3 {
				t.Errorf("%s: %d of 3 calls took the fast path", tt.name, n)
			}
			// The same report again is answered unchanged by the ordinary path.
			again := a.report(t, op, 1, tt.out)
			if !again.Unchanged || again.Next != res.Next {
				t.Errorf("%s: repeated report = %+v, want unchanged %s", tt.name, again, res.Next)
			}
			sameAsStored(t, b, again.Operation, tt.name+": repeated outcome")
		}
		assertSealed(t, a.s)
	})
}

// TestFastPathFallsBackWhenAnotherInstanceMoved: a snapshot another
// instance made stale is caught by the guard in SQL, and the ordinary path
// answers from the database.
func TestFastPathFallsBackWhenAnotherInstanceMoved(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, nil)

		// b starts the attempt a registered: a's snapshot is a version behind.
		op := a.newOp(t, "moved-1", review.RiskCompensableWrite, "files")
		b.start(t, op)
		_, err := a.tryStart(op, "", "")
		if na := errAs[*review.NotAttemptableError](t, err); na.Operation.State != review.InFlight {
			t.Errorf("stale snapshot: refusal names %s, want in_flight", na.Operation.State)
		}
		res := a.report(t, op, 1, success("file:moved-1"))
		wantState(t, res.Operation, review.Confirmed)
		sameAsStored(t, b, res.Operation, "outcome after a stale snapshot")
		if got := countRows(t, a.s, `SELECT COUNT(*) FROM attempts WHERE operation_id = ?`, op.ID); got != 1 {
			t.Errorf("%d attempts, want 1", got)
		}

		// Evidence recorded through b moves detail_version, not version: a's
		// outcome must still answer with it.
		op = a.newOp(t, "moved-2", review.RiskCompensableWrite, "files")
		a.start(t, op)
		if _, err := b.s.AddEvidence(b.ctx, op.Tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch,
			Candidates: []review.Candidate{{Ref: "file:seen"}}}, "test"); err != nil {
			t.Fatal(err)
		}
		res = a.report(t, op, 1, success("file:moved-2"))
		if len(res.Operation.Evidence) != 2 {
			t.Errorf("answer has %d evidence rows, want the search's and the response's", len(res.Operation.Evidence))
		}
		sameAsStored(t, b, res.Operation, "outcome after evidence elsewhere")

		// A reviewer's cancel through b while a holds a snapshot in flight:
		// a's late report is fenced — refused, kept as evidence only, never
		// applied as the attempt's outcome.
		op = a.newOp(t, "moved-3", review.RiskRead, "files")
		a.start(t, op)
		exec(t, b.s, `UPDATE operations SET state = 'cancelled', version = version + 1 WHERE id = ?`, op.ID)
		_, err = a.s.RecordOutcome(a.ctx, op.Tenant, op.ID, 1, success("file:moved-3"), "test")
		errAs[*review.OutcomeConflictError](t, err)
		if got := countRows(t, a.s, `SELECT COUNT(*) FROM attempts WHERE operation_id = ? AND (result <> 'unknown' OR finished_at IS NULL)`, op.ID); got != 0 {
			t.Errorf("the fenced report was applied to the attempt, or left it open")
		}
		if got := countRows(t, a.s, `SELECT COUNT(*) FROM operations WHERE id = ? AND state = 'cancelled' AND resource_ref IS NULL`, op.ID); got != 1 {
			t.Errorf("the fenced report moved the operation")
		}
		if got := countRows(t, a.s, `SELECT COUNT(*) FROM evidence WHERE operation_id = ? AND source = 'response'`, op.ID); got != 1 {
			t.Errorf("the fenced report was not kept as evidence")
		}
	})
}

// TestFastPathOneWinnerAcrossInstances: integrators on two instances ask
// for the first attempt of one operation at once; exactly one is granted.
func TestFastPathOneWinnerAcrossInstances(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, nil)
		for round := range 5 {
			op := a.newOp(t, "race-"+string(rune('a'+round)), review.RiskCompensableWrite, "files")
			b.get(t, op) // both instances hold a snapshot
			var wg sync.WaitGroup
			var mu sync.Mutex
			granted, refused := 0, 0
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					inst := a
					if i%2 == 1 {
						inst = b
					}
					_, err := inst.tryStart(op, "", "")
					mu.Lock()
					defer mu.Unlock()
					var na *review.NotAttemptableError
					switch {
					case err == nil:
						granted++
					case errors.As(err, &na):
						refused++
					default:
						t.Errorf("StartAttempt: %v", err)
					}
				}()
			}
			wg.Wait()
			if granted != 1 || refused != 19 {
				t.Errorf("round %d: %d granted, %d refused; want 1 and 19", round, granted, refused)
			}
			if got := countRows(t, a.s, `SELECT COUNT(*) FROM attempts WHERE operation_id = ?`, op.ID); got != 1 {
				t.Errorf("round %d: %d attempts stored", round, got)
			}
		}
		assertSealed(t, a.s)
	})
}

// TestFastPathGroupCommit: many integrators run attempt cycles at once on
// one instance. On PostgreSQL their fast writes share round trips and
// commits (batch.go); every answer must still be exactly what the database
// holds, every call audited, and the trail must verify.
func TestFastPathGroupCommit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		const workers, cycles = 48, 3
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for c := range cycles {
					ref := fmt.Sprintf("group-%d-%d", w, c)
					op, created, err := b.s.Register(b.ctx, intention(ref, review.RiskCompensableWrite, "files"))
					if err != nil || !created {
						t.Errorf("Register(%s) = %v, created %v", ref, err, created)
						return
					}
					sameAsStored(t, b, op, ref+": register")
					if _, err := b.tryStart(op, "", ""); err != nil {
						t.Errorf("StartAttempt(%s): %v", ref, err)
						return
					}
					res, err := b.s.RecordOutcome(b.ctx, op.Tenant, op.ID, 1, success("file:"+ref), "test")
					if err != nil {
						t.Errorf("RecordOutcome(%s): %v", ref, err)
						return
					}
					wantState(t, res.Operation, review.Confirmed)
					sameAsStored(t, b, res.Operation, ref+": outcome")
				}
			})
		}
		wg.Wait()
		const calls = 3 * workers * cycles
		if h, m := b.s.FastPath(); h != calls || m != 0 {
			t.Errorf("fast path: %d hits, %d misses; want %d and 0", h, m, calls)
		}
		if got := countRows(t, b.s, `SELECT COUNT(*) FROM attempts WHERE finished_at IS NOT NULL`); got != workers*cycles {
			t.Errorf("%d finished attempts, want %d", got, workers*cycles)
		}
		if got := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events WHERE action IN ('operation.registered', 'attempt.started', 'attempt.outcome')`); got != calls {
			t.Errorf("%d audit events for the cycles, want %d", got, calls)
		}
		st := b.s.FastBatches()
		if st.Calls != calls || st.Batches >= st.Calls || st.Split != 0 {
			t.Errorf("batches %+v: want all %d calls batched, some batches shared, none split", st, calls)
		}
		t.Logf("%s: %+v", e, st)
		assertSealed(t, b.s)
	})
}

// TestFastPathBatchErrorStaysWithItsCall: a call the database refuses
// fails alone. The batch it shared is rolled back and its other calls are
// sent one by one: they succeed, and nothing of the refused one is written.
func TestFastPathBatchErrorStaysWithItsCall(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		// The database refuses one source_ref: an error no validation in Go
		// can see coming, as a constraint or a full disk would be.
		if e == store.Postgres {
			exec(t, b.s, `CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'poisoned'; END $$`)
			exec(t, b.s, `CREATE TRIGGER poison BEFORE INSERT ON operations FOR EACH ROW WHEN (NEW.source_ref = 'poison') EXECUTE FUNCTION poison()`)
		} else {
			exec(t, b.s, `CREATE TRIGGER poison BEFORE INSERT ON operations WHEN NEW.source_ref = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END`)
		}
		const others = 23
		for round := range 20 {
			var wg sync.WaitGroup
			for i := range others + 1 {
				wg.Go(func() {
					ref := fmt.Sprintf("round-%d-%d", round, i)
					if i == others/2 {
						ref = "poison"
					}
					_, _, err := b.s.Register(b.ctx, intention(ref, review.RiskCompensableWrite, "files"))
					switch {
					case ref == "poison" && (err == nil || !strings.Contains(err.Error(), "poisoned")):
						t.Errorf("round %d: the refused call got %v, want the database's error", round, err)
					case ref != "poison" && err != nil:
						t.Errorf("round %d: Register(%s) beside the refused call: %v", round, ref, err)
					}
				})
			}
			wg.Wait()
			prefix := fmt.Sprintf("round-%d-%%", round)
			if got := countRows(t, b.s, `SELECT COUNT(*) FROM operations WHERE source_ref LIKE ?`, prefix); got != others {
				t.Fatalf("round %d: %d operations stored, want %d", round, got, others)
			}
			if got := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events a JOIN operations o ON o.id = a.operation_id WHERE o.source_ref LIKE ?`, prefix); got != others {
				t.Fatalf("round %d: %d audit events, want %d", round, got, others)
			}
			if got := countRows(t, b.s, `SELECT COUNT(*) FROM operations WHERE source_ref = 'poison'`); got != 0 {
				t.Fatalf("round %d: the refused operation was stored", round)
			}
			if e == store.SQLite || b.s.FastBatches().Split > 0 {
				break // SQLite has no batches; on PostgreSQL the refused call has shared one
			}
		}
		if st := b.s.FastBatches(); e == store.Postgres && st.Split == 0 {
			t.Errorf("the refused call never shared a batch in 20 rounds (%+v): the split was not tested", st)
		}
		assertSealed(t, b.s)
	})
}

// TestFastPathCallerGone: calls whose caller has already gone are answered
// with the context's error and written nowhere, and they hold no place in
// the batcher: the calls after them go through.
func TestFastPathCallerGone(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		b.newOp(t, "first", review.RiskCompensableWrite, "files") // the tenant is known: the next calls go straight to the fast path
		gone, cancel := context.WithCancel(b.ctx)
		cancel()
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				_, _, err := b.s.Register(gone, intention(fmt.Sprintf("gone-%d", i), review.RiskCompensableWrite, "files"))
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Register for a caller who has gone = %v, want context.Canceled", err)
				}
			})
		}
		wg.Wait()
		// A batcher that lost its slots to them would queue these forever.
		ctx, stop := context.WithTimeout(b.ctx, 10*time.Second)
		defer stop()
		for i := range 10 {
			wg.Go(func() {
				if _, _, err := b.s.Register(ctx, intention(fmt.Sprintf("after-%d", i), review.RiskCompensableWrite, "files")); err != nil {
					t.Errorf("Register after the callers who had gone: %v", err)
				}
			})
		}
		wg.Wait()
		if got := countRows(t, b.s, `SELECT COUNT(*) FROM operations WHERE source_ref LIKE 'gone-%'`); got != 0 {
			t.Errorf("%d operations stored for callers who had gone", got)
		}
	})
}

// TestFastPathLimitsAcrossInstances: first attempts at two destinations
// with concurrency limits, asked at once on two instances. The fast path
// grants them in its batches, under each destination's lock: exactly the
// limit is granted at each, every grant by the fast path, the rest are told
// to wait; a finished attempt frees its slot for the next.
func TestFastPathLimitsAcrossInstances(t *testing.T) {
	t.Parallel()
	const perDest, limit = 24, 4
	actionLimit := limit
	cfg := &review.Config{Destinations: map[string]review.Destination{
		// Each destination's tighter limit is another kind.
		"d1": {Concurrency: limit + 2, Actions: map[string]review.ActionConfig{"transform": {Concurrency: &actionLimit}}},
		"d2": {Concurrency: limit + 1, PerModel: limit},
	}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, cfg)
		var ops []*review.Operation
		for i := range perDest {
			for _, d := range []string{"d1", "d2"} {
				op := a.newOp(t, fmt.Sprintf("%s-%d", d, i), review.RiskCompensableWrite, d)
				b.get(t, op) // both instances hold a snapshot
				ops = append(ops, op)
			}
		}
		var lastA, lastB int64
		hits(a.s, &lastA)
		hits(b.s, &lastB)
		errs := startAtOnce(a, b, ops, "m1")
		granted := map[string]int{}
		for i, err := range errs {
			var w *review.WaitError
			switch {
			case err == nil:
				granted[ops[i].Destination]++
			case errors.As(err, &w) && strings.Contains(w.Reason, "concurrency limit"):
			default:
				t.Errorf("%s: %v, want a grant or a wait for the limit", ops[i].SourceRef, err)
			}
		}
		for _, d := range []string{"d1", "d2"} {
			if granted[d] != limit {
				t.Errorf("%s: %d granted, want %d", d, granted[d], limit)
			}
			if n := countRows(t, a.s, `SELECT COUNT(*) FROM attempts WHERE destination = ? AND finished_at IS NULL`, d); n != limit {
				t.Errorf("%s: %d open attempts, want %d", d, n, limit)
			}
		}
		if h := hits(a.s, &lastA) + hits(b.s, &lastB); h != 2*limit {
			t.Errorf("%d grants by the fast path, want all %d", h, 2*limit)
		}

		// A finished attempt frees its slot: the next first attempt there
		// is granted, by the fast path, and the one after it waits.
		var held, next []*review.Operation
		for i, op := range ops {
			if op.Destination != "d1" {
				continue
			}
			if errs[i] == nil {
				held = append(held, op)
			} else {
				next = append(next, op)
			}
		}
		a.report(t, held[0], 1, success("file-1"))
		b.get(t, next[0]) // its snapshot is fresh after the refusal
		hits(b.s, &lastB)
		if _, err := b.tryStart(next[0], "", ""); err != nil {
			t.Fatalf("the attempt after a slot was freed: %v", err)
		}
		if h := hits(b.s, &lastB); h != 1 {
			t.Errorf("the grant after a slot was freed took the ordinary path")
		}
		b.get(t, next[1])
		if _, err := b.tryStart(next[1], "", ""); !errors.As(err, new(*review.WaitError)) {
			t.Errorf("a grant over the limit = %v, want a wait", err)
		}
		assertSealed(t, a.s)
	})
}

// TestFastPathRetryBudgetAcrossInstances: retries asked at once on two
// instances, at a destination without limits. The retry budget allows
// max(floor, ratio × first attempts) in its window, here the ratio's 4 of
// 9: exactly 4 are granted, every one by the fast path, the rest wait.
func TestFastPathRetryBudgetAcrossInstances(t *testing.T) {
	t.Parallel()
	const ops, allowed = 9, 4 // trunc(0.5 × 9)
	cfg := &review.Config{RetryBudget: review.RetryBudget{Ratio: 0.5, Floor: 1, Window: time.Hour}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, cfg)
		var list []*review.Operation
		for i := range ops {
			op := a.newOp(t, fmt.Sprintf("flaky-%d", i), review.RiskRead, "api")
			a.start(t, op)
			wantState(t, a.report(t, op, 1, connBeforeSend).Operation, review.RetryWait)
			list = append(list, op)
		}
		a.clk.Advance(time.Second) // past every backoff
		for _, op := range list {
			b.get(t, op) // both instances hold a snapshot
		}
		var lastA, lastB int64
		hits(a.s, &lastA)
		hits(b.s, &lastB)
		errs := startAtOnce(a, b, list, "")
		granted := 0
		for i, err := range errs {
			var w *review.WaitError
			switch {
			case err == nil:
				granted++
			case errors.As(err, &w) && strings.Contains(w.Reason, "retry budget"):
			default:
				t.Errorf("%s: %v, want a grant or a wait for the retry budget", list[i].SourceRef, err)
			}
		}
		if granted != allowed {
			t.Errorf("%d retries granted, want %d", granted, allowed)
		}
		if h := hits(a.s, &lastA) + hits(b.s, &lastB); h != allowed {
			t.Errorf("%d retries granted by the fast path, want all %d", h, allowed)
		}
		assertSealed(t, a.s)
	})
}

// startAtOnce asks for the next attempt of every operation of ops at once,
// every third one on instance b (so that operations listed two
// destinations in turn reach both instances at each), with model, and
// returns each answer's error.
func startAtOnce(a, b *bundle, ops []*review.Operation, model string) []error {
	errs := make([]error, len(ops))
	atOnce(len(ops), func(i int) {
		inst := a
		if i%3 == 1 {
			inst = b
		}
		_, errs[i] = inst.tryStart(ops[i], "", model)
	})
	return errs
}

// TestOneKeyAtOnceAtLimitedDestination: fifty attempts asked at once for
// the same operation, on two instances, at a destination with limits. The
// instance that registered it grants by the fast path, in a batch that
// holds the destination's lock; the other has no snapshot and takes the
// ordinary path, which locks the operation and then the destination:
// exactly one grant, the others refused for the state, and no
// transaction that had to be retried for a deadlock.
func TestOneKeyAtOnceAtLimitedDestination(t *testing.T) {
	t.Parallel()
	const callers = 50
	cfg := &review.Config{Destinations: map[string]review.Destination{"files": {Concurrency: 10, PerModel: 5}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, cfg)
		for round := range 5 {
			op := a.newOp(t, fmt.Sprintf("one-key-%d", round), review.RiskCompensableWrite, "files")
			ops := make([]*review.Operation, callers)
			for i := range ops {
				ops[i] = op
			}
			granted := 0
			for i, err := range startAtOnce(a, b, ops, "m1") {
				var na *review.NotAttemptableError
				switch {
				case err == nil:
					granted++
				case errors.As(err, &na) && na.Operation.State == review.InFlight:
				case errors.Is(err, review.ErrConflict):
				default:
					t.Errorf("round %d caller %d: %v, want a grant or a refusal for the state", round, i, err)
				}
			}
			if granted != 1 {
				t.Errorf("round %d: %d grants, want 1", round, granted)
			}
		}
		noDeadlocks(t, a.s, b.s)
		assertSealed(t, a.s)
	})
}

// TestFastCallRunAgainAfterDeadlock: on PostgreSQL a batch is one
// statement outside WithTx, so a lone fast call the database refuses with
// nothing committed is run again by the batcher, as WithTx runs a
// transaction again. Here another transaction holds the operation's row
// and then asks for the destination's lock that the waiting fast call
// holds; PostgreSQL refuses the fast call (this side waits longer before
// it looks for a deadlock), and the caller still gets its grant, by the
// fast path, once the other transaction ends.
func TestFastCallRunAgainAfterDeadlock(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{"files": {Concurrency: 10}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		if e != store.Postgres {
			t.Skip("SQLite has one writer: nothing waits for a lock")
		}
		b := setup(t, e, cfg)
		op := b.newOp(t, "deadlocked", review.RiskCompensableWrite, "files")
		b.get(t, op) // the snapshot: the fast path
		var last int64
		hits(b.s, &last)

		errRollback := errors.New("rolled back by the test")
		locked := make(chan struct{})
		held := make(chan error, 1)
		go func() {
			held <- b.s.WithTx(b.ctx, func(tx *sqlx.Tx) error {
				if _, err := tx.Exec(`SET LOCAL deadlock_timeout = '30s'`); err != nil {
					return err
				}
				if _, err := tx.Exec(`SELECT id FROM operations WHERE id = $1 FOR UPDATE`, op.ID); err != nil {
					return err
				}
				close(locked)
				// The fast call holds the destination's row and waits for
				// the operation's.
				if err := batchesWaiting(tx, 1); err != nil {
					return err
				}
				if _, err := tx.Exec(`UPDATE destination_locks SET destination = destination WHERE destination = 'files'`); err != nil {
					return err
				}
				return errRollback
			})
		}()
		select {
		case <-locked:
		case err := <-held:
			t.Fatalf("the other transaction: %v", err)
		}
		g, err := b.tryStart(op, "", "")
		if err != nil {
			t.Fatalf("StartAttempt after a deadlock: %v, want the grant", err)
		}
		if g.N != 1 {
			t.Errorf("granted attempt %d, want 1", g.N)
		}
		if err := <-held; !errors.Is(err, errRollback) {
			t.Fatalf("the other transaction: %v", err)
		}
		if h := hits(b.s, &last); h != 1 {
			t.Errorf("the grant took the ordinary path")
		}
		// At least the fast call's run: a CI run on a loaded machine once
		// counted two (2026-12-07, cause not found; the grant was still
		// the fast path's, attempt 1, as checked above).
		if r := b.s.TxRetries(); r.Deadlock < 1 {
			t.Errorf("%d transactions run again after a deadlock, want the fast call's", r.Deadlock)
		}
		wantState(t, b.get(t, op), review.InFlight)
		assertSealed(t, b.s)
	})
}

// TestKeysSharedAcrossBatches: many integrators register the same few
// intentions at once, on two instances, so that concurrent batches hold
// the same new keys in different orders. Each key is created once, every
// other call answers with that operation, and no batch waited for a
// deadlock to be broken: a batch writes its calls in one order.
func TestKeysSharedAcrossBatches(t *testing.T) {
	t.Parallel()
	const keys, callers = 8, 96
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		a, b := twoInstances(t, e, nil)
		for round := range 4 {
			ids := make([]string, callers)
			created := make([]bool, callers)
			errs := make([]error, callers)
			atOnce(callers, func(i int) {
				inst := a
				if i%2 == 1 {
					inst = b
				}
				// Callers start on different keys, so batches take them
				// in different orders.
				r := intention(fmt.Sprintf("shared-%d-%d", round, (i*7)%keys), review.RiskCompensableWrite, "plain")
				op, c, err := inst.s.Register(inst.ctx, r)
				if op != nil {
					ids[i] = op.ID
				}
				created[i], errs[i] = c, err
			})
			byKey, made := map[int]string{}, 0
			for i := range callers {
				if errs[i] != nil {
					t.Fatalf("round %d caller %d: %v", round, i, errs[i])
				}
				if created[i] {
					made++
				}
				k := (i * 7) % keys
				if id, ok := byKey[k]; ok && id != ids[i] {
					t.Errorf("round %d: key %d answered as %s and %s", round, k, id, ids[i])
				}
				byKey[k] = ids[i]
			}
			if made != keys {
				t.Errorf("round %d: %d created, want %d", round, made, keys)
			}
		}
		noDeadlocks(t, a.s, b.s)
		assertSealed(t, a.s)
	})
}

// batchesWaiting returns once n fast-path batches wait for a lock that
// tx's session holds, as tx reads pg_stat_activity (about 10 s at most).
// Only the batches tx blocks count: the tests share one database, schema
// by schema, and another test's batch waiting for its own lock once let
// TestFastCallRunAgainAfterDeadlock go on before its batch had locked
// anything, so that no deadlock formed.
func batchesWaiting(tx *sqlx.Tx, n int) error {
	for got, tries := 0, 0; got < n; tries++ {
		if tries == 2000 {
			return fmt.Errorf("%d batches wait for a lock, want %d", got, n)
		}
		// pg_stat_activity is read once per transaction unless its
		// snapshot is cleared.
		if _, err := tx.Exec(`SELECT pg_stat_clear_snapshot()`); err != nil {
			return err
		}
		if err := tx.Get(&got, `SELECT COUNT(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%limbo_fast_batch%' AND pg_backend_pid() = ANY (pg_blocking_pids(pid))`); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// TestBatchLocksItsDestinationsFirst: a batch that grants at two limited
// destinations locks both before any operation, as the lock order says
// (destinations, then operations, then cases). The test makes the batch
// [files: x, models: y] find models locked by another transaction, which
// then locks x, as a concurrent batch reporting x's outcome after its own
// grant at models would. Locking files, x, then models, the batch held x
// while it waited: a deadlock, which PostgreSQL broke after a second.
func TestBatchLocksItsDestinationsFirst(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{"files": {Concurrency: 10}, "models": {Concurrency: 10}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		if e != store.Postgres {
			t.Skip("SQLite has one writer: nothing waits for a lock")
		}
		b := setup(t, e, cfg)
		db := b.s.DB()
		z1, z2 := b.newOp(t, "blocker-1", review.RiskCompensableWrite, "plain"), b.newOp(t, "blocker-2", review.RiskCompensableWrite, "plain")
		x, y := b.newOp(t, "x", review.RiskCompensableWrite, "files"), b.newOp(t, "y", review.RiskCompensableWrite, "models")
		for _, op := range []*review.Operation{z1, z2, x, y} {
			b.get(t, op) // the snapshots: the fast path
		}
		if _, err := db.Exec(`INSERT INTO destination_locks (destination) VALUES ('files'), ('models') ON CONFLICT DO NOTHING`); err != nil {
			t.Fatal(err)
		}

		// Both batch slots wait for the blockers' rows, so that x and y
		// queue up and go in one batch after them.
		blocker, err := db.Beginx()
		if err != nil {
			t.Fatal(err)
		}
		defer blocker.Rollback()
		if _, err := blocker.Exec(`SELECT id FROM operations WHERE id IN ($1, $2) FOR UPDATE`, z1.ID, z2.ID); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 4)
		for _, op := range []*review.Operation{z1, z2} {
			go func() { _, err := b.tryStart(op, "", ""); errs <- err }()
		}
		if err := batchesWaiting(blocker, 2); err != nil {
			t.Fatal(err)
		}
		for _, op := range []*review.Operation{x, y} {
			go func() { _, err := b.tryStart(op, "", ""); errs <- err }()
		}
		for tries := 0; store.QueuedFastCalls(b.s) < 2; tries++ {
			if tries == 2000 {
				t.Fatal("x and y did not queue")
			}
			time.Sleep(time.Millisecond)
		}

		// The other transaction holds models, and takes x once the batch
		// waits; it waits 30 s before looking for a deadlock, so that the
		// batch's backend is the one to find it.
		errRollback := errors.New("rolled back by the test")
		other := make(chan error, 1)
		go func() {
			other <- b.s.WithTx(b.ctx, func(tx *sqlx.Tx) error {
				if _, err := tx.Exec(`SET LOCAL deadlock_timeout = '30s'`); err != nil {
					return err
				}
				if _, err := tx.Exec(`UPDATE destination_locks SET destination = destination WHERE destination = 'models'`); err != nil {
					return err
				}
				if err := blocker.Rollback(); err != nil {
					return err
				}
				if err := batchesWaiting(tx, 1); err != nil {
					return err
				}
				if _, err := tx.Exec(`SELECT id FROM operations WHERE id = $1 FOR UPDATE`, x.ID); err != nil {
					return err
				}
				return errRollback
			})
		}()
		if err := <-other; !errors.Is(err, errRollback) {
			t.Fatalf("the other transaction: %v", err)
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("StartAttempt: %v, want the grant", err)
			}
		}
		noDeadlocks(t, b.s)
		if st := b.s.FastBatches(); st.Split != 0 {
			t.Errorf("%d batches rolled back and split, want none", st.Split)
		}
		for _, op := range []*review.Operation{z1, z2, x, y} {
			wantState(t, b.get(t, op), review.InFlight)
		}
		assertSealed(t, b.s)
	})
}
