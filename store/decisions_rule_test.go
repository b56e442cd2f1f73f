package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// mismatch registers op's key again with another payload: refused, and a
// payload_mismatch case opens (or joins the open one). It returns the case.
func (b *bundle) mismatch(t testing.TB, op *review.Operation) *store.Case {
	t.Helper()
	r := review.Registration{Tenant: op.Tenant, SourceRef: op.SourceRef, LogicalVersion: op.LogicalVersion, Action: op.Action,
		Destination: op.Destination, Risk: op.Risk, Flags: op.Flags, Actor: "integrator", Payload: canonical(t, `{"another":"payload"}`)}
	_, _, err := b.s.Register(b.ctx, r)
	errAs[*review.PayloadMismatchError](t, err)
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		if cs[i].Status == store.CaseOpen {
			return &cs[i]
		}
	}
	t.Fatalf("no open case after a payload mismatch: %+v", cs)
	return nil
}

// TestDecisionOnlyWhereAPersonIsAsked (issue 12, hole 3): a decision on a
// payload_mismatch case moves the operation only when it is in
// needs_review. Elsewhere in its life (pending, in flight, ambiguous,
// settled) the only decision is fail, a verdict on the
// refused payload that leaves the operation alone; the case stays open
// until a person gives it, even after the operation settles. Awaiting
// approval, the mismatch joins the approval case, answered by approve or
// refuse.
func TestDecisionOnlyWhereAPersonIsAsked(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"gated": {Lease: review.DefaultLease, Actions: map[string]review.ActionConfig{"transform": {RequiresApproval: true}}},
	}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		// refused asks for every decision but fail on c and requires each
		// to be refused with nothing recorded and the operation where it was.
		refused := func(t *testing.T, op *review.Operation, c *store.Case) {
			t.Helper()
			for _, action := range []string{review.DecideApproveRetry, review.DecideConfirm, review.DecideCompensate} {
				if _, err := b.s.Decide(b.ctx, decideReq(c, action, "alice")); !errors.Is(err, review.ErrInvalidTransition) {
					t.Errorf("%s on a payload_mismatch case while the operation is %s = %v, want ErrInvalidTransition", action, op.State, err)
				}
			}
			if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions WHERE case_id = ?`, c.ID); n != 0 {
				t.Errorf("refused decisions recorded %d rows", n)
			}
			got := b.get(t, op)
			wantState(t, got, op.State)
			if got.Version != op.Version {
				t.Errorf("refused decisions moved the operation: version %d → %d", op.Version, got.Version)
			}
			if rc, _ := b.s.GetCase(b.ctx, c.ID, nil); rc.Status != store.CaseOpen {
				t.Errorf("refused decisions resolved the case: %+v", rc)
			}
		}
		// verdict fails the refused payload on c: recorded, audited, the
		// case resolved, the operation untouched.
		verdict := func(t *testing.T, op *review.Operation, c *store.Case) {
			t.Helper()
			d, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "alice"))
			if err != nil {
				t.Fatalf("fail on a payload_mismatch case while the operation is %s: %v", op.State, err)
			}
			if d.Status != "refused_payload" || d.FromState != string(op.State) || d.ToState != string(op.State) || d.Action != review.DecideFail {
				t.Errorf("decision = %+v, want a refused_payload verdict from and to %s", d, op.State)
			}
			got := b.get(t, op)
			wantState(t, got, op.State)
			if got.Version != op.Version {
				t.Errorf("the verdict on the refused payload moved the operation: version %d → %d", op.Version, got.Version)
			}
			rc, _ := b.s.GetCase(b.ctx, c.ID, nil)
			if rc.Status != store.CaseResolved || rc.ResolvedBy != "alice" || rc.Resolution != review.DecideFail {
				t.Errorf("case after the verdict = %+v", rc)
			}
			acts := countActions(b.history(t, op.ID))
			if acts["decision.refused_payload"] != 1 || acts["case.resolved"] != 1 || acts["decision.fail"] != 0 {
				t.Errorf("audit = %v, want one decision.refused_payload and one case.resolved", acts)
			}
		}

		t.Run("in flight", func(t *testing.T) {
			op := b.newOp(t, "doc-flight", review.RiskCompensableWrite, "plain")
			b.start(t, op)
			op = b.get(t, op)
			c := b.mismatch(t, op)
			refused(t, op, c)
			verdict(t, op, c)
			// Attempt 1 goes on: its success is applied, not refused.
			wantState(t, b.report(t, op, 1, success("fld-1")).Operation, review.Confirmed)
		})
		t.Run("in flight, financial: not even a first approval", func(t *testing.T) {
			r := intention("charge-flight", review.RiskCompensableWrite, "plain")
			r.Flags = []review.Flag{review.FlagFinancial}
			op := b.register(t, r)
			b.start(t, op)
			op = b.get(t, op)
			refused(t, op, b.mismatch(t, op))
			wantState(t, b.report(t, op, 1, success("chg-1")).Operation, review.Confirmed)
		})
		t.Run("ambiguous", func(t *testing.T) {
			op := b.ambiguous(t, "doc-ambiguous")
			c := b.mismatch(t, op)
			refused(t, op, c)
			verdict(t, op, c)
			if _, err := b.tryStart(op, "", ""); err == nil {
				t.Error("an attempt was granted on an ambiguous operation after a verdict on a refused payload")
			}
		})
		t.Run("pending", func(t *testing.T) {
			op := b.newOp(t, "doc-pending", review.RiskCompensableWrite, "plain")
			c := b.mismatch(t, op)
			refused(t, op, c)
			verdict(t, op, c)
		})
		t.Run("awaiting approval: the mismatch joins the approval case", func(t *testing.T) {
			op := b.newOp(t, "doc-gated", review.RiskCompensableWrite, "gated")
			wantState(t, op, review.AwaitingApproval)
			c := b.mismatch(t, op)
			if !slices.Contains(c.Reasons, review.ReasonApprovalRequired) || !slices.Contains(c.Reasons, review.ReasonPayloadMismatch) {
				t.Fatalf("case reasons %v, want the approval request and the mismatch", c.Reasons)
			}
			refused(t, op, c)
			// The reviewer answers the request, having seen the refused
			// payload: the refused one never runs under this key either way.
			if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "alice")); !errors.Is(err, review.ErrInvalidTransition) {
				t.Errorf("fail on an approval case = %v, want ErrInvalidTransition", err)
			}
			if d, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApprove, "alice")); err != nil || d.ToState != string(review.Pending) {
				t.Fatalf("approve = %+v, %v", d, err)
			}
		})
		t.Run("the case outlives the operation's settling", func(t *testing.T) {
			op := b.newOp(t, "doc-settles", review.RiskCompensableWrite, "plain")
			b.start(t, op)
			c := b.mismatch(t, op)
			op = b.report(t, op, 1, success("fld-9")).Operation
			wantState(t, op, review.Confirmed)
			rc, _ := b.s.GetCase(b.ctx, c.ID, nil)
			if rc.Status != store.CaseOpen {
				t.Fatalf("the operation settling closed the payload_mismatch case: %+v", rc)
			}
			refused(t, op, rc)
			verdict(t, op, rc)
		})
		t.Run("in review: the decision is on the operation", func(t *testing.T) {
			op, c := b.inReview(t, intention("doc-review", review.RiskCompensableWrite, "plain"), false)
			if joined := b.mismatch(t, op); joined.ID != c.ID {
				t.Fatalf("the mismatch opened case %s beside the open case %s", joined.ID, c.ID)
			}
			d, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "alice"))
			if err != nil || d.Status != store.DecisionApplied || d.ToState != string(review.Failed) {
				t.Fatalf("fail on a case in review = %+v, %v; want applied, to failed", d, err)
			}
			wantState(t, b.get(t, op), review.Failed)
		})
		assertSealed(t, b.s)
	})
}
