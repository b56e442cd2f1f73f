package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCompensateIsTracked (issue 12, hole 7): compensate is not terminal.
// The operation goes to compensating and stays there, its case open, until
// a reviewer says the undo happened (compensation_done → compensated, on
// the reviewer's evidence; the case resolves) or did not
// (compensation_failed → needs_review with reason compensation_failed, the
// same case open again for a new decision). Nothing else is decided on a
// compensating operation, and no attempt is granted.
func TestCompensateIsTracked(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://hooks.example.com/limbo")
		op, c := b.inReview(t, intention("doc-dup", review.RiskCompensableWrite, "plain"), false)

		d, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "alice"))
		if err != nil {
			t.Fatalf("compensate: %v", err)
		}
		if d.Status != store.DecisionApplied || d.ToState != string(review.Compensating) {
			t.Errorf("compensate decision = %+v, want applied, to compensating", d)
		}
		got := b.get(t, op)
		wantState(t, got, review.Compensating)
		if got.State.Terminal() {
			t.Fatal("compensating is terminal")
		}
		rc, _ := b.s.GetCase(b.ctx, c.ID, nil)
		if rc.Status != store.CaseOpen || rc.Version <= c.Version {
			t.Fatalf("case after compensate = %+v, want open with a new version", rc)
		}
		_, err = b.tryStart(op, "", "")
		errAs[*review.NotAttemptableError](t, err)

		// Only the word on the undo applies now.
		for _, action := range []string{review.DecideConfirm, review.DecideCompensate, review.DecideApproveRetry, review.DecideFail} {
			if _, err := b.s.Decide(b.ctx, decideReq(rc, action, "bob")); !errors.Is(err, review.ErrInvalidTransition) {
				t.Errorf("%s on a compensating operation = %v, want ErrInvalidTransition", action, err)
			}
		}
		// A reviewer who saw the case before the compensate is told of it.
		_, err = b.s.Decide(b.ctx, seen(decideReq(c, review.DecideFail, "bob"), c))
		if ad := errAs[*review.AlreadyDecidedError](t, err); ad.By != "alice" || ad.Action != review.DecideCompensate {
			t.Errorf("stale decision told %s by %s, want alice's compensate", ad.Action, ad.By)
		}

		// The undo failed: back to review, same case, with the reason.
		failed, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensationFailed,
			Reason: "DELETE /resources/fld-2 answers 403", Actor: "alice"})
		if err != nil {
			t.Fatalf("compensation_failed: %v", err)
		}
		if failed.FromState != string(review.Compensating) || failed.ToState != string(review.NeedsReview) {
			t.Errorf("compensation_failed decision = %+v", failed)
		}
		wantState(t, b.get(t, op), review.NeedsReview)
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].ID != c.ID || cs[0].Status != store.CaseOpen || !slices.Contains(cs[0].Reasons, review.ReasonCompensationFailed) {
			t.Fatalf("cases after compensation_failed = %+v, want the one case open with compensation_failed", cs)
		}

		// Compensate again; this time the undo happened.
		if _, err := b.s.Decide(b.ctx, decideReq(&cs[0], review.DecideCompensate, "alice")); err != nil {
			t.Fatalf("compensate again: %v", err)
		}
		wantState(t, b.get(t, op), review.Compensating)
		done, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensationDone,
			Reason: "fld-2 is gone from the destination", Actor: "bob"})
		if err != nil {
			t.Fatalf("compensation_done: %v", err)
		}
		if done.ToState != string(review.Compensated) || done.ResourceRef != "fld-2" || done.Compensation == "" {
			t.Errorf("compensation_done decision = %+v, want to compensated, naming fld-2 and how", done)
		}
		got = b.get(t, op)
		wantState(t, got, review.Compensated)
		last := got.Evidence[len(got.Evidence)-1]
		if last.Source != review.SourceReviewer || !last.Authoritative || last.Verdict != review.VerdictRefutes ||
			!strings.Contains(last.Note, "fld-2") || !strings.Contains(last.Note, "bob") {
			t.Errorf("compensated on evidence %+v, want the reviewer's word that fld-2 is undone", last)
		}
		rc, _ = b.s.GetCase(b.ctx, c.ID, nil)
		if rc.Status != store.CaseResolved || rc.ResolvedBy != "bob" || rc.Resolution != review.DecideCompensationDone {
			t.Errorf("case after compensation_done = %+v", rc)
		}

		acts := countActions(b.history(t, op.ID))
		if acts["decision.compensate"] != 2 || acts["decision.compensation_failed"] != 1 || acts["decision.compensation_done"] != 1 ||
			acts["case.resolved"] != 1 {
			t.Errorf("audit = %v", acts)
		}
		// Integrators hear of each step.
		types := map[string]int{}
		for _, m := range b.messages(t, ep) {
			types[m.EventType]++
		}
		if len(types) != 3 || types["decision.compensate"] != 2 || types["decision.compensation_failed"] != 1 || types["decision.compensation_done"] != 1 {
			t.Errorf("webhooks = %v, want two compensate, one compensation_failed, one compensation_done", types)
		}
		assertSealed(t, b.s)
	})
}
