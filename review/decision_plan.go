package review

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DecisionStatus is what a recorded decision did.
type DecisionStatus string

const (
	// DecisionApplied: the decision moved the operation.
	DecisionApplied DecisionStatus = "applied"
	// DecisionFirstApproval: an approval that is not yet the last one
	// needed (the first of two, or of as many as the action's policy
	// asks); the case stays open.
	DecisionFirstApproval DecisionStatus = "first_approval"
	// DecisionVoid: a first approval for a payload or key the operation no
	// longer has, or given before another decision moved the operation.
	DecisionVoid DecisionStatus = "void"
	// DecisionRefusedPayload: a verdict on a payload refused under the
	// operation's key, given while the operation was elsewhere than in
	// review (OnRefusedPayload). The operation did not move.
	DecisionRefusedPayload DecisionStatus = "refused_payload"
	// DecisionExtraEffect: a decision on an extra resource found after the
	// operation was confirmed (OnExtraEffect); it stays confirmed.
	DecisionExtraEffect DecisionStatus = "extra_effect"
)

// PriorDecision is a decision already recorded on the case, as planning
// the next one needs it.
type PriorDecision struct {
	Seq                                                            int64
	ID, Action, Actor, ResourceRef, Compensation, PayloadHash, Key string
	// UndoRef is the resource a keep_and_undo undoes.
	UndoRef string
	// Revoked, on an approval, is why its approver may no longer decide
	// the case ("" while they may): disabled, moved off the tenant, or in
	// a role that does not decide it. Such an approval counts no more: the
	// pair an action needs is two people who may decide it now.
	Revoked string
}

// DecisionInput is a reviewer's decision on a case and what it is judged
// against, read under the case's and the operation's locks.
type DecisionInput struct {
	Op          *Operation
	CaseID      string
	CaseReasons []Reason
	// CaseRef is the resource the case is about (its recommendation's),
	// "" when none: what a compensation_done names by default on a case
	// about an extra resource.
	CaseRef string
	// DecisionID is the id the decision is recorded under.
	DecisionID                               string
	Action, Ref, Compensation, Reason, Actor string
	// UndoRef is the resource keep_and_undo undoes (Ref is the one kept).
	UndoRef string
	// Approvals are the case's approvals on record that were not the last
	// one needed (status first_approval, oldest first); LastApplied is its
	// newest applied decision (nil: none).
	Approvals   []PriorDecision
	LastApplied *PriorDecision
	// RequestedBy is who asked for the operation (the creator of the token
	// that registered it), who may not approve it.
	RequestedBy string
	// ClaimedBy and ClaimUntil are the case's claim (CheckClaim).
	ClaimedBy  string
	ClaimUntil *time.Time
	// ApprovalExpires is when the case's approval request lapses (nil:
	// never, or not an approval case); with the operation's deadline it
	// bounds when an approval may be given (ApprovalLapsed).
	ApprovalExpires *time.Time
	// Compensations are the operation's compensation operations that have
	// not settled yet (SettlesByHand).
	Compensations []ChildCompensation
	// AlsoWrittenBy lists, for the resource the decision would undo, the
	// other operations the ledger has that wrote it too (the same ref at
	// the same destination: a file and the versions uploaded to it), at
	// most a few (UndoByHand); another tenant's as AnotherTenantsOperation.
	AlsoWrittenBy []string
	Destination   Destination
	Now           time.Time
}

// ChildCompensation is a compensation operation of the one decided on.
type ChildCompensation struct {
	ID    string
	State State
	// Ref is the resource it undoes.
	Ref string
}

// Unsettled reports whether the undo may still happen, or may have
// happened unseen: pending or retrying it will still run; in flight,
// accepted, ambiguous or in review its outcome is not known. Confirmed
// (undone) and failed (it did not happen) are settled.
func (k ChildCompensation) Unsettled() bool {
	return !slices.Contains([]State{Confirmed, Compensated, Failed}, k.State)
}

