package reconcile_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestJobInReviewIsPolled: the deadline passed while an operation followed
// its job, still queued: a person decides, and the case waits on the job
// (review.JobToWaitOn). The reconciler goes on polling that job, so its
// end reaches the person: a success puts its output on the case,
// recommended to confirm; a destination that no longer finds the job
// makes the case a state_conflict. Either way the polls stop there, and an
// operation in review with no job to wait on is never polled.
func TestJobInReviewIsPolled(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		var mu sync.Mutex
		answers := map[string]string{} // job ref → the job probe's answer ("": 404)
		answer := func(ref, body string) {
			mu.Lock()
			defer mu.Unlock()
			answers[ref] = body
		}
		s := newScripted(t, func(r *http.Request, _ string) (int, string) {
			mu.Lock()
			defer mu.Unlock()
			body, ok := answers[strings.TrimPrefix(r.URL.Path, "/jobs/")]
			if !ok || body == "" {
				return http.StatusNotFound, `{"error":"not_found"}`
			}
			return http.StatusOK, body
		})
		b := setup(t, e, sandbox.Options{}, map[string]review.Destination{"jobs": scriptedConfig(t, "jobs", s.url, "", "", "")})
		polls := func(ref string) int {
			return len(slices.DeleteFunc(s.requests(), func(r *http.Request) bool { return r.URL.Path != "/jobs/"+ref }))
		}
		caseOf := func(op *review.Operation) store.Case {
			t.Helper()
			cs, err := b.st.CasesForOperation(b.ctx, op.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases of %s: %v %+v; want one", op.SourceRef, err, cs)
			}
			return cs[0]
		}

		deadline := b.clk.Now().Add(time.Hour)
		succeeds := b.acceptedBy(t, "doc-succeeds", "jobs", "J1", &deadline)
		gone := b.acceptedBy(t, "doc-gone", "jobs", "J2", &deadline)
		answer("J1", `{"ref":"J1","status":"queued"}`)
		answer("J2", `{"ref":"J2","status":"running"}`)
		b.runOnce(t, 2) // both followed while accepted
		b.clk.Advance(2 * time.Hour)
		if n, err := b.st.ExpireDeadlines(b.ctx); err != nil || n != 2 {
			t.Fatalf("ExpireDeadlines: %d, %v; want both", n, err)
		}
		// In review beside nothing to wait on: never polled.
		other := b.ambiguous(t, "doc-other", "sandbox", nil)
		if _, err := b.st.AddEvidence(b.ctx, tenant, other.ID, review.Evidence{Source: review.SourceStatusLookup, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "a", OperationID: other.ID, Version: "v1"}, {Ref: "b", OperationID: other.ID, Version: "v1"}}}, "test"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, other), review.NeedsReview)
		for _, op := range []*review.Operation{succeeds, gone} {
			wantState(t, b.get(t, op), review.NeedsReview)
			if c := caseOf(op); c.RecommendedAction != review.RecommendReconcileAgain || !strings.Contains(c.Rationale, "is not known to have ended") {
				t.Errorf("%s: case recommends %s (%s), want waiting on the job", op.SourceRef, c.RecommendedAction, c.Rationale)
			}
		}

		b.runOnce(t, 2) // still queued, still running: the case waits
		if polls("J1") != 2 || polls("J2") != 2 {
			t.Fatalf("polls J1 %d, J2 %d; want 2 each", polls("J1"), polls("J2"))
		}
		answer("J1", fmt.Sprintf(`{"ref":"J1","status":"succeeded","output_ref":"out-1","operation_id":%q,"logical_version":"v1"}`, succeeds.ID))
		answer("J2", "")
		b.clk.Advance(2 * time.Minute)
		b.runOnce(t, 2)
		wantState(t, b.get(t, succeeds), review.NeedsReview)
		if c := caseOf(succeeds); c.RecommendedAction != review.RecommendConfirm || c.RecommendedRef != "out-1" {
			t.Errorf("after the job succeeded: case recommends %s %s (%s), want confirm out-1", c.RecommendedAction, c.RecommendedRef, c.Rationale)
		}
		wantState(t, b.get(t, gone), review.NeedsReview)
		if c := caseOf(gone); !slices.Contains(c.Reasons, review.ReasonStateConflict) || strings.Contains(c.Rationale, "is not known to have ended") {
			t.Errorf("after the job was not found: case %v recommends %s (%s), want a state_conflict that no longer waits", c.Reasons, c.RecommendedAction, c.Rationale)
		}

		b.clk.Advance(time.Hour)
		b.runOnce(t, 0)
		if polls("J1") != 3 || polls("J2") != 3 {
			t.Errorf("polls J1 %d, J2 %d after the job's end; want 3 each, none more", polls("J1"), polls("J2"))
		}
		sealed(t, b.st)
	})
}

