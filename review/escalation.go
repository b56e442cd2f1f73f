package review

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Recommended actions on a case (SPEC "Escalation reasons").
const (
	RecommendConfirm        = "confirm"
	RecommendCompensate     = "compensate"
	RecommendApproveRetry   = "approve_retry"
	RecommendReconcileAgain = "reconcile_again"
	RecommendFail           = "fail"
	// RecommendReviewPayload: an approval case; only a person can judge.
	RecommendReviewPayload = "review_payload"
	// RecommendUndoByHand: an undo left to a person (UndoByHand) is
	// pending. Nothing settles it but that person's word once the undo is
	// done, so it is no decision a form or a bulk action could take for
	// them: saying compensation_done unasked would mark undone what nobody
	// undid.
	RecommendUndoByHand = "undo_by_hand"
)

// Recommendation is the action a case suggests, with a one-line rationale.
type Recommendation struct {
	Action string `json:"action"`
	// Ref is the resource to confirm or compensate, when the action names one.
	Ref string `json:"ref,omitempty"`
	// Keep is, when the recommendation undoes a duplicate, the resource to
	// keep: what a confirm should name, never Ref.
	Keep      string `json:"keep,omitempty"`
	Rationale string `json:"rationale"`
}

// String renders the action as SPEC writes it: "confirm file-9", "fail".
func (r Recommendation) String() string {
	if r.Ref != "" {
		return r.Action + " " + r.Ref
	}
	return r.Action
}

// ConfirmRef is the resource a confirm decision should name by default:
// the one recommended to confirm, or the one to keep when a duplicate is
// to be undone — never the one to undo. "" when none.
func (r Recommendation) ConfirmRef() string {
	switch r.Action {
	case RecommendConfirm:
		return r.Ref
	case RecommendCompensate:
		return r.Keep
	}
	return ""
}

// UndoRef is the resource a compensate decision should name by default.
func (r Recommendation) UndoRef() string {
	if r.Action == RecommendCompensate {
		return r.Ref
	}
	return ""
}

// Assessment is what escalation rules make of an operation: why a person
// must look, how urgent it is, and what they should probably do.
type Assessment struct {
	Reasons        []Reason
	Priority       int
	Recommendation Recommendation
	// ChangesAt is when the clock alone next changes the assessment: the
	// operation's deadline coming within six hours or within one
	// (priority), or passing (deadline_expired, and what it recommends);
	// the operation having waited an hour, four, twelve, a day (priority,
	// ageSteps). The case is assessed again then, as if evidence had
	// arrived. Zero: nothing but new evidence or a decision changes it.
	ChangesAt time.Time
}

