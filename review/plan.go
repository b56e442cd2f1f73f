package review

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

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
	// KeyFields is the action's key recipe (ActionConfig.KeyFields): a
	// registration under a taken key is the same intention when these
	// members agree.
	KeyFields []string
	State     State
	Reason    string
	Event     PlannedEvent
	// Approval is the approval case an operation awaiting approval opens
	// (nil: none).
	Approval *ApprovalRequest
}

// ApprovalRequest is the case an operation awaiting approval opens: its
// reasons, who asked (who may not approve), and when it expires — the
// operation then fails, as if refused.
type ApprovalRequest struct {
	Reasons     []Reason
	RequestedBy string
	ExpiresAt   time.Time
}

// PlanRegistration validates and normalizes r (Normalize: errors wrap
// ErrInvalid) and plans the new operation: pending, or awaiting_approval
// when cfg says its action at its destination needs approval first.
func PlanRegistration(r Registration, cfg *Config, now time.Time) (*RegistrationPlan, error) {
	asSent := r
	if err := ApplyPolicy(&r, cfg, now); err != nil {
		refusal := &PolicyRefusal{Err: err}
		// The registration as sent, normalized without the policy, names
		// the key a repeat of it would find.
		if asSent.Risk == "" {
			asSent.Risk = SafeRisk
		}
		if asSent.Normalize(now) == nil {
			refusal.Registration, refusal.PayloadHash = asSent, PayloadHash(asSent.Payload)
		}
		return nil, refusal
	}
	if err := r.Normalize(now); err != nil {
		return nil, err
	}
	ac, _ := cfg.Policy(r.Destination, r.Action)
	if err := ac.Request.Check(r.Payload); err != nil {
		return nil, err
	}
	p := &RegistrationPlan{Registration: r, PayloadHash: PayloadHash(r.Payload), KeyFields: ac.KeyFields, State: Pending, Reason: WhyRegistered}
	if d := cfg.Destination(r.Destination); d.RequiresApproval(r.Action) {
		p.State, p.Reason = AwaitingApproval, WhyApprovalRequired
		p.Approval = &ApprovalRequest{Reasons: []Reason{ReasonApprovalRequired}, RequestedBy: r.RequestedBy,
			ExpiresAt: d.ApprovalExpiry(r.Action, *r.Deadline, now)}
	}
	p.Event = PlannedEvent{Action: "operation.registered", To: p.State,
		Detail: map[string]any{"key": r.Key, "payload_hash": p.PayloadHash, "risk": r.Risk, "reason": p.Reason}}
	return p, nil
}

// PolicyRefusal is PlanRegistration's refusal by the action's policy
// (ApplyPolicy): a tenant the action is not open to, a lower risk or a
// larger budget than the policy's. It wraps that error. A policy made
// stricter after an operation was registered refuses the registration's
// repeat as well — an integrator retrying a call whose answer it lost, an
// agent resuming a run — which then never got its operation back; the
// store answers such a repeat with the operation its key holds (IsRepeat).
type PolicyRefusal struct {
	Err error
	// Registration is the registration as sent, normalized without the
	// policy (its key derived), and PayloadHash its payload's; both zero
	// when it does not normalize.
	Registration Registration
	PayloadHash  string
}

func (e *PolicyRefusal) Error() string { return e.Err.Error() }

// Unwrap makes the refusal the policy's error (ErrForbidden, ErrInvalid).
func (e *PolicyRefusal) Unwrap() error { return e.Err }