// DecisionPlan is what a decision writes: the decision (Status, and the
// resource and undo it names), the case resolved or kept open, the first
// approval it voids, the operation's move with the evidence, resource and
// retry budget that go with it, the announcement to integrators, and the
// events audited after the move.
type DecisionPlan struct {
	Status DecisionStatus
	// From is the operation's state; To the state it moves to (From when
	// it does not move).
	From, To                  State
	ResourceRef, Compensation string
	// ResolveCase: the case is resolved; otherwise it stays open (its
	// version moves on, so a form read before is stale).
	ResolveCase bool
	// ReleaseClaim: a case kept open is let go by its holder — after an
	// approval that is not the last, the next one is someone else's.
	ReleaseClaim bool
	// Void lists the approvals on record (by Seq) that no longer count:
	// given for a payload or key the operation no longer has, by someone
	// who may no longer decide the case, or before another decision moved
	// the operation while the case stayed open.
	Void []int64
	// Announce: integrators learn of it (decisions feed webhook).
	Announce bool
	// Move is the operation's transition to To (nil: it does not move).
	Move       *PlannedEvent
	MoveReason string
	Evidence   *Evidence
	Resource   *ResourceRef
	Retry      *ApprovedRetry
	Events     []PlannedEvent
	// Undo is the compensation operation a compensate registers (nil:
	// none): the undo is tracked as an operation of its own. Keep is the
	// resource keep_and_undo keeps (the operation is confirmed with it once
	// the undo of UndoRef is confirmed).
	Undo          *RegistrationPlan
	Keep, UndoRef string
	// UndoByHand: Limbo does not send Undo; a person does it and says so
	// (UndoByHand says why, in Undo's reason).
	UndoByHand bool
	// Cancel lists the compensation operations a reviewer's word on the
	// undo makes moot: not yet attempted, they fail as canceled so nobody
	// runs them afterwards.
	Cancel []string
}

// ApprovedRetry is the room an approved retry gets to run.
type ApprovedRetry struct {
	MaxAttempts   int
	Deadline      time.Time
	NextAttemptAt time.Time
	// CostBudget is the operation's cost budget (nil: none), raised by
	// a budget's worth when it is spent: Grantable refuses an attempt
	// once the cost spent reaches it.
	CostBudget *float64
}