// Assess derives a case's reasons, priority and recommended action from
// the operation (with its attempts, evidence and jobs), the reasons the
// trigger already knows (extra), and the time. Pure and deterministic.
func Assess(op *Operation, extra []Reason, now time.Time) Assessment {
	set := map[Reason]bool{}
	for _, r := range extra {
		set[r] = true
	}
	for _, f := range op.Flags {
		set[Reason(f)] = true
	}
	if op.Risk == RiskIrreversible {
		set[ReasonIrreversible] = true
	}
	if !op.Deadline.IsZero() && !now.Before(op.Deadline) {
		set[ReasonDeadlineExpired] = true
	}
	if op.MaxAttempts > 0 && op.AttemptCount >= op.MaxAttempts || op.CostBudget != nil && op.CostSpent >= *op.CostBudget {
		set[ReasonBudgetExhausted] = true
	}

	f := weigh(op)
	if len(f.matching) > 1 {
		set[ReasonMultipleCands] = true
	}
	if len(f.otherVersion) > 0 {
		set[ReasonVersionMismatch] = true
	}
	if len(f.foreign) > 0 && len(f.matching) == 0 {
		set[ReasonNoDedupEvidence] = true
	}
	switch {
	case f.confirms && f.refutes:
		set[ReasonSourcesDisagree] = true
	case f.foundSince:
		// A disagreement the case was opened for (a reason kept with it, or
		// one the trigger knows) that a look at the destination has since
		// answered: the sources no longer disagree, and the case stops
		// saying so — its badge, its queue filter and its priority. What
		// it was opened for stays in its history (case.opened). Before, the
		// reason stayed for good, and a case recommending to confirm the
		// one resource a look found still read "Sources disagree".
		delete(set, ReasonSourcesDisagree)
	}
	if op.State.Terminal() && op.State != Confirmed && len(f.matching) > 0 {
		set[ReasonStateConflict] = true
	}
	if op.AttemptCount > 0 && len(f.matching) == 0 && len(f.otherVersion) == 0 && len(f.foreign) == 0 && !f.refutes {
		set[ReasonNoDedupEvidence] = true
	}
	if len(f.matching) > 0 && len(op.Undoing) == 0 && len(op.UndoingByHand) == 0 {
		// Nothing showed whether the effect is there (a reason kept with
		// the case, or one the trigger knows), and the destination has
		// since named a resource for this operation and version: the
		// evidence is there now, and the case stops saying there is none
		// (its badge, the queue's filter). Before, a case recommending to
		// confirm the one resource a check found still read "No way to
		// check for duplicates". While an undo is under way the reason is
		// about the undo — whether it happened — which a look finding the
		// resource does not answer, so it stays.
		delete(set, ReasonNoDedupEvidence)
	}
	if set[ReasonPayloadMismatch] && DecidesOn(op.State, reasonList(set)) == OnRefusedPayload {
		// The case is about a refused payload alone, its operation going
		// its own way: what the operation's attempts and the destination's
		// answers say (evidenceReasons) is not this case's, and it changes
		// on paths that do not assess the case again (an attempt, an
		// outcome). Before, a refused payload's case read "No way to check
		// for duplicates" or not, depending on whether evidence for the
		// operation had come in since, and its priority moved with it.
		for _, r := range evidenceReasons {
			delete(set, r)
		}
	}

	a := Assessment{}
	for r := range set {
		a.Reasons = append(a.Reasons, r)
	}
	slices.Sort(a.Reasons)
	a.Priority = priority(op, set, now)
	a.Recommendation = recommend(op, set, f)
	// The deadline's steps count even when the case already says
	// deadline_expired: the reconciler names it ahead of the deadline
	// when the confirm window would end after it, and the deadline
	// passing still adds to the priority. Before, such a case kept the
	// rank of "within the hour" past its deadline.
	a.ChangesAt = nextDeadlineStep(op.Deadline, now)
	if at := nextAgeStep(op.CreatedAt, now); !at.IsZero() && (a.ChangesAt.IsZero() || at.Before(a.ChangesAt)) {
		a.ChangesAt = at
	}
	return a
}

// evidenceReasons are the reasons Assess draws from the operation's
// attempts, evidence and jobs — not from its action (flags, risk), its
// deadline, or what the trigger knows. Taking them from a refused
// payload's case leaves it the refused payload's (DecidesOn):
// multiple_candidates and state_conflict make a case about an extra
// effect only in states where, with them, it was not the refused
// payload's in the first place.
var evidenceReasons = []Reason{ReasonNoDedupEvidence, ReasonSourcesDisagree, ReasonMultipleCands,
	ReasonVersionMismatch, ReasonStateConflict, ReasonBudgetExhausted}

// findings sorts every candidate seen in the evidence and jobs.
type findings struct {
	matching     []string // name this operation and its logical version
	otherVersion []string // name this operation, another version
	foreign      []string // do not name this operation
	confirms     bool     // some authoritative source confirmed
	refutes      bool     // some authoritative source proved absence no later look outlived
	// hooked is the resource naming this operation and its version that
	// the newest webhook claimed (undone ones, and jobs that ended without
	// output, left out).
	hooked string
	// foundSince: a look at the destination (a search, a status lookup)
	// showed the effect after every authoritative word of another kind
	// (a response, an integrator's report): it answers what a case asked
	// a look for. A look that finds nothing does not: absence never wins
	// against an effect or a webhook's claim of one on its own.
	foundSince bool
	// goneSince: a look found nothing after the destination last said
	// the effect happened — the newest word is that it is not there.
	goneSince bool
	// splitSince: the newest look is split — a probe found nothing at the
	// instant another showed the effect (a person's check records its
	// status lookup and its search at one time).
	splitSince bool
	// reported is the resource naming this operation and its version that
	// the newest evidence reported, a webhook's claim included (undone
	// ones, and jobs that ended without output, left out): on a failed or
	// compensated operation, the effect a person is asked to look at.
	reported string
	// claimed is, on a confirmed operation, the resource naming it and its
	// version that the newest signed webhook reported besides the effect
	// the ledger confirmed (and besides any a look at the destination
	// showed): a duplicate only the destination's word names so far.
	claimed string
}

