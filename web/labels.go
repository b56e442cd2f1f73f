package web

import (
	"context"
	"strings"

	"github.com/limbo-dev/limbo/review"
)

// Human labels for the ledger's words. The raw value stays in the API and
// in each badge's title; a person reads the label. A value without a label
// (a later enum member) is shown raw rather than hidden.

var stateLabels = map[review.State]string{
	review.AwaitingApproval: "Awaiting approval",
	review.Pending:          "Pending",
	review.InFlight:         "In flight",
	review.RetryWait:        "Waiting to retry",
	review.Ambiguous:        "Outcome unknown",
	review.Accepted:         "Accepted, running",
	review.NeedsReview:      "Needs review",
	review.Compensating:     "Being undone",
	review.Confirmed:        "Confirmed",
	review.Compensated:      "Undone",
	review.Failed:           "Failed",
}

// stateTone is the colour family of a state's badge (the text says the
// state; the colour only repeats it).
var stateTone = map[review.State]string{
	review.AwaitingApproval: "attention",
	review.Pending:          "neutral",
	review.InFlight:         "progress",
	review.RetryWait:        "progress",
	review.Ambiguous:        "attention",
	review.Accepted:         "progress",
	review.NeedsReview:      "attention",
	review.Compensating:     "progress",
	review.Confirmed:        "good",
	review.Compensated:      "neutral",
	review.Failed:           "bad",
}

var riskLabels = map[review.Risk]string{
	review.RiskRead:             "Read only",
	review.RiskGenerate:         "Generates content",
	review.RiskIdempotentWrite:  "Idempotent write",
	review.RiskCompensableWrite: "Write that can be undone",
	review.RiskIrreversible:     "Irreversible",
}

var reasonLabels = map[review.Reason]string{
	review.ReasonFinancial:          "Moves money",
	review.ReasonIrreversible:       "Cannot be undone",
	review.ReasonRegulated:          "Regulated",
	review.ReasonSourcesDisagree:    "Sources disagree",
	review.ReasonDeadlineExpired:    "Deadline passed",
	review.ReasonNoDedupEvidence:    "No way to check for duplicates",
	review.ReasonPayloadMismatch:    "Payload differs",
	review.ReasonMultipleCands:      "Possible duplicates",
	review.ReasonVersionMismatch:    "Version differs",
	review.ReasonStateConflict:      "Conflicting states",
	review.ReasonBudgetExhausted:    "Retry budget used up",
	review.ReasonCompensationFailed: "Undo failed",
	review.ReasonApprovalRequired:   "Approval required",
	review.ReasonDependencyFailed:   "Dependency failed",
}

var actionLabels = map[string]string{
	review.DecideConfirm:            "Confirm",
	review.DecideCompensate:         "Undo",
	review.DecideApproveRetry:       "Approve a retry",
	review.DecideFail:               "Mark failed",
	review.DecideCompensationDone:   "Undo done",
	review.DecideCompensationFailed: "Undo failed",
	review.DecideApprove:            "Approve",
	review.DecideRefuse:             "Refuse",
	review.DecideKeepAndUndo:        "Keep one, undo the other",
	review.RecommendReconcileAgain:  "Check again",
	review.RecommendReviewPayload:   "Review the payload",
	review.RecommendUndoByHand:      "Undo by hand",
}

// StateLabel is a state as a person reads it.
func StateLabel(ctx context.Context, s review.State) string {
	if l, ok := stateLabels[s]; ok {
		return T(ctx, l)
	}
	return string(s)
}

// StateInProse is a state as it reads inside a sentence ("the operation
// stays failed"): the label, lower-cased; labels are capitalised for
// badges and menus.
func StateInProse(ctx context.Context, s review.State) string {
	return strings.ToLower(StateLabel(ctx, s))
}

// StateTone is the colour family of a state's badge.
func StateTone(s review.State) string {
	if t, ok := stateTone[s]; ok {
		return t
	}
	return "neutral"
}

// RiskLabel is a risk class as a person reads it.
func RiskLabel(ctx context.Context, r review.Risk) string {
	if l, ok := riskLabels[r]; ok {
		return T(ctx, l)
	}
	return string(r)
}

// ReasonLabel is an escalation reason as a person reads it.
func ReasonLabel(ctx context.Context, r review.Reason) string {
	if l, ok := reasonLabels[r]; ok {
		return T(ctx, l)
	}
	return string(r)
}

// ActionLabel is a decision action or recommendation as a person reads it.
func ActionLabel(ctx context.Context, a string) string {
	if l, ok := actionLabels[a]; ok {
		return T(ctx, l)
	}
	return a
}
