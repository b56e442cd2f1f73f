package review

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
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
	fields := map[string]string{"compensates": parent.ID, "resource": ref, "how": how, "decision": decisionID}
	if isJob(parent, ref) {
		// Its undo (a cancel) is settled by the job probe (LookupRef).
		fields["kind"] = "job"
	}
	payload, err := json.Marshal(fields)
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
		Reason: fmt.Sprintf(WhyUndoes, ref, parent.ID, actor)}
	// Registered like any operation (the trail of every operation starts
	// with operation.registered); the detail says what it compensates.
	p.Event = PlannedEvent{Action: "operation.registered", To: Pending,
		Detail: map[string]any{"key": r.Key, "payload_hash": p.PayloadHash, "parent": parent.ID, "resource": ref, "decision_id": decisionID}}
	return p, nil
}

// CompensationSettles says what a compensation reaching state child means
// for its parent (compensating): confirmed → the parent is compensated, or
// confirmed with the kept resource when the decision kept one (keep_and_undo);
// ambiguous → the parent stays compensating (Compensating) while the undo
// is reconciled, its case marked compensation_failed; in review → the
// same, while a person decides on the compensation's own case whether
// the undo happened (the parent back in needs_review could not follow
// that word: no decision there ends in compensated but another undo);
// failed → the parent goes back to review with reason
// compensation_failed. Any other state moves nothing ("").
func CompensationSettles(child State, keep string) (State, []Reason, string) {
	switch child {
	case Confirmed:
		if keep != "" {
			return Confirmed, nil, fmt.Sprintf(WhyDuplicateUndone, keep)
		}
		return Compensated, nil, WhyCompensationConfirmed
	case Ambiguous:
		// The undo's answer was lost: the parent keeps waiting while the
		// compensation is reconciled, and its case says the undo is in doubt.
		return Compensating, []Reason{ReasonCompensationFailed}, WhyCompensationOutcomeUnknown
	case Failed:
		return NeedsReview, []Reason{ReasonCompensationFailed}, WhyCompensationFailed
	case NeedsReview:
		return Compensating, []Reason{ReasonCompensationFailed}, WhyCompensationInReview
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

// isJob reports whether ref is a job of op: one an outcome or a job poll
// tied to it, or a candidate some evidence names as a job.
func isJob(op *Operation, ref string) bool {
	if slices.ContainsFunc(op.Jobs, func(j Job) bool { return j.Ref == ref }) {
		return true
	}
	return slices.ContainsFunc(op.Evidence, func(e Evidence) bool {
		return slices.ContainsFunc(e.Candidates, func(c Candidate) bool { return c.Ref == ref && c.Kind == "job" })
	})
}

// CompensationUndoesJob reports whether compensation op undoes a job of
// its parent (a cancel), as its payload says: its undo is looked up with
// the destination's job probe, and read as a job's status (undoJobStatus).
func CompensationUndoesJob(op *Operation) bool {
	if !IsCompensation(op.Action) {
		return false
	}
	var p struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(op.Payload, &p) == nil && p.Kind == "job"
}

// CompensationParent is the operation compensation op undoes a resource
// of, as its payload names it ("" for an operation that is not one).
func CompensationParent(op *Operation) string {
	if !IsCompensation(op.Action) {
		return ""
	}
	var p struct {
		Compensates string `json:"compensates"`
	}
	if json.Unmarshal(op.Payload, &p) != nil {
		return ""
	}
	return p.Compensates
}

// What a destination's status lookup says of the resource an undo was
// sent for: the one definition settleUndo reads (undoStatus). Undone: the
// resource no longer has its effect. Live: it stands as it did before the
// undo. Any other word — the undo still in progress there (refund_pending,
// deleting, pending_deletion, cancelling, processing), or one whose
// meaning depends on the destination (succeeded: a refunded charge may
// still say so; queued) — says neither.
var (
	undoneStatuses = []string{"compensated", "deleted", "canceled", "cancelled", "refunded", "voided", "revoked", "removed"}
	liveStatuses   = []string{"active", "enabled", "live", "published"}
)

// undoJobStatus is what a job's status, as the job probe answered it,
// says of its cancel: canceled, or failed (no effect of it remains,
// endedJob), confirms; succeeded refutes — the job ran through, its effect
// stands; queued or running says neither (the cancel may be under way).
func undoJobStatus(status string) Verdict {
	switch JobStatus(status) {
	case JobCanceled, JobFailed:
		return VerdictConfirms
	case JobSucceeded:
		return VerdictRefutes
	}
	return VerdictInconclusive
}

// undoStatus is what status (as a lookup answered it, any case) says of an
// undo: confirms (undone), refutes (live) or inconclusive.
func undoStatus(status string) Verdict {
	switch s := strings.ToLower(status); {
	case slices.Contains(undoneStatuses, s):
		return VerdictConfirms
	case slices.Contains(liveStatuses, s):
		return VerdictRefutes
	}
	return VerdictInconclusive
}

// lookupStatus is a status lookup's word on ref: its status, lowercased,
// or clash naming the ref the answer lists twice differently — with
// another operation or version (uniqueRefs), or with another status.
func lookupStatus(cs []Candidate, ref string) (status, clash string) {
	if _, clash := uniqueRefs(cs); clash != "" {
		return "", clash
	}
	seen := false
	for _, c := range cs {
		if c.Ref != ref {
			continue
		}
		if s := strings.ToLower(c.Status); !seen {
			status, seen = s, true
		} else if s != status {
			return "", ref
		}
	}
	return status, ""
}

// settleUndo settles an ambiguous compensation — its undo sent, the
// answer lost — from a status lookup of the resource it undoes: a search
// for the compensation cannot show a DELETE, so absence there proves
// nothing. The destination does not find the resource (404, 410) or
// gives it an undone status: the undo is done (confirmed). It shows the
// resource live (liveStatuses) once the confirm window has passed since
// the undo was sent: the undo did not happen, and may be sent again (an
// undo is idempotent at the destination) while the budget lasts — except
// the undo of a financial, irreversible or regulated action (a refund),
// which goes to a person instead (RetryNeedsReviewer). Inside
// the window a live status may be the destination showing the undo late,
// as an empty search inside it may be one showing a write late
// (AbsenceSure): sending the undo again on it could refund twice, and
// nothing would catch it — a search cannot show an undo, so none is
// watched for (Watch) — so it is looked up again once the window has
// passed, as failing waits (waitOutWindow). Anything else — a failed lookup, a status saying
// neither (an undo in progress), an answer that contradicts itself, or
// lookups disagreeing — is inconclusive and probed again, and goes to a
// person once the rounds or the deadline are spent; it never sends the
// undo again.
func settleUndo(in SettleInput) Settlement {
	op, now := in.Op, in.Now
	ref := CompensationResource(op)
	// A cancel is read from the job's status, and a job that succeeded is
	// final: no confirm window can show the cancel late.
	verdict, cancel := undoStatus, CompensationUndoesJob(op)
	if cancel {
		verdict = undoJobStatus
	}
	var st Settlement
	var undone, live string // the reason the resource is undone, the live status shown
	for _, r := range in.Results {
		if r.Kind != ProbeStatus || r.Ref != ref {
			continue
		}
		if r.Err != "" {
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyUndoLookupFailed, ref, r.Err)))
			continue
		}
		if r.NotFound {
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictConfirms, fmt.Sprintf(WhyUndoNotFound, ref)))
			undone = cmp.Or(undone, fmt.Sprintf(WhyReconciledNotFound, ref))
			continue
		}
		status, clash := lookupStatus(r.Candidates, ref)
		switch v := verdict(status); {
		case clash != "":
			ev := r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyAnswerClash, r.Kind, clash))
			ev.Authoritative = false
			st.Evidence = append(st.Evidence, ev)
		case v == VerdictConfirms:
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictConfirms, fmt.Sprintf(WhyUndoStatus, ref, status)))
			undone = cmp.Or(undone, fmt.Sprintf(WhyReconciledStatus, ref, status))
		case v == VerdictRefutes && !cancel && !AbsenceSure(in.Destination, in.LastWrite, now):
			ev := r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyUndoStatusTooSoon, ref, status))
			ev.Authoritative = false
			st.Evidence = append(st.Evidence, ev)
			live = cmp.Or(live, status)
		case v == VerdictRefutes:
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictRefutes, fmt.Sprintf(WhyUndoStatusNotUndone, ref, status)))
			live = cmp.Or(live, status)
		case status != "":
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyUndoStatusUnknown, ref, status)))
		default:
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyUndoNoStatus, ref)))
		}
	}
	switch {
	case undone != "" && live != "":
		// Lookups that disagree prove nothing: probed again.
	case undone != "":
		st.State, st.Reason = Confirmed, undone
		return st
	case live != "" && cancel:
		// Cancelling a finished job again changes nothing: a person
		// decides what to undo (its output, say).
		return st.escalate("", fmt.Sprintf(WhyUndoJobRanThrough, ref))
	case live != "" && !AbsenceSure(in.Destination, in.LastWrite, now):
		then := WhyUndoAgainOnlyIfStillShown
		if RetryNeedsReviewer(op) {
			then = WhyUndoToReviewerOnlyIfStillShown
		}
		return st.waitOutWindow(in, fmt.Sprintf(WhyUndoStatusTooSoon, ref, live), then)
	case live != "" && RetryNeedsReviewer(op):
		// A refund, or any undo of a financial, irreversible or regulated
		// action, is sent again only by a person (SPEC: never retried
		// without a reviewer): the destination may still be working on
		// the first one, and two refunds are not undone by a third.
		return st.escalate("", fmt.Sprintf(WhyUndoDidNotHappen, ref, live)+"; "+WhyUndoNeedsReviewer)
	case live != "":
		to, why := AfterAbsence(op, func() time.Time { return now })
		st.State, st.Reason = to, fmt.Sprintf(WhyUndoDidNotHappen, ref, live)+"; "+why
		return st
	}
	round := in.Round + 1
	next := now.Add(min(ProbeBackoffBase<<min(round, 20), ProbeBackoffCap))
	switch {
	case !op.Deadline.IsZero() && next.After(op.Deadline):
		return st.escalate(ReasonDeadlineExpired, WhyUndoPastDeadline)
	case round >= MaxProbeRounds:
		return st.escalate(ReasonNoDedupEvidence, fmt.Sprintf(WhyUndoRoundsSpent, round, ref))
	}
	st.NextProbe = next
	st.Reason = fmt.Sprintf(WhyUndoProbing, ref)
	return st
}
