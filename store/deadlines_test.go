package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func TestExpireDeadlines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
		cfg := &review.Config{Destinations: map[string]review.Destination{"keys": {HonoursKeys: true, Lease: time.Minute}}}
		s := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now})
		deadline := clk.Now().Add(time.Hour)
		reg := func(source, dest string, risk review.Risk) *review.Operation {
			op, _, err := s.Register(ctx, review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "1", Action: "act",
				Destination: dest, Risk: risk, Payload: []byte(`{}`), Deadline: &deadline, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			return op
		}
		attempt := func(op *review.Operation, o review.Outcome) {
			g, err := s.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecordOutcome(ctx, "acme", op.ID, g.N, o, "test"); err != nil {
				t.Fatal(err)
			}
		}
		never := reg("never", "files", review.RiskCompensableWrite)
		waitingClean := reg("clean", "keys", review.RiskIdempotentWrite)
		attempt(waitingClean, review.Outcome{Result: review.ResultConnectionError, Phase: review.PhaseBeforeSend})
		waitingUnknown := reg("unknown", "keys", review.RiskIdempotentWrite)
		attempt(waitingUnknown, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend})
		job := reg("job", "files", review.RiskCompensableWrite)
		attempt(job, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Job: &review.JobRef{Ref: "job-1", Status: "queued"}})

		if n, err := s.ExpireDeadlines(ctx); err != nil || n != 0 {
			t.Fatalf("before the deadline: %d, %v", n, err)
		}
		clk.Advance(2 * time.Hour)
		if n, err := s.ExpireDeadlines(ctx); err != nil || n != 4 {
			t.Fatalf("after the deadline: %d, %v; want 4", n, err)
		}
		for _, c := range []struct {
			op   *review.Operation
			want review.State
		}{{never, review.Failed}, {waitingClean, review.Failed}, {waitingUnknown, review.Ambiguous}, {job, review.NeedsReview}} {
			got, err := s.GetOperation(ctx, "acme", c.op.ID, "")
			if err != nil || got.State != c.want {
				t.Errorf("%s: %v %s, want %s", c.op.SourceRef, err, got.State, c.want)
			}
		}
		if cs, _ := s.CasesForOperation(ctx, job.ID); len(cs) != 1 {
			t.Errorf("the expired job has %d cases, want 1", len(cs))
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// TestADeadlinePassingInReview: an irreversible write in review, whose
// search found nothing, recommends a retry (safe: nothing was made). Its
// deadline nears while the case waits: the sweeper ranks it above a
// younger regulated case in the queue, and nothing else changes. Then the deadline passes. The sweeper
// assesses the case again, as evidence would: deadline_expired, a
// recommendation to fail it, a higher priority, audited; the form a
// reviewer read before is refused as stale; a sweep after that changes
// nothing, and a case whose deadline is still ahead is left alone. Before, the case went on
// recommending the retry, preselected, where a case opened a minute later
// recommended failing.
func TestADeadlinePassingInReview(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, _ := searchable(t, e, "plain")
		inReview := func(ref string, deadline time.Time, flags ...review.Flag) (*review.Operation, *store.Case) {
			r := intention(ref, review.RiskIrreversible, "plain")
			r.Deadline, r.Flags = &deadline, flags
			op, c := b.inReview(t, r, true)
			if c.RecommendedAction != review.RecommendApproveRetry || slices.Contains(c.Reasons, review.ReasonDeadlineExpired) {
				t.Fatalf("%s before its deadline: %s %v; want a retry recommended", ref, c.RecommendedAction, c.Reasons)
			}
			return op, c
		}
		op, before := inReview("doc-due", b.clk.Now().Add(3*time.Hour))
		// Regulated, so ranked above the other until its deadline nears;
		// an hour and a half younger, so its wait adds nothing yet when
		// that happens.
		b.clk.Advance(90 * time.Minute)
		if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		before, err := b.s.GetCase(b.ctx, before.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, later := inReview("doc-later", b.clk.Now().Add(48*time.Hour), review.FlagRegulated)
		if later.Priority <= before.Priority {
			t.Fatalf("priorities %d and %d; want the regulated case first at first", later.Priority, before.Priority)
		}

		// Less than an hour left: the sweeper ranks the case higher in the
		// queue, and that alone changes nothing a reader decides on.
		b.clk.Advance(45 * time.Minute)
		if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		if near, err := b.s.GetCase(b.ctx, before.ID, nil); err != nil || near.Priority != before.Priority+10 || near.Version != before.Version ||
			near.RecommendedAction != review.RecommendApproveRetry {
			t.Errorf("the case three quarters of an hour before its deadline: %+v, %v; want priority %d (ten for the nearer deadline), the version and the recommendation as they were",
				near, err, before.Priority+10)
		}
		if page, err := b.s.Queue(b.ctx, store.QueueFilter{}, 10); err != nil || len(page.Cases) < 2 || page.Cases[0].ID != before.ID {
			t.Errorf("the queue: %+v, %v; want the case whose deadline is near first", page, err)
		}

		b.clk.Advance(time.Hour)
		if n, err := b.s.ExpireDeadlines(b.ctx); err != nil || n != 0 {
			t.Fatalf("ExpireDeadlines: %d, %v; want no operation ended", n, err)
		}
		after, err := b.s.GetCase(b.ctx, before.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(after.Reasons, review.ReasonDeadlineExpired) || after.RecommendedAction != review.RecommendFail ||
			after.Rationale != review.RationaleSpent || after.Priority <= before.Priority || after.Version != before.Version+1 {
			t.Errorf("the case once its deadline passed: %v, %s (%s), priority %d (was %d), version %d (was %d); want deadline_expired, fail, higher, one on",
				after.Reasons, after.RecommendedAction, after.Rationale, after.Priority, before.Priority, after.Version, before.Version)
		}
		if got := b.get(t, op); got.State != review.NeedsReview {
			t.Errorf("the operation: %s, want it still in review", got.State)
		}
		updated := slices.ContainsFunc(b.history(t, op.ID), func(ev store.AuditEvent) bool {
			return ev.Action == "case.updated" && ev.Actor == "system:deadline-sweeper" && strings.Contains(ev.Detail, "deadline_expired")
		})
		if !updated {
			t.Error("no case.updated by the deadline sweeper in the operation's history")
		}
		if _, err := b.s.Decide(b.ctx, seen(decideReq(before, review.DecideApproveRetry, "sara@example.com"), before)); !errors.Is(err, review.ErrStale) {
			t.Errorf("a retry approved on the form read before the deadline passed: %v, want it refused as stale", err)
		}

		if n, err := b.s.ExpireDeadlines(b.ctx); err != nil || n != 0 {
			t.Fatalf("ExpireDeadlines again: %d, %v", n, err)
		}
		if again, err := b.s.GetCase(b.ctx, before.ID, nil); err != nil || again.Version != after.Version {
			t.Errorf("a second sweep: version %d, %v; want %d, nothing new", again.Version, err, after.Version)
		}
		if still, err := b.s.GetCase(b.ctx, later.ID, nil); err != nil || still.Version != later.Version || still.RecommendedAction != review.RecommendApproveRetry {
			t.Errorf("the case whose deadline is ahead: %+v, %v; want it as it was", still, err)
		}
		if _, err := b.s.Decide(b.ctx, seen(decideReq(after, review.DecideFail, "sara@example.com"), after)); err != nil {
			t.Errorf("failing it on the form read after: %v", err)
		}
		wantState(t, b.get(t, op), review.Failed)
		assertSealed(t, b.s)
	})
}

// TestAWaitingCaseRisesInTheQueue: a case nobody touches rises in the
// queue as its operation waits (review's ageSteps: an hour, four, twelve,
// a day), ranked afresh by the deadline sweeper with no new version and
// no case.updated — a form open on it stays good. Here an irreversible
// write's case, come in a day before a financial one, ranks above it once
// it has waited a day. Before, age counted only when something else
// assessed a case, and the older case stayed below for good.
func TestAWaitingCaseRisesInTheQueue(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, _ := searchable(t, e, "plain")
		far := b.clk.Now().Add(7 * 24 * time.Hour) // no deadline near in this test
		w := intention("doc-waiting", review.RiskIrreversible, "plain")
		w.Deadline = &far
		_, old := b.inReview(t, w, true)
		b.clk.Advance(23 * time.Hour)
		r := intention("doc-financial", review.RiskCompensableWrite, "plain")
		r.Flags, r.Deadline = []review.Flag{review.FlagFinancial}, &far
		_, fresh := b.inReview(t, r, true)
		if fresh.Priority <= old.Priority {
			t.Fatalf("priorities %d (financial) and %d (irreversible); want the financial case first when it comes in", fresh.Priority, old.Priority)
		}
		b.clk.Advance(time.Hour)
		if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		got, err := b.s.GetCase(b.ctx, old.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Priority != old.Priority+24 || got.Version != old.Version || got.RecommendedAction != old.RecommendedAction {
			t.Errorf("the case after a day's wait: priority %d, version %d, %s; want %d, %d, %s",
				got.Priority, got.Version, got.RecommendedAction, old.Priority+24, old.Version, old.RecommendedAction)
		}
		if page, err := b.s.Queue(b.ctx, store.QueueFilter{}, 10); err != nil || len(page.Cases) != 2 || page.Cases[0].ID != old.ID {
			t.Errorf("the queue: %+v, %v; want the case that waited a day first", page, err)
		}
		if n := countActions(b.history(t, old.OperationID))["case.updated"]; n != 0 {
			t.Errorf("%d case.updated events; want none: a rank is not a change a reader decides on", n)
		}
		// A day is the last step of age: what is scheduled next is the
		// deadline's first.
		if step := far.Add(-6 * time.Hour); got.ReassessAt == nil || !got.ReassessAt.Equal(step) {
			t.Errorf("the case after a day's wait is scheduled again at %v; want %s, six hours before its deadline", got.ReassessAt, step)
		}
	})
}
