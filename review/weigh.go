package review

import (
	"fmt"
	"slices"
	"time"
)

// EvidenceVerdict is what one piece of evidence says about op's effect, on
// its own: exactly one candidate naming the operation and its logical
// version (jobs the ledger knows ended without an effect left out)
// confirms; an authoritative answer with no candidates, or only such
// jobs, refutes; anything else is inconclusive. It is the verdict stored with the
// evidence; where the operation goes is decided by Weigh, from all of it.
func EvidenceVerdict(op *Operation, ev Evidence) Verdict {
	cands, clash := uniqueRefs(ev.Candidates) // a ref listed twice is one candidate
	m, o, _, anon := sortCandidates(op, cands)
	m = withoutEndedJobs(op, m)
	switch {
	case clash != "" || len(anon) > 0:
		// It contradicts itself, or names a resource that may be this
		// operation's as well as anything else's.
		return VerdictInconclusive
	case len(m) == 1 && len(o) == 0:
		// A candidate naming another operation is not this one's effect.
		return VerdictConfirms
	case noEffectShown(op, cands) && ev.Authoritative:
		return VerdictRefutes
	}
	return VerdictInconclusive
}

// Weighing is where everything persisted about an operation's effect
// leaves it. State "" means it stays where it is.
type Weighing struct {
	State    State
	Reasons  []Reason
	Reason   string
	Resource *ResourceRef
	// Job is a job the evidence found that the ledger does not hold yet:
	// the operation follows it (accepted).
	Job *Job
	// Watch: the operation moves on proven absence; search for it through
	// the confirm window (Watch).
	Watch bool
}

// Assessed reports the states evidence may move an operation out of: those in
// which nobody is answering for the effect yet. An attempt in flight waits
// for its outcome (or its lease), accepted follows its job, and a person
// decides in review; terminal states are final.
func Assessed(s State) bool { return s == Pending || s == RetryWait || s == Ambiguous }

