package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCompensationIsAnOperation (issue 14, part 4): a compensate decision
// registers an operation of its own — its key derived from the parent,
// the resource and the decision — which the integrator runs through the
// same API. The parent stays compensating until it is confirmed, then is
// compensated and its case resolved; a compensation that fails sends the
// parent back to review with compensation_failed.
func TestCompensationIsAnOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		compensate := func(t *testing.T, ref string) (*store.Case, *review.Operation, store.Compensation) {
			t.Helper()
			c := b.reviewCase(t, ref)
			d, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensate, Ref: "fld-2",
				Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "two folders for one operation"})
			if err != nil {
				t.Fatal(err)
			}
			parent, err := b.s.OperationByID(b.ctx, c.OperationID, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, parent, review.Compensating)
			cs, err := b.s.Compensations(b.ctx, parent.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("compensations %+v, %v", cs, err)
			}
			k := cs[0]
			if k.ResourceRef != "fld-2" || k.DecisionID != d.ID || k.CaseID != c.ID || k.State != review.Pending ||
				k.Key != review.CompensationKey(parent.Key, "fld-2", d.ID) {
				t.Errorf("compensation %+v", k)
			}
			child, err := b.s.GetOperation(b.ctx, tenantA, k.OperationID, "")
			if err != nil {
				t.Fatal(err)
			}
			if child.Action != review.CompensationPrefix+parent.Action || child.Risk != review.RiskCompensableWrite {
				t.Errorf("compensation operation %+v", child)
			}
			return c, parent, k
		}

		t.Run("confirmed: the parent is compensated", func(t *testing.T) {
			c, parent, k := compensate(t, "doc-undo")
			child := &review.Operation{ID: k.OperationID, Tenant: tenantA}
			b.start(t, child)
			wantState(t, b.get(t, parent), review.Compensating) // in flight: nothing settled yet
			b.report(t, child, 1, success("fld-2"))
			wantState(t, b.get(t, parent), review.Compensated)
			if got, _ := b.s.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseResolved || got.Resolution != "compensation_done" {
				t.Errorf("case after the undo = %+v", got)
			}
			acts := countActions(b.history(t, parent.ID))
			if acts["compensation.settled"] != 1 || acts["case.resolved"] != 1 {
				t.Errorf("parent's audit = %v", acts)
			}
		})

		t.Run("failed: the parent goes back to review", func(t *testing.T) {
			c, parent, k := compensate(t, "doc-undo-fails")
			child := &review.Operation{ID: k.OperationID, Tenant: tenantA}
			b.start(t, child)
			b.report(t, child, 1, httpError(422))
			got := b.get(t, parent)
			wantState(t, got, review.NeedsReview)
			rc, _ := b.s.GetCase(b.ctx, c.ID, nil)
			if rc.Status != store.CaseOpen || !slices.Contains(rc.Reasons, review.ReasonCompensationFailed) {
				t.Errorf("case after a failed undo = %+v", rc)
			}
		})
		t.Run("keep one, undo the other: confirmed with the kept one once the undo is", func(t *testing.T) {
			c := b.reviewCase(t, "doc-keep")
			req := store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", Compensation: "delete the duplicate folder",
				Actor: "rita@example.com", Reason: "fld-1 is the one the customer uses"}
			for _, undo := range []string{"", "fld-1"} {
				bad := req
				bad.UndoRef = undo
				if _, err := b.s.Decide(b.ctx, bad); !errors.Is(err, review.ErrInvalid) {
					t.Errorf("keep_and_undo undoing %q: %v, want ErrInvalid", undo, err)
				}
			}
			req.UndoRef = "fld-2"
			d, err := b.s.Decide(b.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.ResourceRef != "fld-1" || d.UndoRef != "fld-2" || d.ToState != string(review.Compensating) {
				t.Errorf("decision %+v", d)
			}
			parent, _ := b.s.OperationByID(b.ctx, c.OperationID, nil)
			wantState(t, parent, review.Compensating)
			cs, _ := b.s.Compensations(b.ctx, parent.ID)
			if len(cs) != 1 || cs[0].ResourceRef != "fld-2" {
				t.Fatalf("compensations %+v, want the undo of fld-2", cs)
			}
			child := &review.Operation{ID: cs[0].OperationID, Tenant: tenantA}
			b.start(t, child)
			b.report(t, child, 1, success("fld-2"))
			got := b.get(t, parent)
			wantState(t, got, review.Confirmed)
			if got.Resource == nil || got.Resource.Ref != "fld-1" {
				t.Errorf("confirmed with %+v, want the kept fld-1", got.Resource)
			}
			if rc, _ := b.s.GetCase(b.ctx, c.ID, nil); rc.Status != store.CaseResolved {
				t.Errorf("case after keep-and-undo settled: %+v", rc)
			}
		})

		t.Run("a reviewer's word on an undo not yet run cancels it", func(t *testing.T) {
			c, parent, k := compensate(t, "doc-by-hand")
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensationFailed, Actor: "rita@example.com",
				Reason: "the folder could not be deleted"}); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, parent), review.NeedsReview)
			if rc, _ := b.s.GetCase(b.ctx, c.ID, nil); rc.Status != store.CaseOpen {
				t.Errorf("the parent is in review but its case was closed: %+v", rc)
			}
			child := &review.Operation{ID: k.OperationID, Tenant: tenantA}
			wantState(t, b.get(t, child), review.Failed)
			errAs[*review.NotAttemptableError](t, func() error { _, err := b.tryStart(child, "", ""); return err }())
			cs, _ := b.s.Compensations(b.ctx, parent.ID)
			if len(cs) != 1 || cs[0].CanceledBy != "rita@example.com" {
				t.Errorf("compensations %+v, want the one canceled by rita", cs)
			}
			if acts := countActions(b.history(t, child.ID)); acts["compensation.canceled"] != 1 {
				t.Errorf("the compensation's audit = %v", acts)
			}
		})

		t.Run("a reviewer's word on an undo in flight is refused", func(t *testing.T) {
			c, parent, k := compensate(t, "doc-by-hand-running")
			child := &review.Operation{ID: k.OperationID, Tenant: tenantA}
			b.start(t, child)
			for _, a := range []string{review.DecideCompensationDone, review.DecideCompensationFailed} {
				_, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: a, Actor: "rita@example.com", Reason: "I deleted it myself"})
				if !errors.Is(err, review.ErrInvalidTransition) {
					t.Errorf("%s while the undo is in flight: %v, want refused", a, err)
				}
			}
			b.report(t, child, 1, success("fld-2"))
			wantState(t, b.get(t, parent), review.Compensated)
		})

		t.Run("keep and undo, the duplicate undone by hand: confirmed with the kept one", func(t *testing.T) {
			c := b.reviewCase(t, "doc-keep-by-hand")
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: "fld-2",
				Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "fld-1 is the one in use"}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensationDone, Actor: "rita@example.com",
				Reason: "deleted fld-2 in the provider's console"}); err != nil {
				t.Fatal(err)
			}
			got, _ := b.s.OperationByID(b.ctx, c.OperationID, nil)
			wantState(t, got, review.Confirmed)
			if got.Resource == nil || got.Resource.Ref != "fld-1" {
				t.Errorf("confirmed with %+v, want the kept fld-1", got.Resource)
			}
			if rc, _ := b.s.GetCase(b.ctx, c.ID, nil); rc.Status != store.CaseResolved {
				t.Errorf("case %+v, want resolved", rc)
			}
		})

		t.Run("the dashboard counts them", func(t *testing.T) {
			compensate(t, "doc-undo-pending")
			d, err := b.s.Dashboard(b.ctx, nil, 24*time.Hour, 4)
			if err != nil {
				t.Fatal(err)
			}
			if d.CompensationsDone != 3 || d.CompensationsFailed != 1 || d.CompensationsPending != 1 {
				t.Errorf("compensations done %d, pending %d, failed %d; want 3, 1, 1", d.CompensationsDone, d.CompensationsPending, d.CompensationsFailed)
			}
		})
		assertSealed(t, b.s)
	})
}

