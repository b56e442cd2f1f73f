package review

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// CompensationPrefix starts the action of every compensation operation:
// "compensate:<the parent's action>". Integrators may not register such
// actions themselves (CheckAction): a compensation exists only because a
// reviewer decided one.
const CompensationPrefix = "compensate:"

// DefaultCompensationDeadline is how long a compensation may take.
const DefaultCompensationDeadline = 24 * time.Hour

// IsCompensation reports whether action is a compensation's.
func IsCompensation(action string) bool { return strings.HasPrefix(action, CompensationPrefix) }

// CompensationKey is a compensation's idempotency key: derived from the
// parent's key, the resource it undoes and the decision that asked for it,
// so the same decision never registers two undos of one resource.
func CompensationKey(parentKey, ref, decisionID string) string {
	return DeriveKey(parentKey, ref, CompensationPrefix, decisionID)
}

// PlanCompensation plans the operation that undoes resource ref of parent,
// as decision decisionID asked (how: what is undone and how): its own key,
// action compensate:<action>, risk compensable_write, the parent's tenant,
// destination, source and version, linked to the parent by its payload.
func PlanCompensation(parent *Operation, ref, how, decisionID, actor string, now time.Time) (*RegistrationPlan, error) {
	payload, err := json.Marshal(map[string]string{"compensates": parent.ID, "resource": ref, "how": how, "decision": decisionID})
	if err != nil {
		return nil, err
	}
	canonical, err := Canonicalize(payload)
	if err != nil {
		return nil, err
	}
	deadline := now.Add(DefaultCompensationDeadline)
	r := Registration{Tenant: parent.Tenant, SourceRef: parent.SourceRef, LogicalVersion: parent.LogicalVersion,
		Action: CompensationPrefix + parent.Action, Destination: parent.Destination, Risk: RiskCompensableWrite,
		Flags: parent.Flags, Payload: canonical, Key: CompensationKey(parent.Key, ref, decisionID), Deadline: &deadline, Actor: actor}
	if err := r.Normalize(now); err != nil {
		return nil, fmt.Errorf("compensation of %s: %w", parent.ID, err)
	}
	p := &RegistrationPlan{Registration: r, PayloadHash: PayloadHash(r.Payload), State: Pending,
		Reason: fmt.Sprintf("undoes %s of %s, as %s decided", ref, parent.ID, actor)}
	// Registered like any operation (the trail of every operation starts
	// with operation.registered); the detail says what it compensates.
	p.Event = PlannedEvent{Action: "operation.registered", To: Pending,
		Detail: map[string]any{"key": r.Key, "payload_hash": p.PayloadHash, "parent": parent.ID, "resource": ref, "decision_id": decisionID}}
	return p, nil
}

// CompensationSettles says what a compensation reaching state child means
// for its parent (compensating): confirmed → the parent is compensated, or
// confirmed with the kept resource when the decision kept one (keep_and_undo);
// failed, ambiguous or in review → the parent goes back to review with
// reason compensation_failed. Any other state moves nothing ("").
func CompensationSettles(child State, keep string) (State, []Reason, string) {
	switch child {
	case Confirmed:
		if keep != "" {
			return Confirmed, nil, "the duplicate is undone; " + keep + " is the effect"
		}
		return Compensated, nil, "the compensation is confirmed: the effect is undone"
	case Failed, Ambiguous, NeedsReview:
		return NeedsReview, []Reason{ReasonCompensationFailed}, "the compensation is " + string(child) + ": the effect may still be there"
	}
	return "", nil, ""
}

// CompensationResource is the resource compensation op undoes, as its
// payload names it ("" for an operation that is not a compensation).
func CompensationResource(op *Operation) string {
	if !IsCompensation(op.Action) {
		return ""
	}
	var p struct {
		Resource string `json:"resource"`
	}
	if json.Unmarshal(op.Payload, &p) != nil {
		return ""
	}
	return p.Resource
}
