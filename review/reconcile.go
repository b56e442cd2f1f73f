package review

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ProbeKind says which step of the reconciliation hierarchy a probe is.
type ProbeKind string

const (
	// ProbeStatus looks the known resource or job up by its ref.
	ProbeStatus ProbeKind = "status"
	// ProbeSearch searches the destination for the operation id in metadata.
	ProbeSearch ProbeKind = "search"
	// ProbeHistory lists the versions of a resource the search found for
	// the operation at another version (Ref): whether this operation's
	// own version ever existed there — a lost answer after a later upload.
	ProbeHistory ProbeKind = "history"
)

// ProbeResult is one probe's answer.
type ProbeResult struct {
	Kind ProbeKind
	// Err is set when the probe failed (timeout, 5xx, unreadable answer):
	// a failed probe proves nothing either way.
	Err string
	// Class is the class of a failed request (netguard's: policy, dns,
	// connect, tls, timeout, http_status), Err then its fixed message;
	// empty when the request was answered but the answer was unusable.
	Class string
	// Ref is the ref a status lookup asked about: one the ledger knows (see
	// LookupRef). Its answer must name it.
	Ref string
	// NotFound: a status lookup answered that the ref does not exist (404
	// or 410). For a ref the ledger knows, that contradicts the ledger.
	NotFound   bool
	Candidates []Candidate
	At         time.Time
	// Took is how long the probe took.
	Took time.Duration
}

// Evidence turns a probe result into the evidence row that records it.
func (p ProbeResult) Evidence(op *Operation, verdict Verdict, note string) Evidence {
	src := SourceMetadataSearch
	if p.Kind == ProbeStatus || p.Kind == ProbeHistory {
		src = SourceStatusLookup
	}
	cands := p.Candidates
	if cands == nil {
		cands = []Candidate{}
	}
	return Evidence{Source: src, Authoritative: p.Err == "", Candidates: cands, Verdict: verdict, Note: note, ObservedAt: p.At}
}

// Reconciliation limits.
const (
	// MaxProbeRounds: after this many inconclusive rounds a person decides.
	MaxProbeRounds = 8
	// ProbeBackoffBase and ProbeBackoffCap space the rounds.
	ProbeBackoffBase = time.Second
	ProbeBackoffCap  = 5 * time.Minute
	// EvidenceWait is how long an ambiguous operation on a destination
	// without probes waits for the integrator's evidence before escalating.
	EvidenceWait = 2 * time.Minute
)

// Settlement is what a reconciliation round concludes.
type Settlement struct {
	// State is where the operation goes; "" means it stays ambiguous and is
	// probed again at NextProbe.
	State    State
	Reasons  []Reason
	Reason   string
	Resource *ResourceRef
	// Job is the job found, when the operation goes to accepted.
	Job *Job
	// Watch: the operation moves on proven absence; search for it through
	// the confirm window (Watch).
	Watch     bool
	NextProbe time.Time
	// Evidence are the rows to record, one per probe.
	Evidence []Evidence
	// Uncounted: the round settled nothing only because the search could
	// not show the attempt yet (inside the search lag). It counts toward
	// neither MaxProbeRounds nor the backoff of the rounds after it.
	Uncounted bool
}

// SettleInput is one reconciliation round's facts.
type SettleInput struct {
	Op          *Operation
	Destination Destination
	// LastWrite is the latest moment an attempt could have landed
	// (LastWriteAt): a search only counts as absence once the
	// destination's search lag has passed since then.
	LastWrite time.Time
	Results   []ProbeResult
	// Round is the number of rounds already run.
	Round int
	Now   time.Time
}

// LookupRef is the ref a status lookup asks the destination about: the
// operation's resource when the ledger knows one, else its latest job not
// known to have ended without an effect (job is then true); "" when the
// ledger knows neither. A failed or canceled job is no effect to look
// for: asked about, a destination that has purged it would read as a
// contradiction, and left unanswered it would keep every empty search
// from proving absence.
func LookupRef(op *Operation) (ref string, job bool) {
	if ref := CompensationResource(op); ref != "" {
		// An undo is settled by looking its resource up: a job with the
		// job probe.
		return ref, CompensationUndoesJob(op)
	}
	if op.Resource != nil && op.Resource.Ref != "" {
		return op.Resource.Ref, false
	}
	for i := len(op.Jobs) - 1; i >= 0; i-- {
		if j := op.Jobs[i]; j.Ref != "" && !EndedJob(op, j.Ref) {
			return j.Ref, true
		}
	}
	return "", false
}

