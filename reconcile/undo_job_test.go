package reconcile_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestUndoOfAJobByTheJobProbe: a reviewer keeps job J2 of a conversion
// and undoes (cancels) J1, its duplicate; the cancel's answer is lost. The
// destination's only probe is its job probe, and the reconciler asks it
// about J1 — the job the cancel is about, which belongs to the parent —
// and reads the job's status: canceled settles the cancel (the parent is
// confirmed with J2); succeeded means J1 ran through, and a person
// decides at once; running is probed again, and so is an answer about
// another operation's job. Before, an undo was looked up with the status
// probe only, so at such a destination no cancel in doubt was ever
// settled but by a person after every round was spent. On both engines.
func TestUndoOfAJobByTheJobProbe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, status, owner string // owner: the answer's operation_id ("" the parent)
		child, parent       review.State
	}{
		{name: "canceled", status: "canceled", child: review.Confirmed, parent: review.Confirmed},
		{name: "failed", status: "failed", child: review.Confirmed, parent: review.Confirmed},
		{name: "succeeded", status: "succeeded", child: review.NeedsReview, parent: review.Compensating},
		{name: "running", status: "running", child: review.Ambiguous, parent: review.Compensating},
		{name: "another operation's job", status: "canceled", owner: "op_someone_else", child: review.Ambiguous, parent: review.Compensating},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		var mu sync.Mutex
		parents := make([]string, len(cases))
		servers := make([]*scripted, len(cases))
		extra := map[string]review.Destination{}
		for i, c := range cases {
			servers[i] = newScripted(t, func(r *http.Request, _ string) (int, string) {
				if r.URL.Path != "/jobs/J1" {
					return http.StatusNotFound, `{"error":"not_found"}`
				}
				mu.Lock()
				defer mu.Unlock()
				owner := c.owner
				if owner == "" {
					owner = parents[i]
				}
				return http.StatusOK, fmt.Sprintf(`{"ref":"J1","status":%q,"operation_id":%q,"input_version":"v1"}`, c.status, owner)
			})
			extra[fmt.Sprintf("jobs-%d", i)] = review.Destination{Lease: time.Minute, SearchLag: searchLag, AllowInternal: loopbackV4,
				Probes: review.Probes{Job: &review.Probe{Method: "GET", URL: servers[i].url + "/jobs/{{.JobRef}}", Timeout: 2 * time.Second}}}
		}
		b := setup(t, e, sandbox.Options{}, extra)
		children := make([]string, len(cases))
		for i := range cases {
			parent := b.ambiguousAfter(t, fmt.Sprintf("convert-%d", i), fmt.Sprintf("jobs-%d", i), nil)
			mu.Lock()
			parents[i] = parent.ID
			mu.Unlock()
			job := func(ref string) review.Candidate {
				return review.Candidate{Ref: ref, Kind: "job", Version: "v1", OperationID: parent.ID}
			}
			got, err := b.st.AddEvidence(b.ctx, tenant, parent.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
				Candidates: []review.Candidate{job("J1"), job("J2")}}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.NeedsReview)
			cs, err := b.st.CasesForOperation(b.ctx, parent.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases %+v, %v", cs, err)
			}
			if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideKeepAndUndo, Ref: "J2", UndoRef: "J1",
				Compensation: "cancel J1", Actor: "rita@example.com", Reason: "two conversions of one file"}); err != nil {
				t.Fatal(err)
			}
			ks, err := b.st.Compensations(b.ctx, parent.ID)
			if err != nil || len(ks) != 1 {
				t.Fatalf("compensations %+v, %v", ks, err)
			}
			children[i] = ks[0].OperationID
			g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: children[i], Actor: "integrator"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := b.st.RecordOutcome(b.ctx, tenant, children[i], g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, res.Operation, review.Ambiguous)
		}
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, len(cases))
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				child := b.get(t, &review.Operation{ID: children[i], SourceRef: "the cancel"})
				if child.State != c.child {
					t.Errorf("the cancel is %s (%s), want %s", child.State, child.StateReason, c.child)
				}
				if c.status == "succeeded" && !strings.Contains(child.StateReason, "succeeded before the cancel took") {
					t.Errorf("the cancel's reason %q does not say J1 ran through", child.StateReason)
				}
				parent := b.get(t, &review.Operation{ID: parents[i], SourceRef: "the conversion"})
				if parent.State != c.parent {
					t.Errorf("the conversion is %s (%s), want %s", parent.State, parent.StateReason, c.parent)
				}
				if c.parent == review.Confirmed && (parent.Resource == nil || parent.Resource.Ref != "J2") {
					t.Errorf("the conversion is confirmed with %+v, want J2", parent.Resource)
				}
				reqs := servers[i].requests()
				if len(reqs) == 0 {
					t.Fatal("the job probe was not asked")
				}
				for _, r := range reqs {
					if r.URL.Path != "/jobs/J1" {
						t.Errorf("asked %s, want only the job the cancel is about", r.URL)
					}
				}
			})
		}
		sealed(t, b.st)
	})
}