// TestPollFollowsTheJobTheCaseWaitsOn: a retry was let go while the first
// attempt's job J1 was still queued; the retry's job J2 then failed. The
// operation is in review waiting on J1 (store: TestRetryBesideALiveJob),
// and it is J1 the reconciler polls — not J2, the newest, which has
// ended — so that J1's success reaches the case.
func TestPollFollowsTheJobTheCaseWaitsOn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		var mu sync.Mutex
		j1 := `{"ref":"J1","status":"queued"}`
		s := newScripted(t, func(r *http.Request, _ string) (int, string) {
			mu.Lock()
			defer mu.Unlock()
			switch r.URL.Path {
			case "/jobs/J1":
				return http.StatusOK, j1
			case "/jobs/J2":
				return http.StatusOK, `{"ref":"J2","status":"failed"}`
			}
			return http.StatusNotFound, `{"error":"not_found"}`
		})
		b := setup(t, e, sandbox.Options{}, map[string]review.Destination{"jobs": scriptedConfig(t, "jobs", s.url, "", "", "")})
		polls := func(ref string) int {
			return len(slices.DeleteFunc(s.requests(), func(r *http.Request) bool { return r.URL.Path != "/jobs/"+ref }))
		}
		openCase := func(op *review.Operation) store.Case {
			t.Helper()
			cs, err := b.st.CasesForOperation(b.ctx, op.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.Status == store.CaseOpen {
					return c
				}
			}
			t.Fatalf("no open case for %s: %+v", op.SourceRef, cs)
			return store.Case{}
		}

		deadline := b.clk.Now().Add(time.Hour)
		op := b.acceptedBy(t, "doc-retried", "jobs", "J1", &deadline)
		b.clk.Advance(2 * time.Hour)
		if _, err := b.st.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: openCase(op).ID, Action: review.DecideApproveRetry,
			Reason: "the job seems stuck", Actor: "reviewer"}); err != nil {
			t.Fatal(err)
		}
		g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.st.RecordOutcome(b.ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: http.StatusAccepted, Job: &review.JobRef{Ref: "J2", Status: string(review.JobQueued)}}, "test"); err != nil {
			t.Fatal(err)
		}
		b.runOnce(t, 1) // J2 polled, failed: J1 may still make the effect
		wantState(t, b.get(t, op), review.NeedsReview)
		if c := openCase(op); !strings.Contains(c.Rationale, "job J1 is not known to have ended") {
			t.Errorf("case recommends %s (%s), want waiting on J1", c.RecommendedAction, c.Rationale)
		}

		b.clk.Advance(time.Minute)
		b.runOnce(t, 1) // J1, still queued
		mu.Lock()
		j1 = fmt.Sprintf(`{"ref":"J1","status":"succeeded","output_ref":"out-1","operation_id":%q,"logical_version":"v1"}`, op.ID)
		mu.Unlock()
		b.clk.Advance(time.Minute)
		b.runOnce(t, 1)
		if c := openCase(op); c.RecommendedAction != review.RecommendConfirm || c.RecommendedRef != "out-1" {
			t.Errorf("after J1 succeeded: case recommends %s %s (%s), want confirm out-1", c.RecommendedAction, c.RecommendedRef, c.Rationale)
		}
		if polls("J1") != 2 || polls("J2") != 1 {
			t.Errorf("polls J1 %d, J2 %d; want J1 twice in review, J2 once while followed", polls("J1"), polls("J2"))
		}
		b.clk.Advance(time.Hour)
		b.runOnce(t, 0)
		sealed(t, b.st)
	})
}