// Settle applies SPEC's reconciliation hierarchy to one round of probes:
// status lookup, then metadata search; exactly one candidate matching the
// operation id and logical version confirms; authoritative, fresh absence
// allows a retry with the same key (or, for financial and irreversible
// operations, a reviewer's approval); anything else goes to a person.
// Never assume absence: a failed probe, a search inside the freshness
// window, or a ref the ledger knows that no lookup answered for leaves the
// operation ambiguous, to be probed again. A ref the ledger knows that the
// destination does not find contradicts the ledger: state_conflict.
func Settle(in SettleInput) Settlement {
	if IsCompensation(in.Op.Action) {
		return settleUndo(in)
	}
	return withHistory(in, settleRound(in))
}

// withHistory weighs a round's conclusion against everything the ledger
// already holds (review.Weigh over the earlier evidence and this round's):
// an effect recorded earlier — a response naming the resource, a late
// outcome kept as evidence, a webhook's claim — is not outweighed by this
// round's empty search, and a resource this round finds is not the only
// one when earlier evidence named another (issue 12, hole 9). Only a
// round that would settle (confirm, or act on absence) is re-weighed.
func withHistory(in SettleInput, st Settlement) Settlement {
	settles := st.State == Confirmed || st.State == RetryWait || st.State == Failed ||
		(st.State == NeedsReview && len(st.Reasons) == 0) // absence of a financial or irreversible effect
	if !settles {
		return st
	}
	op := *in.Op
	op.Evidence = append([]Evidence{}, in.Op.Evidence...)
	for _, ev := range st.Evidence {
		ev.ObservedAt = in.Now
		op.Evidence = append(op.Evidence, ev)
	}
	w := Weigh(&op, in.Destination, in.Now)
	onAbsence := st.State != Confirmed
	switch {
	case w.State == NeedsReview && len(w.Reasons) > 0:
		st.Resource, st.Job = nil, nil
		return st.escalate(w.Reasons[0], w.Reason)
	case onAbsence && w.State == Confirmed:
		// An effect the ledger already holds, which this round's search
		// does not show yet (inside the confirm window): it is the effect.
		st.State, st.Reasons, st.Reason, st.Resource, st.Watch = Confirmed, nil, w.Reason, w.Resource, false
	case onAbsence && w.State == "":
		// Earlier evidence (a webhook's claim) names an effect that the
		// search does not show yet: not absence until the window passes.
		sure := in.LastWrite.Add(in.Destination.Window())
		if !in.Op.Deadline.IsZero() && sure.After(in.Op.Deadline) {
			st.Watch = false
			return st.escalate(ReasonDeadlineExpired, WhyClaimPastDeadline)
		}
		st.State, st.Reasons, st.Resource, st.Job, st.Watch = "", nil, nil, nil, false
		st.NextProbe = maxTime(sure, in.Now.Add(ProbeBackoffBase))
		st.Reason = WhyClaimProbing
	}
	return st
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// settleRound is Settle for this round's probe results alone.
func settleRound(in SettleInput) Settlement {
	op, now := in.Op, in.Now
	var st Settlement
	var matching, otherVersion, foreign []Candidate
	failed, absent, withinLag := 0, false, false
	known, _ := LookupRef(op)
	lookedUp, conflict := false, ""
	// existed: resources found at another version whose history shows
	// this operation's own version (HistoryEvidence).
	existed := map[string]bool{}
	for _, r := range in.Results {
		// The known ref was looked up, and the answer names it and can be
		// read: only then may an empty search speak of absence.
		if r.Kind == ProbeStatus && r.Ref != "" && r.Ref == known && r.Err == "" && names(r.Candidates, known) {
			cs, clash := uniqueRefs(r.Candidates)
			_, _, _, anon := sortCandidates(op, cs)
			lookedUp = clash == "" && len(anon) == 0
		}
	}
	for _, r := range in.Results {
		if r.Err != "" {
			failed++
			note := fmt.Sprintf(WhyProbeFailed, r.Kind, r.Err)
			if r.Class != "" {
				note = fmt.Sprintf(WhyProbeFailedClass, r.Kind, r.Class, r.Err)
			}
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictInconclusive, note))
			continue
		}
		if r.Kind == ProbeHistory {
			ev, mine := HistoryEvidence(op, r, otherVersion)
			existed[r.Ref] = existed[r.Ref] || mine
			st.Evidence = append(st.Evidence, ev)
			continue
		}
		if r.Kind == ProbeStatus && r.Ref != "" && !names(r.Candidates, r.Ref) {
			// The ledger holds this ref (an outcome or a job report named
			// it); the destination does not: not absence, a contradiction.
			conflict = fmt.Sprintf(WhyLedgerRefNotFound, r.Ref)
			if !r.NotFound && len(r.Candidates) > 0 {
				conflict = fmt.Sprintf(WhyLedgerRefAnswers, r.Ref, r.Candidates[0].Ref)
			}
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictInconclusive, conflict))
			continue
		}
		cs, clash := uniqueRefs(r.Candidates)
		m, o, f, anon := sortCandidates(op, cs)
		m = withoutEndedJobs(op, m)
		switch {
		case clash != "":
			failed++
			ev := r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyAnswerClash, r.Kind, clash))
			ev.Authoritative = false
			st.Evidence = append(st.Evidence, ev)
			continue
		case len(anon) > 0:
			// SPEC: exactly one candidate. One that names no operation
			// may be this operation's effect as well as anything else.
			failed++
			ev := r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhyAnonymousCandidate, r.Kind, anon[0].Ref))
			ev.Authoritative = false
			st.Evidence = append(st.Evidence, ev)
			continue
		}
		matching, otherVersion, foreign = append(matching, m...), append(otherVersion, o...), append(foreign, f...)
		switch {
		case len(m) == 1 && len(o) == 0:
			// Candidates naming another operation are not this one's
			// effect: the one matching is the only candidate that counts.
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictConfirms, foundNote(r.Kind, m[0].Ref)))
		case r.Kind == ProbeSearch && noEffectShown(op, cs):
			fresh := in.LastWrite.IsZero() || now.Sub(in.LastWrite) >= in.Destination.SearchLag
			switch {
			case !fresh:
				withinLag = true
				note := fmt.Sprintf(WhySearchWithinLag, in.Destination.SearchLag)
				if len(cs) > 0 {
					note = fmt.Sprintf(WhySearchOnlyEndedWithinLag, refList(cs), in.Destination.SearchLag)
				}
				ev := r.Evidence(op, VerdictInconclusive, note)
				ev.Authoritative = false
				st.Evidence = append(st.Evidence, ev)
			case known != "" && !lookedUp:
				ev := r.Evidence(op, VerdictInconclusive, fmt.Sprintf(WhySearchLedgerHolds, known))
				ev.Authoritative = false
				st.Evidence = append(st.Evidence, ev)
			default:
				absent = true
				note := WhySearchNothing
				if len(cs) > 0 {
					note = fmt.Sprintf(WhySearchOnlyEnded, refList(cs))
				}
				st.Evidence = append(st.Evidence, r.Evidence(op, VerdictRefutes, note))
			}
		default:
			note := fmt.Sprintf(WhyFoundCandidates, r.Kind, len(cs))
			if len(cs) == 1 {
				note = fmt.Sprintf(WhyFoundOneCandidate, r.Kind)
			}
			st.Evidence = append(st.Evidence, r.Evidence(op, VerdictInconclusive, note))
		}
	}
	// A resource found at a later version, whose history holds this
	// operation's version, is this operation's effect.
	otherVersion = slices.DeleteFunc(otherVersion, func(c Candidate) bool {
		if existed[c.Ref] {
			c.Version = op.LogicalVersion
			matching = append(matching, c)
		}
		return existed[c.Ref]
	})
	matching, _ = uniqueRefs(matching)
	switch {
	case conflict != "":
		return st.escalate(ReasonStateConflict, conflict)
	case len(matching) > 1:
		return st.escalate(ReasonMultipleCands, fmt.Sprintf(WhyResourcesNamed, len(matching)))
	case len(otherVersion) > 0:
		return st.escalate(ReasonVersionMismatch, fmt.Sprintf(WhyOtherVersion, otherVersion[0].Ref, otherVersion[0].Version, op.LogicalVersion))
	case len(matching) == 1 && absent && AbsenceSure(in.Destination, in.LastWrite, now):
		// Inside the confirm window an empty search next to a lookup that
		// finds the resource is a search lagging longer than configured:
		// the lookup's resource is the effect. Past it, they disagree.
		return st.escalate(ReasonSourcesDisagree, WhySourcesDisagree)
	case len(matching) == 1 && matching[0].Kind == "job":
		// The destination accepted a job for this operation: it is not done
		// until the job is. Follow the job (accepted) rather than confirm.
		c := matching[0]
		st.State, st.Reason = Accepted, fmt.Sprintf(WhyReconciledJob, c.Ref)
		st.Job = &Job{Ref: c.Ref, Status: JobQueued, InputVersion: c.Version, Found: true}
		return st
	case len(matching) == 1:
		c := matching[0]
		st.State, st.Reason = Confirmed, fmt.Sprintf(WhyReconciledOne, c.Ref)
		st.Resource = &ResourceRef{Ref: c.Ref, Kind: c.Kind, Version: c.Version}
		return st
	case len(foreign) > 0:
		return st.escalate(ReasonNoDedupEvidence, fmt.Sprintf(WhyForeignResource, foreign[0].Ref))
	case absent && RetryNeedsReviewer(op):
		if !AbsenceSure(in.Destination, in.LastWrite, now) {
			return st.waitOutWindow(in, WhyNoEffectShown, WhyReviewerOnlyIfNothingShows)
		}
		return st.escalate("", WhyNoEffectNeedsReviewer)
	case absent:
		to, why := AfterAbsence(op, func() time.Time { return now })
		if to == Failed && !AbsenceSure(in.Destination, in.LastWrite, now) {
			return st.waitOutWindow(in, why, WhyFailedOnlyIfNothingShows)
		}
		st.State, st.Reason, st.Watch = to, why, to == RetryWait && in.Destination.Window() > 0
		return st
	}
	// Nothing settled. Probe again, unless the deadline or rounds are spent.
	round := in.Round + 1
	wait := min(ProbeBackoffBase<<min(round, 20), ProbeBackoffCap)
	if withinLag {
		// A search inside the lag proves nothing: look again when it can,
		// and do not count the round against the limit.
		wait = in.LastWrite.Add(in.Destination.SearchLag).Sub(now) + 10*time.Millisecond
	}
	next := now.Add(wait)
	switch {
	case !op.Deadline.IsZero() && next.After(op.Deadline):
		return st.escalate(ReasonDeadlineExpired, WhyOutcomePastDeadline)
	case round >= MaxProbeRounds && !withinLag:
		return st.escalate(ReasonNoDedupEvidence, fmt.Sprintf(WhyRoundsSettledNothing, round))
	case len(in.Results) == 0 && now.Sub(in.LastWrite) >= EvidenceWait:
		return st.escalate(ReasonNoDedupEvidence, WhyNoProbesNoEvidence)
	}
	st.NextProbe, st.Uncounted = next, withinLag
	st.Reason = fmt.Sprintf(WhyInconclusive, failed, len(in.Results))
	return st
}

