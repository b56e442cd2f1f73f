package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// keyedConfig knows one destination that honours idempotency keys; every
// other name gets the safe defaults.
func keyedConfig() *review.Config {
	return &review.Config{Destinations: map[string]review.Destination{
		"keyed": {HonoursKeys: true},
	}}
}

func TestStartAttemptGrants(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{"quick": {Lease: 5 * time.Second}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		for _, tt := range []struct {
			dest  string
			lease time.Duration
		}{{"files", review.DefaultLease}, {"quick", 5 * time.Second}} {
			op := b.newOp(t, "doc-"+tt.dest, review.RiskCompensableWrite, tt.dest)
			g := b.start(t, op)
			if g.OperationID != op.ID || g.N != 1 || g.Key != op.Key || !g.LeaseExpiresAt.Equal(t0.Add(tt.lease)) {
				t.Errorf("grant = %+v, want n 1, key %s, lease until %s", g, op.Key, t0.Add(tt.lease))
			}
			got := b.get(t, op)
			wantState(t, got, review.InFlight)
			if got.AttemptCount != 1 || len(got.Attempts) != 1 || got.Attempts[0].N != 1 || got.Attempts[0].FinishedAt != nil {
				t.Errorf("after the grant: %d attempts counted, %+v", got.AttemptCount, got.Attempts)
			}
			// One attempt at a time: an operation in flight is not attemptable.
			_, err := b.tryStart(op, "", "")
			if na := errAs[*review.NotAttemptableError](t, err); na.Operation.State != review.InFlight {
				t.Errorf("refusal names state %s, want in_flight", na.Operation.State)
			}
		}
		if _, err := b.s.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenantA, OperationID: "op_missing"}); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("StartAttempt(unknown id) = %v, want ErrNotFound", err)
		}
	})
}

