package review

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDecisionTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		action string
		want   State
	}{
		{"confirm", DecideConfirm, Confirmed},
		// issue 12, hole 7: an undo is not done because it was decided.
		{"compensate", DecideCompensate, Compensating},
		{"approve_retry", DecideApproveRetry, RetryWait},
		{"fail", DecideFail, Failed},
		{"compensation_done", DecideCompensationDone, Compensated},
		{"compensation_failed", DecideCompensationFailed, NeedsReview},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecisionTarget(tt.action)
			if err != nil || got != tt.want {
				t.Fatalf("DecisionTarget(%q) = %q, %v; want %q", tt.action, got, err, tt.want)
			}
			// Every decision is a legal move from where it is allowed.
			from := NeedsReview
			if tt.action == DecideCompensationDone || tt.action == DecideCompensationFailed {
				from = Compensating
			}
			if err := CheckTransition(from, got); err != nil {
				t.Errorf("%s: %v", tt.action, err)
			}
			if _, err := CheckDecision(from, nil, tt.action); err != nil {
				t.Errorf("%s from %s: %v", tt.action, from, err)
			}
		})
	}
	for _, bad := range []string{"", "approved", "Confirm", "retry", "compensate "} {
		if _, err := DecisionTarget(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("DecisionTarget(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestValidateDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                              string
		action, ref, compensation, reason string
		// wantField is the field the error names; "" means valid.
		wantField string
	}{
		{name: "confirm with ref and reason", action: DecideConfirm, ref: "fld-1", reason: "search shows exactly this folder"},
		{name: "compensate with what and how", action: DecideCompensate, ref: "fld-2", compensation: "deleted fld-2 via DELETE /resources", reason: "duplicate"},
		{name: "compensate without a ref", action: DecideCompensate, compensation: "refunded the charge by hand", reason: "duplicate charge"},
		{name: "approve_retry", action: DecideApproveRetry, reason: "search proves nothing was created"},
		{name: "fail", action: DecideFail, reason: "customer cancelled"},
		{name: "reason of three bytes", action: DecideFail, reason: "dup"},
		{name: "compensation_done", action: DecideCompensationDone, reason: "the duplicate folder is gone"},
		{name: "compensation_failed without a reason", action: DecideCompensationFailed, wantField: "reason"},
		{name: "unknown action", action: "approved", reason: "looks fine", wantField: ""},
		{name: "no reason", action: DecideFail, reason: "", wantField: "reason"},
		{name: "reason too short", action: DecideApproveRetry, reason: "ok", wantField: "reason"},
		{name: "confirm without a ref", action: DecideConfirm, reason: "it is there", wantField: "candidate"},
		{name: "compensate without saying how", action: DecideCompensate, ref: "fld-2", reason: "duplicate", wantField: "compensation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDecision(tt.action, tt.ref, tt.compensation, tt.reason)
			valid := tt.wantField == "" && tt.action != "approved"
			switch {
			case valid && err != nil:
				t.Fatalf("ValidateDecision = %v, want nil", err)
			case !valid && !errors.Is(err, ErrInvalid):
				t.Fatalf("ValidateDecision = %v, want ErrInvalid", err)
			case tt.wantField != "" && !strings.Contains(err.Error(), `field "`+tt.wantField+`"`):
				t.Errorf("error %q does not name field %q", err, tt.wantField)
			}
		})
	}
}

func TestNeedsTwoApprovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		op     *Operation
		action string
		want   bool
	}{
		{"financial approve_retry", caseOp(RiskCompensableWrite, FlagFinancial), DecideApproveRetry, true},
		{"irreversible flag approve_retry", caseOp(RiskCompensableWrite, FlagIrreversible), DecideApproveRetry, true},
		{"irreversible risk approve_retry", caseOp(RiskIrreversible), DecideApproveRetry, true},
		{"financial irreversible approve_retry", caseOp(RiskIrreversible, FlagFinancial), DecideApproveRetry, true},
		{"regulated approve_retry", caseOp(RiskCompensableWrite, FlagRegulated), DecideApproveRetry, true},
		{"plain approve_retry", caseOp(RiskCompensableWrite), DecideApproveRetry, false},
		{"idempotent approve_retry", caseOp(RiskIdempotentWrite), DecideApproveRetry, false},
		{"financial confirm", caseOp(RiskCompensableWrite, FlagFinancial), DecideConfirm, false},
		{"financial compensate", caseOp(RiskCompensableWrite, FlagFinancial), DecideCompensate, false},
		{"irreversible fail", caseOp(RiskIrreversible), DecideFail, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsTwoApprovers(tt.op, tt.action); got != tt.want {
				t.Errorf("NeedsTwoApprovers = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAlreadyDecidedErrorNamesTheWinner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *AlreadyDecidedError
		want []string
	}{
		{"decided", &AlreadyDecidedError{CaseID: "case_1", By: "alice", Action: DecideConfirm, At: settleNow}, []string{"case_1", "alice", "confirm", "2030-05-06T07:08:09Z"}},
		{"changed", &AlreadyDecidedError{CaseID: "case_2"}, []string{"case_2", "reload"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(tt.err.Error(), w) {
					t.Errorf("%q does not mention %q", tt.err.Error(), w)
				}
			}
		})
	}
}

// TestCheckDecision (issue 12, hole 3): a decision moves an operation only
// from needs_review; on a payload_mismatch case whose operation is
// anywhere else, fail alone is allowed, as a verdict on the refused
// payload; a case with no payload mismatch outside review allows nothing.
func TestCheckDecision(t *testing.T) {
	t.Parallel()
	review := []string{DecideConfirm, DecideCompensate, DecideApproveRetry, DecideFail}
	duplicates := append([]string{DecideKeepAndUndo}, review...) // several resources: keep one, undo another
	all := append(slices.Clone(review), DecideCompensationDone, DecideCompensationFailed)
	mismatch := []Reason{ReasonPayloadMismatch}
	tests := []struct {
		name    string
		state   State
		reasons []Reason
		want    []string
		on      DecisionScope
	}{
		{"in review", NeedsReview, []Reason{ReasonMultipleCands}, duplicates, OnOperation},
		{"in review, one resource", NeedsReview, []Reason{ReasonVersionMismatch}, review, OnOperation},
		{"in review, with a payload mismatch too", NeedsReview, []Reason{ReasonMultipleCands, ReasonPayloadMismatch}, duplicates, OnOperation},
		{"awaiting approval", AwaitingApproval, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"pending", Pending, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"in flight", InFlight, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"retry_wait", RetryWait, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"ambiguous", Ambiguous, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"accepted", Accepted, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"confirmed", Confirmed, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"failed", Failed, mismatch, []string{DecideFail}, OnRefusedPayload},
		{"compensating", Compensating, []Reason{ReasonMultipleCands}, []string{DecideCompensationDone, DecideCompensationFailed}, OnOperation},
		{"compensating, with a payload mismatch too", Compensating, []Reason{ReasonPayloadMismatch}, []string{DecideCompensationDone, DecideCompensationFailed}, OnOperation},
		{"in flight, no mismatch", InFlight, []Reason{ReasonMultipleCands}, nil, ""},
		{"awaiting approval, no mismatch", AwaitingApproval, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecisionsAllowed(tt.state, tt.reasons); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("DecisionsAllowed = %v, want %v", got, tt.want)
			}
			if got := DecidesOn(tt.state, tt.reasons); got != tt.on {
				t.Errorf("DecidesOn = %q, want %q", got, tt.on)
			}
			for _, a := range all {
				on, err := CheckDecision(tt.state, tt.reasons, a)
				allowed := slices.Contains(tt.want, a)
				switch {
				case allowed && (err != nil || on != tt.on):
					t.Errorf("CheckDecision(%s) = %q, %v; want %q", a, on, err, tt.on)
				case !allowed && !errors.Is(err, ErrInvalidTransition):
					t.Errorf("CheckDecision(%s) = %q, %v; want ErrInvalidTransition", a, on, err)
				case !allowed && !strings.Contains(err.Error(), string(tt.state)):
					t.Errorf("CheckDecision(%s): %q does not name the state", a, err)
				}
			}
			// Whatever is allowed on the operation is a legal move.
			if tt.on == OnOperation {
				for _, a := range tt.want {
					to, _ := DecisionTarget(a)
					if err := CheckTransition(tt.state, to); err != nil {
						t.Errorf("%s from %s: %v", a, tt.state, err)
					}
				}
			}
		})
	}
}
