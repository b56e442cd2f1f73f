package review

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
		return Failed, WhyNoEffectAttemptsSpent
	case !op.Deadline.IsZero() && !now().Before(op.Deadline):
		return Failed, WhyNoEffectDeadlinePassed
	case op.CostBudget != nil && op.CostSpent >= *op.CostBudget:
		return Failed, WhyNoEffectCostSpent
	}
	return RetryWait, WhyNoEffectRetry
}