// PlanDecision decides what a reviewer's decision does: only the holder
// of a live claim may decide (CheckClaim), and CheckDecision says whether
// it may be taken at all. On a refused payload or an extra
// effect it is a verdict that moves nothing; an approve_retry that needs
// two approvers is a first approval until a different reviewer gives the
// second for the same payload and key; anything else moves the operation
// to DecisionTarget. Errors wrap ErrInvalidTransition or ErrSecondApprover.
func PlanDecision(in DecisionInput) (*DecisionPlan, error) {
	op := in.Op
	if err := CheckClaim(in.CaseID, in.ClaimedBy, in.ClaimUntil, in.Actor, in.Now); err != nil {
		return nil, err
	}
	on, err := CheckDecision(op.State, in.CaseReasons, in.Action)
	if err != nil {
		return nil, err
	}
	if UndoesAnUndo(op, in.Action) {
		return nil, fmt.Errorf("%w: %s is an undo, and an undo is not undone: say whether it happened (confirm or fail), "+
			"or approve sending it again (approve_retry)", ErrInvalidTransition, op.ID)
	}
	if in.Action == DecideApprove && op.State == AwaitingApproval {
		// Lapsed is lapsed, whether or not the deadline sweeper has
		// ended the operation yet: an approval now would let it run.
		if lapsed, why := ApprovalLapsed(in.ApprovalExpires, op.Deadline, in.Now); lapsed {
			return nil, fmt.Errorf("%w: too late to approve: %s", ErrInvalidTransition, why)
		}
	}
	p := &DecisionPlan{Status: DecisionApplied, From: op.State, To: op.State, ResourceRef: in.Ref, Compensation: in.Compensation,
		ResolveCase: !KeepsCaseOpen(in.Action)}
	switch on {
	case OnRefusedPayload, OnExtraEffect:
		p.Status = DecisionRefusedPayload
		if on == OnExtraEffect {
			p.Status = DecisionExtraEffect
		}
		if on == OnExtraEffect && in.Action == DecideCompensationDone {
			// The word on one resource: its own undo not yet attempted
			// is canceled, any other's is left to run, and the case stays
			// open until they settle (their outcome lands on it).
			p.ResourceRef = DoneRef(in.Ref, nil, in.CaseRef)
			if p.ResourceRef == "" {
				// The case names no resource while its undos run (its
				// recommendation waits for them, UndoUnderWay).
				if p.ResourceRef, err = onlyUnsettled(in.Compensations); err != nil {
					return nil, err
				}
			}
			if err := CheckDoneRef(op, p.ResourceRef, nil, in.Compensations); err != nil {
				return nil, err
			}
			if p.Cancel, err = SettlesByHand(in.Action, p.ResourceRef, in.Compensations); err != nil {
				return nil, err
			}
			p.ResolveCase = !undoesOthers(p.ResourceRef, in.Compensations)
		}
		if on == OnExtraEffect && in.Action == DecideCompensate {
			if err := CheckUndoRef(op, in.Destination, in.Ref); err != nil {
				return nil, err
			}
			if err := UndoUnderWay(in.Ref, in.Compensations); err != nil {
				return nil, err
			}
			if err := p.planUndo(in, in.Ref); err != nil {
				return nil, err
			}
		}
		detail := map[string]any{"case_id": in.CaseID, "decision_id": in.DecisionID, "action": in.Action, "reason": in.Reason, "state": op.State}
		if p.ResourceRef != "" {
			detail["resource_ref"] = p.ResourceRef
		}
		if in.Compensation != "" {
			detail["compensation"] = in.Compensation
		}
		p.Events = append(p.Events, PlannedEvent{Action: "decision." + string(p.Status), Detail: detail})
		p.Events = append(p.Events, p.resolved(in)...)
		return p, nil
	}
	if need := approvalsNeeded(in); need > 1 || in.Action == DecideApprove {
		given, err := p.countApprovals(in)
		if err != nil {
			return nil, err
		}
		if given+1 < need {
			p.Status, p.ResolveCase, p.ReleaseClaim = DecisionFirstApproval, false, true
			p.Events = append(p.Events, PlannedEvent{Action: "decision.first_approval", Detail: map[string]any{"case_id": in.CaseID,
				"decision_id": in.DecisionID, "action": in.Action, "reason": in.Reason, "payload_hash": op.PayloadHash, "key": op.Key,
				"approvals": given + 1, "needed": need}})
			return p, nil
		}
	}
	to, err := DecisionTarget(in.Action)
	if err != nil {
		return nil, err
	}
	if err := CheckTransition(op.State, to); err != nil {
		return nil, err
	}
	p.To, p.Announce = to, true
	last := in.LastApplied
	undone := "" // the resource a compensation_done says is undone
	if in.Action == DecideCompensationDone {
		undone = DoneRef(in.Ref, last, in.CaseRef)
		if err := CheckDoneRef(op, undone, last, in.Compensations); err != nil {
			return nil, err
		}
		if err := WaitsForOtherUndo(undone, in.Compensations); err != nil {
			return nil, err
		}
		p.ResourceRef = undone
	}
	if p.Cancel, err = SettlesByHand(in.Action, undone, in.Compensations); err != nil {
		return nil, err
	}
	if in.Action == DecideCompensationDone && in.Compensation == "" && last != nil && last.Action == DecideCompensate && undone == last.ResourceRef {
		p.Compensation = last.Compensation // how it was to be undone
	}
	if in.Action == DecideCompensationDone && last != nil && last.Action == DecideKeepAndUndo {
		// The duplicate is undone by hand: the operation is confirmed with
		// the resource the decision kept, as its compensation would have.
		p.To, p.ResourceRef, p.UndoRef = Confirmed, last.ResourceRef, undone
		if err := CheckTransition(op.State, p.To); err != nil {
			return nil, err
		}
	}
	p.planMove(in)
	switch in.Action {
	case DecideCompensate:
		if err := CheckUndoRef(op, in.Destination, p.ResourceRef); err != nil {
			return nil, err
		}
		if err := UndoUnderWay(p.ResourceRef, in.Compensations); err != nil {
			return nil, err
		}
		if err := p.planUndo(in, p.ResourceRef); err != nil {
			return nil, err
		}
	case DecideKeepAndUndo:
		if in.UndoRef == "" || in.UndoRef == in.Ref {
			return nil, fmt.Errorf("%w: field \"undo_ref\": keep_and_undo undoes another resource than the one it keeps", ErrInvalid)
		}
		if err := CheckUndoRef(op, in.Destination, in.UndoRef); err != nil {
			return nil, err
		}
		if err := UndoUnderWay(in.UndoRef, in.Compensations); err != nil {
			return nil, err
		}
		if err := p.planUndo(in, in.UndoRef); err != nil {
			return nil, err
		}
		p.Keep, p.UndoRef = in.Ref, in.UndoRef
	}
	if !p.ResolveCase && len(in.Approvals) > 0 {
		// The operation moves by another decision and the case stays open
		// (compensate, keep_and_undo, compensation_failed): the approvals
		// given before were given for the case as it was, and count no
		// more towards one given after — else a retry first approved
		// before an undo was decided would need one reviewer after it.
		voided := make([]string, 0, len(in.Approvals))
		for _, a := range in.Approvals {
			p.Void = append(p.Void, a.Seq)
			voided = append(voided, a.Actor)
		}
		p.Move.Detail["voided_approvals"] = voided
	}
	p.Events = append(p.Events, p.resolved(in)...)
	return p, nil
}

