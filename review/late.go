package review

import "fmt"

// LateEvidence is what an outcome report for attempt n says when it
// arrives after that attempt was closed — by the lease sweeper, by another
// report, or because the operation moved on. It is kept like any report:
// a success is the destination's own word that the effect happened, as
// authoritative as the same report on time, and confirms its resource
// (unless the resource is for another logical version); any other result
// speaks for attempt n alone, while other attempts may have had their
// effect, so it is inconclusive and not authoritative. A job accepted and
// not known to have ended is no word that its effect happened (it may
// fail), as on time (responseEvidence), but the destination's word that
// it holds the job for this operation: named as a job, it is followed
// where the operation may still move (Weigh), and on a settled operation
// it is an effect nobody answers for (ExtraEffects) — a retry must not go
// out blind beside it. why says how the report came late
// (WhyLateAfterClosed, WhyLateAfterOutcome, WhyLateAfterMovedOn).
func LateEvidence(op *Operation, n int, o Outcome, why string) Evidence {
	ev := Evidence{OperationID: op.ID, Source: SourceResponse, Verdict: VerdictInconclusive, Candidates: []Candidate{}}
	liveJob := o.Resource == nil && o.Job != nil && !JobStatus(o.Job.Status).Done()
	switch {
	case o.Resource != nil:
		ev.Candidates = []Candidate{{Ref: o.Resource.Ref, Kind: o.Resource.Kind, Version: o.Resource.Version, OperationID: op.ID}}
	case liveJob:
		ev.Candidates = []Candidate{{Ref: o.Job.Ref, Kind: "job", OperationID: op.ID}}
	}
	what := string(o.Result)
	if o.HTTPStatus != 0 {
		what = fmt.Sprintf(WhyLateSaidHTTP, what, o.HTTPStatus)
	}
	if o.Resource != nil {
		what = fmt.Sprintf(WhyLateSaidResource, what, o.Resource.Ref)
	}
	if o.Job != nil {
		what = fmt.Sprintf(WhyLateSaidJob, what, o.Job.Ref)
	}
	ev.Note = fmt.Sprintf(WhyLateReport, n, why, what)
	if o.Result == ResultSuccess {
		ev.Authoritative = true
		if !liveJob && (o.Resource == nil || o.Resource.Version == "" || o.Resource.Version == op.LogicalVersion) {
			ev.Verdict = VerdictConfirms
		}
	}
	return ev
}

// LateSuccessNeedsReview reports whether a success reported late for
// attempt n must send op to a person at once: the ledger has let another
// attempt go ahead — it finished and op waits to retry again, it is in
// flight, or its job was accepted — and for this write a second effect
// would be a duplicate (risk is the effective risk class; the test is the
// one an unknown outcome gets in Decide). Elsewhere the late success is
// left to the assessment of all the evidence: an ambiguous operation is
// reconciled, one in review has its case, a settled one cannot move.
func LateSuccessNeedsReview(op *Operation, n int, risk Risk) bool {
	// Only a later attempt can have repeated the effect. Waiting to retry
	// with none sent yet, the late success simply proves the effect:
	// Weigh confirms it and nothing is retried.
	later := op.AttemptCount > n
	retrying := later && (op.State == RetryWait || op.State == InFlight || op.State == Accepted)
	duplicateMatters := RetryNeedsReviewer(op) || risk == RiskCompensableWrite || risk == RiskIrreversible
	return retrying && duplicateMatters
}
