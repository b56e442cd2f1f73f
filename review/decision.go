package review

import (
	"fmt"
	"slices"
	"strings"
)

// Decision actions a reviewer may take on a case (SPEC "Decision").
const (
	DecideConfirm      = "confirm"
	DecideCompensate   = "compensate"
	DecideApproveRetry = "approve_retry"
	DecideFail         = "fail"
	// DecideCompensationDone and DecideCompensationFailed are a reviewer's
	// word on an undo decided earlier (the operation is compensating): it
	// happened (→ compensated, the reviewer's evidence), or it did not
	// (→ needs_review, reason compensation_failed). They stand in for the
	// tracked compensation operation SPEC describes until it exists, and
	// are named apart from confirm and fail because integrators read those
	// as "the effect is this resource" and "the effect did not happen".
	DecideCompensationDone   = "compensation_done"
	DecideCompensationFailed = "compensation_failed"
	// DecideApprove and DecideRefuse answer an approval case: the action
	// may run (→ pending, once every approval its policy asks for is
	// given), or it may not (→ failed).
	DecideApprove = "approve"
	DecideRefuse  = "refuse"
	// DecideKeepAndUndo resolves a duplicate in one decision: keep one
	// resource (the operation's effect) and undo another, tracked as a
	// compensation operation; the operation is confirmed with the kept
	// resource once the undo is confirmed.
	DecideKeepAndUndo = "keep_and_undo"
)

// DecisionTarget is the state a decision moves the operation to.
func DecisionTarget(action string) (State, error) {
	switch action {
	case DecideConfirm:
		return Confirmed, nil
	case DecideCompensate:
		// Not compensated yet: nothing shows the undo happened.
		return Compensating, nil
	case DecideApproveRetry:
		return RetryWait, nil
	case DecideFail:
		return Failed, nil
	case DecideCompensationDone:
		return Compensated, nil
	case DecideCompensationFailed:
		return NeedsReview, nil
	case DecideApprove:
		return Pending, nil
	case DecideKeepAndUndo:
		return Compensating, nil
	case DecideRefuse:
		return Failed, nil
	}
	return "", fmt.Errorf("%w: action must be confirm, compensate, approve_retry, fail, compensation_done, compensation_failed, approve, refuse or keep_and_undo", ErrInvalid)
}

// KeepsCaseOpen reports whether a decision leaves its case open: after
// compensate or keep_and_undo the operation waits for its undo, and the
// case is resolved once that is confirmed (or back in review on it if it
// fails); after compensation_failed the operation is back in review on it.
func KeepsCaseOpen(action string) bool {
	return action == DecideCompensate || action == DecideKeepAndUndo || action == DecideCompensationFailed
}

// DecisionScope is what a decision on a case acts upon.
type DecisionScope string

const (
	// OnOperation: the operation waits for a person (needs_review, or
	// compensating for a reviewer's word on the undo), so a decision moves it.
	OnOperation DecisionScope = "operation"
	// OnRefusedPayload: the case is about a payload refused under the
	// operation's key (payload_mismatch) while the operation itself is
	// elsewhere in its life — pending, in flight, ambiguous, retrying,
	// accepted, awaiting approval or settled. Nobody asked a person about
	// the operation, so a decision is a verdict on the refused payload and
	// moves nothing.
	OnRefusedPayload DecisionScope = "refused_payload"
	// OnExtraEffect: the operation is settled, and the destination later
	// showed a resource for it that nobody answers for (ExtraEffects):
	// another beside the confirmed one (multiple_candidates), or one at
	// all of a failed operation (state_conflict) or of a compensated one
	// (multiple_candidates). The settled state stands; a decision is about
	// the extra resource: compensate it (the case stays open until the
	// undo is done), or say it was undone.
	OnExtraEffect DecisionScope = "extra_effect"
	// OnApproval: the operation awaits approval before it runs
	// (approval_required); a decision approves or refuses it.
	OnApproval DecisionScope = "approval"
)

// DecidesOn says what decisions on a case with these reasons act upon
// while its operation is in state, or "" when no decision applies.
//
// Decisions happen only where a person is asked: an operation moves by a
// decision only from needs_review (SPEC "Operation states"), or from
// compensating, where a reviewer says whether the undo happened; and from
// awaiting_approval, where only approve and refuse apply.
//
// A payload_mismatch case whose operation is elsewhere stays open, and
// reviewable, even once the operation settles: the operation's outcome
// says nothing about the refused payload — an intention that may never
// have run because its key was reused — and closing the case on its own
// would drop the only sign of it.
func DecidesOn(state State, reasons []Reason) DecisionScope {
	switch {
	case state == AwaitingApproval && slices.Contains(reasons, ReasonApprovalRequired):
		return OnApproval
	case state == NeedsReview, state == Compensating:
		return OnOperation
	case state == Confirmed && slices.Contains(reasons, ReasonMultipleCands):
		return OnExtraEffect
	case state == Compensated && slices.Contains(reasons, ReasonMultipleCands),
		state == Failed && slices.Contains(reasons, ReasonStateConflict):
		return OnExtraEffect
	case slices.Contains(reasons, ReasonPayloadMismatch):
		return OnRefusedPayload
	}
	return ""
}

