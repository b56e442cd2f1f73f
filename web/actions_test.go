package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// TestApprovalTextCountsTheSecondReviewer: the policy page says how many
// reviewers approving takes, as deciding counts them
// (review.Destination.ApprovalsNeeded): an irreversible, financial or
// regulated action needs two even when its policy says approvals: 1 or
// nothing. It said "1 reviewer(s)" for them.
func TestApprovalTextCountsTheSecondReviewer(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		ac   review.ActionConfig
		want string
	}{
		{review.ActionConfig{RequiresApproval: true}, "1 reviewer(s) approve before it runs"},
		{review.ActionConfig{RequiresApproval: true, Approvals: 3}, "3 reviewer(s) approve before it runs"},
		{review.ActionConfig{RequiresApproval: true, Risk: review.RiskIrreversible}, "2 reviewer(s) approve before it runs"},
		{review.ActionConfig{RequiresApproval: true, Approvals: 1, Flags: []review.Flag{review.FlagFinancial}}, "2 reviewer(s) approve before it runs"},
		{review.ActionConfig{RequiresApproval: true, Flags: []review.Flag{review.FlagRegulated}, ApprovalTimeout: time.Hour}, "2 reviewer(s) approve before it runs, within 1 h"},
		{review.ActionConfig{Risk: review.RiskIrreversible}, "none"},
	} {
		if got := approvalText(ctx, tt.ac); got != tt.want {
			t.Errorf("approvalText(%+v) = %q, want %q", tt.ac, got, tt.want)
		}
		// The page agrees with deciding: an operation the policy made.
		if tt.ac.RequiresApproval {
			op := &review.Operation{Action: "a", Risk: tt.ac.Risk, Flags: tt.ac.Flags}
			d := review.Destination{Actions: map[string]review.ActionConfig{"a": tt.ac}}
			if n := review.PolicyApprovals(tt.ac); n != d.ApprovalsNeeded(op) {
				t.Errorf("%+v: the page says %d, deciding needs %d", tt.ac, n, d.ApprovalsNeeded(op))
			}
		}
	}
}

// TestRiskTextShowsFlagsWithoutRisk: a policy that states flags but no
// risk shows its flags: they apply to every operation of the action (and
// make approving take two reviewers). The row said only "not stated".
func TestRiskTextShowsFlagsWithoutRisk(t *testing.T) {
	ctx := context.Background()
	if got := riskText(ctx, review.ActionConfig{Flags: []review.Flag{review.FlagFinancial}}); got != "not stated, "+strings.ToLower(FlagLabel(ctx, review.FlagFinancial)) {
		t.Errorf("flags without a risk read %q", got)
	}
	if got := riskText(ctx, review.ActionConfig{}); got != "" {
		t.Errorf("no risk, no flags read %q, want nothing (the row says not stated)", got)
	}
	if got := riskText(WithLang(ctx, "it"), review.ActionConfig{Flags: []review.Flag{review.FlagRegulated}}); strings.Contains(got, "not stated") {
		t.Errorf("in Italian: %q", got)
	}
}