// TestOutcomeClassification walks SPEC's error classification through the
// store: one attempt, one outcome, and where the operation ends up.
func TestOutcomeClassification(t *testing.T) {
	t.Parallel()
	one := 1
	tests := []struct {
		name        string
		risk        review.Risk
		dest        string
		flags       []review.Flag
		maxAttempts *int
		outcome     review.Outcome
		state       review.State
		next        review.Next
	}{
		{"compensable timeout after send", review.RiskCompensableWrite, "plain", nil, nil, timeoutAfterSend, review.Ambiguous, review.NextReconcile},
		{"irreversible timeout after send", review.RiskIrreversible, "plain", nil, nil, timeoutAfterSend, review.Ambiguous, review.NextReconcile},
		{"compensable 502", review.RiskCompensableWrite, "plain", nil, nil, httpError(502), review.Ambiguous, review.NextReconcile},
		{"idempotent on unconfigured destination 500", review.RiskIdempotentWrite, "plain", nil, nil, httpError(500), review.Ambiguous, review.NextReconcile},
		{"idempotent on keyed destination 500", review.RiskIdempotentWrite, "keyed", nil, nil, httpError(500), review.RetryWait, review.NextRetryAt},
		{"idempotent on keyed destination 500, budget spent", review.RiskIdempotentWrite, "keyed", nil, &one, httpError(500), review.Ambiguous, review.NextReconcile},
		{"compensable 400", review.RiskCompensableWrite, "plain", nil, nil, httpError(400), review.Failed, review.NextFailed},
		{"read 404", review.RiskRead, "plain", nil, nil, httpError(404), review.Failed, review.NextFailed},
		{"compensable 422", review.RiskCompensableWrite, "plain", nil, nil, httpError(422), review.Failed, review.NextFailed},
		{"compensable connection error before send", review.RiskCompensableWrite, "plain", nil, nil, connBeforeSend, review.RetryWait, review.NextRetryAt},
		{"irreversible timeout before send", review.RiskIrreversible, "plain", nil, nil,
			review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseBeforeSend}, review.RetryWait, review.NextRetryAt},
		{"compensable 503", review.RiskCompensableWrite, "plain", nil, nil, httpError(503), review.RetryWait, review.NextRetryAt},
		{"compensable 429 quota exhausted", review.RiskCompensableWrite, "plain", nil, nil,
			review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota"}, review.Failed, review.NextFailed},
		{"read 500", review.RiskRead, "plain", nil, nil, httpError(500), review.RetryWait, review.NextRetryAt},
		{"read timeout after send", review.RiskRead, "plain", nil, nil, timeoutAfterSend, review.RetryWait, review.NextRetryAt},
		{"read 500, max attempts spent", review.RiskRead, "plain", nil, &one, httpError(500), review.Failed, review.NextFailed},
		{"financial read 500", review.RiskRead, "plain", []review.Flag{review.FlagFinancial}, nil, httpError(500), review.Ambiguous, review.NextReconcile},
		{"compensable success", review.RiskCompensableWrite, "plain", nil, nil, success("file-1"), review.Confirmed, review.NextDone},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, keyedConfig())
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := intention(fmt.Sprintf("doc-%d", i), tt.risk, tt.dest)
				r.Flags, r.MaxAttempts = tt.flags, tt.maxAttempts
				op := b.register(t, r)
				b.start(t, op)
				res := b.report(t, op, 1, tt.outcome)
				wantState(t, res.Operation, tt.state)
				if res.Next != tt.next || res.Reason == "" || res.Unchanged {
					t.Errorf("next = %s (%q, unchanged %v), want %s with a reason", res.Next, res.Reason, res.Unchanged, tt.next)
				}
				att := res.Operation.Attempts[0]
				if att.FinishedAt == nil || att.Result != tt.outcome.Result || att.HTTPStatus != tt.outcome.HTTPStatus || att.Next != tt.next {
					t.Errorf("attempt row = %+v, want it closed with the report", att)
				}
				switch tt.state {
				case review.RetryWait:
					if res.RetryAt == nil || res.Operation.NextAttemptAt == nil || !res.RetryAt.Equal(*res.Operation.NextAttemptAt) {
						t.Errorf("retry_at = %v, next_attempt_at = %v; want both set and equal", res.RetryAt, res.Operation.NextAttemptAt)
					}
				default:
					if res.RetryAt != nil {
						t.Errorf("retry_at = %v, want none for %s", res.RetryAt, tt.state)
					}
					// Ambiguous, failed and confirmed operations grant nothing.
					_, err := b.tryStart(op, "", "")
					if na := errAs[*review.NotAttemptableError](t, err); na.Operation.State != tt.state {
						t.Errorf("refusal names state %s, want %s", na.Operation.State, tt.state)
					}
				}
			})
		}
		assertSealed(t, b.s)
	})
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, keyedConfig())
		op := b.newOp(t, "doc-1", review.RiskIdempotentWrite, "keyed")
		first := b.start(t, op)
		res := b.report(t, op, 1, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 429, RetryAfter: "3"})
		wantState(t, res.Operation, review.RetryWait)
		// The 500 ms backoff is shorter than the 3 s the destination asked for.
		retryAt := t0.Add(3 * time.Second)
		if res.Next != review.NextRetryAt || res.RetryAt == nil || !res.RetryAt.Equal(retryAt) {
			t.Fatalf("next = %s at %v, want retry_at %s", res.Next, res.RetryAt, retryAt)
		}
		events := len(b.history(t, op.ID))

		b.clk.Advance(2 * time.Second)
		_, err := b.tryStart(op, "", "")
		if w := errAs[*review.WaitError](t, err); w.Until.Before(retryAt) {
			t.Errorf("wait until %s, before the retry time %s", w.Until, retryAt)
		}
		if got := b.get(t, op); got.AttemptCount != 1 || got.State != review.RetryWait || len(b.history(t, op.ID)) != events {
			t.Errorf("a refused attempt changed the operation: %+v", got)
		}

		b.clk.Advance(1500 * time.Millisecond)
		second := b.start(t, op)
		if second.N != 2 || second.Key != first.Key {
			t.Errorf("second grant = n %d key %s, want n 2 with the same key %s", second.N, second.Key, first.Key)
		}
		assertSealed(t, b.s)
	})
}

func TestBudgetsEndInFailure(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)

		t.Run("max attempts", func(t *testing.T) {
			two := 2
			r := intention("doc-attempts", review.RiskRead, "plain")
			r.MaxAttempts = &two
			op := b.register(t, r)
			b.start(t, op)
			wantState(t, b.report(t, op, 1, httpError(500)).Operation, review.RetryWait)
			b.clk.Advance(time.Minute)
			b.start(t, op)
			res := b.report(t, op, 2, httpError(500))
			wantState(t, res.Operation, review.Failed)
			if res.Next != review.NextFailed || !strings.Contains(res.Reason, "budget") {
				t.Errorf("next = %s (%q), want failed for the budget", res.Next, res.Reason)
			}
		})

		t.Run("deadline", func(t *testing.T) {
			r := intention("doc-deadline", review.RiskRead, "plain")
			deadline := b.clk.Now().Add(10 * time.Second)
			r.Deadline = &deadline
			op := b.register(t, r)
			b.start(t, op)
			wantState(t, b.report(t, op, 1, connBeforeSend).Operation, review.RetryWait)
			b.clk.Advance(20 * time.Second)
			_, err := b.tryStart(op, "", "")
			na := errAs[*review.NotAttemptableError](t, err)
			if na.Operation.State != review.Failed {
				t.Errorf("refusal names state %s, want failed", na.Operation.State)
			}
			got := b.get(t, op)
			wantState(t, got, review.Failed)
			if last := b.history(t, op.ID); last[len(last)-1].ToState != string(review.Failed) {
				t.Errorf("the failure was not audited: %+v", last[len(last)-1])
			}
		})

		t.Run("cost", func(t *testing.T) {
			budget := 1.0
			r := intention("doc-cost", review.RiskRead, "plain")
			r.CostBudget = &budget
			op := b.register(t, r)
			b.start(t, op)
			o := httpError(500)
			o.Cost = 1.5
			res := b.report(t, op, 1, o)
			wantState(t, res.Operation, review.Failed)
			if res.Operation.CostSpent != 1.5 {
				t.Errorf("cost spent = %v, want 1.5", res.Operation.CostSpent)
			}
		})
		assertSealed(t, b.s)
	})
}