// DecisionsAllowed lists the actions a case with these reasons allows
// while its operation is in state, in the order a form offers them
// (before any role check).
func DecisionsAllowed(state State, reasons []Reason) []string {
	switch DecidesOn(state, reasons) {
	case OnOperation:
		if state == Compensating {
			return []string{DecideCompensationDone, DecideCompensationFailed}
		}
		if slices.Contains(reasons, ReasonMultipleCands) {
			return []string{DecideKeepAndUndo, DecideConfirm, DecideCompensate, DecideApproveRetry, DecideFail}
		}
		return []string{DecideConfirm, DecideCompensate, DecideApproveRetry, DecideFail}
	case OnRefusedPayload:
		// "fail" is the one verdict that means something for a refused
		// payload: it will not run under this key. Confirming, compensating
		// or retrying would be about the operation, which nobody asked about.
		return []string{DecideFail}
	case OnExtraEffect:
		return []string{DecideCompensate, DecideCompensationDone}
	case OnApproval:
		return []string{DecideApprove, DecideRefuse}
	}
	return nil
}

// CheckDecision says whether action may be taken on a case with these
// reasons while its operation is in state, and what it acts upon. A
// refusal wraps ErrInvalidTransition and says what is possible instead.
func CheckDecision(state State, reasons []Reason, action string) (DecisionScope, error) {
	on := DecidesOn(state, reasons)
	if slices.Contains(DecisionsAllowed(state, reasons), action) {
		return on, nil
	}
	switch on {
	case OnApproval:
		return "", fmt.Errorf("%w: the operation awaits approval before it runs: approve or refuse it, not %s", ErrInvalidTransition, action)
	case OnRefusedPayload:
		return "", fmt.Errorf("%w: %s decides an operation in needs_review, and this one is %s: the case is about a payload refused under its key, "+
			"and fail (the refused payload will not run) is the only verdict on it; the operation goes its own way", ErrInvalidTransition, action, state)
	case OnExtraEffect:
		return "", fmt.Errorf("%w: the operation is %s and the case is about an extra resource: compensate it, or say the undo is done (compensation_done), not %s",
			ErrInvalidTransition, state, action)
	case OnOperation:
		if state == Compensating {
			return "", fmt.Errorf("%w: the operation is compensating: say whether the undo happened (compensation_done) or not (compensation_failed), not %s",
				ErrInvalidTransition, action)
		}
		return "", fmt.Errorf("%w: %s applies only to an operation that is compensating; this one is %s", ErrInvalidTransition, action, state)
	}
	return "", fmt.Errorf("%w: the operation is %s: a decision applies only to an operation in needs_review", ErrInvalidTransition, state)
}

// ValidateDecision checks the fields each action needs: always a reason
// (NormalizeReason); confirm names the resource; compensate says what is
// undone and how. Fields are judged trimmed, as they are recorded.
func ValidateDecision(action, ref, compensation, reason string) error {
	if _, err := DecisionTarget(action); err != nil {
		return err
	}
	if _, err := NormalizeReason(reason); err != nil {
		return err
	}
	ref, compensation = strings.TrimSpace(ref), strings.TrimSpace(compensation)
	if err := CheckText("candidate", Identifier, MaxFieldLen, ref); err != nil {
		return err
	}
	if err := CheckText("compensation", FreeText, MaxReasonLen, compensation); err != nil {
		return err
	}
	switch {
	case action == DecideConfirm && ref == "":
		return fmt.Errorf("%w: field \"candidate\": confirm names the resource that is the effect", ErrInvalid)
	case action == DecideKeepAndUndo && ref == "":
		return fmt.Errorf("%w: field \"candidate\": keep_and_undo names the resource to keep", ErrInvalid)
	case (action == DecideCompensate || action == DecideKeepAndUndo) && compensation == "":
		return fmt.Errorf("%w: field \"compensation\": say what is undone and how", ErrInvalid)
	}
	return nil
}

// NeedsTwoApprovers reports whether approving a retry of op needs a second,
// different reviewer: financial or irreversible operations.
func NeedsTwoApprovers(op *Operation, action string) bool {
	return action == DecideApproveRetry && RetryNeedsReviewer(op)
}
