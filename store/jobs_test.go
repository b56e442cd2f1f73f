package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// accepted is an outcome whose destination accepted job ref.
func accepted(ref string) review.Outcome {
	return review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202, Job: &review.JobRef{Ref: ref, Status: "queued"}}
}

// TestJobsBelongToTheirOperation (issue 12, hole 6): a job update for a
// ref the operation never reported is refused (409) with nothing changed;
// a known job that is no longer the operation's current one is recorded
// but does not settle it; only the current job's end does.
func TestJobsBelongToTheirOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)

		t.Run("a ref never reported", func(t *testing.T) {
			op := b.newOp(t, "doc-a", review.RiskCompensableWrite, "transform")
			b.start(t, op)
			op = b.report(t, op, 1, accepted("job-A")).Operation
			wantState(t, op, review.Accepted)
			events := len(b.history(t, op.ID))

			_, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-B", Status: review.JobFailed}, "integrator")
			if !errors.Is(err, review.ErrConflict) || !strings.Contains(err.Error(), "job-B") || !strings.Contains(err.Error(), "job-A") {
				t.Fatalf("PutJob(job-B) = %v, want ErrConflict naming job-B and the operation's job-A", err)
			}
			got := b.get(t, op)
			wantState(t, got, review.Accepted)
			if len(got.Jobs) != 1 || got.Jobs[0].Ref != "job-A" || got.Version != op.Version || len(b.history(t, op.ID)) != events {
				t.Errorf("the refused job update changed something: jobs %+v, version %d → %d", got.Jobs, op.Version, got.Version)
			}
			got, err = b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-A", Status: review.JobSucceeded, OutputRef: "pdf-a"}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.Confirmed)

			// An operation that never had a job takes none by PUT.
			plain := b.newOp(t, "doc-p", review.RiskCompensableWrite, "transform")
			if _, err := b.s.PutJob(b.ctx, tenantA, plain.ID, review.Job{Ref: "job-Z", Status: review.JobQueued}, "integrator"); !errors.Is(err, review.ErrConflict) {
				t.Errorf("PutJob on an operation without jobs = %v, want ErrConflict", err)
			}
		})

		t.Run("an earlier job does not settle the current one's operation", func(t *testing.T) {
			op := retryApprovedBesideJob(t, b, "doc-two-jobs", nil)
			b.start(t, op)
			op = b.report(t, op, 2, accepted("job-2")).Operation
			wantState(t, op, review.Accepted)

			got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobFailed}, "integrator")
			if err != nil {
				t.Fatalf("PutJob(job-1) = %v, want it recorded", err)
			}
			wantState(t, got, review.Accepted)
			if got.Jobs[0].Ref != "job-1" || got.Jobs[0].Status != review.JobFailed {
				t.Errorf("jobs = %+v, want job-1 recorded failed", got.Jobs)
			}
			got, err = b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-2", Status: review.JobSucceeded, OutputRef: "pdf-2"}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.Confirmed)
		})
		assertSealed(t, b.s)
	})
}

// TestJobSuccessSettlesAnAmbiguousOperation (issue 12, hole 1, the job
// part): the destination named job J1 and then the connection dropped,
// so the operation is ambiguous with J1 known. J1's success, reported by
// PUT, is evidence of the effect: the operation is confirmed with the
// job's output instead of waiting for (or being retried past) a search.
// J1's failure proves nothing about the operation and leaves it to the
// reconciler. Before, both changed nothing.
func TestJobSuccessSettlesAnAmbiguousOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		lost := func(ref string) *review.Operation {
			op := b.newOp(t, ref, review.RiskCompensableWrite, "transform")
			b.start(t, op)
			res := b.report(t, op, 1, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend, Job: &review.JobRef{Ref: "J1", Status: "queued"}})
			wantState(t, res.Operation, review.Ambiguous)
			return res.Operation
		}

		op := lost("doc-job-ok")
		got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "J1", Status: review.JobSucceeded, OutputRef: "pdf-1", InputVersion: "v1"}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != "pdf-1" {
			t.Errorf("confirmed with resource %+v, want the job's output pdf-1", got.Resource)
		}

		op = lost("doc-job-failed")
		got, err = b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "J1", Status: review.JobFailed}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Ambiguous)
		assertSealed(t, b.s)
	})
}

