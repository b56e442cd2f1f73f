package review

import "slices"

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

// withoutEndedJobs is the candidates of op's effect in m without the jobs
// the ledger knows ended without one (failed or canceled): such a job is
// no effect to confirm or to follow (accepted). Followed again, its known
// failure would settle nothing (JobEndSettles) and the operation would
// wait on it for ever; extraEffects leaves them out for the same
// reason.
// m is the caller's own (sortCandidates builds it), so it is filtered in
// place.
func withoutEndedJobs(op *Operation, m []Candidate) []Candidate {
	return slices.DeleteFunc(m, func(c Candidate) bool { return endedJob(op, c.Ref) })
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
