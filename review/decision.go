package review

import "fmt"

// Decision actions a reviewer may take on a case (SPEC "Decision").
const (
	DecideConfirm      = "confirm"
	DecideCompensate   = "compensate"
	DecideApproveRetry = "approve_retry"
	DecideFail         = "fail"
)

// DecisionTarget is the state a decision moves the operation to.
func DecisionTarget(action string) (State, error) {
	switch action {
	case DecideConfirm:
		return Confirmed, nil
	case DecideCompensate:
		return Compensated, nil
	case DecideApproveRetry:
		return RetryWait, nil
	case DecideFail:
		return Failed, nil
	}
	return "", fmt.Errorf("%w: action must be confirm, compensate, approve_retry or fail", ErrInvalid)
}

// ValidateDecision checks the fields each action needs: always a reason;
// confirm names the resource; compensate says what is undone and how.
func ValidateDecision(action, ref, compensation, reason string) error {
	if _, err := DecisionTarget(action); err != nil {
		return err
	}
	switch {
	case len(reason) < 3:
		return fmt.Errorf("%w: field \"reason\": every decision needs a reason", ErrInvalid)
	case action == DecideConfirm && ref == "":
		return fmt.Errorf("%w: field \"candidate\": confirm names the resource that is the effect", ErrInvalid)
	case action == DecideCompensate && compensation == "":
		return fmt.Errorf("%w: field \"compensation\": say what is undone and how", ErrInvalid)
	}
	return nil
}

// NeedsTwoApprovers reports whether approving a retry of op needs a second,
// different reviewer: financial or irreversible operations.
func NeedsTwoApprovers(op *Operation, action string) bool {
	return action == DecideApproveRetry &&
		(op.HasFlag(FlagFinancial) || op.HasFlag(FlagIrreversible) || op.Risk == RiskIrreversible)
}