// TestJobFailureAfterALostRetry: a reviewer approved a retry while the
// first attempt's job was still queued; the retry's outcome was lost
// (ambiguous). Evidence naming the first job had the operation follow it
// (accepted), and that job's failure then failed the operation, though
// the retry — after it, outcome unknown — may have made an effect of its
// own (the long property test found it from a random seed, its own job
// live at the destination). Now the failure sends the operation back to
// ambiguous, for reconciliation, and the ended job is never followed
// again. The job keeps the attempt that named it.
func TestJobFailureAfterALostRetry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		var named review.Evidence
		op := retryApprovedBesideJob(t, b, "doc-lost-retry", func(op *review.Operation) {
			job1 := review.Candidate{Ref: "job-1", Kind: "job", Version: "v1", OperationID: op.ID}
			named = review.Evidence{Source: review.SourceResponse, Authoritative: true, Candidates: []review.Candidate{job1}}
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, named, "integrator"); err != nil {
				t.Fatal(err)
			}
		})
		b.start(t, op)
		b.clk.Advance(time.Hour)
		if _, err := b.s.SweepLeases(b.ctx); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Ambiguous)

		// The integrator's word again: the operation follows job-1.
		got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, named, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Accepted)
		if len(got.Jobs) != 1 || got.Jobs[0].Attempt != 1 {
			t.Fatalf("jobs %+v, want job-1 of attempt 1", got.Jobs)
		}

		got, err = b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobFailed}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Ambiguous)
		if !strings.Contains(got.StateReason, "attempted again after it (attempt 2)") {
			t.Errorf("reason %q, want it to name attempt 2", got.StateReason)
		}
		// Named again, the ended job is no effect to follow.
		got, err = b.s.AddEvidence(b.ctx, tenantA, op.ID, named, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Ambiguous)
		assertSealed(t, b.s)
	})
}

// TestProbeRoundsStartAfreshInEachState: the rounds a reconciler counts
// (the round limit, the backoff) and when it looks next are those of the
// state the operation is in now. An operation whose job was polled many
// times while accepted, then sent back to ambiguous by the job's failure
// after a retry, is due at once, at round 0. Before, it kept the polls'
// count — its first inconclusive round was past review.MaxProbeRounds
// and handed it to a person ("… reconciliation rounds settled nothing")
// after one look — and waited for the next poll's time.
func TestProbeRoundsStartAfreshInEachState(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		var named review.Evidence
		op := retryApprovedBesideJob(t, b, "doc-polled", func(op *review.Operation) {
			job1 := review.Candidate{Ref: "job-1", Kind: "job", Version: "v1", OperationID: op.ID}
			named = review.Evidence{Source: review.SourceResponse, Authoritative: true, Candidates: []review.Candidate{job1}}
		})
		b.start(t, op)
		b.clk.Advance(time.Hour)
		if _, err := b.s.SweepLeases(b.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, named, "integrator"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Accepted)
		queued := &review.Job{Ref: "job-1", Status: review.JobQueued}
		for i := range review.MaxProbeRounds + 2 {
			cs, err := b.s.ClaimAccepted(b.ctx, "poller", 10, probeLease)
			if err != nil || len(cs) != 1 {
				t.Fatalf("poll %d: claimed %d, %v; want the operation", i, len(cs), err)
			}
			if err := b.s.ApplyJobPoll(b.ctx, cs[0], queued, b.clk.Now()); err != nil {
				t.Fatal(err)
			}
		}
		// The last poll set the next one a minute ahead.
		cs, err := b.s.ClaimAccepted(b.ctx, "poller", 10, probeLease)
		if err != nil || len(cs) != 1 {
			t.Fatalf("last poll: claimed %d, %v; want the operation", len(cs), err)
		}
		if err := b.s.ApplyJobPoll(b.ctx, cs[0], queued, b.clk.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobFailed}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Ambiguous)
		c := b.claimOne(t, "r1", got)
		if c.Round != 0 {
			t.Fatalf("reconciliation claimed at round %d, want 0", c.Round)
		}
	})
}

// retryApprovedBesideJob is deadlinePassedBesideJob with job-1, then a
// reviewer approves a retry: the operation waits for attempt 2.
func retryApprovedBesideJob(t *testing.T, b *bundle, sourceRef string, whileAccepted func(*review.Operation)) *review.Operation {
	t.Helper()
	op, c := deadlinePassedBesideJob(t, b, sourceRef, "job-1", whileAccepted)
	if _, err := b.s.Decide(b.ctx, decideReq(&c, review.DecideApproveRetry, "alice")); err != nil {
		t.Fatal(err)
	}
	return op
}