// TestUndoneDuplicateIsWatchedAgain: once a duplicate's undo is confirmed
// and the operation confirmed with the kept resource, its confirm window
// opens again — the destination has shown it makes more than one — and a
// third resource found later opens a case; the undone one, still listed
// by a destination that shows deleted resources, does not.
func TestUndoneDuplicateIsWatchedAgain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, &review.Config{Destinations: map[string]review.Destination{"files": {SearchLag: 2 * time.Second}}})
		op := b.newOp(t, "doc-thrice", review.RiskCompensableWrite, "files")
		b.start(t, op)
		b.report(t, op, 1, timeoutAfterSend)
		cand := func(ref string) review.Candidate {
			return review.Candidate{Ref: ref, Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID}
		}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{cand("fld-1"), cand("fld-2")}}, "integrator"); err != nil {
			t.Fatal(err)
		}
		cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
		if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: "fld-2",
			Compensation: "delete fld-2", Actor: "rita@example.com", Reason: "two folders"}); err != nil {
			t.Fatal(err)
		}
		comps, _ := b.s.Compensations(b.ctx, op.ID)
		child := &review.Operation{ID: comps[0].OperationID, Tenant: tenantA}
		b.start(t, child)
		b.report(t, child, 1, success("fld-2"))
		wantState(t, b.get(t, op), review.Confirmed)

		b.clk.Advance(3 * time.Second)
		claims, err := b.s.ClaimWatches(b.ctx, 10, time.Minute)
		if err != nil || len(claims) != 1 || claims[0].Op.ID != op.ID {
			t.Fatalf("watches after the undo: %+v, %v; want the confirmed parent", claims, err)
		}
		// What the reconciler makes of a search listing the kept, the undone
		// and (later) a third folder.
		look := func(c store.WatchClaim, refs ...string) review.Watching {
			var cs []review.Candidate
			for _, r := range refs {
				cs = append(cs, cand(r))
			}
			return review.Watch(c.Op, review.Destination{SearchLag: 2 * time.Second},
				[]review.ProbeResult{{Kind: review.ProbeSearch, Candidates: cs}}, c.Until, b.clk.Now())
		}
		if !slices.Contains(claims[0].Op.Undone, "fld-2") {
			t.Errorf("the parent's undone resources = %v, want fld-2", claims[0].Op.Undone)
		}
		w := look(claims[0], "fld-1", "fld-2")
		if len(w.Extra) != 0 || w.Next.IsZero() {
			t.Errorf("a search still listing the undone fld-2: extra %v, next %v; want no extra, the watch going on", w.Extra, w.Next)
		}
		if err := b.s.ApplyWatch(b.ctx, claims[0], w); err != nil {
			t.Fatal(err)
		}
		if open := openCases(t, b, op.ID); open != 0 {
			t.Errorf("the undone fld-2 listed again opened %d cases", open)
		}
		b.clk.Advance(3 * time.Second)
		claims, _ = b.s.ClaimWatches(b.ctx, 10, time.Minute)
		if len(claims) != 1 {
			t.Fatalf("second look: %+v", claims)
		}
		if err := b.s.ApplyWatch(b.ctx, claims[0], look(claims[0], "fld-1", "fld-2", "fld-3")); err != nil {
			t.Fatal(err)
		}
		if open := openCases(t, b, op.ID); open != 1 {
			t.Errorf("a third folder found after the undo opened %d cases, want one", open)
		}
		cs, _ = b.s.CasesForOperation(b.ctx, op.ID)
		for _, c := range cs {
			if c.Status == store.CaseOpen && c.RecommendedRef != "fld-3" {
				t.Errorf("the new case recommends %s %s, want the undo of fld-3 (fld-2 is undone already)", c.RecommendedAction, c.RecommendedRef)
			}
		}
	})
}