// CheckUndoRef refuses to undo ref where Limbo sends the undo itself (the
// destination has an undo call, run with Limbo's own credential) unless
// ref is a resource op is known to have: its resource, a candidate its
// evidence names, or one of its jobs or their outputs. A ref typed into
// the form — empty, or any other — would have Limbo delete whatever the
// destination holds under that name, another tenant's resource included
// (or, empty, "." or "..", the undo URL's collection: an integrator's
// evidence may name such a candidate). Where the integrator runs the
// compensation, the ref is the reviewer's word to it, and passes.
func CheckUndoRef(op *Operation, d Destination, ref string) error {
	if d.Undo == nil {
		return nil
	}
	if ref == "" {
		return fmt.Errorf("%w: field \"candidate\": Limbo sends this destination's undo itself: name the resource to undo", ErrInvalid)
	}
	if ref == "." || ref == ".." {
		// A path segment, not a name: in the undo URL it would address
		// the collection above the resource (DELETE …/resources/..).
		return fmt.Errorf("%w: field \"candidate\": %s is not a resource name Limbo sends an undo for", ErrInvalid, ref)
	}
	if KnownResource(op, ref) {
		return nil
	}
	return fmt.Errorf("%w: field \"candidate\": %s is not a resource this operation is known to have (its resource, a candidate "+
		"its evidence names, or a job's); Limbo sends this destination's undo itself, and undoes only those", ErrInvalid, ref)
}

// NothingLimboCanUndo reports whether action would undo a resource
// Limbo cannot send the undo of: the destination's undo call is Limbo's
// (CheckUndoRef), and op is known to have no resource at all — a success
// reported naming none (UnnamedEffect). Any ref named would be refused;
// a person undoes what they find and says compensation_done.
func NothingLimboCanUndo(op *Operation, d Destination, action string) bool {
	return d.Undo != nil && (action == DecideCompensate || action == DecideKeepAndUndo) && !hasKnownResources(op)
}

// UndoTarget is the resource a decision undoes: compensate's ref, or
// the other one keep_and_undo names; "" for other actions.
func UndoTarget(action, ref, undoRef string) string {
	switch action {
	case DecideCompensate:
		return ref
	case DecideKeepAndUndo:
		return undoRef
	}
	return ""
}

// UndoByHand says why an undo of ref is left to a person ("" when it
// is not): Limbo would send it itself (the destination has an undo call),
// and other operations wrote ref too (others, from the ledger). The undo
// call names the resource only (DELETE …/resources/{{.Ref}}) and removes
// it whole: undoing one operation's upload of a file's new version would
// delete the file with every version, the others' included, and undoing
// the upload that created the file would delete the versions uploaded
// since. The compensation is registered as any other, so the parent waits
// in compensating and the undo is tracked, but Limbo does not send it: a
// person removes this operation's part at the destination and says so
// (compensation_done). Where the integrator runs compensations, it knows
// what its undo removes.
func UndoByHand(d Destination, ref string, others []string) string {
	if d.Undo == nil || len(others) == 0 {
		return ""
	}
	return fmt.Sprintf(WhyUndoByHand, ref, strings.Join(others, ", "))
}