// waitOutWindow holds an operation whose next step on absence cannot be
// taken back — failing it, or asking a person to approve an irreversible
// retry — until the confirm window has passed, in case the destination
// lags longer than it says; the reconciler looks again then (or a person,
// when the window ends after the deadline). then is the format of the
// step it waits to take (WhyFailedOnlyIfNothingShows,
// WhyReviewerOnlyIfNothingShows).
func (st Settlement) waitOutWindow(in SettleInput, why, then string) Settlement {
	sure := in.LastWrite.Add(in.Destination.Window())
	if !in.Op.Deadline.IsZero() && sure.After(in.Op.Deadline) {
		return st.escalate(ReasonDeadlineExpired, fmt.Sprintf(WhyAbsencePastDeadline, why, sure.UTC().Format(time.RFC3339)))
	}
	st.NextProbe = sure.Add(10 * time.Millisecond)
	st.Reason = why + "; " + fmt.Sprintf(then, sure.UTC().Format(time.RFC3339))
	return st
}

// refList names the candidates' refs, comma-separated.
func refList(cs []Candidate) string {
	refs := make([]string, len(cs))
	for i, c := range cs {
		refs[i] = c.Ref
	}
	return strings.Join(refs, ", ")
}

// foundNote is the note of a probe of kind that found ref, this
// operation's effect.
func foundNote(kind ProbeKind, ref string) string {
	switch kind {
	case ProbeStatus:
		return fmt.Sprintf(WhyStatusFound, ref)
	case ProbeSearch:
		return fmt.Sprintf(WhySearchFound, ref)
	}
	return string(kind) + " found " + ref // no other kind gets here
}