func openCases(t *testing.T, b *bundle, opID string) int {
	t.Helper()
	cs, err := b.s.CasesForOperation(b.ctx, opID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cs {
		if c.Status == store.CaseOpen {
			n++
		}
	}
	return n
}

// undoInReview compensates fld-2 of a case's operation and leaves the
// compensation in review: its answer lost, the reconciler's rounds spent.
func (b *bundle) undoInReview(t *testing.T, ref string) (c *store.Case, parent, child *review.Operation) {
	t.Helper()
	c = b.reviewCase(t, ref)
	if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "rita@example.com")); err != nil {
		t.Fatal(err)
	}
	cs, err := b.s.Compensations(b.ctx, c.OperationID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("compensations %+v, %v", cs, err)
	}
	parent = &review.Operation{ID: c.OperationID, Tenant: tenantA}
	child = &review.Operation{ID: cs[0].OperationID, Tenant: tenantA}
	b.start(t, child)
	b.report(t, child, 1, timeoutAfterSend)
	wantState(t, b.get(t, child), review.Ambiguous)
	claim := b.claimOne(t, "reconciler", b.get(t, child))
	claim.Round = review.MaxProbeRounds - 1
	st := b.settleClaim(claim, review.ProbeResult{Kind: review.ProbeStatus, Ref: "fld-2", Err: "503 Service Unavailable"})
	if st.State != review.NeedsReview {
		t.Fatalf("settlement %s (%s), want needs_review", st.State, st.Reason)
	}
	if err := b.s.ApplySettlement(b.ctx, claim, st); err != nil {
		t.Fatal(err)
	}
	return c, parent, child
}

// TestUndoInReviewKeepsItsParentWaiting: a compensation the reconciler
// cannot settle goes to a person, its outcome unknown; its parent keeps
// waiting in compensating (its case marked compensation_failed) instead
// of going back to needs_review, where no decision can say "compensated"
// and the undo's later confirmation moved nothing: the parent stayed in
// review, and the only decision left that ends in compensated was to
// send the undo again. The reviewer's word on the undo goes on the
// compensation's own case; the parent follows it.
func TestUndoInReviewKeepsItsParentWaiting(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		c, parent, child := b.undoInReview(t, "doc-undo-in-review")
		wantState(t, b.get(t, parent), review.Compensating)
		rc, _ := b.s.GetCase(b.ctx, c.ID, nil)
		if rc.Status != store.CaseOpen || !slices.Contains(rc.Reasons, review.ReasonCompensationFailed) {
			t.Errorf("the parent's case while its undo is in review = %+v", rc)
		}
		// Not on the parent's case: the undo's outcome is the
		// compensation's case to decide.
		for _, a := range []string{review.DecideCompensationDone, review.DecideCompensationFailed, review.DecideCompensate} {
			req := decideReq(c, a, "rita@example.com")
			if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, review.ErrInvalidTransition) {
				t.Errorf("%s on the parent while its undo is in review: %v, want refused", a, err)
			}
		}
		kc, err := b.s.CasesForOperation(b.ctx, child.ID)
		if err != nil || len(kc) != 1 {
			t.Fatalf("the compensation's cases %+v, %v", kc, err)
		}
		req := decideReq(&kc[0], review.DecideConfirm, "rita@example.com")
		req.Ref = "fld-2"
		if _, err := b.s.Decide(b.ctx, req); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, parent), review.Compensated)
		if got, _ := b.s.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseResolved {
			t.Errorf("the parent's case once its undo is confirmed = %+v", got)
		}
		assertSealed(t, b.s)
	})
}

// TestNoSecondUndoWhileTheFirstIsUnsettled: the case of a confirmed
// operation's extra resource stays open while its undo runs, and offered
// compensate again: a second compensation of the same resource was
// registered while the first was pending, in flight or had lost its
// answer — two undos (two refunds) where one may already have happened.
// Now compensating a resource is refused while an earlier undo of it is
// unsettled; another resource may still be undone.
func TestNoSecondUndoWhileTheFirstIsUnsettled(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-extra-twice", review.RiskCompensableWrite, "plain")
		b.start(t, op)
		b.report(t, op, 1, success("fld-1"))
		cand := func(ref string) review.Candidate {
			return review.Candidate{Ref: ref, Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID}
		}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{cand("fld-1"), cand("fld-2"), cand("fld-3")}}, "integrator"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Confirmed)
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || cs[0].Status != store.CaseOpen {
			t.Fatalf("cases %+v, %v; want the extra resources' case", cs, err)
		}
		c := &cs[0]
		undo := func(ref string) error {
			req := decideReq(c, review.DecideCompensate, "rita@example.com")
			req.Ref = ref
			_, err := b.s.Decide(b.ctx, req)
			return err
		}
		if err := undo("fld-2"); err != nil {
			t.Fatal(err)
		}
		if err := undo("fld-2"); !errors.Is(err, review.ErrInvalidTransition) {
			t.Errorf("fld-2 undone again while its undo is pending: %v, want refused", err)
		}
		comps, _ := b.s.Compensations(b.ctx, op.ID)
		child := &review.Operation{ID: comps[0].OperationID, Tenant: tenantA}
		b.start(t, child)
		b.report(t, child, 1, timeoutAfterSend)
		wantState(t, b.get(t, child), review.Ambiguous)
		if err := undo("fld-2"); !errors.Is(err, review.ErrInvalidTransition) {
			t.Errorf("fld-2 undone again while its undo's answer is lost: %v, want refused", err)
		}
		if err := undo("fld-3"); err != nil {
			t.Errorf("another resource's undo: %v", err)
		}
		if comps, _ := b.s.Compensations(b.ctx, op.ID); len(comps) != 2 {
			t.Errorf("compensations %+v, want one of fld-2 and one of fld-3", comps)
		}
	})
}