// planUndo plans the compensation of ref the decision registers, sent by
// Limbo or left to a person (UndoByHand).
func (p *DecisionPlan) planUndo(in DecisionInput, ref string) error {
	var err error
	if p.Undo, err = PlanCompensation(in.Op, ref, p.Compensation, in.DecisionID, in.Actor, in.Now); err != nil {
		return err
	}
	if why := UndoByHand(in.Destination, ref, in.AlsoWrittenBy); why != "" {
		p.Undo.Reason, p.UndoByHand = why, true
		p.Undo.Event.Detail["by_hand"] = true
	}
	return nil
}

// KnownResource reports whether ref is a resource op is known to have:
// its resource, a candidate its evidence names, or one of its jobs or
// their outputs.
func KnownResource(op *Operation, ref string) bool {
	if op.Resource != nil && op.Resource.Ref == ref {
		return true
	}
	for _, ev := range op.Evidence {
		if slices.ContainsFunc(ev.Candidates, func(c Candidate) bool { return c.Ref == ref }) {
			return true
		}
	}
	return slices.ContainsFunc(op.Jobs, func(j Job) bool { return j.Ref == ref || j.OutputRef == ref })
}

// hasKnownResources reports whether op is known to have any resource at
// all, in KnownResource's sense: a resource, a candidate its evidence
// names, or a job. The two must read the same places.
func hasKnownResources(op *Operation) bool {
	return op.Resource != nil || len(op.Jobs) > 0 ||
		slices.ContainsFunc(op.Evidence, func(e Evidence) bool { return len(e.Candidates) > 0 })
}

// UndoesAnUndo reports whether action, on op's case, would undo a
// compensation: a compensation of a compensation sends the same undo
// again (around approve_retry and its second reviewer) and ends in a
// state (compensated) the parent does not follow (CompensationSettles).
func UndoesAnUndo(op *Operation, action string) bool {
	return IsCompensation(op.Action) && (action == DecideCompensate || action == DecideKeepAndUndo)
}

// UndoUnderWay refuses a second undo of ref while an earlier compensation
// of it has not settled: pending or retrying it will still run; in
// flight, ambiguous or in review it may have happened already. Two undos
// of one resource may refund twice. Once it settles — confirmed, or
// failed — ref may be undone again.
func UndoUnderWay(ref string, children []ChildCompensation) error {
	for _, k := range children {
		if k.Ref != ref || !k.Unsettled() {
			continue
		}
		return fmt.Errorf("%w: an undo of %s is already under way (compensation %s is %s): wait for its outcome, "+
			"or settle it on its case, before undoing it again", ErrInvalidTransition, ref, k.ID, k.State)
	}
	return nil
}

// SettlesByHand decides what a reviewer's word on the undo
// (compensation_done or compensation_failed) does to the compensation
// operations still unsettled that it covers: for compensation_done, the
// undos of the resource it names (ref: what the person undid — another
// resource's undo is not theirs to call off); for compensation_failed,
// every one (the operation goes back to review, where a person decides
// anew). One not yet attempted (pending, or waiting to retry) is
// canceled, since the reviewer's word settles the undo and nobody should
// run it afterwards; one whose attempt may be having its effect right
// now (in flight, accepted, ambiguous) refuses the word — its outcome
// settles the case, or sends it back to review — and so does one in
// review, whose own case takes the word on the undo. Any other decision
// leaves them be.
func SettlesByHand(action, ref string, children []ChildCompensation) ([]string, error) {
	if action != DecideCompensationDone && action != DecideCompensationFailed {
		return nil, nil
	}
	var cancel []string
	for _, k := range children {
		if action == DecideCompensationDone && k.Ref != ref {
			continue
		}
		switch k.State {
		case Pending, RetryWait, AwaitingApproval:
			cancel = append(cancel, k.ID)
		case Confirmed, Compensated, Failed:
		case NeedsReview:
			return nil, fmt.Errorf("%w: the compensation %s is in review: say whether the undo happened on its own case, "+
				"and this case follows", ErrInvalidTransition, k.ID)
		default:
			return nil, fmt.Errorf("%w: the compensation %s is %s: the undo may be happening right now, and its outcome settles "+
				"this case (or sends it back to review); wait for it rather than saying how it went", ErrInvalidTransition, k.ID, k.State)
		}
	}
	return cancel, nil
}

