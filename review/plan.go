package review

import "time"

// A plan is what a request writes, decided here before anything is: the
// rows, the case to open, the events to audit. The store persists a plan
// as it is, in one transaction (or one guarded statement), and decides
// nothing on the way.

// PlannedEvent is an audit event a plan records. The store adds when, who,
// the tenant and the operation.
type PlannedEvent struct {
	Action string
	From   State
	To     State
	// Detail is the event's detail object (nil: an empty one).
	Detail map[string]any
}

// RegistrationPlan is what registering an operation writes when its key is
// new: the operation, from the normalized registration, in State for
// Reason, and Event, which records it. A key that is taken is
// ExistingKey's to answer.
type RegistrationPlan struct {
	// Registration is the request normalized: defaults filled, identity
	// fields in NFC, the key derived when none was given.
	Registration Registration
	PayloadHash  string
	State        State
	Reason       string
	Event        PlannedEvent
}

// PlanRegistration validates and normalizes r (Normalize: errors wrap
// ErrInvalid) and plans the new operation: pending, or awaiting_approval
// when cfg says its action at its destination needs approval first.
func PlanRegistration(r Registration, cfg *Config, now time.Time) (*RegistrationPlan, error) {
	if err := r.Normalize(now); err != nil {
		return nil, err
	}
	p := &RegistrationPlan{Registration: r, PayloadHash: PayloadHash(r.Payload), State: Pending, Reason: "registered"}
	if cfg.Destination(r.Destination).RequiresApproval(r.Action) {
		p.State, p.Reason = AwaitingApproval, "the action requires approval before any attempt"
	}
	p.Event = PlannedEvent{Action: "operation.registered", To: p.State,
		Detail: map[string]any{"key": r.Key, "payload_hash": p.PayloadHash, "risk": r.Risk, "reason": p.Reason}}
	return p, nil
}

// KeyTakenPlan is what a registration whose key is taken writes: nothing
// when it is the same intention (Mismatch nil: the stored operation
// answers), or else a refusal a person must know of: Event audits it, a
// case for CaseReasons is opened (or joined) on the stored operation, and
// the refused payload is kept for the reviewer's diff.
type KeyTakenPlan struct {
	Mismatch    *PayloadMismatchError
	Event       PlannedEvent
	CaseReasons []Reason
}

// ExistingKey plans the registration against op, the operation that holds
// its key (SameIntention).
func (p *RegistrationPlan) ExistingKey(op *Operation) KeyTakenPlan {
	diff := p.Registration.SameIntention(op, p.PayloadHash)
	if len(diff) == 0 {
		return KeyTakenPlan{}
	}
	return KeyTakenPlan{
		Mismatch:    &PayloadMismatchError{Operation: op, Fields: diff},
		Event:       PlannedEvent{Action: "operation.payload_mismatch", Detail: map[string]any{"fields": diff, "payload_hash": p.PayloadHash}},
		CaseReasons: []Reason{ReasonPayloadMismatch},
	}
}