// TestAnUndoIsNotUndone: the case of a compensation in review offered
// compensate (and keep_and_undo): deciding it registered a compensation
// of the compensation, which sent the same undo again — for a refund,
// without the second reviewer approve_retry needs — and, once confirmed,
// left the compensation "compensated", a state its parent does not
// follow, so the parent waited in compensating for a person. Now an
// undo's case refuses them and its form does not offer them: confirm or
// fail says whether it happened, approve_retry sends it again.
func TestAnUndoIsNotUndone(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		_, _, child := b.undoInReview(t, "doc-undo-the-undo")
		kc, err := b.s.CasesForOperation(b.ctx, child.ID)
		if err != nil || len(kc) != 1 {
			t.Fatalf("the compensation's cases %+v, %v", kc, err)
		}
		for _, a := range []string{review.DecideCompensate, review.DecideKeepAndUndo} {
			req := decideReq(&kc[0], a, "rita@example.com")
			req.Ref, req.UndoRef, req.Compensation = "fld-2", "fld-3", "delete it again"
			if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, review.ErrInvalidTransition) {
				t.Errorf("%s on an undo's case: %v, want refused", a, err)
			}
		}
		if cs, _ := b.s.Compensations(b.ctx, child.ID); len(cs) != 0 {
			t.Errorf("compensations of the compensation: %+v", cs)
		}
		wantState(t, b.get(t, child), review.NeedsReview)
	})
}

// TestLimboUndoesOnlyWhatTheOperationHas: where Limbo sends the undo
// itself (the destination has an undo call, run with Limbo's credential),
// a compensate decision must name a resource the operation is known to
// have. The form's select offers those, but the value posted was taken
// as is: any ref typed into it — another tenant's resource at the same
// destination, say — registered a compensation the undo worker sent a
// DELETE for, and an empty one a DELETE of the undo URL's collection.
func TestLimboUndoesOnlyWhatTheOperationHas(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, &review.Config{Destinations: map[string]review.Destination{"plain": {
			Undo: &review.Undo{Method: "DELETE", URL: "http://127.0.0.1:9/resources/{{.Ref}}", Timeout: time.Second}}}})
		c := b.reviewCase(t, "doc-undo-what")
		for _, ref := range []string{"", "fld-of-another-tenant"} {
			req := decideReq(c, review.DecideCompensate, "rita@example.com")
			req.Ref = ref
			if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("compensate %q: %v, want refused", ref, err)
			}
			keep := store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: ref,
				Compensation: "delete it", Actor: "rita@example.com", Reason: "two folders"}
			if _, err := b.s.Decide(b.ctx, keep); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("keep fld-1, undo %q: %v, want refused", ref, err)
			}
		}
		if cs, _ := b.s.Compensations(b.ctx, c.OperationID); len(cs) != 0 {
			t.Fatalf("compensations registered: %+v", cs)
		}
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "rita@example.com")); err != nil {
			t.Errorf("compensate fld-2, a candidate: %v", err)
		}
	})
}