// TestCheckTakesTheJobsEnd: a person asks the destination now about an
// operation in review whose case waits on its job (review.JobToWaitOn):
// the check asks the job probe too, as a poll would, and the job's end
// it brings is taken — the job recorded as ended, its output on the case,
// recommended to confirm — rather than left to the next poll, a minute
// later.
func TestCheckTakesTheJobsEnd(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		var mu sync.Mutex
		job, found := `{"ref":"J1","status":"queued"}`, `[]`
		s := newScripted(t, func(r *http.Request, opID string) (int, string) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.URL.Path == "/jobs/J1", r.URL.Path == "/lookup/J1":
				return http.StatusOK, job
			case r.URL.Path == "/search":
				return http.StatusOK, `{"results":` + found + `}`
			}
			return http.StatusNotFound, `{"error":"not_found"}`
		})
		b := setup(t, e, sandbox.Options{}, map[string]review.Destination{"jobs": scriptedConfig(t, "jobs", s.url, "", "", "")})
		deadline := b.clk.Now().Add(time.Hour)
		op := b.acceptedBy(t, "doc-check-job", "jobs", "J1", &deadline)
		b.clk.Advance(2 * time.Hour)
		if n, err := b.st.ExpireDeadlines(b.ctx); err != nil || n != 1 {
			t.Fatalf("ExpireDeadlines: %d, %v", n, err)
		}
		cs, err := b.st.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || !strings.Contains(cs[0].Rationale, "J1 is not known to have ended") {
			t.Fatalf("cases %+v, %v; want one waiting on J1", cs, err)
		}

		mu.Lock()
		job = fmt.Sprintf(`{"ref":"J1","status":"succeeded","output_ref":"out-1","operation_id":%q,"logical_version":"v1"}`, op.ID)
		found = `[` + candidate("out-1", op.ID, "v1") + `]`
		mu.Unlock()
		a, err := b.rec.Check(b.ctx, b.get(t, op))
		if err != nil {
			t.Fatal(err)
		}
		if a.Job == nil || a.Job.Ref != "J1" || a.Job.Status != review.JobSucceeded || a.Job.OutputRef != "out-1" {
			t.Fatalf("the check's job: %+v, want J1 succeeded with out-1", a.Job)
		}
		if err := b.st.RecordCheck(b.ctx, cs[0].ID, review.Principal{Name: "sara@example.com"}, nil, a); err != nil {
			t.Fatal(err)
		}
		got := b.get(t, op)
		wantState(t, got, review.NeedsReview)
		if len(got.Jobs) != 1 || got.Jobs[0].Status != review.JobSucceeded || got.Jobs[0].OutputRef != "out-1" {
			t.Errorf("jobs %+v, want J1 succeeded with out-1", got.Jobs)
		}
		cs, _ = b.st.CasesForOperation(b.ctx, op.ID)
		if len(cs) != 1 || cs[0].RecommendedAction != review.RecommendConfirm || cs[0].RecommendedRef != "out-1" {
			t.Errorf("cases %+v, want the open one recommending to confirm out-1", cs)
		}
		// Its polls stop: the case waits on nothing.
		b.clk.Advance(time.Hour)
		polls := len(s.requests())
		b.runOnce(t, 0)
		if n := len(s.requests()); n != polls {
			t.Errorf("%d more requests after the job's end, want none", n-polls)
		}
		sealed(t, b.st)
	})
}