// IsRepeat reports whether op, the operation holding the refused
// registration's key, is that registration made before the policy
// changed: the same identity and the same payload, byte for byte. Anything
// else stays refused by the policy.
func (e *PolicyRefusal) IsRepeat(op *Operation) bool {
	r := e.Registration
	return r.Key != "" && op.Tenant == r.Tenant && op.Key == r.Key && op.SourceRef == r.SourceRef &&
		op.LogicalVersion == r.LogicalVersion && op.Action == r.Action && op.Destination == r.Destination &&
		op.PayloadHash == e.PayloadHash
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
	diff := p.Registration.SameIntention(op, p.PayloadHash, p.KeyFields)
	if len(diff) == 0 {
		return KeyTakenPlan{}
	}
	return KeyTakenPlan{
		Mismatch:    &PayloadMismatchError{Operation: op, Fields: diff},
		Event:       PlannedEvent{Action: "operation.payload_mismatch", Detail: map[string]any{"fields": diff, "payload_hash": p.PayloadHash}},
		CaseReasons: []Reason{ReasonPayloadMismatch},
	}
}

// OutcomePlan is what an attempt's outcome writes: the attempt closed and
// the operation moved as Decision says (its next step, state, retry time
// and reason), the operation's Resource when it is confirmed, the
// response's Evidence on success, the Job the report names, the Event,
// and, when the operation goes to review, a case for Decision.Escalation.
type OutcomePlan struct {
	Decision Decision
	// Cost is what the attempt cost: the reported cost plus its token
	// usage priced by the destination (the attempt's and the
	// operation's cost_spent take this, never the raw report).
	Cost     float64
	Resource *ResourceRef
	Evidence *Evidence
	Job      *Job
	Event    PlannedEvent
}

// OpensCase reports whether the plan sends the operation to a person.
func (p *OutcomePlan) OpensCase() bool { return p.Decision.State == NeedsReview }

// PlanOutcome plans the outcome of attempt in.N of in.Op, which must carry
// its whole record (attempts, evidence, jobs): state follows from all of
// it, not from the report alone. Decide reads the report and
// the earlier attempts (PriorMayHaveEffect is computed here); then, unless
// the destination answered success, the evidence that landed while the
// attempt was in flight is weighed (Weigh) — an effect it names, or a
// webhook's claim of one, outweighs a retry, a failure or an unknown
// outcome the report alone would have planned (an effect already named
// needs no reconciling: an earlier attempt's job that succeeded while a
// retry was in flight, say).
func PlanOutcome(in DecideInput) OutcomePlan {
	op, o, now := in.Op, in.Outcome, in.Now
	in.PriorMayHaveEffect = PriorMayHaveEffect(op.Attempts, in.N, in.Destination, op.Action, now)
	_, priced := in.Destination.UsageCost(o.Usage)
	in.Outcome.Cost = PricedCost(o, in.Destination)
	p := OutcomePlan{Decision: Decide(in), Cost: in.Outcome.Cost}
	d := &p.Decision
	if !priced {
		d.Reason += "; " + fmt.Sprintf(WhyModelNotPriced, strconv.Quote(o.Usage.Model))
	}
	if o.Result != ResultSuccess && (d.State == RetryWait || d.State == Failed || d.State == Ambiguous) {
		if w := weighReported(op, in.Destination, now); w.State != "" {
			*d = Decision{Next: nextFor(w.State), State: w.State, Escalation: w.Reasons,
				Reason: d.Reason + "; " + fmt.Sprintf(WhyButEvidence, w.Reason)}
			p.Resource, p.Job = w.Resource, w.Job
		}
	}
	if o.Resource != nil && d.State == Confirmed && p.Resource == nil {
		p.Resource = &ResourceRef{Ref: o.Resource.Ref, Kind: o.Resource.Kind, Version: o.Resource.Version}
	}
	if o.Result == ResultSuccess && !OutputRefused(o, op) {
		p.Evidence = responseEvidence(op.ID, in.N, o, *d, now)
		if d.State == Confirmed && o.Resource != nil {
			// Evidence already naming another effect of this operation
			// and version (a retry after an absence that was not one, an
			// earlier attempt's job): weighed with the response, two
			// resources — a person keeps one and undoes the other, as
			// when the same evidence lands after the confirm
			// (ExtraEffects). The order they came in decides nothing.
			if w := weighReported(op, in.Destination, now, *p.Evidence); w.State == NeedsReview && slices.Contains(w.Reasons, ReasonMultipleCands) {
				*d = Decision{Next: NextReview, State: NeedsReview, Escalation: w.Reasons,
					Reason: d.Reason + "; " + fmt.Sprintf(WhyButEvidence, w.Reason)}
				p.Resource = nil
			}
		}
	}
	p.Job = OutcomeJob(op, o)
	p.Event = PlannedEvent{Action: "attempt.outcome", From: op.State, To: d.State, Detail: outcomeDetail(in.N, in.Outcome, *d)}
	return p
}