func TestSuccessConfirmsWithEvidence(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-1", review.RiskCompensableWrite, "files")
		b.start(t, op)
		res := b.report(t, op, 1, success("file-9"))
		got := res.Operation
		wantState(t, got, review.Confirmed)
		if res.Next != review.NextDone {
			t.Errorf("next = %s, want done", res.Next)
		}
		if got.Resource == nil || *got.Resource != (review.ResourceRef{Ref: "file-9", Kind: "file", Version: "v1"}) {
			t.Errorf("resource = %+v, want file-9", got.Resource)
		}
		if len(got.Evidence) != 1 {
			t.Fatalf("evidence = %+v, want the response", got.Evidence)
		}
		ev := got.Evidence[0]
		if ev.Source != review.SourceResponse || ev.Verdict != review.VerdictConfirms || !ev.Authoritative ||
			len(ev.Candidates) != 1 || ev.Candidates[0].Ref != "file-9" || ev.Candidates[0].OperationID != op.ID {
			t.Errorf("evidence = %+v, want an authoritative response confirming file-9", ev)
		}
	})
}

func TestSuccessForAnotherVersionNeedsReview(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-1", review.RiskCompensableWrite, "files")
		b.start(t, op)
		o := success("file-9")
		o.Resource.Version = "v0"
		res := b.report(t, op, 1, o)
		wantState(t, res.Operation, review.NeedsReview)
		if res.Next != review.NextReview || res.Operation.Resource != nil {
			t.Errorf("next = %s, resource %+v; want review and no confirmed resource", res.Next, res.Operation.Resource)
		}
		if ev := res.Operation.Evidence; len(ev) != 1 || ev[0].Verdict != review.VerdictInconclusive {
			t.Errorf("evidence = %+v, want one inconclusive response", ev)
		}
	})
}

func TestAcceptedJob(t *testing.T) {
	t.Parallel()
	queued := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202,
		Job: &review.JobRef{Ref: "job-1", Status: "queued"}}
	tests := []struct {
		name     string
		job      review.Job
		want     review.State
		resource *review.ResourceRef
	}{
		{"succeeded", review.Job{Ref: "job-1", Status: review.JobSucceeded, OutputRef: "pdf-1"}, review.Confirmed,
			&review.ResourceRef{Ref: "pdf-1", Kind: "job_output", Version: "v1"}},
		{"succeeded for the same version", review.Job{Ref: "job-1", Status: review.JobSucceeded, InputVersion: "v1"}, review.Confirmed,
			&review.ResourceRef{Ref: "job-1", Kind: "job_output", Version: "v1"}},
		{"succeeded for another version", review.Job{Ref: "job-1", Status: review.JobSucceeded, InputVersion: "v0", OutputRef: "pdf-0"}, review.NeedsReview, nil},
		{"failed", review.Job{Ref: "job-1", Status: review.JobFailed}, review.Failed, nil},
		{"canceled", review.Job{Ref: "job-1", Status: review.JobCanceled}, review.Failed, nil},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				op := b.newOp(t, fmt.Sprintf("doc-%d", i), review.RiskCompensableWrite, "transform")
				b.start(t, op)
				res := b.report(t, op, 1, queued)
				wantState(t, res.Operation, review.Accepted)
				if res.Next != review.NextDone {
					t.Errorf("next = %s, want done (wait for the job)", res.Next)
				}
				jobs := res.Operation.Jobs
				if len(jobs) != 1 || jobs[0].Ref != "job-1" || jobs[0].Status != review.JobQueued || jobs[0].InputVersion != "v1" {
					t.Fatalf("jobs = %+v, want job-1 queued for v1", jobs)
				}

				running, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobRunning}, "test")
				if err != nil {
					t.Fatal(err)
				}
				wantState(t, running, review.Accepted)

				got, err := b.s.PutJob(b.ctx, tenantA, op.ID, tt.job, "test")
				if err != nil {
					t.Fatal(err)
				}
				wantState(t, got, tt.want)
				if (got.Resource == nil) != (tt.resource == nil) || got.Resource != nil && *got.Resource != *tt.resource {
					t.Errorf("resource = %+v, want %+v", got.Resource, tt.resource)
				}
				events := len(b.history(t, op.ID))

				// The same report again changes nothing; a finished job stays finished.
				again, err := b.s.PutJob(b.ctx, tenantA, op.ID, tt.job, "test")
				if err != nil || again.State != tt.want || len(b.history(t, op.ID)) != events {
					t.Errorf("same job report again = %v, %v; want no change", again, err)
				}
				if _, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobRunning}, "test"); !errors.Is(err, review.ErrConflict) {
					t.Errorf("finished job set running = %v, want ErrConflict", err)
				}
			})
		}
		if _, err := b.s.PutJob(b.ctx, tenantA, "op_missing", review.Job{Ref: "job-1", Status: review.JobQueued}, "test"); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("PutJob(unknown operation) = %v, want ErrNotFound", err)
		}
		assertSealed(t, b.s)
	})
}