// deadlinePassedBesideJob registers sourceRef with a deadline; attempt 1's
// destination accepts jobRef (accepted), then, the job still queued, the
// deadline passes: the operation is in review, with its case.
// whileAccepted, when set, runs while it follows the job.
func deadlinePassedBesideJob(t *testing.T, b *bundle, sourceRef, jobRef string, whileAccepted func(*review.Operation)) (*review.Operation, store.Case) {
	t.Helper()
	r := intention(sourceRef, review.RiskCompensableWrite, "transform")
	deadline := b.clk.Now().Add(time.Hour)
	r.Deadline = &deadline
	op := b.register(t, r)
	b.start(t, op)
	wantState(t, b.report(t, op, 1, accepted(jobRef)).Operation, review.Accepted)
	if whileAccepted != nil {
		whileAccepted(op)
	}
	b.clk.Advance(2 * time.Hour)
	if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
		t.Fatal(err)
	}
	wantState(t, b.get(t, op), review.NeedsReview)
	cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
	if len(cs) != 1 {
		t.Fatalf("cases after the deadline: %+v", cs)
	}
	return op, cs[0]
}

// TestCaseWaitsOnAnUnfinishedJob: the deadline passed while the operation
// followed job-1, still queued. Its case does not recommend failing, nor
// a retry, even once a search finds nothing (the job's output may not
// exist yet): it names the job to wait on. When the job ends, the case
// says what to do now — its recommendation is assessed again, audited —
// and when it succeeds, its output settles the operation.
func TestCaseWaitsOnAnUnfinishedJob(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		inReview := func(sourceRef string, searched bool) (*review.Operation, store.Case) {
			t.Helper()
			op, c := deadlinePassedBesideJob(t, b, sourceRef, "job-"+sourceRef, nil)
			if !searched {
				return op, c
			}
			nothing := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Verdict: review.VerdictRefutes}
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, nothing, "integrator"); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, op), review.NeedsReview)
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			return op, cs[0]
		}
		recommends := func(c store.Case, action, mentions string) {
			t.Helper()
			if c.RecommendedAction != action || !strings.Contains(c.Rationale, mentions) {
				t.Errorf("case recommends %s (%s), want %s mentioning %q", c.RecommendedAction, c.Rationale, action, mentions)
			}
		}

		updates := func(op *review.Operation) int {
			n := 0
			for _, ev := range b.history(t, op.ID) {
				if ev.Action == "case.updated" {
					n++
				}
			}
			return n
		}

		op, c := inReview("doc-fails", true)
		recommends(c, review.RecommendReconcileAgain, "job job-doc-fails is not known to have ended")
		// The destination accepting the job said nothing of its output: an
		// empty search beside it is no disagreement.
		if slices.Contains(c.Reasons, review.ReasonSourcesDisagree) {
			t.Errorf("case reasons %v: the accepted job read as confirming the effect", c.Reasons)
		}
		before := updates(op)
		// The same search again changes nothing a reader sees: the case and
		// its version (a reviewer's open form) stay as they are.
		nothing := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Verdict: review.VerdictRefutes}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, nothing, "integrator"); err != nil {
			t.Fatal(err)
		}
		if again, _ := b.s.CasesForOperation(b.ctx, op.ID); again[0].Version != c.Version || updates(op) != before {
			t.Errorf("the same search again moved the case from version %d to %d", c.Version, again[0].Version)
		}
		if _, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-doc-fails", Status: review.JobRunning}, "integrator"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-doc-fails", Status: review.JobFailed}, "integrator"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.NeedsReview)
		// Its failure is the destination's word that no effect was made,
		// recorded; with the deadline spent, the case recommends failing.
		cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
		recommends(cs[0], review.RecommendFail, "holds no effect")
		if last := b.get(t, op).Evidence; len(last) == 0 || last[len(last)-1].Verdict != review.VerdictRefutes ||
			last[len(last)-1].Note != "job job-doc-fails ended failed" {
			t.Errorf("evidence after the job failed: %+v", last)
		}
		if n := updates(op) - before; n != 1 {
			t.Errorf("%d case.updated events, want 1: the job's end, not its start, changed the recommendation", n)
		}

		// Its success is for the reviewer to confirm: a person decides in
		// review, and the case recommends the job's output.
		op, c = inReview("doc-succeeds", false)
		recommends(c, review.RecommendReconcileAgain, "job job-doc-succeeds is not known to have ended")
		got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-doc-succeeds", Status: review.JobSucceeded, OutputRef: "file-out"}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.NeedsReview)
		cs, _ = b.s.CasesForOperation(b.ctx, op.ID)
		recommends(cs[0], review.RecommendConfirm, "file-out")
		req := decideReq(&cs[0], review.DecideConfirm, "alice")
		req.Ref = "file-out"
		if _, err := b.s.Decide(b.ctx, req); err != nil {
			t.Fatal(err)
		}
		if got = b.get(t, op); got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "file-out" {
			t.Errorf("after the confirm: %s, resource %+v; want confirmed with the job's output", got.State, got.Resource)
		}

		// Evidence brought while the case is open is weighed into what it
		// recommends: a lookup finds the job's output.
		op, _ = inReview("doc-found", false)
		found := review.Evidence{Source: review.SourceStatusLookup, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "file-found", Kind: "file", Version: "v1", OperationID: op.ID}}}
		if got, err = b.s.AddEvidence(b.ctx, tenantA, op.ID, found, "integrator"); err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.NeedsReview)
		cs, _ = b.s.CasesForOperation(b.ctx, op.ID)
		recommends(cs[0], review.RecommendConfirm, "file-found")
		assertSealed(t, b.s)
	})
}