// TestLimboDoesNotUndoWhatOthersWroteToo: the undo call a destination is
// configured with names a resource only (DELETE /resources/{{.Ref}}) and
// removes it whole. An operation that uploaded a new version of a file
// has the file as its resource, as has the one that created it and every
// other upload: a compensate decision on one of them had Limbo delete the
// file with every version, the others' included. Where the ledger says
// another operation wrote the resource too, the compensation is still
// registered and tracked, but left to a person: Limbo's undo worker does
// not list it, its reason says who else wrote the resource (another
// tenant's operation without its id) and what to do, and the reviewer's
// compensation_done settles it. Operations at another destination, and a
// ref in other letters, do not count; where the integrator runs the undo,
// it is an ordinary compensation.
func TestLimboDoesNotUndoWhatOthersWroteToo(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		undo := &review.Undo{Method: "DELETE", URL: "http://127.0.0.1:9/resources/{{.Ref}}", Timeout: time.Second}
		b := setup(t, e, &review.Config{Destinations: map[string]review.Destination{"plain": {Undo: undo}, "files": {Undo: undo}}})
		wrote := func(t *testing.T, tenant, dest, ref string) *review.Operation {
			t.Helper()
			r := intention("upload-"+ref+"-"+tenant+"-"+dest, review.RiskIdempotentWrite, dest)
			r.Tenant = tenant
			op := b.register(t, r)
			b.start(t, op)
			wantState(t, b.report(t, op, 1, success(ref)).Operation, review.Confirmed)
			return op
		}
		due := func(t *testing.T) []string {
			t.Helper()
			cs, err := b.s.DueCompensations(b.ctx, []string{"plain"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			var refs []string
			for _, c := range cs {
				refs = append(refs, c.ParentID+" "+c.ResourceRef)
			}
			return refs
		}
		// Nobody else wrote fld-2 here: the same name elsewhere, or in
		// other letters, is another resource. Limbo sends this undo.
		wrote(t, tenantA, "files", "fld-2")
		wrote(t, tenantA, "plain", "FLD-2")
		c := b.reviewCase(t, "doc-shared")
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "rita@example.com")); err != nil {
			t.Fatalf("compensate fld-2, written by this operation only: %v", err)
		}
		if got := due(t); !slices.Equal(got, []string{c.OperationID + " fld-2"}) {
			t.Fatalf("due compensations %v, want the undo of fld-2", got)
		}
		first := c

		// A version of fld-2 uploaded by another operation, and one by
		// another tenant's.
		c = b.reviewCase(t, "doc-shared-2")
		other := wrote(t, tenantA, "plain", "fld-2")
		wrote(t, tenantB, "plain", "fld-2")
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "rita@example.com")); err != nil {
			t.Fatalf("compensate fld-2: %v", err)
		}
		parent := b.get(t, &review.Operation{ID: c.OperationID, Tenant: tenantA})
		wantState(t, parent, review.Compensating)
		cs, err := b.s.Compensations(b.ctx, c.OperationID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("compensations %+v, %v", cs, err)
		}
		k := cs[0]
		if !k.ByHand || k.State != review.Pending {
			t.Fatalf("compensation %+v, want pending and left to a person", k)
		}
		for _, want := range []string{"fld-2 was written by " + other.ID + ", " + review.AnotherTenantsOperation + " too", "removes it whole",
			"Limbo does not send it", "compensation_done"} {
			if !strings.Contains(k.StateReason, want) {
				t.Errorf("its reason %q does not say %q", k.StateReason, want)
			}
		}
		if strings.Contains(k.StateReason, tenantB) {
			t.Errorf("its reason %q names the other tenant", k.StateReason)
		}
		if got := due(t); len(got) != 1 || strings.HasPrefix(got[0], c.OperationID) {
			t.Fatalf("due compensations %v: the undo left to a person is listed", got)
		}
		// The first undo was decided before the others wrote fld-2. Asked
		// to send it now, Limbo finds them: it is left to a person too,
		// audited, and its case says so.
		firstUndo, err := b.s.Compensations(b.ctx, first.OperationID)
		if err != nil || len(firstUndo) != 1 || firstUndo[0].ByHand {
			t.Fatalf("first compensation %+v, %v", firstUndo, err)
		}
		_, err = b.s.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenantA, OperationID: firstUndo[0].OperationID, Actor: "system:undo"})
		if na := errAs[*review.NotAttemptableError](t, err); !strings.Contains(na.Operation.StateReason, "fld-2 was written by "+other.ID) {
			t.Errorf("the refusal says %q, want who else wrote fld-2", na.Operation.StateReason)
		}
		if firstUndo, _ = b.s.Compensations(b.ctx, first.OperationID); !firstUndo[0].ByHand || firstUndo[0].State != review.Pending ||
			!strings.Contains(firstUndo[0].StateReason, "Limbo does not send it") {
			t.Errorf("first compensation after the refusal %+v, want pending and left to a person", firstUndo[0])
		}
		if got := due(t); len(got) != 0 {
			t.Errorf("due compensations %v, want none: both are left to a person", got)
		}
		if open, err := b.s.GetCase(b.ctx, first.ID, nil); err != nil {
			t.Fatal(err)
		} else if open.RecommendedAction != review.RecommendUndoByHand {
			t.Errorf("the first case recommends %q, want undo_by_hand", open.RecommendedAction)
		}
		audited := false
		for _, ev := range events(t, b.s) {
			audited = audited || ev.Action == "compensation.left_to_person" && ev.OperationID == firstUndo[0].OperationID && ev.Actor == "system:undo"
		}
		if !audited {
			t.Error("leaving the first undo to a person is not audited")
		}
		// Nor does an integrator get an attempt at one, even once the
		// operation was read (which readies the fast path).
		if _, err := b.s.GetOperation(b.ctx, tenantA, k.OperationID, ""); err != nil {
			t.Fatal(err)
		}
		_, err = b.s.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenantA, OperationID: k.OperationID, Actor: "integrator"})
		errAs[*review.NotAttemptableError](t, err)

		// The case asks that person to act: waiting settles nothing, and
		// "apply the recommendation" must not say undone for them.
		open, err := b.s.GetCase(b.ctx, c.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := review.Recommendation{Action: open.RecommendedAction, Ref: open.RecommendedRef}
		if rec.String() != "undo_by_hand fld-2" || open.Rationale != fmt.Sprintf(review.RationaleUndoByHand, "fld-2") {
			t.Errorf("the case recommends %s (%s), want undo_by_hand fld-2", rec, open.Rationale)
		}
		if item := review.PlanBulk(review.BulkRecommended, rec); item.Skip == "" {
			t.Errorf("applying the recommendation plans %+v, want it skipped", item)
		}
		// The person undid this operation's version and says so.
		done := decideReq(c, review.DecideCompensationDone, "rita@example.com")
		done.Ref = "fld-2"
		if _, err := b.s.Decide(b.ctx, done); err != nil {
			t.Fatalf("compensation_done fld-2: %v", err)
		}
		wantState(t, b.get(t, parent), review.Compensated)
		if cs, _ := b.s.Compensations(b.ctx, c.OperationID); cs[0].State != review.Failed || cs[0].CanceledBy != "rita@example.com" {
			t.Fatalf("compensation after the word: %+v, want canceled", cs[0])
		}

		// keep_and_undo of a shared resource is left to a person too.
		c = b.reviewCase(t, "doc-shared-3")
		keep := store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: "fld-2",
			Compensation: "delete it", Actor: "rita@example.com", Reason: "two folders"}
		if _, err := b.s.Decide(b.ctx, keep); err != nil {
			t.Fatalf("keep fld-1, undo fld-2: %v", err)
		}
		if cs, _ := b.s.Compensations(b.ctx, c.OperationID); len(cs) != 1 || !cs[0].ByHand {
			t.Fatalf("keep_and_undo's compensation %+v, want it left to a person", cs)
		}

		// Where the integrator runs the undo, it knows what it removes.
		b2 := setup(t, e, nil)
		c2 := b2.reviewCase(t, "doc-shared-4")
		op := b2.newOp(t, "upload-fld-2", review.RiskIdempotentWrite, "plain")
		b2.start(t, op)
		b2.report(t, op, 1, success("fld-2"))
		if _, err := b2.s.Decide(b2.ctx, decideReq(c2, review.DecideCompensate, "rita@example.com")); err != nil {
			t.Fatalf("compensate fld-2, undone by the integrator: %v", err)
		}
		if cs, _ := b2.s.Compensations(b2.ctx, c2.OperationID); len(cs) != 1 || cs[0].ByHand {
			t.Fatalf("compensation %+v, want an ordinary one", cs)
		}
	})
}