func TestOutcomeReportedTwice(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-1", review.RiskRead, "files")
		b.start(t, op)
		first := b.report(t, op, 1, httpError(503))
		events := len(b.history(t, op.ID))

		b.clk.Advance(100 * time.Millisecond)
		again := b.report(t, op, 1, httpError(503))
		if !again.Unchanged || again.Next != first.Next || again.RetryAt == nil || !again.RetryAt.Equal(*first.RetryAt) || again.Reason != first.Reason {
			t.Errorf("same outcome again = %+v, want unchanged with the first answer %+v", again, first)
		}
		if again.Operation == nil || again.Operation.Version != first.Operation.Version {
			t.Errorf("unchanged answer carries operation %+v, want version %d", again.Operation, first.Operation.Version)
		}
		if n := len(b.history(t, op.ID)); n != events {
			t.Errorf("audit events %d → %d for a repeated report", events, n)
		}

		// A conflicting report for the same attempt is refused, and kept:
		// a success names the effect, so no retry goes out (review.Weigh
		// confirms it); the attempt keeps its first report.
		_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("file-1"), "test")
		oc := errAs[*review.OutcomeConflictError](t, err)
		if oc.Operation == nil || oc.Operation.State != review.Confirmed {
			t.Errorf("conflict names %+v, want the operation confirmed by the kept success", oc.Operation)
		}
		if got := b.get(t, op); got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "file-1" || got.Attempts[0].HTTPStatus != 503 {
			t.Errorf("after a conflicting success: %+v", got)
		}

		if _, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 7, httpError(503), "test"); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("outcome for attempt 7 = %v, want ErrNotFound", err)
		}
		if _, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseBeforeSend}, "test"); !errors.Is(err, review.ErrInvalid) {
			t.Errorf("self-contradicting outcome = %v, want ErrInvalid", err)
		}
	})
}