// TestJobSuccessAfterTheOperationFailed: a reviewer failed the operation
// while its job was still queued; the job then succeeds at the
// destination. Its integrator was told there is no effect, so its output
// is an effect nobody answers for: a case asks a person to undo it, as it
// does for any other evidence of such an effect.
func TestJobSuccessAfterTheOperationFailed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, c := deadlinePassedBesideJob(t, b, "doc-failed-beside-job", "job-1", nil)
		if _, err := b.s.Decide(b.ctx, decideReq(&c, review.DecideFail, "alice")); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Failed)

		got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobSucceeded, OutputRef: "file-out"}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Failed)
		cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
		var open *store.Case
		for i := range cs {
			if cs[i].Status == store.CaseOpen {
				open = &cs[i]
			}
		}
		if open == nil || open.RecommendedAction != review.RecommendCompensate || open.RecommendedRef != "file-out" {
			t.Fatalf("cases %+v, want one open recommending to compensate file-out", cs)
		}
		// The same report again opens nothing more.
		if _, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobSucceeded, OutputRef: "file-out"}, "integrator"); err != nil {
			t.Fatal(err)
		}
		if again, _ := b.s.CasesForOperation(b.ctx, op.ID); len(again) != len(cs) {
			t.Errorf("%d cases after the same report again, want %d", len(again), len(cs))
		}
		assertSealed(t, b.s)
	})
}

// TestWebhookBringsTheJobPollForward: a webhook about an operation in
// review whose case waits on its job makes the reconciler poll the job now,
// as it does for an accepted one; one in review with no job to wait on is
// not polled for it.
func TestWebhookBringsTheJobPollForward(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		waiting, _ := deadlinePassedBesideJob(t, b, "doc-waiting", "job-1", nil)
		claims, err := b.s.ClaimJobsInReview(b.ctx, "rec", 10, time.Minute)
		if err != nil || len(claims) != 1 || claims[0].Op.ID != waiting.ID {
			t.Fatalf("ClaimJobsInReview: %v, %d claims; want the operation waiting on its job", err, len(claims))
		}
		if err := b.s.ApplyJobPoll(b.ctx, claims[0], &review.Job{Ref: "job-1", Status: review.JobRunning}, b.clk.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		other := b.ambiguous(t, "doc-other")
		two := review.Evidence{Source: review.SourceStatusLookup, Authoritative: true, Candidates: []review.Candidate{
			{Ref: "a", Version: "v1", OperationID: other.ID}, {Ref: "b", Version: "v1", OperationID: other.ID}}}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, other.ID, two, "integrator"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, other), review.NeedsReview)
		if claims, err := b.s.ClaimJobsInReview(b.ctx, "rec", 10, time.Minute); err != nil || len(claims) != 0 {
			t.Fatalf("ClaimJobsInReview before any webhook: %v, %d claims; want none", err, len(claims))
		}
		for _, op := range []*review.Operation{waiting, other} {
			if _, err := b.s.Inbound(b.ctx, store.InboundEvent{Source: op.Destination, EventID: "evt-" + op.SourceRef, OperationID: op.ID,
				Body: `{"type":"job.updated"}`, Note: "job.updated"}); err != nil {
				t.Fatal(err)
			}
		}
		claims, err = b.s.ClaimJobsInReview(b.ctx, "rec", 10, time.Minute)
		if err != nil || len(claims) != 1 || claims[0].Op.ID != waiting.ID {
			t.Fatalf("ClaimJobsInReview after the webhooks: %v, %d claims; want the operation waiting on its job only", err, len(claims))
		}
	})
}

