package review

import "fmt"

// Scoring a fault run's open cases: does each case recommend what the
// destination's ground truth supports? A reviewer who follows the
// recommendation must not be led into a duplicate or a lost effect.

// RecommendationScore is how a run's open cases fared against the truth.
type RecommendationScore struct {
	// Scored counts the open cases with a decisive recommendation
	// (confirm, compensate, approve_retry, fail).
	Scored  int
	Correct int
	// Undecided counts cases recommending reconcile_again (they ask for
	// another look, which is never wrong and never a decision) or
	// undo_by_hand (it relays an undo a person decided already).
	Undecided int
	// Wrong names each case whose recommendation the truth does not
	// support, and why.
	Wrong []string
}

// Share is the share of decisive recommendations that are correct; 1
// when there is none.
func (s RecommendationScore) Share() float64 {
	if s.Scored == 0 {
		return 1
	}
	return float64(s.Correct) / float64(s.Scored)
}

// ScoreRecommendations judges every open case's recommendation
// (recs, by operation) against the effects in t.
func ScoreRecommendations(l Ledger, recs map[string]Recommendation, t Truth) RecommendationScore {
	var s RecommendationScore
	for _, op := range l.Operations {
		rec, ok := recs[op.ID]
		if !ok {
			continue
		}
		if rec.Action == RecommendReconcileAgain || rec.Action == RecommendUndoByHand {
			s.Undecided++
			continue
		}
		s.Scored++
		class := op.Risk
		if t.Config != nil {
			class = EffectClass(op, t.Config.Destination(op.Destination))
		}
		if why := wrongRecommendation(op, class, rec, t.Effects); why != "" {
			s.Wrong = append(s.Wrong, fmt.Sprintf("operation %s (%s %s, %s): recommends %s — %s", op.ID, op.Risk, op.Action, op.State, rec, why))
			continue
		}
		s.Correct++
	}
	return s
}

// wrongRecommendation says why the truth does not support rec for op
// (its effects counted as class counts them), or "" when it does.
func wrongRecommendation(op *Operation, class Risk, rec Recommendation, effects []TrueEffect) string {
	var live []string // op's live effects at its version
	other := map[string]bool{}
	for _, e := range effects {
		switch {
		case e.OperationID != op.ID || e.Compensated:
		case e.LogicalVersion == op.LogicalVersion:
			live = append(live, e.Ref)
		default:
			other[e.Ref] = true
		}
	}
	isLive := func(ref string) bool {
		for _, r := range live {
			if r == ref {
				return true
			}
		}
		return false
	}
	// Reads and generations may hold several effects; writes one.
	single := class != RiskRead && class != RiskGenerate
	switch rec.Action {
	case RecommendConfirm:
		switch {
		case !isLive(rec.Ref):
			return fmt.Sprintf("%s is not a live effect of version %s (live: %v)", rec.Ref, op.LogicalVersion, live)
		case single && len(live) > 1:
			return fmt.Sprintf("the destination holds %d effects %v; confirming one leaves the others", len(live), live)
		}
	case RecommendCompensate:
		switch {
		case other[rec.Ref]:
		case !isLive(rec.Ref):
			return fmt.Sprintf("%s is not a live effect of this operation", rec.Ref)
		case len(live) < 2 && !settledWithoutEffect(op):
			// Of an operation settled without its effect (failed,
			// compensated), every live effect is one nobody answers for:
			// undoing it is right, the only one or not.
			return fmt.Sprintf("%s is the only effect of version %s; undoing it loses the operation", rec.Ref, op.LogicalVersion)
		}
	case RecommendApproveRetry, RecommendFail:
		if len(live) > 0 {
			return fmt.Sprintf("the destination holds %v for version %s", live, op.LogicalVersion)
		}
	default:
		return fmt.Sprintf("unknown action %q", rec.Action)
	}
	return ""
}