func TestConcurrencyLimits(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"narrow":     {Concurrency: 1},
		"credential": {PerCredential: 1},
		"model":      {PerModel: 1},
		"solo":       {Concurrency: 1},
	}}
	type req struct{ credential, model string }
	tests := []struct {
		dest string
		// first is granted and holds its slot; then each of others is
		// tried: wait says whether it is held back.
		first  req
		others []req
		wait   []bool
	}{
		{"narrow", req{}, []req{{}, {"c1", "m1"}}, []bool{true, true}},
		{"credential", req{"c1", ""}, []req{{"c1", ""}, {"c2", ""}, {"", ""}}, []bool{true, false, false}},
		{"model", req{"", "m1"}, []req{{"", "m1"}, {"", "m2"}, {"c1", ""}}, []bool{true, false, false}},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		for _, tt := range tests {
			t.Run(tt.dest, func(t *testing.T) {
				holder := b.newOp(t, tt.dest+"-holder", review.RiskCompensableWrite, tt.dest)
				if _, err := b.tryStart(holder, tt.first.credential, tt.first.model); err != nil {
					t.Fatal(err)
				}
				var waiting []*review.Operation
				for i, o := range tt.others {
					op := b.newOp(t, fmt.Sprintf("%s-%d", tt.dest, i), review.RiskCompensableWrite, tt.dest)
					_, err := b.tryStart(op, o.credential, o.model)
					if !tt.wait[i] {
						if err != nil {
							t.Errorf("attempt %+v = %v, want granted", o, err)
						}
						continue
					}
					w := errAs[*review.WaitError](t, err)
					if !w.Until.After(b.clk.Now()) || !strings.Contains(w.Reason, "concurrency") {
						t.Errorf("wait = %+v, want a later time and the concurrency limit as reason", w)
					}
					if got := b.get(t, op); got.State != review.Pending || got.AttemptCount != 0 {
						t.Errorf("a refused attempt changed the operation: %+v", got)
					}
					waiting = append(waiting, op)
				}
				// The holder's outcome frees its slot.
				b.report(t, holder, 1, success(tt.dest+"-file"))
				if _, err := b.tryStart(waiting[0], tt.others[0].credential, tt.others[0].model); err != nil {
					t.Errorf("after the slot was freed: %v", err)
				}
			})
		}

		t.Run("expired lease frees the slot", func(t *testing.T) {
			holder := b.newOp(t, "lease-holder", review.RiskRead, "solo")
			b.start(t, holder)
			op := b.newOp(t, "lease-waiter", review.RiskRead, "solo")
			_, err := b.tryStart(op, "", "")
			errAs[*review.WaitError](t, err)
			b.clk.Advance(review.DefaultLease)
			if _, err := b.tryStart(op, "", ""); err != nil {
				t.Errorf("after the holder's lease expired: %v", err)
			}
		})
	})
}