func (st Settlement) escalate(r Reason, why string) Settlement {
	st.State, st.Reason = NeedsReview, why
	if r != "" {
		st.Reasons = []Reason{r}
	}
	return st
}

// sortCandidates sorts candidates by what they say of op: naming it and
// its logical version (or no version: the destination does not version),
// naming it and another version, naming another operation, or naming none.
func sortCandidates(op *Operation, cs []Candidate) (matching, otherVersion, foreign, anonymous []Candidate) {
	for _, c := range cs {
		switch {
		case c.OperationID == "":
			anonymous = append(anonymous, c)
		case c.OperationID == op.ID && (c.Version == "" || c.Version == op.LogicalVersion):
			matching = append(matching, c)
		case c.OperationID == op.ID:
			otherVersion = append(otherVersion, c)
		default:
			foreign = append(foreign, c)
		}
	}
	return
}

// uniqueRefs collapses candidates listed more than once (a search may list
// one resource twice) into one. When two listings of one ref disagree on
// its operation or version, the answer contradicts itself: clash names
// the ref. Statuses are not compared here: only an undo reads them, and
// lookupStatus finds a ref listed with two.
func uniqueRefs(cs []Candidate) (out []Candidate, clash string) {
	seen := map[string]Candidate{}
	for _, c := range cs {
		prev, ok := seen[c.Ref]
		switch {
		case !ok:
			seen[c.Ref] = c
			out = append(out, c)
		case (prev.OperationID != c.OperationID || prev.Version != c.Version) && clash == "":
			clash = c.Ref
		}
	}
	return out, clash
}