// TestRecommendationFollowsUndosUnderWay: a case's recommendation follows
// the undos decided on it. After keep_and_undo of fld-2 it still said
// "compensate fld-2" while that undo ran — the form preselected it, and a
// second undo of fld-2 is refused; it waits for the undo now, and names
// fld-2 again once the undo failed. On a confirmed operation's extra
// resources, the one being undone is passed over for the next.
func TestRecommendationFollowsUndosUnderWay(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		recommends := func(t *testing.T, c *store.Case, action, ref, rationale string) {
			t.Helper()
			got, err := b.s.GetCase(b.ctx, c.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.RecommendedAction != action || got.RecommendedRef != ref || !strings.Contains(got.Rationale, rationale) {
				t.Errorf("case recommends %s %q (%s), want %s %q (%q)", got.RecommendedAction, got.RecommendedRef, got.Rationale, action, ref, rationale)
			}
		}

		t.Run("keep one, undo the other", func(t *testing.T) {
			c := b.reviewCase(t, "doc-keep-rec")
			recommends(t, c, review.RecommendCompensate, "fld-2", "keep fld-1")
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: "fld-2",
				Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "fld-1 is the one in use"}); err != nil {
				t.Fatal(err)
			}
			recommends(t, c, review.RecommendReconcileAgain, "", "undo of fld-2 is under way")
			cs, _ := b.s.Compensations(b.ctx, c.OperationID)
			child := &review.Operation{ID: cs[0].OperationID, Tenant: tenantA}
			b.start(t, child)
			b.report(t, child, 1, timeoutAfterSend) // in doubt: still under way
			recommends(t, c, review.RecommendReconcileAgain, "", "undo of fld-2 is under way")
		})

		t.Run("an undo that failed is to decide again", func(t *testing.T) {
			c := b.reviewCase(t, "doc-keep-fails")
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: "fld-2",
				Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "fld-1 is the one in use"}); err != nil {
				t.Fatal(err)
			}
			cs, _ := b.s.Compensations(b.ctx, c.OperationID)
			child := &review.Operation{ID: cs[0].OperationID, Tenant: tenantA}
			b.start(t, child)
			b.report(t, child, 1, httpError(422))
			wantState(t, b.get(t, &review.Operation{ID: c.OperationID, Tenant: tenantA}), review.NeedsReview)
			recommends(t, c, review.RecommendCompensate, "fld-2", "keep fld-1")
		})

		t.Run("extra resources of a confirmed operation", func(t *testing.T) {
			op := b.newOp(t, "doc-extra-rec", review.RiskCompensableWrite, "plain")
			b.start(t, op)
			b.report(t, op, 1, success("fld-1"))
			cand := func(ref string) review.Candidate {
				return review.Candidate{Ref: ref, Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID}
			}
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
				Candidates: []review.Candidate{cand("fld-1"), cand("fld-2"), cand("fld-3")}}, "integrator"); err != nil {
				t.Fatal(err)
			}
			cs, err := b.s.CasesForOperation(b.ctx, op.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases %+v, %v", cs, err)
			}
			c := &cs[0]
			recommends(t, c, review.RecommendCompensate, "fld-2", "keep fld-1")
			for _, ref := range []string{"fld-2", "fld-3"} {
				req := decideReq(c, review.DecideCompensate, "rita@example.com")
				req.Ref = ref
				if _, err := b.s.Decide(b.ctx, req); err != nil {
					t.Fatal(err)
				}
				if ref == "fld-2" {
					recommends(t, c, review.RecommendCompensate, "fld-3", "keep fld-1")
				}
			}
			recommends(t, c, review.RecommendReconcileAgain, "", "fld-2, fld-3")
			wantState(t, b.get(t, op), review.Confirmed)
		})
	})
}

// TestCompensationDoneNamesItsResource: on a case with several extra
// resources, each with an undo decided, a reviewer's compensation_done
// ("I undid it myself") names the resource it covers — by default the
// one the case is about, or the one undo under way; with several under
// way it must name one — and cancels only that one's pending undo: the
// other's is kept, runs, and its outcome settles the case, which stays
// open until then. Before, the word cancelled nothing and closed the
// case, leaving the other undo unwatched. A resource the operation does
// not have is refused.
func TestCompensationDoneNamesItsResource(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, c := b.twoExtras(t, "doc-extras")
		for _, ref := range []string{"fld-2", "fld-3"} {
			req := decideReq(c, review.DecideCompensate, "rita@example.com")
			req.Ref = ref
			if _, err := b.s.Decide(b.ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		undos := func() map[string]store.Compensation {
			ks, err := b.s.Compensations(b.ctx, op.ID)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]store.Compensation{}
			for _, k := range ks {
				out[k.ResourceRef] = k
			}
			return out
		}

		bad := decideReq(c, review.DecideCompensationDone, "rita@example.com")
		bad.Ref = "fld-9"
		if _, err := b.s.Decide(b.ctx, bad); !errors.Is(err, review.ErrInvalid) {
			t.Errorf("compensation_done naming fld-9, which the operation does not have: %v, want refused", err)
		}

		// With both undos under way the case recommends waiting for
		// them and names no resource: a word naming none is refused,
		// since which one a person undid by hand is theirs to say.
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensationDone, "rita@example.com")); !errors.Is(err, review.ErrInvalid) ||
			!strings.Contains(err.Error(), "fld-2, fld-3") {
			t.Errorf("compensation_done naming nothing while fld-2 and fld-3 are undone: %v, want refused, naming both", err)
		}
		// Rita deleted fld-2 by hand.
		done := decideReq(c, review.DecideCompensationDone, "rita@example.com")
		done.Ref = "fld-2"
		d, err := b.s.Decide(b.ctx, done)
		if err != nil {
			t.Fatal(err)
		}
		if d.ResourceRef != "fld-2" {
			t.Errorf("the decision names %q, want fld-2", d.ResourceRef)
		}
		ks := undos()
		if k := ks["fld-2"]; k.State != review.Failed || k.CanceledBy != "rita@example.com" {
			t.Errorf("fld-2's undo: %s, canceled by %q; want canceled by rita", k.State, k.CanceledBy)
		}
		if k := ks["fld-3"]; k.State != review.Pending || k.CanceledBy != "" {
			t.Errorf("fld-3's undo: %s, canceled by %q; want it kept, pending", k.State, k.CanceledBy)
		}
		if got, _ := b.s.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseOpen {
			t.Fatalf("the case is %s while fld-3's undo is pending; want open", got.Status)
		}
		wantState(t, b.get(t, op), review.Confirmed)

		// fld-3's undo runs; its confirmation settles the case.
		child := &review.Operation{ID: ks["fld-3"].OperationID, Tenant: tenantA}
		b.start(t, child)
		b.report(t, child, 1, success("fld-3"))
		if got, _ := b.s.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseResolved {
			t.Errorf("the case after fld-3's undo is %s, want resolved", got.Status)
		}
		assertSealed(t, b.s)
	})
}