func TestRetryBudget(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{RetryBudget: review.RetryBudget{Ratio: 0.1, Floor: 2, Window: time.Minute}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		var ops []*review.Operation
		for i := range 3 {
			op := b.newOp(t, fmt.Sprintf("doc-%d", i), review.RiskRead, "api")
			b.start(t, op)
			wantState(t, b.report(t, op, 1, connBeforeSend).Operation, review.RetryWait)
			ops = append(ops, op)
		}
		b.clk.Advance(time.Second) // past every backoff

		// 3 first attempts × 10 % is below the floor: 2 retries per minute.
		for _, op := range ops[:2] {
			if g := b.start(t, op); g.N != 2 {
				t.Errorf("retry granted as attempt %d, want 2", g.N)
			}
		}
		_, err := b.tryStart(ops[2], "", "")
		w := errAs[*review.WaitError](t, err)
		if !strings.Contains(w.Reason, "retry budget") || !w.Until.After(b.clk.Now()) {
			t.Errorf("wait = %+v, want the retry budget with a later time", w)
		}
		// First attempts are not retries: they still pass.
		for i := range 3 {
			b.start(t, b.newOp(t, fmt.Sprintf("fresh-%d", i), review.RiskRead, "api"))
		}
		// Another destination has its own budget.
		other := b.newOp(t, "elsewhere", review.RiskRead, "other-api")
		b.start(t, other)
		b.report(t, other, 1, connBeforeSend)
		b.clk.Advance(time.Second)
		b.start(t, other)

		// Another tenant at the same destination has its own budget: tenant
		// A's two retries spent nothing of it.
		regB := intention("b-doc", review.RiskRead, "api")
		regB.Tenant = tenantB
		opB := b.register(t, regB)
		b.start(t, opB)
		b.report(t, opB, 1, connBeforeSend)
		b.clk.Advance(time.Second)
		if g, err := b.tryStart(opB, "", ""); err != nil || g.N != 2 {
			t.Errorf("tenant B's retry = %+v, %v; want attempt 2 from its own budget", g, err)
		}
		// The fill, as the admin page and /metrics read it.
		fills, err := b.s.RetryBudgets(b.ctx, review.Operator("test"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]store.RetryBudgetFill{}
		for _, f := range fills {
			got[f.Destination+"/"+f.Tenant] = f
		}
		if a := got["api/"+tenantA]; a.Firsts != 6 || a.Retries != 2 || a.Allowed != 2 || a.Left() != 0 || a.Percent() != 100 {
			t.Errorf("tenant A at api = %+v, want 6 firsts, 2 of 2 retries", a)
		}
		if bb := got["api/"+tenantB]; bb.Firsts != 1 || bb.Retries != 1 || bb.Allowed != 2 || bb.Left() != 1 {
			t.Errorf("tenant B at api = %+v, want 1 first, 1 of 2 retries", bb)
		}
		scoped, err := b.s.RetryBudgets(b.ctx, review.Principal{Name: "b-admin", Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{tenantB}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range scoped {
			if f.Tenant != tenantB {
				t.Errorf("a tenant-B admin reads %s's budget", f.Tenant)
			}
		}

		// Once the window has slid past the two retries, the third may go.
		b.clk.Advance(time.Minute)
		if g, err := b.tryStart(ops[2], "", ""); err != nil || g.N != 2 {
			t.Errorf("retry after the window = %+v, %v; want attempt 2", g, err)
		}
	})
}

// TestReservePriority: the slots kept for priority actions are closed to
// ordinary ones and open to an action whose policy says priority.
func TestReservePriority(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{"busy": {Concurrency: 3, ReservePriority: 1,
		Actions: map[string]review.ActionConfig{"page_oncall": {Priority: true}}}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		b.start(t, b.newOp(t, "ordinary-1", review.RiskRead, "busy"))
		b.start(t, b.newOp(t, "ordinary-2", review.RiskRead, "busy"))
		_, err := b.tryStart(b.newOp(t, "ordinary-3", review.RiskRead, "busy"), "", "")
		if w := errAs[*review.WaitError](t, err); !strings.Contains(w.Reason, "kept for priority") {
			t.Errorf("ordinary third attempt: %q, want the priority reserve named", w.Reason)
		}
		reg := intention("urgent", review.RiskRead, "busy")
		reg.Action = "page_oncall"
		b.start(t, b.register(t, reg))
		reg = intention("urgent-2", review.RiskRead, "busy")
		reg.Action = "page_oncall"
		if _, err := b.tryStart(b.register(t, reg), "", ""); err == nil {
			t.Error("a priority operation went past the destination's whole limit")
		}
	})
}

// TestConcurrencyLimitUnderContention starts attempts on 20 operations of
// one destination at once: the limit holds exactly. On PostgreSQL this
// proves the destination row lock; on SQLite, the single writer.
func TestConcurrencyLimitUnderContention(t *testing.T) {
	t.Parallel()
	const ops, limit = 20, 5
	cfg := &review.Config{Destinations: map[string]review.Destination{"busy": {Concurrency: limit}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		var list []*review.Operation
		for i := range ops {
			list = append(list, b.newOp(t, fmt.Sprintf("doc-%d", i), review.RiskCompensableWrite, "busy"))
		}
		var (
			wg    sync.WaitGroup
			ready = make(chan struct{})
			errs  = make([]error, ops)
		)
		for i, op := range list {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				_, errs[i] = b.tryStart(op, "", "")
			}()
		}
		close(ready)
		wg.Wait()
		granted, waited := 0, 0
		for i, err := range errs {
			var w *review.WaitError
			switch {
			case err == nil:
				granted++
			case errors.As(err, &w):
				waited++
			default:
				t.Errorf("operation %d: %v", i, err)
			}
		}
		if granted != limit || waited != ops-limit {
			t.Errorf("%d granted, %d told to wait; want %d and %d", granted, waited, limit, ops-limit)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM attempts WHERE destination = ? AND finished_at IS NULL`, "busy"); n != limit {
			t.Errorf("open attempts = %d, want %d", n, limit)
		}
	})
}

func TestLeaseSweeper(t *testing.T) {
	t.Parallel()
	tests := []struct {
		risk review.Risk
		want review.State
	}{
		{review.RiskCompensableWrite, review.Ambiguous},
		{review.RiskIrreversible, review.Ambiguous},
		{review.RiskRead, review.RetryWait},
	}
	for _, tt := range tests {
		t.Run(string(tt.risk), func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, e store.Engine) {
				b := setup(t, e, nil)
				op := b.newOp(t, "doc-1", tt.risk, "files")
				b.start(t, op)

				b.clk.Advance(review.DefaultLease - time.Second)
				if n, err := b.s.SweepLeases(b.ctx); err != nil || n != 0 {
					t.Fatalf("sweep before the lease ends = %d, %v; want 0", n, err)
				}
				b.clk.Advance(2 * time.Second)
				if n, err := b.s.SweepLeases(b.ctx); err != nil || n != 1 {
					t.Fatalf("sweep after the lease ends = %d, %v; want 1", n, err)
				}
				if n, err := b.s.SweepLeases(b.ctx); err != nil || n != 0 {
					t.Errorf("second sweep = %d, %v; want 0", n, err)
				}
				got := b.get(t, op)
				wantState(t, got, tt.want)
				att := got.Attempts[0]
				if att.Result != review.ResultUnknown || att.Phase != review.PhaseUnknown || att.FinishedAt == nil {
					t.Errorf("swept attempt = %+v, want closed with result unknown", att)
				}
				hist := b.history(t, op.ID)
				if last := hist[len(hist)-1]; last.Actor != "system:lease-sweeper" || last.ToState != string(tt.want) {
					t.Errorf("last event = %+v, want the sweeper's move to %s", last, tt.want)
				}

				// The integrator reports late: refused, but kept as evidence.
				_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("file-late"), "test")
				oc := errAs[*review.OutcomeConflictError](t, err)
				if !strings.Contains(oc.Reason, "lease") {
					t.Errorf("conflict reason = %q, want it to name the expired lease", oc.Reason)
				}
				// A success is the destination's word however late it comes
				// (review.LateEvidence), and with no other attempt out it
				// settles the operation (review.Weigh).
				after := b.get(t, op)
				wantState(t, after, review.Confirmed)
				if after.Resource == nil || after.Resource.Ref != "file-late" {
					t.Errorf("after a late success: resource %+v", after.Resource)
				}
				if len(after.Evidence) != 1 || len(after.Evidence[0].Candidates) != 1 || after.Evidence[0].Candidates[0].Ref != "file-late" ||
					after.Evidence[0].Verdict != review.VerdictConfirms || !after.Evidence[0].Authoritative {
					t.Errorf("evidence = %+v, want the late success kept as authoritative, confirming evidence", after.Evidence)
				}
				assertSealed(t, b.s)
			})
		})
	}
}

// TestRacesHaveOneWinner: callers racing on one operation never both win.
func TestRacesHaveOneWinner(t *testing.T) {
	t.Parallel()
	const callers = 10
	race := func(fn func(i int) error) []error {
		var wg sync.WaitGroup
		ready := make(chan struct{})
		errs := make([]error, callers)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				errs[i] = fn(i)
			}()
		}
		close(ready)
		wg.Wait()
		return errs
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-1", review.RiskCompensableWrite, "files")

		t.Run("start attempt", func(t *testing.T) {
			errs := race(func(int) error { _, err := b.tryStart(op, "", ""); return err })
			granted := 0
			for i, err := range errs {
				var na *review.NotAttemptableError
				switch {
				case err == nil:
					granted++
				case !errors.As(err, &na):
					t.Errorf("caller %d: %v", i, err)
				}
			}
			if granted != 1 {
				t.Errorf("%d attempts granted, want 1", granted)
			}
			if got := b.get(t, op); got.AttemptCount != 1 || len(got.Attempts) != 1 {
				t.Errorf("operation counts %d attempts, %d rows; want 1", got.AttemptCount, len(got.Attempts))
			}
		})

		t.Run("record outcome", func(t *testing.T) {
			// Even callers report a success, odd ones a timeout.
			outcomes := []review.Outcome{success("file-1"), timeoutAfterSend}
			applied := make([]bool, callers)
			errs := race(func(i int) error {
				res, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, outcomes[i%2], "test")
				applied[i] = err == nil && !res.Unchanged
				return err
			})
			winners, winner := 0, -1
			for i := range errs {
				if applied[i] {
					winners++
					winner = i % 2
				}
			}
			if winners != 1 {
				t.Fatalf("%d reports applied, want exactly 1", winners)
			}
			for i, err := range errs {
				if i%2 == winner {
					if err != nil {
						t.Errorf("caller %d sent the winning report and got %v, want unchanged", i, err)
					}
					continue
				}
				var oc *review.OutcomeConflictError
				if !errors.As(err, &oc) {
					t.Errorf("caller %d sent the losing report and got %v, want an OutcomeConflictError", i, err)
				}
			}
			// Whichever report won, the other is kept as evidence (issue
			// 12, hole 4): the success names file-1 for this operation, so
			// the operation is confirmed either way.
			wantState(t, b.get(t, op), review.Confirmed)
		})
		assertSealed(t, b.s)
	})
}

// TestRetryAfterKeyRetentionReconciles: a destination that remembers keys
// for 3 s; attempt 1 times out after send at 1.5 s (an idempotent write:
// retry with the same key), and the retry asked for at 4 s would go out
// with a key the destination has forgotten. It is not granted: the
// operation is reconciled first. Before, attempt 2 was granted (issue 12,
// hole 5). A retry inside the retention is still granted.
func TestRetryAfterKeyRetentionReconciles(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{"short": {HonoursKeys: true, KeyRetention: 3 * time.Second}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		timeout := review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}

		late := b.newOp(t, "late-retry", review.RiskIdempotentWrite, "short")
		b.start(t, late)
		b.clk.Advance(1500 * time.Millisecond)
		if res := b.report(t, late, 1, timeout); res.Operation.State != review.RetryWait {
			t.Fatalf("after a timeout inside the key retention: %s, want retry_wait", res.Operation.State)
		}
		b.clk.Advance(2500 * time.Millisecond) // 4 s after attempt 1
		_, err := b.tryStart(late, "", "")
		if na := errAs[*review.NotAttemptableError](t, err); na.Operation.State != review.Ambiguous {
			t.Fatalf("a retry past the key retention: refused with %s, want ambiguous", na.Operation.State)
		}
		got := b.get(t, late)
		wantState(t, got, review.Ambiguous)
		if got.AttemptCount != 1 || !strings.Contains(got.StateReason, "key_retention") {
			t.Errorf("after the refusal: %d attempts, reason %q", got.AttemptCount, got.StateReason)
		}

		soon := b.newOp(t, "soon-retry", review.RiskIdempotentWrite, "short")
		b.start(t, soon)
		b.report(t, soon, 1, timeout)
		b.clk.Advance(1500 * time.Millisecond)
		if g := b.start(t, soon); g.N != 2 || g.Key != soon.Key {
			t.Errorf("a retry inside the key retention: %+v, want attempt 2 with the same key", g)
		}
	})
}

// TestOutcomeFollowsTheWholeRecord: an outcome moves the operation as its
// whole record says, not as the report alone would — on the fast path
// (the snapshot holds the record) and the ordinary one (a fresh store
// reads it). A refusal after an attempt whose effect is unknown is
// reconciled, not failed; a webhook's claim that landed while the attempt
// was in flight turns a retry or a failure into reconciliation; a lookup
// that found the effect confirms.
func TestOutcomeFollowsTheWholeRecord(t *testing.T) {
	t.Parallel()
	quota := review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota"}
	unknown := review.Outcome{Result: review.ResultError, Phase: review.PhaseUnknown, HTTPStatus: 502}
	refused := httpError(422)
	claim := func(op *review.Operation) review.Evidence {
		return review.Evidence{Source: review.SourceWebhook, Candidates: []review.Candidate{{Ref: "fld-1", Kind: "folder", Version: "v1", OperationID: op.ID}}}
	}
	found := func(op *review.Operation) review.Evidence {
		return review.Evidence{Source: review.SourceStatusLookup, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "fld-1", Kind: "folder", Version: "v1", OperationID: op.ID}}}
	}
	tests := []struct {
		name     string
		risk     review.Risk
		first    review.Outcome // attempt 1's outcome, which leaves a retry due
		inFlight func(*review.Operation) review.Evidence
		second   review.Outcome
		want     review.State
	}{
		{"a refusal after an unknown effect", review.RiskIdempotentWrite, unknown, nil, quota, review.Ambiguous},
		{"a refusal after a refusal", review.RiskIdempotentWrite, httpError(503), nil, quota, review.Failed},
		{"a refusal while a webhook claims the effect", review.RiskIdempotentWrite, httpError(503), claim, refused, review.Ambiguous},
		{"a transient error while a webhook claims the effect", review.RiskIdempotentWrite, httpError(503), claim, httpError(503), review.Ambiguous},
		{"a transient error while a lookup found the effect", review.RiskIdempotentWrite, httpError(503), found, httpError(503), review.Confirmed},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		for _, path := range []string{"fast", "ordinary"} {
			for i, tt := range tests {
				t.Run(path+"/"+tt.name, func(t *testing.T) {
					b, other := twoInstances(t, e, keyedConfig())
					op := b.newOp(t, fmt.Sprintf("doc-%d", i), tt.risk, "keyed")
					b.start(t, op)
					wantState(t, b.report(t, op, 1, tt.first).Operation, review.RetryWait)
					b.clk.Advance(time.Minute)
					b.start(t, op)
					if tt.inFlight != nil {
						got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, tt.inFlight(op), "integrator")
						if err != nil {
							t.Fatal(err)
						}
						wantState(t, got, review.InFlight) // evidence never moves an attempt in flight
					}
					reporter := b
					if path == "fast" {
						b.get(t, op) // a snapshot that holds the whole record
					} else {
						reporter = other // no snapshot: it reads the record under a lock
					}
					var last int64
					hits(reporter.s, &last)
					res := reporter.report(t, op, 2, tt.second)
					if fast := hits(reporter.s, &last) == 1; fast != (path == "fast") {
						t.Errorf("answered by the fast path: %v, want %v", fast, path == "fast")
					}
					wantState(t, res.Operation, tt.want)
					sameAsStored(t, other, res.Operation, "the outcome")
					if tt.want == review.Confirmed && (res.Operation.Resource == nil || res.Operation.Resource.Ref != "fld-1") {
						t.Errorf("confirmed on %+v, want fld-1", res.Operation.Resource)
					}
					if _, err := b.tryStart(op, "", ""); err == nil {
						t.Errorf("a third attempt was granted from %s", tt.want)
					}
					assertSealed(t, b.s)
				})
			}
		}
	})
}
