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

// retrying leaves a compensable write in retry_wait: attempt 1 timed
// out, then the destination authoritatively held nothing.
func (b *bundle) retrying(t *testing.T, ref string) *review.Operation {
	t.Helper()
	op := b.ambiguous(t, ref)
	got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "integrator")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, got, review.RetryWait)
	return got
}

// lateKept requires the newest evidence of op to be attempt n's late
// report of ref: source response, kept as the report says.
func lateKept(t *testing.T, op *review.Operation, n int, ref string, authoritative bool, verdict review.Verdict) {
	t.Helper()
	if len(op.Evidence) == 0 {
		t.Fatalf("no evidence: the late report of attempt %d was thrown away", n)
	}
	ev := op.Evidence[len(op.Evidence)-1]
	if ev.Source != review.SourceResponse || ev.Authoritative != authoritative || ev.Verdict != verdict ||
		len(ev.Candidates) != 1 || ev.Candidates[0].Ref != ref || !strings.Contains(ev.Note, "late report for attempt") {
		t.Errorf("newest evidence = %+v, want attempt %d's late report of %s (authoritative %v, %s)", ev, n, ref, authoritative, verdict)
	}
}

// TestLateOutcomesAreKept (issue 12, hole 4): an outcome for an attempt
// already closed — a different report for it, or any report after the
// operation moved on — is refused (409) but always stored as evidence
// and audited. A late success while a retry is due or a later attempt is
// out sends the operation to a person: the retry may repeat the effect.
func TestLateOutcomesAreKept(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)

		t.Run("a different report while a retry is due", func(t *testing.T) {
			op := b.retrying(t, "doc-retry")
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("fld-late"), "integrator")
			oc := errAs[*review.OutcomeConflictError](t, err)
			if !strings.Contains(oc.Reason, "kept as evidence") {
				t.Errorf("conflict reason %q does not say the report was kept", oc.Reason)
			}
			got := b.get(t, op)
			lateKept(t, got, 1, "fld-late", true, review.VerdictConfirms)
			// The retry would repeat the effect: a person decides.
			wantState(t, got, review.NeedsReview)
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].Status != store.CaseOpen || !slices.Contains(cs[0].Reasons, review.ReasonSourcesDisagree) {
				t.Errorf("cases = %+v, want one open with sources_disagree", cs)
			}
			_, err = b.tryStart(op, "", "")
			errAs[*review.NotAttemptableError](t, err)
			// The kept success and the earlier proof of absence disagree
			// (review.Weigh): the absence settled once, the disagreement once.
			acts := countActions(b.history(t, op.ID))
			if acts["evidence.recorded"] < 1 || acts["evidence.settled"] != 2 {
				t.Errorf("audit = %v, want the kept report and the move to review", acts)
			}
		})

		t.Run("a late success while attempt 2 is in flight", func(t *testing.T) {
			op := b.retrying(t, "doc-flight")
			b.start(t, op)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("fld-1"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			lateKept(t, got, 1, "fld-1", true, review.VerdictConfirms)
			wantState(t, got, review.NeedsReview)
			if a := got.Attempts[1]; a.FinishedAt == nil || a.Result != review.ResultUnknown {
				t.Errorf("attempt 2 = %+v, want closed with result unknown (its report is kept when it comes)", a)
			}
			// Attempt 2's own report comes: refused, kept; the case sees both.
			_, err = b.s.RecordOutcome(b.ctx, tenantA, op.ID, 2, success("fld-2"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got = b.get(t, op)
			lateKept(t, got, 2, "fld-2", true, review.VerdictConfirms)
			wantState(t, got, review.NeedsReview)
			if n := countRows(t, b.s, `SELECT COUNT(*) FROM attempts WHERE operation_id = ? AND finished_at IS NULL`, op.ID); n != 0 {
				t.Errorf("%d attempts still open", n)
			}
		})

		t.Run("a failure reported late says nothing about the operation", func(t *testing.T) {
			op := b.retrying(t, "doc-error")
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 500,
				Resource: &review.ResourceRef{Ref: "fld-err"}}, "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			lateKept(t, got, 1, "fld-err", false, review.VerdictInconclusive)
			wantState(t, got, review.RetryWait)
		})

		t.Run("after the operation moved on with the attempt open", func(t *testing.T) {
			op := b.newOp(t, "doc-moved", review.RiskCompensableWrite, "plain")
			b.start(t, op)
			// Whatever moved it (nothing in this store may, today), the
			// attempt's report is no longer the operation's outcome.
			exec(t, b.s, `UPDATE operations SET state = 'needs_review', version = version + 1 WHERE id = ?`, op.ID)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("fld-moved"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			lateKept(t, got, 1, "fld-moved", true, review.VerdictConfirms)
			wantState(t, got, review.NeedsReview)
			if a := got.Attempts[0]; a.FinishedAt == nil || a.Result != review.ResultUnknown {
				t.Errorf("attempt 1 = %+v, want closed as unknown, so that the sweeper leaves it", a)
			}
		})

		t.Run("read: a late success is kept and settles it, nothing escalates", func(t *testing.T) {
			op := b.newOp(t, "doc-read", review.RiskRead, "plain")
			b.start(t, op)
			wantState(t, b.report(t, op, 1, httpError(503)).Operation, review.RetryWait)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("rows"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			lateKept(t, got, 1, "rows", true, review.VerdictConfirms)
			// No other attempt went out: the answer is there, nothing to retry.
			wantState(t, got, review.Confirmed)
		})
		assertSealed(t, b.s)
	})
}

// TestLateJobIsFollowed: a report that comes late saying the destination
// accepted a job is the destination's word that it holds the job for this
// operation. Waiting to retry, the operation follows the job instead of
// sending the retry beside it (an empty search earlier does not
// contradict a job, whose output does not exist yet); once confirmed by a
// later attempt, the job is a second effect nobody answers for, and a
// person is asked to cancel it. The job is the operation's then: its end
// is taken (not refused as a job never reported) — its output is the
// effect the case asks to undo, and a job that made nothing leaves the
// case nothing to ask, which resolves it.
func TestLateJobIsFollowed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)

		t.Run("waiting to retry: the job is followed, no retry goes out", func(t *testing.T) {
			op := b.retrying(t, "doc-late-job")
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, accepted("job-late"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			wantState(t, got, review.Accepted)
			if len(got.Jobs) != 1 || got.Jobs[0].Ref != "job-late" || got.Jobs[0].Attempt != 1 {
				t.Errorf("jobs %+v, want job-late of attempt 1", got.Jobs)
			}
			if ev := got.Evidence[len(got.Evidence)-1]; ev.Verdict != review.VerdictInconclusive {
				t.Errorf("the late report %+v: a job accepted is no word its effect happened", ev)
			}
			_, err = b.tryStart(op, "", "")
			errAs[*review.NotAttemptableError](t, err)
			got, err = b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-late", Status: review.JobSucceeded, OutputRef: "file-1"}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "file-1" {
				t.Errorf("after the job succeeded: %s, resource %+v; want confirmed with file-1", got.State, got.Resource)
			}
		})

		t.Run("confirmed by a later attempt: the job is for a person", func(t *testing.T) {
			op := b.retrying(t, "doc-late-job-dup")
			b.start(t, op)
			wantState(t, b.report(t, op, 2, success("fld-2")).Operation, review.Confirmed)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, accepted("job-1-dup"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			wantState(t, b.get(t, op), review.Confirmed)
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].Status != store.CaseOpen || cs[0].RecommendedAction != review.RecommendCompensate || cs[0].RecommendedRef != "job-1-dup" {
				t.Fatalf("cases %+v, want one open recommending to cancel job-1-dup", cs)
			}
			// The job is the operation's now: its end is taken, and the
			// case asks about what it made.
			got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1-dup", Status: review.JobSucceeded, OutputRef: "fld-9"}, "integrator")
			if err != nil {
				t.Fatalf("the late job's end: %v", err)
			}
			wantState(t, got, review.Confirmed)
			if got.Resource == nil || got.Resource.Ref != "fld-2" {
				t.Errorf("the confirmed resource is now %+v, want fld-2 still", got.Resource)
			}
			cs, _ = b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].Status != store.CaseOpen || cs[0].RecommendedAction != review.RecommendCompensate || cs[0].RecommendedRef != "fld-9" {
				t.Errorf("cases %+v, want one open recommending to undo fld-9, the job's output", cs)
			}
		})

		t.Run("confirmed by a later attempt: the job fails", func(t *testing.T) {
			op := b.retrying(t, "doc-late-job-fails")
			b.start(t, op)
			wantState(t, b.report(t, op, 2, success("fld-2")).Operation, review.Confirmed)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, accepted("job-1-fails"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1-fails", Status: review.JobFailed}, "integrator")
			if err != nil {
				t.Fatalf("the late job's end: %v", err)
			}
			wantState(t, got, review.Confirmed)
			// It made nothing: the case about it has nothing left to ask.
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].Status == store.CaseOpen || cs[0].Resolution != review.ResolvedJobEnded || cs[0].ResolvedBy != "integrator" {
				t.Errorf("cases %+v, want the one about job-1-fails resolved as %s", cs, review.ResolvedJobEnded)
			}
		})

		t.Run("in review: the case waits on the job, its end is taken", func(t *testing.T) {
			// An irreversible write the destination held nothing of: the
			// case recommends approving a retry. Then the destination's
			// late word that it accepted a job for attempt 1.
			op, before := b.inReview(t, intention("charge-late-job", review.RiskIrreversible, "plain"), true)
			if before.RecommendedAction != review.RecommendApproveRetry {
				t.Fatalf("before the report the case recommends %s, want %s", before.RecommendedAction, review.RecommendApproveRetry)
			}
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, accepted("job-in-review"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			wantState(t, got, review.NeedsReview)
			if len(got.Jobs) != 1 || got.Jobs[0].Ref != "job-in-review" || got.Jobs[0].Attempt != 1 {
				t.Errorf("jobs %+v, want job-in-review of attempt 1", got.Jobs)
			}
			if !slices.ContainsFunc(b.history(t, op.ID), func(e store.AuditEvent) bool {
				return e.Action == "evidence.recorded" && strings.Contains(string(e.Detail), `"job":"job-in-review"`)
			}) {
				t.Error("no evidence.recorded event names the job it recorded")
			}
			// A retry while the job may run could charge twice: the case
			// now waits on the job, and a form read before the report is
			// stale.
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].RecommendedAction != review.RecommendReconcileAgain || !strings.Contains(cs[0].Rationale, "job-in-review") {
				t.Errorf("cases %+v, want the open one waiting on job-in-review", cs)
			}
			if _, err := b.s.Decide(b.ctx, seen(decideReq(before, review.DecideApproveRetry, "alice@example.com"), before)); !errors.Is(err, review.ErrStale) {
				t.Errorf("approving a retry on the form read before the report: %v, want ErrStale", err)
			}
			// The reconciler polls the job, as an accepted operation's.
			claims, err := b.s.ClaimJobsInReview(b.ctx, "reconciler-late", 10, time.Minute)
			if err != nil || !slices.ContainsFunc(claims, func(c store.ProbeClaim) bool { return c.Op.ID == op.ID }) {
				t.Errorf("jobs in review due for a poll: %d, %v; want this operation's", len(claims), err)
			}
			// The integrator's word of its end is taken. The search that
			// found nothing was made before the job ended: it does not
			// contradict the output, which the case recommends confirming.
			b.clk.Advance(time.Minute)
			if _, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-in-review", Status: review.JobSucceeded, OutputRef: "rcpt-9"}, "integrator"); err != nil {
				t.Fatalf("the late job's end: %v", err)
			}
			if got := b.get(t, op); got.Jobs[0].Status != review.JobSucceeded || got.Jobs[0].OutputRef != "rcpt-9" {
				t.Errorf("jobs %+v, want job-in-review succeeded with rcpt-9", got.Jobs)
			}
			cs, _ = b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].RecommendedAction != review.RecommendConfirm || cs[0].RecommendedRef != "rcpt-9" ||
				slices.Contains(cs[0].Reasons, review.ReasonSourcesDisagree) {
				t.Errorf("cases %+v, want the open one recommending to confirm rcpt-9, no sources disagreeing", cs)
			}
			// A look since the job ended that finds nothing does disagree.
			b.clk.Advance(time.Minute)
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "integrator"); err != nil {
				t.Fatal(err)
			}
			cs, _ = b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].RecommendedAction != review.RecommendReconcileAgain || !slices.Contains(cs[0].Reasons, review.ReasonSourcesDisagree) {
				t.Errorf("cases %+v, want the open one: sources disagree, look again", cs)
			}
		})

		t.Run("a late report of a success in review is weighed", func(t *testing.T) {
			op, before := b.inReview(t, intention("charge-late-success", review.RiskIrreversible, "plain"), true)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("rcpt-late"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].RecommendedAction == review.RecommendApproveRetry || !slices.Contains(cs[0].Reasons, review.ReasonSourcesDisagree) {
				t.Errorf("cases %+v: the destination said it charged; want no retry recommended, the sources disagreeing", cs)
			}
			if _, err := b.s.Decide(b.ctx, seen(decideReq(before, review.DecideApproveRetry, "alice@example.com"), before)); !errors.Is(err, review.ErrStale) {
				t.Errorf("approving a retry on the form read before the report: %v, want ErrStale", err)
			}
		})

		t.Run("following a job, a late success: the job is still polled in review", func(t *testing.T) {
			op := b.retrying(t, "doc-late-beside-job")
			b.start(t, op)
			wantState(t, b.report(t, op, 2, accepted("job-followed")).Operation, review.Accepted)
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success("fld-1"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			wantState(t, b.get(t, op), review.NeedsReview)
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || !strings.Contains(cs[0].Rationale, "job-followed") {
				t.Errorf("cases %+v, want the open one waiting on job-followed", cs)
			}
			claims, err := b.s.ClaimJobsInReview(b.ctx, "reconciler-beside", 10, time.Minute)
			if err != nil || !slices.ContainsFunc(claims, func(c store.ProbeClaim) bool { return c.Op.ID == op.ID }) {
				t.Errorf("jobs in review due for a poll: %d, %v; want this operation's", len(claims), err)
			}
		})

		t.Run("a late job of an earlier attempt is not the newest", func(t *testing.T) {
			op := b.retrying(t, "doc-late-job-order")
			b.start(t, op)
			b.report(t, op, 2, accepted("job-a-2"))
			// Named so that, recorded at the same moment, the ref alone
			// would put attempt 1's job last.
			_, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, accepted("job-z-1"), "integrator")
			errAs[*review.OutcomeConflictError](t, err)
			got := b.get(t, op)
			if len(got.Jobs) != 2 || got.Jobs[0].Ref != "job-z-1" || got.Jobs[0].Attempt != 1 || got.Jobs[1].Ref != "job-a-2" {
				t.Fatalf("jobs %+v, want job-z-1 (attempt 1) then job-a-2 (attempt 2)", got.Jobs)
			}
			if ref, job := review.LookupRef(got); ref != "job-a-2" || !job {
				t.Errorf("a status lookup asks about %q (job %v), want job-a-2, the latest attempt's", ref, job)
			}
		})
		assertSealed(t, b.s)
	})
}