// TestRetryBesideALiveJob: a person approved a retry while the first
// attempt's job was still queued (the case warned against it), and the
// retry's destination accepted a second job. Either job may make the
// effect. The second job's failure fails nothing while the first may yet
// succeed: a person decides, the case waiting on the first job. The first
// job's success while the second is followed is an effect, and the second
// may make another: a person looks, with the first job's output on the
// case.
func TestRetryBesideALiveJob(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		retried := func(sourceRef string) *review.Operation {
			t.Helper()
			op, c := deadlinePassedBesideJob(t, b, sourceRef, "job-1-"+sourceRef, nil)
			if _, err := b.s.Decide(b.ctx, decideReq(&c, review.DecideApproveRetry, "alice")); err != nil {
				t.Fatal(err)
			}
			b.start(t, op)
			wantState(t, b.report(t, op, 2, accepted("job-2-"+sourceRef)).Operation, review.Accepted)
			return op
		}
		openCase := func(op *review.Operation) store.Case {
			t.Helper()
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			for _, c := range cs {
				if c.Status == store.CaseOpen {
					return c
				}
			}
			t.Fatalf("%s: no open case in %+v", op.SourceRef, cs)
			return store.Case{}
		}
		put := func(op *review.Operation, j review.Job) *review.Operation {
			t.Helper()
			got, err := b.s.PutJob(b.ctx, tenantA, op.ID, j, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			return got
		}

		op := retried("doc-second-fails")
		wantState(t, put(op, review.Job{Ref: "job-2-doc-second-fails", Status: review.JobFailed}), review.NeedsReview)
		c := openCase(op)
		if c.RecommendedAction != review.RecommendReconcileAgain || !strings.Contains(c.Rationale, "job job-1-doc-second-fails is not known to have ended") {
			t.Errorf("case recommends %s (%s), want waiting on job-1", c.RecommendedAction, c.Rationale)
		}
		// The first job fails too: nothing was made, and a retry is safe.
		wantState(t, put(op, review.Job{Ref: "job-1-doc-second-fails", Status: review.JobFailed}), review.NeedsReview)
		if c = openCase(op); c.RecommendedAction != review.RecommendApproveRetry || !strings.Contains(c.Rationale, "holds no effect") {
			t.Errorf("after both jobs failed: case recommends %s (%s), want a retry", c.RecommendedAction, c.Rationale)
		}

		op = retried("doc-first-succeeds")
		wantState(t, put(op, review.Job{Ref: "job-1-doc-first-succeeds", Status: review.JobSucceeded, OutputRef: "file-1"}), review.NeedsReview)
		if c = openCase(op); c.RecommendedAction != review.RecommendConfirm || c.RecommendedRef != "file-1" {
			t.Errorf("after the first job succeeded: case recommends %s %s (%s), want confirm file-1", c.RecommendedAction, c.RecommendedRef, c.Rationale)
		}
		// The second succeeds as well: two outputs, one to undo.
		wantState(t, put(op, review.Job{Ref: "job-2-doc-first-succeeds", Status: review.JobSucceeded, OutputRef: "file-2"}), review.NeedsReview)
		if c = openCase(op); c.RecommendedAction != review.RecommendCompensate || c.RecommendedRef == "" {
			t.Errorf("after both jobs succeeded: case recommends %s %s (%s), want the undo of one", c.RecommendedAction, c.RecommendedRef, c.Rationale)
		}

		// The first job succeeds while the retry is in flight: its output is
		// evidence, and the retry's lost outcome is weighed with it.
		op, c = deadlinePassedBesideJob(t, b, "doc-during-retry", "job-1-doc-during-retry", nil)
		if _, err := b.s.Decide(b.ctx, decideReq(&c, review.DecideApproveRetry, "alice")); err != nil {
			t.Fatal(err)
		}
		b.start(t, op)
		wantState(t, put(op, review.Job{Ref: "job-1-doc-during-retry", Status: review.JobSucceeded, OutputRef: "file-1"}), review.InFlight)
		got := b.report(t, op, 2, timeoutAfterSend).Operation
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "file-1" {
			t.Errorf("after the retry timed out: %s (%s), resource %+v; want confirmed with the first job's output", got.State, got.StateReason, got.Resource)
		}
		assertSealed(t, b.s)
	})
}