// MatchingRefs are the resources the authoritative evidence shows naming
// op and its logical version (those undone left out): its candidates.
func MatchingRefs(op *Operation) []string { return weigh(op).matching }

// ClaimedDuplicate is the resource a signed webhook names for confirmed
// op and its version besides the effect the ledger confirmed, that no
// look at the destination has shown and nobody is undoing: a duplicate
// only the destination's word names, which may not be there ("" when
// there is none).
func ClaimedDuplicate(op *Operation) string { return claimedOnly(op, weigh(op)) }

func claimedOnly(op *Operation, f findings) string {
	if op.State != Confirmed || f.claimed == "" || slices.Contains(f.matching, f.claimed) || slices.Contains(op.Undoing, f.claimed) {
		return ""
	}
	return f.claimed
}

func weigh(op *Operation) findings {
	var f findings
	seen := map[string]bool{}
	for _, ref := range op.Undone {
		seen[ref] = true // undone: no longer a candidate for anything
	}
	add := func(list *[]string, ref string) {
		if !seen[ref] {
			seen[ref] = true
			*list = append(*list, ref)
		}
	}
	// When the destination last said the effect happened (lastConfirm),
	// last showed it to a look (lastFound), last showed a look nothing
	// (lastAbsent), and last said anything other than what a look shows
	// (lastOther).
	var lastConfirm, lastFound, lastOther, lastAbsent time.Time
	for _, e := range op.Evidence {
		if !e.Authoritative || e.Source == SourceWebhook || e.Source == SourceReviewer {
			continue
		}
		look := e.Source == SourceMetadataSearch || e.Source == SourceStatusLookup
		switch {
		case confirmsEffect(op, e):
			lastConfirm = later(lastConfirm, e.ObservedAt)
			if look {
				lastFound = later(lastFound, e.ObservedAt)
			}
		case e.Verdict == VerdictRefutes && look && noEffectShown(op, e.Candidates):
			lastAbsent = later(lastAbsent, e.ObservedAt)
		}
		if !look {
			lastOther = later(lastOther, e.ObservedAt)
		}
	}
	f.foundSince = lastFound.After(lastOther)
	f.goneSince = !lastConfirm.IsZero() && lastAbsent.After(lastConfirm)
	f.splitSince = !lastConfirm.IsZero() && lastAbsent.Equal(lastConfirm)
	for _, e := range op.Evidence {
		if e.Authoritative && e.Source != SourceWebhook {
			f.confirms = f.confirms || confirmsEffect(op, e)
			f.refutes = f.refutes || e.Verdict == VerdictRefutes && !absenceOutlived(op, e, lastConfirm)
		}
		if e.Source == SourceWebhook || e.Authoritative {
			for _, c := range e.Candidates {
				if c.OperationID == op.ID && (c.Version == "" || c.Version == op.LogicalVersion) &&
					!slices.Contains(op.Undone, c.Ref) && !EndedJob(op, c.Ref) {
					f.reported = c.Ref
					if op.State == Confirmed && e.Source == SourceWebhook && !confirmedAs(op, c.Ref) {
						f.claimed = c.Ref
					}
					if e.Source == SourceWebhook {
						f.hooked = c.Ref
					}
				}
			}
		}
		if e.Source == SourceWebhook || !e.Authoritative {
			// A webhook is a hint to probe, and evidence nobody vouches
			// for proves nothing (EvidenceVerdict): neither is a finding.
			continue
		}
		for _, c := range e.Candidates {
			switch {
			case EndedJob(op, c.Ref), outputStandsFor(op, c.Ref):
				// A job that made nothing is no effect; one whose output
				// is known has the output, found on its own, for effect.
			case c.OperationID == op.ID && (c.Version == "" || c.Version == op.LogicalVersion):
				add(&f.matching, c.Ref)
			case c.OperationID == op.ID:
				add(&f.otherVersion, c.Ref)
			default:
				add(&f.foreign, c.Ref)
			}
		}
	}
	for _, j := range op.Jobs {
		if j.Status == JobSucceeded && j.InputVersion != "" && j.InputVersion != op.LogicalVersion {
			ref := j.OutputRef
			if ref == "" {
				ref = j.Ref
			}
			add(&f.otherVersion, ref)
		}
	}
	return f
}

