package review_test

import (
	"testing"

	"github.com/limbo-dev/limbo/review"
)

func TestScoreRecommendations(t *testing.T) {
	t.Parallel()
	write := func(id string) *review.Operation {
		return &review.Operation{ID: id, Risk: review.RiskCompensableWrite, Action: "upload_file", LogicalVersion: "1", State: review.NeedsReview}
	}
	effect := func(op, version, ref string) review.TrueEffect {
		return review.TrueEffect{OperationID: op, LogicalVersion: version, Ref: ref}
	}
	truth := review.Truth{Effects: []review.TrueEffect{
		effect("one", "1", "r1"),
		effect("two", "1", "a"), effect("two", "1", "b"),
		effect("old", "2", "new"), effect("old", "1", "stale"),
		{OperationID: "undone", LogicalVersion: "1", Ref: "u", Compensated: true},
	}}
	rec := func(action, ref string) review.Recommendation { return review.Recommendation{Action: action, Ref: ref} }
	for _, c := range []struct {
		name  string
		op    string
		rec   review.Recommendation
		right bool
	}{
		{"confirm the one effect", "one", rec(review.RecommendConfirm, "r1"), true},
		{"confirm a ref the destination lacks", "one", rec(review.RecommendConfirm, "zz"), false},
		{"confirm one of two duplicates", "two", rec(review.RecommendConfirm, "a"), false},
		{"compensate a duplicate", "two", rec(review.RecommendCompensate, "b"), true},
		{"compensate the only effect", "one", rec(review.RecommendCompensate, "r1"), false},
		{"compensate the only effect of a failed operation", "one failed", rec(review.RecommendCompensate, "r1"), true},
		{"compensate another version's effect", "old", rec(review.RecommendCompensate, "stale"), true},
		{"approve a retry with nothing there", "none", rec(review.RecommendApproveRetry, ""), true},
		{"approve a retry after an undone effect", "undone", rec(review.RecommendApproveRetry, ""), true},
		{"approve a retry with the effect there", "one", rec(review.RecommendApproveRetry, ""), false},
		{"fail with the effect there", "one", rec(review.RecommendFail, ""), false},
		{"fail with nothing there", "none", rec(review.RecommendFail, ""), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := write(c.op)
			if c.op == "old" {
				o.LogicalVersion = "2"
			}
			if c.op == "one failed" {
				// Its integrator was told the effect did not happen: the
				// effect is one nobody answers for.
				o.ID, o.State = "one", review.Failed
			}
			s := review.ScoreRecommendations(review.Ledger{Operations: []*review.Operation{o}}, map[string]review.Recommendation{o.ID: c.rec}, truth)
			if s.Scored != 1 || (s.Correct == 1) != c.right {
				t.Errorf("score %+v, want correct=%t", s, c.right)
			}
		})
	}
	s := review.ScoreRecommendations(review.Ledger{Operations: []*review.Operation{write("one"), write("two")}},
		map[string]review.Recommendation{"one": rec(review.RecommendReconcileAgain, "")}, truth)
	if s.Scored != 0 || s.Undecided != 1 || s.Share() != 1 {
		t.Errorf("reconcile_again and no case: %+v", s)
	}
}
