package chaos

// The reviewer of `limbo chaos`: once the integrations are done, a person
// resolves the duplicates the run left in review as the recommendation
// says — keep one, undo the other — and a confirmed operation's extra
// resource by compensating it. Limbo's undo worker then runs each undo
// against the faulty sandbox (DELETE /resources/{ref}: lost answers,
// 500-after-commit, 429…), and the check holds every duplicate to the
// sandbox's truth: undone there, or still in an open case.

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
)

// chaosReviewer is who decides in the ledger.
const chaosReviewer = "chaos-reviewer@example.com"

// reviewDuplicates decides, once each, the open cases of the run's
// operations that a duplicate put there, then waits (up to settle) for
// the compensations it asked for to settle. It returns how many decisions
// it made. A case it cannot decide as recommended (more than two
// candidates, a recommendation that undoes nothing) stays open.
func reviewDuplicates(ctx context.Context, st *store.Store, igs []*integrator, d review.Destination, settle time.Duration, log *slog.Logger) (int, error) {
	ours := map[string]bool{}
	for _, ig := range igs {
		for _, it := range ig.work {
			if it.opID != "" {
				ours[it.opID] = true
			}
		}
	}
	cases, err := st.OpenCases(ctx, 1<<30)
	if err != nil {
		return 0, err
	}
	decided := 0
	var parents []string
	for _, c := range cases {
		if !ours[c.OperationID] || !slices.Contains(c.Reasons, review.ReasonMultipleCands) {
			continue
		}
		op, err := st.OperationByID(ctx, c.OperationID, nil)
		if err != nil {
			return decided, err
		}
		req, ok := undoDecision(&c, op, st.Now())
		if !ok {
			continue
		}
		if _, err := st.Decide(ctx, req); err != nil {
			// Moved on meanwhile (a late outcome, the confirm window): the
			// case says so and stays for a person.
			log.Info("chaos: reviewer could not decide", "case", c.ID, "err", err)
			continue
		}
		decided++
		parents = append(parents, op.ID)
	}
	log.Info("chaos: reviewer decided duplicates", "decisions", decided)
	if decided == 0 {
		return 0, nil
	}
	if err := awaitCompensations(ctx, st, parents, settle, log); err != nil {
		return decided, err
	}
	// A parent confirmed once its duplicate was undone is watched again
	// (a third resource may surface late): judge once that window closed.
	if w := d.Window(); w > 0 && !simulate.Pause(ctx, w+4*app.ReconcileEvery+time.Second) {
		return decided, ctx.Err()
	}
	return decided, nil
}

// undoDecision is the decision the recommendation asks for on case c of
// op, when it undoes a duplicate: keep_and_undo of the two candidates
// naming it (in review), or compensate of the extra resource (confirmed).
func undoDecision(c *store.Case, op *review.Operation, now time.Time) (store.DecisionRequest, bool) {
	rec := review.Assess(op, c.Reasons, now).Recommendation
	req := store.DecisionRequest{CaseID: c.ID, Actor: chaosReviewer, Compensation: "DELETE /resources/" + rec.Ref,
		Reason: "chaos reviewer: as recommended (" + rec.Rationale + ")"}
	if rec.Action != review.RecommendCompensate || rec.Ref == "" {
		return req, false
	}
	switch {
	case op.State == review.NeedsReview && rec.Keep != "" && len(review.MatchingRefs(op)) == 2:
		req.Action, req.Ref, req.UndoRef = review.DecideKeepAndUndo, rec.Keep, rec.Ref
	case op.State == review.Confirmed && len(review.MatchingRefs(op)) == 2:
		req.Action, req.Ref = review.DecideCompensate, rec.Ref
	default:
		return req, false
	}
	return req, true
}

// awaitCompensations waits until every compensation of parents has
// settled (confirmed, failed, or in review for a person), or settle has
// passed.
func awaitCompensations(ctx context.Context, st *store.Store, parents []string, settle time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(settle)
	for {
		open := 0
		for _, p := range parents {
			cs, err := st.Compensations(ctx, p)
			if err != nil {
				return err
			}
			for _, k := range cs {
				// In review, the undo waits for a person: settled for now.
				if !k.State.Terminal() && k.State != review.NeedsReview {
					open++
				}
			}
		}
		if open == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			log.Warn("chaos: compensations still unsettled after --settle", "open", open)
			return nil
		}
		if !simulate.Pause(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}
