package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

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
		s, err := store.Open(context.Background(), url, store.Options{Config: cfg, Clock: clk.Now, Rand: fixedRand(0.5)})
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
		// a's late report is fenced, nothing is half-written.
		op = a.newOp(t, "moved-3", review.RiskRead, "files")
		a.start(t, op)
		exec(t, b.s, `UPDATE operations SET state = 'cancelled', version = version + 1 WHERE id = ?`, op.ID)
		if _, err := a.s.RecordOutcome(a.ctx, op.Tenant, op.ID, 1, success("file:moved-3"), "test"); !errors.Is(err, review.ErrConflict) {
			t.Errorf("report after the operation moved on = %v, want ErrConflict", err)
		}
		if got := countRows(t, a.s, `SELECT COUNT(*) FROM attempts WHERE operation_id = ? AND finished_at IS NOT NULL`, op.ID); got != 0 {
			t.Errorf("the fenced report closed the attempt")
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