// nextFor is what an integrator is told to do next about an operation
// that evidence moved to s.
func nextFor(s State) Next {
	switch s {
	case Confirmed, Accepted:
		return NextDone
	case NeedsReview:
		return NextReview
	case Failed:
		return NextFailed
	case RetryWait:
		return NextRetryAt
	}
	return NextReconcile
}

// weighReported is what all of op's evidence says, with also (the report's
// own) among it, as though the attempt's report were in: op is weighed
// as waiting to retry, a state Weigh assesses.
func weighReported(op *Operation, d Destination, now time.Time, also ...Evidence) Weighing {
	asked := *op
	asked.State = RetryWait
	if len(also) > 0 {
		asked.Evidence = append(slices.Clone(op.Evidence), also...)
	}
	return Weigh(&asked, d, now)
}

// responseEvidence is the evidence a reported success leaves: the response
// is what a confirmation rests on (I7). A job accepted, naming no
// resource, is the destination's word that it took the job, not that the
// effect happened: inconclusive. Read as confirming, it made an empty
// search while the job ran, or after it failed, look like sources
// disagreeing, and a reviewer read "confirms" beside "confirmed when the
// job completes". The job's own end is the evidence (settleJob).
func responseEvidence(opID string, n int, o Outcome, d Decision, now time.Time) *Evidence {
	ev := &Evidence{OperationID: opID, Source: SourceResponse, Authoritative: true, ObservedAt: now,
		Candidates: []Candidate{}, Verdict: VerdictConfirms, Note: fmt.Sprintf(WhyResponseNote, n, d.Reason)}
	if o.Resource != nil {
		ev.Candidates = []Candidate{{Ref: o.Resource.Ref, Kind: o.Resource.Kind, Version: o.Resource.Version, OperationID: opID}}
	}
	if d.State != Confirmed && (d.State != Accepted || o.Resource == nil) {
		ev.Verdict = VerdictInconclusive
	}
	return ev
}

// outcomeDetail is the audit detail of an attempt's outcome.
func outcomeDetail(n int, o Outcome, d Decision) map[string]any {
	detail := map[string]any{"n": n, "result": o.Result, "phase": o.Phase, "next": d.Next, "reason": d.Reason}
	if o.HTTPStatus != 0 {
		detail["http_status"] = o.HTTPStatus
	}
	if len(d.Escalation) > 0 {
		detail["escalation"] = d.Escalation
	}
	if o.Usage != nil {
		detail["usage"] = o.Usage
	}
	if o.Cost != 0 {
		detail["cost"] = o.Cost
	}
	return detail
}

// ApprovalLapsed says whether an operation awaiting approval has waited
// too long at now — past its approval case's expiry (nil: none recorded)
// or its deadline — and why. It then fails: an approval never given is a
// refusal (fail closed), never a run.
func ApprovalLapsed(expires *time.Time, deadline, now time.Time) (bool, string) {
	switch {
	case expires != nil && !now.Before(*expires):
		return true, WhyApprovalExpired
	case !now.Before(deadline):
		return true, WhyApprovalDeadline
	}
	return false, ""
}

// OutcomeJob is the job an outcome o for op names (nil: none), queued
// unless the outcome says how it is, for op's version.
func OutcomeJob(op *Operation, o Outcome) *Job {
	if o.Job == nil {
		return nil
	}
	status := JobStatus(o.Job.Status)
	if status == "" {
		status = JobQueued
	}
	return &Job{Ref: o.Job.Ref, Status: status, InputVersion: op.LogicalVersion}
}
