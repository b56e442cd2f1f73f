package review

import "slices"

// JobFailureSettles reports whether the end without effect (failed or
// canceled) of j, the job an accepted operation follows, fails the
// operation, which has had attempts attempts: only when no attempt was
// sent after the one j belongs to. A later attempt — a retry a reviewer
// approved while j was still queued, whose outcome was then lost — may
// have an effect of its own, which j's failure says nothing about: the
// operation is ambiguous again (WhyJobEndedAfterRetry), and reconciliation
// decides. A later attempt known not to have been sent goes the same
// way: reconciliation finds as much, and nothing is declared failed on a
// guess. A job recorded before jobs kept their attempt (0) counts as the
// latest's, as it did.
func JobFailureSettles(j Job, attempts int) bool {
	return j.Attempt == 0 || j.Attempt >= attempts
}

// withoutEndedJobs is the candidates of op's effect in m without the jobs
// the ledger knows ended without one (failed or canceled): such a job is
// no effect to confirm or to follow (accepted). Followed again, its known
// failure would settle nothing (JobFailureSettles) and the operation
// would wait on it for ever; extraEffects leaves them out for the same
// reason.
func withoutEndedJobs(op *Operation, m []Candidate) []Candidate {
	return slices.DeleteFunc(slices.Clone(m), func(c Candidate) bool { return endedJob(op, c.Ref) })
}