// Weigh re-reads op's whole record — every evidence row (the newest
// included), its attempts — and says where the operation goes. It is asked
// every time evidence lands, so the answer never depends on which piece
// came last (issue 12):
//
//   - Authoritative evidence naming this operation and version (not a
//     webhook, which never confirms on its own) is an effect. Effects do
//     not vanish, so confirming evidence counts whenever it was observed:
//     in pending, retry_wait or ambiguous it stops attempts — confirmed
//     when it names one resource and nothing contradicts it, a case when
//     it names several, or when a fresh proof of absence contradicts it.
//   - Absence is proven only by authoritative evidence with no candidates,
//     observed after the last attempt was sent — and for a metadata
//     search, only once the destination's search lag had passed since
//     then, whoever submitted it. It never outweighs an effect.
//   - A signed webhook naming this operation is a claim: it cannot confirm,
//     but absence cannot win against it (sources disagree), and a pending
//     or retry_wait operation is reconciled before anything is repeated.
//   - Only an ambiguous operation settles on absence or escalates on
//     candidates of another version or of no operation.
//   - Evidence recorded before the newest reviewer decision (a confirm, an
//     undo said done, a retry approved) was weighed by that person and is
//     not counted again. Recorded, not observed: what the reviewer could
//     not have seen counts, whenever it was observed; and the order rows
//     were written in decides, not clocks that may read the same.
func Weigh(op *Operation, d Destination, now time.Time) Weighing {
	if !Assessed(op.State) {
		return Weighing{}
	}
	lastWrite := LastWriteAt(op.Attempts)
	decided := -1 // op.Evidence is in the order it was recorded
	for i, ev := range op.Evidence {
		if ev.Source == SourceReviewer {
			decided = i
		}
	}
	effects := map[string]Candidate{} // by ref
	var order []string
	var claimed, absent, several bool
	// Absence contradicts an effect (or a webhook's claim of one) only when
	// it was sure (AbsenceSure: past the confirm window since the last
	// write). Inside the window an empty search next to a named effect is
	// a search lagging longer than configured — resources do not vanish —
	// and the effect stands.
	var sureAbsent bool
	var otherVersion, foreign []Candidate
	for i, ev := range op.Evidence {
		if i <= decided || ev.Source == SourceReviewer {
			continue // a person weighed it when they decided
		}
		cands, clash := uniqueRefs(ev.Candidates)
		m, o, f, anon := sortCandidates(op, cands)
		m = withoutEndedJobs(op, m)
		switch {
		case ev.Source == SourceWebhook:
			if len(m) > 0 {
				claimed = true
			}
		case !ev.Authoritative, clash != "", len(anon) > 0:
			// Proves nothing (EvidenceVerdict).
		case noEffectShown(op, cands):
			// Only a look at what the destination holds proves absence (an
			// error answer never does), and only as its verdict recorded it
			// (a lookup that no longer finds a known ref is a conflict, not
			// absence).
			if ev.Verdict == VerdictRefutes && (ev.Source == SourceMetadataSearch || ev.Source == SourceStatusLookup) &&
				freshAbsence(ev, lastWrite, d.SearchLag) {
				absent = true
				sureAbsent = sureAbsent || AbsenceSure(d, lastWrite, ev.ObservedAt)
			}
		case len(m)+len(o) > 1:
			// Exactly one candidate confirms; several naming this
			// operation are for a person.
			several = true
		case len(m) == 1:
			if _, seen := effects[m[0].Ref]; !seen {
				effects[m[0].Ref] = m[0]
				order = append(order, m[0].Ref)
			}
		case !ev.ObservedAt.Before(lastWrite):
			// No effect of this operation's version: what else was found
			// matters only when seen since the last send (earlier ones
			// were about an earlier attempt).
			otherVersion, foreign = append(otherVersion, o...), append(foreign, f...)
		}
	}
	switch {
	case len(effects) > 1:
		return Weighing{State: NeedsReview, Reasons: []Reason{ReasonMultipleCands},
			Reason: fmt.Sprintf(WhyEvidenceNamesResources, len(effects))}
	case several:
		return Weighing{State: NeedsReview, Reasons: []Reason{ReasonMultipleCands},
			Reason: WhySeveralCandidates}
	case len(effects) == 1 && effects[order[0]].Kind == "job":
		// The destination holds a job for this operation: not an effect
		// until it succeeds (it may still fail). Follow it, as Settle does.
		// An empty search does not contradict it: what a search finds is
		// the job's output, which does not exist before the job ends.
		c := effects[order[0]]
		w := Weighing{State: Accepted, Reason: fmt.Sprintf(WhyEvidenceNamesJob, c.Ref)}
		if !slices.ContainsFunc(op.Jobs, func(j Job) bool { return j.Ref == c.Ref }) {
			w.Job = &Job{Ref: c.Ref, Status: JobQueued, InputVersion: c.Version, Found: true}
		}
		return w
	case len(effects) == 1 && sureAbsent:
		return Weighing{State: NeedsReview, Reasons: []Reason{ReasonSourcesDisagree},
			Reason: fmt.Sprintf(WhyEvidenceThenAbsence, order[0])}
	case len(effects) == 1:
		c := effects[order[0]]
		return Weighing{State: Confirmed, Resource: &ResourceRef{Ref: c.Ref, Kind: c.Kind, Version: c.Version},
			Reason: fmt.Sprintf(WhyEvidenceNamesOne, c.Ref)}
	case claimed && sureAbsent:
		return Weighing{State: NeedsReview, Reasons: []Reason{ReasonSourcesDisagree},
			Reason: WhyWebhookThenAbsence}
	case claimed && absent && op.State == Ambiguous:
		// The search may not show it yet: no retry, and no case, until
		// the confirm window has passed (the reconciler probes again).
		return Weighing{}
	case claimed && op.State != Ambiguous:
		return Weighing{State: Ambiguous, Reason: WhyWebhookClaim}
	case op.State != Ambiguous:
		return Weighing{}
	case len(otherVersion) > 0:
		c := otherVersion[0]
		return Weighing{State: NeedsReview, Reasons: []Reason{ReasonVersionMismatch},
			Reason: fmt.Sprintf(WhyOtherVersion, c.Ref, c.Version, op.LogicalVersion)}
	case len(foreign) > 0:
		return Weighing{State: NeedsReview, Reasons: []Reason{ReasonNoDedupEvidence},
			Reason: fmt.Sprintf(WhyForeignResource, foreign[0].Ref)}
	case absent && RetryNeedsReviewer(op):
		if !AbsenceSure(d, lastWrite, now) {
			return Weighing{} // an approved retry is final: the reconciler waits out the confirm window
		}
		return Weighing{State: NeedsReview,
			Reason: WhyNoEffectNeedsReviewer}
	case absent:
		st, why := AfterAbsence(op, func() time.Time { return now })
		if st == Failed && !AbsenceSure(d, lastWrite, now) {
			return Weighing{} // final: the reconciler waits out the confirm window
		}
		return Weighing{State: st, Reason: why, Watch: st == RetryWait && d.Window() > 0}
	}
	return Weighing{}
}

// freshAbsence reports whether ev, an authoritative answer with no
// candidates, proves absence now: it was observed after the last send, and
// a metadata search only once the search lag had passed since then.
func freshAbsence(ev Evidence, lastWrite time.Time, lag time.Duration) bool {
	if ev.ObservedAt.Before(lastWrite) {
		return false
	}
	if ev.Source == SourceMetadataSearch && !lastWrite.IsZero() && ev.ObservedAt.Sub(lastWrite) < lag {
		return false
	}
	return true
}

// LastWriteAt is the latest moment any of the attempts could have landed
// at the destination, from which a search's lag is counted. A request
// lands any time before its outcome is known — a slow network, a queue in
// front of the destination — so the moment is an attempt's end (its
// outcome report, or the lease sweep), and, while it is still open, its
// lease expiry. Counting from the grant let a write landing late inside
// the lease pass for absent.
func LastWriteAt(attempts []Attempt) time.Time {
	var last time.Time
	for _, a := range attempts {
		end := a.LeaseExpiresAt
		if a.FinishedAt != nil {
			end = *a.FinishedAt
		}
		if end.IsZero() {
			end = a.StartedAt
		}
		if end.After(last) {
			last = end
		}
	}
	return last
}