// names reports whether a candidate is ref.
func names(cs []Candidate, ref string) bool {
	for _, c := range cs {
		if c.Ref == ref {
			return true
		}
	}
	return false
}

// HistoryNote opens the note of every history probe's evidence
// (HistoryEvidence): "history of REF: REF@1: version 6 by op_…; … — what
// it means".
const HistoryNote = "history of "

// HistoryOf splits a history evidence's note into the resource, its
// versions (one line each) and what they mean; ok is false for other
// evidence.
func HistoryOf(ev Evidence) (ref string, versions []string, means string, ok bool) {
	rest, ok := strings.CutPrefix(ev.Note, HistoryNote)
	if !ok {
		return "", nil, "", false
	}
	ref, rest, _ = strings.Cut(rest, ": ")
	rest, means, _ = strings.Cut(rest, " — ")
	if rest != "no versions" {
		versions = strings.Split(rest, "; ")
	}
	return ref, versions, means, true
}

// HistoryEvidence reads a history probe's answer about r.Ref, a resource
// found (in found, the round's candidates at another version) naming op
// at another version. mine reports whether the history holds op's own
// version: then the evidence confirms the resource, at op's version; else
// it shows what op's entries say (or that there are none), for a person.
// The note lists the whole history, which the case page shows beside the
// candidates.
func HistoryEvidence(op *Operation, r ProbeResult, found []Candidate) (ev Evidence, mine bool) {
	kind := ""
	for _, c := range found {
		if c.Ref == r.Ref {
			kind = c.Kind
		}
	}
	var lines []string
	var own []Candidate
	for _, c := range r.Candidates {
		lines = append(lines, fmt.Sprintf(WhyHistoryVersion, c.Ref, orNone(c.Version), orNone(c.OperationID)))
		if c.OperationID == op.ID {
			own = append(own, Candidate{Ref: r.Ref, Kind: kind, Version: c.Version, OperationID: op.ID})
			mine = mine || c.Version == op.LogicalVersion
		}
	}
	versions := strings.Join(lines, "; ")
	switch {
	case mine:
		return r.evidenceWith(op, VerdictConfirms, []Candidate{{Ref: r.Ref, Kind: kind, Version: op.LogicalVersion, OperationID: op.ID}},
			fmt.Sprintf(WhyHistoryMine, r.Ref, versions, op.LogicalVersion)), true
	case len(own) == 0:
		note := fmt.Sprintf(WhyHistoryNotMine, r.Ref, versions)
		if len(lines) == 0 {
			note = fmt.Sprintf(WhyHistoryNoVersionsNotMine, r.Ref)
		}
		ev := r.evidenceWith(op, VerdictInconclusive, []Candidate{}, note)
		ev.Authoritative = false
		return ev, false
	}
	// Its own entries at other versions: the resource is the operation's,
	// not for its version — a person decides.
	own, _ = uniqueRefs(own)
	return r.evidenceWith(op, VerdictInconclusive, own[:1], fmt.Sprintf(WhyHistory, r.Ref, versions)), false
}

// evidenceWith is Evidence with its candidates replaced.
func (p ProbeResult) evidenceWith(op *Operation, verdict Verdict, cands []Candidate, note string) Evidence {
	p.Candidates = cands
	return p.Evidence(op, verdict, note)
}
