package reconcile_test

import (
	"slices"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// The confirm window (issue 12, ★ and hole 16), against the sandbox on
// loopback whose real search lag (8 s) is four times what Limbo is told
// (searchLag, 2 s): the window is 10 × 2 s = 20 s.
const realLag = 8 * time.Second

// lyingSandbox: a sandbox that lags longer than configured and does not
// honour keys, so a retry makes a second folder.
func lyingSandbox(t *testing.T, e store.Engine) *testBundle {
	return setup(t, e, sandbox.Options{SearchLag: realLag, NoKeySupport: true}, nil)
}

// retryOnAbsence takes an ambiguous operation whose first folder the
// sandbox does not show yet past the configured lag to a retry, and
// confirms it with the retry's folder, which it returns.
func (b *testBundle) retryOnAbsence(t *testing.T, op *review.Operation) string {
	t.Helper()
	b.clk.Advance(searchLag + time.Second)
	b.runOnce(t, 1)
	wantState(t, b.get(t, op), review.RetryWait)
	g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatalf("the retry after proven absence: %v", err)
	}
	second := b.createFolder(t, op)
	res, err := b.st.RecordOutcome(b.ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
		HTTPStatus: 201, Resource: &review.ResourceRef{Ref: second, Kind: "folder", Version: "v1"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, res.Operation, review.Confirmed)
	return second
}

// rounds runs reconciliation rounds every step until d has passed.
func (b *testBundle) rounds(t *testing.T, d, step time.Duration) {
	t.Helper()
	for end := b.clk.Now().Add(d); b.clk.Now().Before(end); {
		b.clk.Advance(step)
		if _, err := b.rec.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConfirmWindowCatchesALateDuplicate: the first folder shows only
// after the retry made a second. Before, nothing probed again: two folders,
// the operation confirmed, no case. Now the watch finds the first while
// the window is open and opens a multiple_candidates case on the confirmed
// operation, recommending the undo of the extra; a reviewer compensates it
// and says when it is undone, and the case closes with the operation still
// confirmed.
func TestConfirmWindowCatchesALateDuplicate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := lyingSandbox(t, e)
		var first string
		op := b.ambiguous(t, "folder-late", "sandbox", func(op *review.Operation) { first = b.createFolder(t, op) })
		second := b.retryOnAbsence(t, op)

		b.rounds(t, realLag, time.Second)
		got := b.get(t, op)
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != second {
			t.Errorf("confirmed with %+v, want the retry's %s", got.Resource, second)
		}
		cs, err := b.st.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Status != store.CaseOpen || !slices.Contains(cs[0].Reasons, review.ReasonMultipleCands) {
			t.Fatalf("cases %+v, want one open multiple_candidates case", cs)
		}
		c := cs[0]
		if c.RecommendedAction != review.RecommendCompensate || c.RecommendedRef != first {
			t.Errorf("recommendation %s %s, want compensate %s (the extra; %s is confirmed)", c.RecommendedAction, c.RecommendedRef, first, second)
		}
		if on := review.DecidesOn(got.State, c.Reasons); on != review.OnExtraEffect {
			t.Fatalf("decisions on the case act on %q, want %q", on, review.OnExtraEffect)
		}

		// A retry or a fail makes no sense here; the undo does.
		if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideApproveRetry, Reason: "try again", Actor: "reviewer"}); err == nil {
			t.Errorf("approve_retry on a confirmed operation's extra resource was taken")
		}
		if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensate, Ref: first,
			Compensation: "delete " + first + ", the duplicate", Reason: "two folders", Actor: "reviewer"}); err != nil {
			t.Fatal(err)
		}
		if cs, _ := b.st.CasesForOperation(b.ctx, op.ID); cs[0].Status != store.CaseOpen {
			t.Errorf("the case closed at compensate; it waits for the undo")
		}
		if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensationDone, Ref: first,
			Reason: "deleted it", Actor: "reviewer"}); err != nil {
			t.Fatal(err)
		}
		if cs, _ := b.st.CasesForOperation(b.ctx, op.ID); cs[0].Status == store.CaseOpen {
			t.Errorf("the case is still open after compensation_done")
		}
		wantState(t, b.get(t, op), review.Confirmed)

		// The watch is over: nothing more is claimed for it.
		b.clk.Advance(time.Minute)
		b.runOnce(t, 0)
		sealed(t, b.st)
	})
}

// TestConfirmWindowEnds: at a destination that lags as it says, the
// watch looks until the window closes, finds only the confirmed folder,
// opens nothing, and stops.
func TestConfirmWindowEnds(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag, NoKeySupport: true}, nil)
		op := b.ambiguous(t, "folder-once", "sandbox", nil)
		b.retryOnAbsence(t, op)
		b.rounds(t, 10*searchLag+time.Second, time.Second)
		if cs, _ := b.st.CasesForOperation(b.ctx, op.ID); len(cs) != 0 {
			t.Errorf("cases %+v at a destination with one folder", cs)
		}
		wantState(t, b.get(t, op), review.Confirmed)
		b.clk.Advance(time.Minute)
		b.runOnce(t, 0)
		sealed(t, b.st)
	})
}

// TestAbsenceFailsOnlyAfterTheWindow: an operation whose attempt budget is
// spent would be failed by the first proof of absence — final, though the
// lying destination shows its folder 8 s later. It stays ambiguous until
// the window has passed: the folder shows, and it is confirmed; where
// nothing shows, it is failed then.
func TestAbsenceFailsOnlyAfterTheWindow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := lyingSandbox(t, e)
		one := 1
		spent := func(ref string, created func(*review.Operation)) *review.Operation {
			op := b.ambiguousWith(t, ref, "sandbox", created, nil, &one)
			return op
		}
		made := spent("folder-made", func(op *review.Operation) { b.createFolder(t, op) })
		never := spent("folder-never", nil)
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, 2)
		wantState(t, b.get(t, made), review.Ambiguous)
		wantState(t, b.get(t, never), review.Ambiguous)

		b.rounds(t, 10*searchLag, time.Second)
		wantState(t, b.get(t, made), review.Confirmed)
		got := b.get(t, never)
		wantState(t, got, review.Failed)
		sealed(t, b.st)
	})
}

// TestAbsenceAsksForApprovalOnlyAfterTheWindow: an irreversible operation
// whose search shows nothing past the configured lag. Before, it went to a
// reviewer at once, recommending approve_retry — and the fault run found
// every such recommendation wrong on a destination lagging longer than it
// says: the send had happened, and approving would send again. Now the
// reconciler holds it until the confirm window has passed: the late write
// shows and confirms it, and only an operation with nothing there by then
// asks for approval.
func TestAbsenceAsksForApprovalOnlyAfterTheWindow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := lyingSandbox(t, e)
		made := b.ambiguousAs(t, "sent", "sandbox", review.RiskIrreversible, func(op *review.Operation) { b.createFolder(t, op) }, nil, nil)
		never := b.ambiguousAs(t, "never-sent", "sandbox", review.RiskIrreversible, nil, nil, nil)
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, 2)
		wantState(t, b.get(t, made), review.Ambiguous)
		wantState(t, b.get(t, never), review.Ambiguous)

		b.rounds(t, 10*searchLag, time.Second)
		wantState(t, b.get(t, made), review.Confirmed)
		got := b.get(t, never)
		wantState(t, got, review.NeedsReview)
		cs, err := b.st.CasesForOperation(b.ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].RecommendedAction != review.RecommendApproveRetry {
			t.Errorf("cases %+v, want one recommending approve_retry once absence is sure", cs)
		}
		sealed(t, b.st)
	})
}