// DoneRef is the resource a compensation_done names: ref, as the
// reviewer named it; else the one whose undo the case decided last (a
// compensate's, a keep_and_undo's undone one); else the resource the case
// is about (caseRef). "" when there is none (an undo the integrator runs,
// decided without naming one).
func DoneRef(ref string, last *PriorDecision, caseRef string) string {
	switch {
	case ref != "":
		return ref
	case last != nil && last.Action == DecideCompensate:
		return last.ResourceRef
	case last != nil && last.Action == DecideKeepAndUndo:
		return last.UndoRef
	}
	return caseRef
}

// CheckDoneRef refuses a compensation_done naming a resource op is not
// known to have (KnownResource) and whose undo was not decided on it
// (last, or an unsettled one among children: an undo the integrator runs
// may name any resource, CheckUndoRef): the word
// would settle nothing real, and cancel nobody's undo. Naming none
// passes: an undo decided without a resource is said done as decided.
func CheckDoneRef(op *Operation, ref string, last *PriorDecision, children []ChildCompensation) error {
	decided := slices.ContainsFunc(children, func(k ChildCompensation) bool { return k.Ref == ref }) ||
		last != nil && (last.Action == DecideCompensate && last.ResourceRef == ref || last.Action == DecideKeepAndUndo && last.UndoRef == ref)
	if ref == "" || decided || KnownResource(op, ref) {
		return nil
	}
	return fmt.Errorf("%w: field \"candidate\": %s is not a resource this operation is known to have (its resource, a candidate "+
		"its evidence names, or a job's): name the one that is undone", ErrInvalid, ref)
}

// onlyUnsettled is the resource of the one unsettled undo among children
// ("" when none is): the one a compensation_done naming no resource means.
// With several, which of them a person undid by hand is theirs to say,
// not Limbo's to guess: the word would cancel the wrong undo.
func onlyUnsettled(children []ChildCompensation) (string, error) {
	var refs []string
	for _, k := range children {
		if k.Ref != "" && !k.State.Terminal() && !slices.Contains(refs, k.Ref) {
			refs = append(refs, k.Ref)
		}
	}
	switch len(refs) {
	case 0:
		return "", nil
	case 1:
		return refs[0], nil
	}
	slices.Sort(refs)
	return "", fmt.Errorf("%w: field \"candidate\": the undos of %s are under way: name the one that is undone", ErrInvalid, strings.Join(refs, ", "))
}

// WaitsForOtherUndo refuses a compensation_done on an operation being
// undone that names a resource other than the one whose undo is still
// unsettled: the operation waits for that undo, which the word would not
// cancel (SettlesByHand cancels only the named resource's), so the
// operation would be compensated while the undo it waits for still ran,
// or later failed with nobody told. The word names that undo's resource
// (cancelling it when not yet attempted), or the reviewer waits for its
// outcome.
func WaitsForOtherUndo(ref string, children []ChildCompensation) error {
	for _, k := range children {
		if k.Ref != ref && !k.State.Terminal() {
			return fmt.Errorf("%w: field \"candidate\": the operation waits for the undo of %s, which this does not settle: "+
				"name that resource to say it is undone, or wait for its outcome", ErrInvalid, k.Ref)
		}
	}
	return nil
}

// undoesOthers reports whether an undo of a resource other than ref is
// still unsettled among children.
func undoesOthers(ref string, children []ChildCompensation) bool {
	return slices.ContainsFunc(children, func(k ChildCompensation) bool { return k.Ref != ref && !k.State.Terminal() })
}