// TestOneUndoneExtraDoesNotSettleTheOther: on a case about two extra
// resources, each with its undo under way, the first undo's confirmation
// resolved the case while the second was still pending; its failure then
// had no open case to land on. The case now waits for both: the first
// confirmation leaves it open, recommending to wait for the second, and
// the second's settles it.
func TestOneUndoneExtraDoesNotSettleTheOther(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, c := b.twoExtras(t, "doc-two-extras")
		undo := map[string]*review.Operation{}
		for _, ref := range []string{"fld-2", "fld-3"} {
			req := decideReq(c, review.DecideCompensate, "rita@example.com")
			req.Ref = ref
			d, err := b.s.Decide(b.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			undo[ref] = &review.Operation{ID: d.CompensationID, Tenant: tenantA}
		}
		b.start(t, undo["fld-2"])
		b.report(t, undo["fld-2"], 1, success("fld-2"))
		got, err := b.s.GetCase(b.ctx, c.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.CaseOpen {
			t.Fatalf("the case after fld-2's undo is %s (%s), while fld-3's is pending; want open", got.Status, got.Resolution)
		}
		if got.RecommendedRef == "fld-2" {
			t.Errorf("the case still recommends undoing fld-2, which is undone")
		}
		// fld-3's undo is refused: the case is open for it to land on.
		b.start(t, undo["fld-3"])
		b.report(t, undo["fld-3"], 1, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 403})
		got, _ = b.s.GetCase(b.ctx, c.ID, nil)
		if got.Status != store.CaseOpen || !slices.Contains(got.Reasons, review.ReasonCompensationFailed) {
			t.Fatalf("the case after fld-3's undo failed: %s %v, want open with compensation_failed", got.Status, got.Reasons)
		}
		wantState(t, b.get(t, op), review.Confirmed)
		assertSealed(t, b.s)
	})
}

// TestCompensationDoneOfAnotherResourceWaits: an operation compensating
// for its undo of fld-2 was moved to compensated by a compensation_done
// naming fld-1, a resource it also knows — fld-2's undo, not cancelled by
// a word about fld-1, kept running with its parent already compensated,
// and its failure reached nobody. Such a word is refused; naming fld-2
// settles the operation (and cancels its undo, not yet attempted).
func TestCompensationDoneOfAnotherResourceWaits(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		c := b.reviewCase(t, "doc-done-other")
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "rita@example.com")); err != nil {
			t.Fatal(err)
		}
		parent := &review.Operation{ID: c.OperationID, Tenant: tenantA}
		wantState(t, b.get(t, parent), review.Compensating)
		other := decideReq(c, review.DecideCompensationDone, "rita@example.com")
		other.Ref = "fld-1"
		_, err := b.s.Decide(b.ctx, other)
		if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), "waits for the undo of fld-2") {
			t.Fatalf("compensation_done naming fld-1 while fld-2 is undone: %v, want refused", err)
		}
		wantState(t, b.get(t, parent), review.Compensating)
		done := decideReq(c, review.DecideCompensationDone, "rita@example.com")
		done.Ref = "fld-2"
		if _, err := b.s.Decide(b.ctx, done); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, parent), review.Compensated)
		ks, err := b.s.Compensations(b.ctx, c.OperationID)
		if err != nil || len(ks) != 1 || ks[0].State != review.Failed || ks[0].CanceledBy != "rita@example.com" {
			t.Fatalf("fld-2's undo %+v, %v; want canceled by rita", ks, err)
		}
	})
}

// twoExtras confirms an operation with fld-1, then has a search find
// fld-2 and fld-3 for it too: two extra resources, one case about them,
// recommending to undo fld-2.
func (b *bundle) twoExtras(t *testing.T, source string) (*review.Operation, *store.Case) {
	t.Helper()
	op := b.newOp(t, source, review.RiskCompensableWrite, "plain")
	b.start(t, op)
	wantState(t, b.report(t, op, 1, success("fld-1")).Operation, review.Confirmed)
	var cands []review.Candidate
	for _, ref := range []string{"fld-1", "fld-2", "fld-3"} {
		cands = append(cands, review.Candidate{Ref: ref, Version: op.LogicalVersion, OperationID: op.ID})
	}
	if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
		Candidates: cands}, "integrator"); err != nil {
		t.Fatal(err)
	}
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil || len(cs) != 1 || cs[0].RecommendedRef != "fld-2" {
		t.Fatalf("cases %+v, %v; want one about fld-2", cs, err)
	}
	return op, &cs[0]
}

// TestReviewersUndoIsRemembered: a reviewer's word that a resource is
// undone (compensation_done naming it) is remembered as an undo Limbo made
// and confirmed would be: the resource is no longer the operation's
// effect, and a later search still listing it (some destinations list
// what was deleted or refunded) opens no case. Before, only a compensation
// that settled as confirmed was remembered; a word given before the undo
// was sent (which cancels it) or with none decided was not, and the next
// search opened a case on the resource the reviewer had just answered
// for — the word led back to the case it closed. On both engines.
func TestReviewersUndoIsRemembered(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		searchAgain := func(t *testing.T, op *review.Operation, refs ...string) {
			t.Helper()
			ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}
			for _, ref := range refs {
				ev.Candidates = append(ev.Candidates, mine(op, ref))
			}
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator"); err != nil {
				t.Fatal(err)
			}
			if n := openCases(t, b, op.ID); n != 0 {
				t.Errorf("a search listing %v after the word: %d open cases, want none", refs, n)
			}
		}

		// doneByHand says on c that fld-2 is undone, and wants op in state
		// want afterwards, fld-2 remembered as undone.
		doneByHand := func(t *testing.T, c *store.Case, op *review.Operation, want review.State) *review.Operation {
			t.Helper()
			done := decideReq(c, review.DecideCompensationDone, "rita@example.com")
			done.Ref, done.Reason = "fld-2", "deleted it myself"
			if _, err := b.s.Decide(b.ctx, done); err != nil {
				t.Fatal(err)
			}
			got := b.get(t, op)
			wantState(t, got, want)
			if !slices.Contains(got.Undone, "fld-2") {
				t.Errorf("undone %v, want fld-2", got.Undone)
			}
			return got
		}

		t.Run("keep one, the other undone by hand", func(t *testing.T) {
			c := b.reviewCase(t, "doc-remembered-keep")
			op := &review.Operation{ID: c.OperationID, Tenant: tenantA}
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: "fld-1", UndoRef: "fld-2",
				Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "fld-1 is the one in use"}); err != nil {
				t.Fatal(err)
			}
			// Deleted by hand before the integrator ran the undo: the word
			// cancels it.
			got := doneByHand(t, c, op, review.Confirmed)
			searchAgain(t, got, "fld-1", "fld-2")
		})

		t.Run("an undo decided, then done by hand", func(t *testing.T) {
			c := b.reviewCase(t, "doc-remembered-undo")
			op := &review.Operation{ID: c.OperationID, Tenant: tenantA}
			undo := decideReq(c, review.DecideCompensate, "rita@example.com")
			undo.Ref, undo.Compensation = "fld-2", "delete the folder"
			if _, err := b.s.Decide(b.ctx, undo); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, op), review.Compensating)
			got := doneByHand(t, c, op, review.Compensated)
			searchAgain(t, got, "fld-2")
			// Another resource of the operation is an effect nobody
			// answers for: a person looks.
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
				Candidates: []review.Candidate{mine(got, "fld-2"), mine(got, "fld-9")}}, "integrator"); err != nil {
				t.Fatal(err)
			}
			if n := openCases(t, b, op.ID); n != 1 {
				t.Errorf("a search listing fld-9 too: %d open cases, want one", n)
			}
		})
	})
}

