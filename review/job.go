package review

import (
	"slices"
	"time"
)

// JobEndSettles reports whether the end of j, the job an accepted
// operation follows, settles the operation by the job's word alone, the
// operation having had attempts attempts: only when no attempt was sent
// after the one j belongs to. After a later attempt — a retry a reviewer
// approved while j was still queued, whose outcome was then lost — j's
// end speaks for its own attempt only. Its failure sends the operation
// back to ambiguous, and reconciliation decides (WhyJobEndedAfterRetry);
// its success is an effect, but the later attempt may have made a second
// one: a person looks at the destination (WhyJobSucceededAfterRetry,
// no_dedup_evidence). A later attempt known not to have been sent goes
// the same way: nothing is declared failed, or confirmed alone, on a
// guess. A job recorded before jobs kept their attempt (0) counts as the
// latest's, as it did.
func JobEndSettles(j Job, attempts int) bool {
	return j.Attempt == 0 || j.Attempt >= attempts
}

// JobFailureSettles reports whether the failure (or cancellation) of j,
// the job accepted op follows, fails op by the job's word alone (d is op's
// destination): when its end settles op (JobEndSettles), and unless j is
// a job a look at the destination found (Found), none of op's answers
// naming it, while an attempt before the latest may have had its effect.
// Such a job is taken as the latest attempt's, but may be that earlier
// one's: at a destination that keeps no keys, the latest may then have
// made a job of its own that a lagging search did not show yet. Its
// failure proves nothing of the others, and op goes back to ambiguous,
// as after a retry (WhyFoundJobEnded). Failed on the found job's word,
// op ended failed beside the other job's effect (the fault run found it,
// at a destination whose search lags longer than it says). Its success
// still settles: an effect is there, and the confirm window looks for a
// second.
func JobFailureSettles(op *Operation, j Job, d Destination, now time.Time) bool {
	if !JobEndSettles(j, op.AttemptCount) {
		return false
	}
	return !j.Found || !PriorMayHaveEffect(op.Attempts, op.AttemptCount, d, op.Action, now)
}

// EndedJob reports whether ref is a job of op that failed or was
// canceled: no effect of it remains to find.
func EndedJob(op *Operation, ref string) bool {
	return slices.ContainsFunc(op.Jobs, func(j Job) bool {
		return j.Ref == ref && (j.Status == JobFailed || j.Status == JobCanceled)
	})
}

// withoutEndedJobs is the candidates of op's effect in m without the jobs
// the ledger knows ended without one (failed or canceled): such a job is
// no effect to confirm or to follow (accepted). Followed again, its known
// failure would settle nothing (JobEndSettles) and the operation would
// wait on it for ever; extraEffects leaves them out for the same
// reason.
// m is the caller's own (sortCandidates builds it), so it is filtered in
// place.
func withoutEndedJobs(op *Operation, m []Candidate) []Candidate {
	return slices.DeleteFunc(m, func(c Candidate) bool { return EndedJob(op, c.Ref) })
}

// noEffectShown reports whether a look's candidates show nothing of op's
// effect: none at all, or only jobs of op the ledger knows ended without
// one. A search that lists an earlier attempt's failed job, and nothing
// of the retry's, shows absence as an empty one does; read as a
// candidate, it left every round inconclusive until the rounds ran out
// and a person was asked what the destination had already said.
func noEffectShown(op *Operation, cands []Candidate) bool {
	return !slices.ContainsFunc(cands, func(c Candidate) bool { return !EndedJob(op, c.Ref) })
}

// outputStandsFor reports whether ref is a job of op that succeeded with
// an output: the output is the effect, named by its own evidence, and the
// job is no second one beside it — to keep or to undo, it is the output
// a person acts on.
func outputStandsFor(op *Operation, ref string) bool {
	return slices.ContainsFunc(op.Jobs, func(j Job) bool {
		return j.Ref == ref && j.Status == JobSucceeded && j.OutputRef != "" && j.OutputRef != ref
	})
}

// JobToWaitOn is the job a case about op, in review for reasons, waits
// on rather than retrying or failing, and whether there is one: the
// newest job of op not known to have ended (queued or running as last
// reported). The destination may yet make the effect with it, so a retry
// could make a second one and failing the operation could leave an effect
// nobody answers for (recommend, RationaleJobUnfinished; the console's
// case page). Not when the destination contradicted the ledger
// (state_conflict: it no longer finds the job, say): the job's last
// report is no longer a word to wait on.
func JobToWaitOn(op *Operation, reasons []Reason) (Job, bool) {
	if op.State != NeedsReview || slices.Contains(reasons, ReasonStateConflict) {
		return Job{}, false
	}
	for i := len(op.Jobs) - 1; i >= 0; i-- {
		if !op.Jobs[i].Status.Done() {
			return op.Jobs[i], true
		}
	}
	return Job{}, false
}

// JobToPoll is the job a poll of op asks the destination about, and
// whether there is one: in review, the one its case waits on
// (JobToWaitOn), which need not be the newest — a retry's job may have
// ended while an earlier attempt's has not; otherwise the newest, the one
// an accepted operation follows.
func JobToPoll(op *Operation) (Job, bool) {
	if j, ok := JobToWaitOn(op, nil); ok {
		return j, true
	}
	if n := len(op.Jobs); n > 0 {
		return op.Jobs[n-1], true
	}
	return Job{}, false
}

// LiveJobBeside is a job of op other than the one named ref that is not
// known to have ended, and whether there is one. A retry let go while an
// earlier attempt's job was still queued (a person approved it against the
// case's warning) leaves two jobs that may each make the effect: the end
// without output of the one the operation follows then fails nothing
// (WhyJobEndedBesideLive), and the other's success while it is followed
// is a possible duplicate (WhyEarlierJobSucceeded).
func LiveJobBeside(op *Operation, ref string) (Job, bool) {
	for i := len(op.Jobs) - 1; i >= 0; i-- {
		if j := op.Jobs[i]; j.Ref != ref && !j.Status.Done() {
			return j, true
		}
	}
	return Job{}, false
}

// NoJobLeft reports whether every job of op ended without output, the
// newest being the last attempt's (JobEndSettles): the destination's word
// that no job made the effect, as the end of the job an accepted
// operation follows is. In review it is recorded as evidence that refutes
// (store.settleJob), so the case recommends a retry, or failing, rather
// than another search. One job's end alone says nothing of the others':
// while another may still run, or made an output, it is no such word.
func NoJobLeft(op *Operation) bool {
	n := len(op.Jobs)
	if n == 0 || !JobEndSettles(op.Jobs[n-1], op.AttemptCount) {
		return false
	}
	for _, j := range op.Jobs {
		if !j.Status.Done() || j.Status == JobSucceeded {
			return false
		}
	}
	return true
}
