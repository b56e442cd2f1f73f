package review

import "time"

// A person may ask the destination again, now, about an operation in
// review (a check): the reconciler's probes, sent at their word, recorded
// as evidence, and the case recommends again from all of it. A check
// settles nothing — the operation stays in review and a person decides —
// but it is how a case that recommends a look at the destination
// (RecommendReconcileAgain) is acted on from the console: the reconciler
// no longer probes an operation in review of its own accord.

// CheckInterval is how soon after the destination was last asked about an
// operation a check is refused: a second click, or two people at once,
// ask it once.
const CheckInterval = 10 * time.Second

// Checkable reports whether the destination may be asked about op, whose
// case is open, at a person's word: op is in review, or settled with an
// effect nobody answers for (a duplicate a webhook named, a success
// reported for a failed operation), not an undo (whose outcome its status
// lookup and the undo's own rounds settle), and d has a status lookup or
// a search to ask with. Not while it waits for approval (nothing was
// sent) or is being undone (the undo's outcome settles it).
func Checkable(op *Operation, d Destination) bool {
	return (op.State == NeedsReview || op.State.Terminal()) && !IsCompensation(op.Action) &&
		(d.Probes.Status != nil || d.Probes.Search != nil)
}

// LastAsked is when the destination was last asked about op (the newest
// status lookup, search or history lookup recorded); zero when never.
func LastAsked(op *Operation) time.Time {
	var at time.Time
	for _, ev := range op.Evidence {
		if (ev.Source == SourceStatusLookup || ev.Source == SourceMetadataSearch) && ev.ObservedAt.After(at) {
			at = ev.ObservedAt
		}
	}
	return at
}

// LastAnswers are what the destination answered when it was last asked
// about op (LastAsked): the status lookup and search recorded then, in the
// order they were recorded; none when it was never asked.
func LastAnswers(op *Operation) []Evidence {
	at := LastAsked(op)
	var evs []Evidence
	for _, ev := range op.Evidence {
		if (ev.Source == SourceStatusLookup || ev.Source == SourceMetadataSearch) && !at.IsZero() && ev.ObservedAt.Equal(at) {
			evs = append(evs, ev)
		}
	}
	return evs
}

// CheckAnswers is what a check brought back: the evidence its probes'
// answers record (CheckEvidence), and Job, when the case waits on a job
// (JobToWaitOn), that job as the destination's job probe answers — its
// end, if it came, is taken as a poll's is (nil: not asked, or no
// readable answer; the reconciler's polls go on).
type CheckAnswers struct {
	Evidence []Evidence
	Job      *Job
}

// CheckEvidence is what the answers of a check (results, the destination's
// probes for op sent at now) record: one evidence row each, as a
// reconciliation round writes them (Settle), with nothing settled.
func CheckEvidence(op *Operation, d Destination, results []ProbeResult, now time.Time) []Evidence {
	st := Settle(SettleInput{Op: op, Destination: d, LastWrite: LastWriteAt(op.Attempts), Results: results, Now: now})
	return st.Evidence
}