// TestEvidenceWhileUndoing: an operation being undone moves on no
// evidence, so an effect shown while the undo runs — by an integrator's
// look, or by an earlier attempt's job that succeeds — is put to a person
// once the undo settles it: the operation is compensated, yet the
// destination holds an effect nobody answers for. What was on the record
// when the undo was decided (the candidate the reviewer left) opens
// nothing.
func TestEvidenceWhileUndoing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		undo := func(t *testing.T, c *store.Case, ref string) *review.Operation {
			t.Helper()
			req := decideReq(c, review.DecideCompensate, "rita@example.com")
			req.Ref = ref
			if _, err := b.s.Decide(b.ctx, req); err != nil {
				t.Fatal(err)
			}
			parent := b.get(t, &review.Operation{ID: c.OperationID, Tenant: tenantA})
			wantState(t, parent, review.Compensating)
			return parent
		}
		runUndo := func(t *testing.T, parent *review.Operation, ref string) {
			t.Helper()
			cs, err := b.s.Compensations(b.ctx, parent.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("compensations %+v, %v", cs, err)
			}
			child := &review.Operation{ID: cs[0].OperationID, Tenant: tenantA}
			b.start(t, child)
			b.report(t, child, 1, success(ref))
			wantState(t, b.get(t, parent), review.Compensated)
		}
		// look submits a search naming ref for op, as an integrator's look.
		look := func(t *testing.T, op *review.Operation, ref string) *review.Operation {
			t.Helper()
			ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
				{Ref: ref, Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID}}}
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		openCases := func(t *testing.T, opID string) []store.Case {
			t.Helper()
			cs, err := b.s.CasesForOperation(b.ctx, opID)
			if err != nil {
				t.Fatal(err)
			}
			return slices.DeleteFunc(cs, func(c store.Case) bool { return c.Status != store.CaseOpen })
		}
		wantExtra := func(t *testing.T, parent *review.Operation, ref string) {
			t.Helper()
			open := openCases(t, parent.ID)
			if len(open) != 1 || !slices.Contains(open[0].Reasons, review.ReasonMultipleCands) {
				t.Fatalf("open cases after the undo: %+v, want one about %s", open, ref)
			}
			if open[0].RecommendedAction != review.RecommendCompensate || open[0].RecommendedRef != ref {
				t.Errorf("the case recommends %s %s (%s), want the undo of %s", open[0].RecommendedAction, open[0].RecommendedRef, open[0].Rationale, ref)
			}
			if acts := countActions(b.history(t, parent.ID)); acts["evidence.extra_effect"] != 1 {
				t.Errorf("parent's audit = %v", acts)
			}
		}

		t.Run("nothing new: the undo settles it", func(t *testing.T) {
			c := b.reviewCase(t, "doc-undo-quiet")
			parent := undo(t, c, "fld-2")
			b.clk.Advance(time.Minute)
			// fld-1 again: the reviewer decided knowing of it.
			look(t, parent, "fld-1")
			runUndo(t, parent, "fld-2")
			if open := openCases(t, parent.ID); len(open) != 0 {
				t.Errorf("open cases %+v: fld-1 was on the record when the undo was decided", open)
			}
		})

		t.Run("an integrator's look names another resource", func(t *testing.T) {
			c := b.reviewCase(t, "doc-undo-look")
			parent := undo(t, c, "fld-2")
			b.clk.Advance(time.Minute)
			got := look(t, parent, "fld-3")
			wantState(t, got, review.Compensating)
			runUndo(t, parent, "fld-2")
			wantExtra(t, parent, "fld-3")
		})

		t.Run("a reviewer's word settles the undo", func(t *testing.T) {
			c := b.reviewCase(t, "doc-undo-word")
			parent := undo(t, c, "fld-2")
			b.clk.Advance(time.Minute)
			look(t, parent, "fld-3")
			b.clk.Advance(time.Minute)
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensationDone, Actor: "rita@example.com",
				Reason: "deleted fld-2 in the provider's console"}); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, parent), review.Compensated)
			wantExtra(t, parent, "fld-3")
		})

		t.Run("an earlier attempt's job succeeds", func(t *testing.T) {
			op, c := deadlinePassedBesideJob(t, b, "doc-undo-job", "job-1-doc-undo-job", nil)
			look(t, op, "fld-1")
			parent := undo(t, &c, "fld-1")
			b.clk.Advance(time.Minute)
			got, err := b.s.PutJob(b.ctx, tenantA, op.ID, review.Job{Ref: "job-1-doc-undo-job", Status: review.JobSucceeded, OutputRef: "file-1"}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.Compensating)
			runUndo(t, parent, "fld-1")
			wantExtra(t, parent, "file-1")
		})
		assertSealed(t, b.s)
	})
}
