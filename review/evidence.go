package review

import "fmt"

// Judge decides what a piece of evidence says about op: its verdict, and
// for an ambiguous operation the state it settles into (or "" when it
// settles nothing). It implements step 3 of SPEC's reconciliation
// hierarchy for evidence as it arrives; freshness windows and probing come
// with the reconciler.
//
// Rules: a candidate matches when its operation_id is op.ID and its version
// is op.LogicalVersion (or empty when the destination does not version).
// Exactly one match from an authoritative source confirms. An authoritative
// answer with no candidates at all refutes (proof of absence). Several
// candidates, or a candidate for another version, needs a person. A webhook
// never confirms a write on its own, and non-authoritative evidence never
// settles anything.
func Judge(op *Operation, ev Evidence) (Verdict, State, []Reason, string) {
	var match, other []Candidate
	for _, c := range ev.Candidates {
		if c.OperationID == op.ID && (c.Version == "" || c.Version == op.LogicalVersion) {
			match = append(match, c)
		} else {
			other = append(other, c)
		}
	}
	verdict := VerdictInconclusive
	switch {
	case len(match) == 1 && len(other) == 0:
		verdict = VerdictConfirms
	case len(ev.Candidates) == 0 && ev.Authoritative:
		verdict = VerdictRefutes
	}
	if op.State != Ambiguous || !ev.Authoritative || ev.Source == SourceWebhook {
		return verdict, "", nil, "evidence recorded"
	}
	switch {
	case verdict == VerdictConfirms:
		return verdict, Confirmed, nil, fmt.Sprintf("%s found exactly one resource %s for this operation and version", ev.Source, match[0].Ref)
	case verdict == VerdictRefutes && (op.HasFlag(FlagFinancial) || op.HasFlag(FlagIrreversible) || op.Risk == RiskIrreversible):
		return verdict, NeedsReview, nil, fmt.Sprintf("%s authoritatively found no effect; a financial or irreversible action is never retried without a reviewer", ev.Source)
	case verdict == VerdictRefutes:
		return verdict, RetryWait, nil, fmt.Sprintf("%s authoritatively found no effect; retry with the same key", ev.Source)
	case len(match) > 1 || len(ev.Candidates) > 1:
		return verdict, NeedsReview, []Reason{ReasonMultipleCands}, fmt.Sprintf("%s found %d candidates", ev.Source, len(ev.Candidates))
	case len(match) == 0 && ev.Candidates[0].OperationID == op.ID:
		return verdict, NeedsReview, []Reason{ReasonVersionMismatch}, fmt.Sprintf("%s found %s for version %s, expected %s", ev.Source, ev.Candidates[0].Ref, ev.Candidates[0].Version, op.LogicalVersion)
	default:
		// A resource whose metadata does not name this operation may or may
		// not be its effect: nothing proves either way.
		return verdict, NeedsReview, []Reason{ReasonNoDedupEvidence}, fmt.Sprintf("%s found %s, whose metadata does not name this operation", ev.Source, ev.Candidates[0].Ref)
	}
}

// AfterAbsence is where an ambiguous operation goes once absence is proven:
// another attempt with the same key if the budgets allow it, otherwise
// failed — the budget ended with proof of no effect.
func AfterAbsence(op *Operation, now Clock) (State, string) {
	max := op.MaxAttempts
	if max <= 0 {
		max = DefaultMaxAttempts
	}
	switch {
	case op.AttemptCount >= max:
		return Failed, "no effect found and the attempt budget is exhausted"
	case !op.Deadline.IsZero() && !now().Before(op.Deadline):
		return Failed, "no effect found and the deadline has passed"
	case op.CostBudget != nil && op.CostSpent >= *op.CostBudget:
		return Failed, "no effect found and the cost budget is exhausted"
	}
	return RetryWait, "no effect found; retry with the same key"
}