// confirmsEffect reports whether e said op's effect happened and still
// does: its verdict confirmed, and what it named for op and its version
// is more than jobs the ledger has since learned ended without an effect
// (another operation's resources beside them confirm nothing of op's). A
// response naming a queued job confirmed when it came; once the job
// failed, it no longer says an effect is there, and an empty search
// beside it is no disagreement.
func confirmsEffect(op *Operation, e Evidence) bool {
	if e.Verdict != VerdictConfirms {
		return false
	}
	if len(e.Candidates) == 0 {
		return true // a success that named nothing (unnamedSuccess)
	}
	m, _, _, _ := sortCandidates(op, e.Candidates)
	return len(withoutEndedJobs(op, m)) > 0
}

// absenceOutlived reports whether e, a look that found nothing, was
// taken before the destination showed the effect — before an
// authoritative word that it happened (lastConfirm), or before a job of
// op was known to have succeeded. What was found later may not have
// existed yet, or the search lagged: resources appear, they do not
// vanish, so that absence contradicts nothing (as an empty search does
// not contradict a job still running, Weigh). A look that finds nothing
// after the effect was shown still contradicts it. Before, an absence
// and any later look that found the effect read as sources disagreeing
// for ever: the case recommended looking again, and every look found the
// effect.
func absenceOutlived(op *Operation, e Evidence, lastConfirm time.Time) bool {
	if !noEffectShown(op, e.Candidates) {
		return false
	}
	return e.ObservedAt.Before(lastConfirm) || slices.ContainsFunc(op.Jobs, func(j Job) bool {
		return j.Status == JobSucceeded && e.ObservedAt.Before(j.UpdatedAt)
	})
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// deadlineWeights is what a nearing deadline adds to a case's priority:
// add, once at most within is left (0: the deadline has passed); the
// first that holds counts.
var deadlineWeights = []struct {
	within time.Duration
	add    int
}{{0, 30}, {time.Hour, 20}, {6 * time.Hour, 10}}

// nextDeadlineStep is the first instant after now at which a deadline
// changes a case's priority or its reasons (deadlineWeights); zero when
// none is ahead.
func nextDeadlineStep(deadline, now time.Time) time.Time {
	var next time.Time
	if deadline.IsZero() {
		return next
	}
	for _, w := range deadlineWeights {
		if at := deadline.Add(-w.within); at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// ageSteps are the waits at which age adds to a case's priority: a point
// per hour the operation has waited, counted at these steps (the first
// that holds counts), up to a day. The clock then changes a case's rank
// at four instants (Assessment.ChangesAt), where a point every hour would
// assess every open case every hour. Before, age counted only when
// something else assessed a case, so a case nobody touched kept the rank
// it had when it came in: one waiting a day ranked as if just opened.
var ageSteps = []time.Duration{24 * time.Hour, 12 * time.Hour, 4 * time.Hour, time.Hour}

// nextAgeStep is the first instant after now at which an operation
// created at created has waited an ageSteps step; zero when none is ahead.
func nextAgeStep(created, now time.Time) time.Time {
	var next time.Time
	for _, step := range ageSteps {
		if at := created.Add(step); at.After(now) {
			next = at // ageSteps runs from the longest: the last one ahead is the nearest
		}
	}
	return next
}

// priority: higher is more urgent. Flags weigh most, then the deadline,
// then age (ageSteps).
func priority(op *Operation, set map[Reason]bool, now time.Time) int {
	p := 10
	if set[ReasonFinancial] {
		p += 40
	}
	if set[ReasonIrreversible] {
		p += 30
	}
	if set[ReasonRegulated] {
		p += 20
	}
	if set[ReasonMultipleCands] || set[ReasonStateConflict] || set[ReasonSourcesDisagree] {
		p += 15
	}
	if !op.Deadline.IsZero() {
		left := op.Deadline.Sub(now)
		for _, w := range deadlineWeights {
			if left <= w.within {
				p += w.add
				break
			}
		}
	}
	for _, step := range ageSteps {
		if now.Sub(op.CreatedAt) >= step {
			p += int(step / time.Hour)
			break
		}
	}
	return p
}

func recommend(op *Operation, set map[Reason]bool, f findings) Recommendation {
	switch {
	case op.State == AwaitingApproval && set[ReasonApprovalRequired]:
		// Nothing in the ledger can say whether the action should run: a
		// person reads the payload. No default the form could preselect.
		return Recommendation{Action: RecommendReviewPayload,
			Rationale: RationaleApproval}
	case set[ReasonPayloadMismatch] && DecidesOn(op.State, reasonList(set)) == OnRefusedPayload:
		// The case is about the refused payload alone (its operation is
		// elsewhere), and fail is its one decision: what the evidence says
		// of the operation is not this case's to settle.
		return Recommendation{Action: RecommendFail, Rationale: RationaleRefusedPayload}
	}
	if len(op.Undoing) > 0 {
		// An undo decided already has not settled: its resource is not
		// to be undone again (UndoUnderWay refuses it) nor confirmed
		// meanwhile. A recommendation naming it would be preselected on
		// the form and refused when sent.
		f.matching = slices.DeleteFunc(slices.Clone(f.matching), func(r string) bool { return slices.Contains(op.Undoing, r) })
	}
	live, running := JobToWaitOn(op, reasonList(set))
	// The sources disagree now, or disagreed when the case was opened and
	// no look at the destination has shown the effect since (Assess keeps
	// the reason until one has): once one has, the case recommends from all
	// the evidence (an absence that look outlived contradicts nothing).
	// Before, a case with the reason recommended looking again for ever,
	// whatever every look found.
	disagree := set[ReasonSourcesDisagree]
	switch {
	case settledWithoutEffect(op) && f.reported != "" && !slices.Contains(op.Undoing, f.reported):
		// Limbo said there is no effect (failed) or that it was undone
		// (compensated), and the destination reports one: an effect
		// nobody answers for, to undo (ExtraEffects). Confirming is not
		// on offer: the operation is settled and its integrator told.
		rationale := RationaleEffectOnFailed
		if op.State == Compensated {
			rationale = RationaleEffectOnCompensated
		}
		return Recommendation{Action: RecommendCompensate, Ref: f.reported, Rationale: fmt.Sprintf(rationale, f.reported)}
	case op.State == Failed && !IsCompensation(op.Action) && f.confirms && f.reported == "" && len(op.Undoing) == 0:
		// The destination's own word that the effect happened, naming no
		// resource (UnnamedEffect): nothing to preselect; a person looks.
		return Recommendation{Action: RecommendReconcileAgain, Rationale: RationaleUnnamedEffect}
	case len(f.matching) > 1:
		keep, undo := f.matching[0], f.matching[1]
		if op.State == Confirmed && op.Resource != nil && undo == op.Resource.Ref {
			// Keep what the ledger confirmed; the other is the extra.
			keep, undo = undo, keep
		}
		return Recommendation{Action: RecommendCompensate, Ref: undo, Keep: keep,
			Rationale: fmt.Sprintf(RationaleDuplicates, len(f.matching), keep, undo)}
	case len(op.UndoingByHand) > 0:
		// Limbo sends nothing for these, so waiting settles nothing: a
		// person undoes at the destination, then says so.
		return Recommendation{Action: RecommendUndoByHand, Ref: op.UndoingByHand[0],
			Rationale: fmt.Sprintf(RationaleUndoByHand, strings.Join(op.UndoingByHand, ", "))}
	case len(op.Undoing) > 0:
		// Whatever else the evidence shows waits for the undo's outcome:
		// it settles the operation (compensated, confirmed with what was
		// kept) or sends it back to review.
		return Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleUndoUnderWay, strings.Join(op.Undoing, ", "))}
	case claimedOnly(op, f) != "":
		// The destination's signed word of a second resource beside the
		// confirmed one (ExtraEffects): a duplicate if it is there.
		// Confirming is not on offer (the operation is confirmed); a
		// person looks, then undoes it or says it is undone, or not there.
		_, kept := extraRefs(op, nil)
		return Recommendation{Action: RecommendCompensate, Ref: claimedOnly(op, f),
			Rationale: fmt.Sprintf(RationaleClaimedDuplicate, claimedOnly(op, f), kept)}
	case len(f.matching) == 1 && !disagree && !(running && f.matching[0] == live.Ref):
		return Recommendation{Action: RecommendConfirm, Ref: f.matching[0],
			Rationale: fmt.Sprintf(RationaleOneResource, f.matching[0], op.LogicalVersion)}
	case len(f.otherVersion) > 0:
		return Recommendation{Action: RecommendCompensate, Ref: f.otherVersion[0],
			Rationale: fmt.Sprintf(RationaleOtherVersion, f.otherVersion[0], op.LogicalVersion)}
	case running:
		// The destination accepted a job not known to have ended (a deadline
		// passed while the operation followed it): neither a retry nor
		// failing is safe while it may still run, and the job itself is
		// no effect to confirm yet. A search that finds nothing proves
		// little either: the job's output may not exist yet.
		return Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleJobUnfinished, live.Ref)}
	case !op.State.Terminal() && len(f.matching) == 0 && f.hooked != "":
		// A webhook's claim of an effect no look has shown: absence does
		// not outweigh it (Weigh), so neither a retry nor failing is
		// recommended — either could be wrong if the effect is there —
		// and looks that keep finding nothing cannot settle it: the
		// rationale says what a person does then. Before, such a case
		// recommended failing (a search found nothing, the deadline
		// spent), preselected, or looking again for ever.
		return Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleClaimUnseen, f.hooked)}
	case set[ReasonDependencyFailed] && op.AttemptCount == 0:
		// Nothing was sent, so nothing is there to probe for: the
		// operation can only be failed (or approved to run once its
		// dependency is redone).
		return Recommendation{Action: RecommendFail, Rationale: RationaleDependencyBroken}
	case disagree && f.goneSince && len(f.matching) == 1 && !op.State.Terminal():
		// The effect was shown, and the newest look finds nothing: a
		// search failing, or the resource removed at the destination.
		// Looking again may settle the first; only a person the second.
		// Before, the case recommended looking again for ever.
		return Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleEffectGone, f.matching[0])}
	case disagree && f.splitSince && len(f.matching) == 1 && !op.State.Terminal():
		// The newest look is split: the status lookup finds the effect,
		// the search does not (a lagging or failing search, or a lookup
		// answering from a stale record). Looking again may settle it, and
		// when every check says the same, only a person can. Before, the
		// case recommended probing again, and every check said the same.
		return Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleLooksSplit, f.matching[0])}
	case disagree:
		return Recommendation{Action: RecommendReconcileAgain, Rationale: RationaleDisagree}
	case f.refutes && (set[ReasonDeadlineExpired] || set[ReasonBudgetExhausted]):
		return Recommendation{Action: RecommendFail, Rationale: RationaleSpent}
	case f.refutes:
		return Recommendation{Action: RecommendApproveRetry, Rationale: RationaleSafeRetry}
	case set[ReasonPayloadMismatch]:
		return Recommendation{Action: RecommendReconcileAgain, Rationale: RationalePayloadReused}
	case set[ReasonDeadlineExpired]:
		return Recommendation{Action: RecommendReconcileAgain, Rationale: RationaleDeadlinePassed}
	}
	return Recommendation{Action: RecommendReconcileAgain, Rationale: RationaleNoEvidence}
}

// reasonList is set's reasons, in no order.
func reasonList(set map[Reason]bool) []Reason {
	rs := make([]Reason, 0, len(set))
	for r, on := range set {
		if on {
			rs = append(rs, r)
		}
	}
	return rs
}