// planMove plans the operation's move as decided, with the evidence a
// reviewer's decision is (I7: a confirmation rests on it).
func (p *DecisionPlan) planMove(in DecisionInput) {
	op, now := in.Op, in.Now
	detail := map[string]any{"decision_id": in.DecisionID, "case_id": in.CaseID, "action": in.Action}
	switch in.Action {
	case DecideConfirm:
		seen := seenAs(op, p.ResourceRef)
		p.Evidence = &Evidence{Source: SourceReviewer, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: now,
			Candidates: []Candidate{{Ref: p.ResourceRef, Kind: seen.Kind, Version: seen.Version, OperationID: op.ID}}, Note: in.Actor + ": " + in.Reason}
		p.Resource = &seen
	case DecideCompensate:
		detail["compensation"], detail["resource_ref"] = p.Compensation, p.ResourceRef
	case DecideKeepAndUndo:
		// The reviewer's word that the kept resource is the effect; the
		// operation is confirmed with it when the other's undo is.
		p.Evidence = &Evidence{Source: SourceReviewer, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: now,
			Candidates: []Candidate{{Ref: p.ResourceRef, OperationID: op.ID}}, Note: fmt.Sprintf(WhyReviewerKeep, in.Actor, p.ResourceRef, in.UndoRef, in.Reason)}
		detail["compensation"], detail["resource_ref"], detail["undo_ref"] = p.Compensation, p.ResourceRef, in.UndoRef
	case DecideCompensationDone:
		if p.To == Confirmed { // keep_and_undo's duplicate undone by hand
			p.Evidence = &Evidence{Source: SourceReviewer, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: now,
				Candidates: []Candidate{{Ref: p.ResourceRef, OperationID: op.ID}}, Note: fmt.Sprintf(WhyReviewerDuplicateUndone, in.Actor, p.ResourceRef, in.Reason)}
			p.Resource = &ResourceRef{Ref: p.ResourceRef}
			detail["resource_ref"] = p.ResourceRef
			break
		}
		// What compensated rests on: a reviewer's word that the effect is
		// undone — it is no longer there, hence refutes.
		var note string
		switch {
		case p.ResourceRef != "" && p.Compensation != "":
			note = fmt.Sprintf(WhyCompensationDoneOfHow, p.ResourceRef, p.Compensation, in.Actor, in.Reason)
		case p.ResourceRef != "":
			note = fmt.Sprintf(WhyCompensationDoneOf, p.ResourceRef, in.Actor, in.Reason)
		case p.Compensation != "":
			note = fmt.Sprintf(WhyCompensationDoneHow, p.Compensation, in.Actor, in.Reason)
		default:
			note = fmt.Sprintf(WhyCompensationDone, in.Actor, in.Reason)
		}
		p.Evidence = &Evidence{Source: SourceReviewer, Authoritative: true, Verdict: VerdictRefutes, ObservedAt: now, Note: note}
		detail["compensation"], detail["resource_ref"] = p.Compensation, p.ResourceRef
	case DecideCompensationFailed:
		detail["escalation"] = []Reason{ReasonCompensationFailed}
	case DecideApproveRetry:
		b := &ApprovedRetry{MaxAttempts: op.MaxAttempts, Deadline: op.Deadline, NextAttemptAt: now}
		if op.AttemptCount >= b.MaxAttempts {
			b.MaxAttempts = op.AttemptCount + 1
		}
		if !now.Before(b.Deadline) {
			b.Deadline = now.Add(time.Hour) // a retry approved after the deadline gets an hour to run
		}
		if c := op.CostBudget; c != nil {
			budget := *c
			if op.CostSpent >= budget {
				budget = min(op.CostSpent+budget, MaxCost) // as spent attempts get one more
			}
			b.CostBudget = &budget
		}
		p.Retry = b
		// The reviewer weighed the evidence so far and judged a retry
		// safe: Weigh no longer counts it (candidates they set aside
		// would send the retry back to them). Proves nothing itself.
		p.Evidence = &Evidence{Source: SourceReviewer, Verdict: VerdictInconclusive, ObservedAt: now,
			Candidates: []Candidate{}, Note: fmt.Sprintf(WhyReviewerRetry, in.Actor, in.Reason)}
	}
	if f, ok := whyDecided[in.Action]; ok {
		p.MoveReason = fmt.Sprintf(f, in.Actor, in.Reason)
	} else {
		p.MoveReason = in.Action + " by " + in.Actor + ": " + in.Reason // no other action moves an operation
	}
	p.Move = &PlannedEvent{Action: "decision." + in.Action, From: p.From, To: p.To, Detail: detail}
}