// TestAJobPollAfterTheJobEndedElsewhere: the reconciler claims the poll of
// a job a case waits on; meanwhile the integrator reports the job's end,
// so the case waits on nothing and the polls stop. The poll then fails
// (no answer): it schedules nothing — whether to poll again is decided
// as every assessment of the case decides it (pollJobWaitedOn), from the
// operation as it is now. Before, it was decided from the claim's
// snapshot, which still waited on the job, and the job was polled again.
func TestAJobPollAfterTheJobEndedElsewhere(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, _ := deadlinePassedBesideJob(t, b, "doc-ended-elsewhere", "job-1", nil)
		claims, err := b.s.ClaimJobsInReview(b.ctx, "rec", 10, time.Minute)
		if err != nil || len(claims) != 1 || claims[0].Op.ID != op.ID {
			t.Fatalf("ClaimJobsInReview: %v, %d claims; want the operation waiting on its job", err, len(claims))
		}
		if _, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobSucceeded, OutputRef: "file-out"}, "integrator"); err != nil {
			t.Fatal(err)
		}
		if err := b.s.ApplyJobPoll(b.ctx, claims[0], nil, b.clk.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(2 * time.Minute)
		if claims, err := b.s.ClaimJobsInReview(b.ctx, "rec", 10, time.Minute); err != nil || len(claims) != 0 {
			t.Errorf("ClaimJobsInReview after the job ended: %v, %d claims; want none", err, len(claims))
		}
	})
}

// TestAFoundJobFailingAfterALostAttempt: attempt 1's answer was lost, a
// search then showed nothing and the operation was retried; attempt 2's
// answer was lost too, and a look found one job, which the operation
// follows. The job fails. It may be attempt 1's — written late, after the
// search that missed it — and attempt 2's job not shown yet: the failure
// sends the operation back to ambiguous, to be reconciled, instead of
// failing it. The fault run found it failed beside attempt 2's job, which
// then succeeded. When attempt 1 was refused before it did anything, the
// job is attempt 2's, and its failure fails the operation as before.
// Both engines.
func TestAFoundJobFailingAfterALostAttempt(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for _, tt := range []struct {
			first review.Outcome
			want  review.State
		}{
			{timeoutAfterSend, review.Ambiguous},
			{connBeforeSend, review.Failed},
		} {
			op := b.register(t, intention("doc-found-"+string(tt.first.Result), review.RiskCompensableWrite, "plain"))
			b.start(t, op)
			b.report(t, op, 1, tt.first)
			if got := b.get(t, op); got.State == review.Ambiguous {
				// Nothing shows: a retry.
				if got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{}}, "integrator"); err != nil || got.State != review.RetryWait {
					t.Fatalf("after an empty search: %+v, %v; want retry_wait", got, err)
				}
			}
			b.clk.Advance(time.Minute)
			b.start(t, op)
			wantState(t, b.report(t, op, 2, timeoutAfterSend).Operation, review.Ambiguous)
			job := review.Candidate{Ref: "job-1", Kind: "job", Version: "v1", OperationID: op.ID}
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{job}}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.Accepted)
			if len(got.Jobs) != 1 || !got.Jobs[0].Found || got.Jobs[0].Attempt != 2 {
				t.Fatalf("jobs %+v, want job-1 found after attempt 2", got.Jobs)
			}
			got, err = b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1", Status: review.JobFailed}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, tt.want)
			if tt.want == review.Ambiguous && !strings.Contains(got.StateReason, "no answer said which one it was for") {
				t.Errorf("after %s: reason %q, want the found job's", tt.first.Result, got.StateReason)
			}
		}
		assertSealed(t, b.s)
	})
}
