package review

import (
	"fmt"
	"time"
)

// Grantability is Grantable's answer: whether the next attempt of an
// operation may be granted now and, if not, what stands in the way.
type Grantability int

const (
	// GrantNow: nothing about the operation stands in the way. The
	// destination's concurrency limits and retry budget, which count other
	// operations' attempts, still may.
	GrantNow Grantability = iota
	// GrantNotAttemptable: the state allows no attempt.
	GrantNotAttemptable
	// GrantAttemptsSpent: every attempt of the budget has been granted.
	// Where the operation goes is BudgetEnded's answer.
	GrantAttemptsSpent
	// GrantDeadlinePassed: the deadline has passed; likewise BudgetEnded.
	GrantDeadlinePassed
	// GrantBackoff: not before the operation's NextAttemptAt.
	GrantBackoff
	// GrantIfKeyKept: a retry of an idempotent_write to a destination
	// that forgets keys (key_retention). It is granted unless
	// RetryNeedsReconcile, which needs the earlier attempts' outcomes,
	// says to reconcile first.
	GrantIfKeyKept
	// GrantCostSpent: the cost spent has reached the cost budget (a late
	// report's cost counts too); likewise BudgetEnded.
	GrantCostSpent
)

var grantabilityNames = [...]string{"grant now", "not attemptable", "attempts spent", "deadline passed", "backoff", "grant if the key is kept",
	"cost spent"}

func (g Grantability) String() string {
	if g < 0 || int(g) >= len(grantabilityNames) {
		return "Grantability(?)"
	}
	return grantabilityNames[g]
}

// Grantable is when the next attempt of op, to destination d, may be
// granted at now, judged from the operation alone and in this order: its
// state, its attempt budget, its cost budget, its deadline, its backoff, and the key a
// retry reuses. The ordinary path and the fast one both ask it.
func Grantable(op *Operation, d Destination, now time.Time) Grantability {
	switch {
	case !op.State.Attemptable():
		return GrantNotAttemptable
	case op.AttemptCount >= op.MaxAttempts:
		return GrantAttemptsSpent
	case op.CostBudget != nil && op.CostSpent >= *op.CostBudget:
		return GrantCostSpent
	case !now.Before(op.Deadline):
		return GrantDeadlinePassed
	case op.NextAttemptAt != nil && now.Before(*op.NextAttemptAt):
		return GrantBackoff
	case op.AttemptCount > 0 && op.Risk == RiskIdempotentWrite && d.KeyRetention > 0:
		return GrantIfKeyKept
	}
	return GrantNow
}

// BudgetEndReason is why op's next attempt is refused for good, as g
// (GrantAttemptsSpent, GrantCostSpent or GrantDeadlinePassed) says.
func BudgetEndReason(op *Operation, g Grantability) string {
	switch g {
	case GrantAttemptsSpent:
		return WhyAttemptBudgetIsExhausted
	case GrantCostSpent:
		return fmt.Sprintf(WhyCostBudgetSpent, formatCost(op.CostSpent), formatCost(*op.CostBudget))
	}
	return WhyDeadlineHasPassed
}

// PricedCost is what an attempt reported as o cost: its cost plus its
// tokens priced by d (Destination.UsageCost).
func PricedCost(o Outcome, d Destination) float64 {
	usage, _ := d.UsageCost(o.Usage)
	return o.Cost + usage
}