// approvalsNeeded is how many different people must give in.Action
// before it applies: an approval case's policy (Destination.ApprovalsNeeded),
// two for a retry that needs a reviewer (NeedsTwoApprovers), else one.
func approvalsNeeded(in DecisionInput) int {
	switch {
	case in.Action == DecideApprove:
		return in.Destination.ApprovalsNeeded(in.Op)
	case NeedsTwoApprovers(in.Op, in.Action):
		return 2
	}
	return 1
}

// countApprovals counts the approvals on record that still count towards
// in.Action, marking for voiding those given for another payload or key
// (an approval is bound to both) and those whose approver may no longer
// decide the case (Revoked), each audited as decision.approval_voided
// saying why, and refuses a person approving twice or approving their own
// request.
func (p *DecisionPlan) countApprovals(in DecisionInput) (int, error) {
	op := in.Op
	if in.Action == DecideApprove && in.RequestedBy != "" && strings.EqualFold(in.RequestedBy, in.Actor) {
		return 0, fmt.Errorf("%w: %s created the API token that registered this operation; another reviewer must approve it", ErrOwnRequest, in.Actor)
	}
	given := 0
	for _, a := range in.Approvals {
		switch {
		case a.PayloadHash != op.PayloadHash || a.Key != op.Key:
			// The approval was for something else: it is void, audited
			// with what it was given for.
			p.Void = append(p.Void, a.Seq)
			p.Events = append(p.Events, PlannedEvent{Action: "decision.approval_voided", Detail: map[string]any{"case_id": in.CaseID,
				"decision_id": a.ID, "approver": a.Actor, "why": WhyApprovalOtherPayload, "voided_by": in.DecisionID,
				"payload_hash": a.PayloadHash, "key": a.Key}})
		case a.Action != in.Action:
			// An approval of another action does not count towards this one.
		case a.Revoked != "":
			// Two approvals mean two people who may decide this now: one
			// from someone disabled, moved off the tenant or demoted since
			// counts no more, and this approval takes its place.
			p.Void = append(p.Void, a.Seq)
			p.Events = append(p.Events, PlannedEvent{Action: "decision.approval_voided", Detail: map[string]any{"case_id": in.CaseID,
				"decision_id": a.ID, "approver": a.Actor, "why": a.Revoked, "voided_by": in.DecisionID}})
		case strings.EqualFold(a.Actor, in.Actor):
			return 0, fmt.Errorf("%w: %s already gave an approval; the next must come from someone else", ErrSecondApprover, in.Actor)
		default:
			given++
		}
	}
	return given, nil
}

// resolved is the case.resolved event, when the decision resolves the case.
func (p *DecisionPlan) resolved(in DecisionInput) []PlannedEvent {
	if !p.ResolveCase {
		return nil
	}
	return []PlannedEvent{{Action: "case.resolved", Detail: map[string]any{"case_id": in.CaseID, "decision_id": in.DecisionID, "resolution": in.Action}}}
}

// seenAs is the resource ref as the ledger last saw it for op — its kind
// and version from the evidence naming op, or from the job that made it:
// a reviewer confirming a resource confirms it as it is, so that an
// operation waiting for "version 7" is not handed a PDF of version 8.
func seenAs(op *Operation, ref string) ResourceRef {
	out := ResourceRef{Ref: ref}
	for _, ev := range op.Evidence {
		for _, c := range ev.Candidates {
			if c.Ref == ref && c.OperationID == op.ID && (c.Version != "" || c.Kind != "") {
				out.Kind, out.Version = c.Kind, c.Version
			}
		}
	}
	for _, j := range op.Jobs {
		if j.OutputRef == ref && j.InputVersion != "" {
			out.Kind, out.Version = "job_output", j.InputVersion
		}
	}
	return out
}
