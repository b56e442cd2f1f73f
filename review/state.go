// Package review is Limbo's pure domain core: the vocabulary of docs/SPEC.md, the
// operation state machine, key and payload rules, error classification, retry
// policy and the decision of what happens after an outcome. It does no I/O:
// the store persists whatever review decides, and the clock and randomness are
// injected so every decision is reproducible in tests.
package review

import "fmt"

// State is the lifecycle state of an operation. The full diagram lives in
// docs/state-machine.md; the table below is the single source of truth.
type State string

const (
	// AwaitingApproval: the action's policy needs a reviewer's approval before
	// any attempt is granted.
	AwaitingApproval State = "awaiting_approval"
	// Pending: registered, no attempt yet.
	Pending State = "pending"
	// InFlight: an attempt holds a lease; its outcome has not been reported.
	InFlight State = "in_flight"
	// RetryWait: the last attempt cannot have had an effect (or the destination
	// honours the key); another attempt may start at next_attempt_at.
	RetryWait State = "retry_wait"
	// Ambiguous: the outcome is unknown. No attempt is granted until
	// reconciliation settles it.
	Ambiguous State = "ambiguous"
	// Accepted: the destination accepted an asynchronous job; the operation is
	// confirmed when the job completes.
	Accepted State = "accepted"
	// NeedsReview: evidence could not settle the outcome; a person decides.
	NeedsReview State = "needs_review"
	// Compensating: a reviewer decided to undo the effect; the operation
	// waits for the undo to be confirmed (→ compensated) or to fail (→ back
	// to needs_review, reason compensation_failed). Until compensation is
	// an operation of its own, a reviewer says which, on the case.
	Compensating State = "compensating"
	// Confirmed (terminal): persisted evidence shows the effect happened once.
	Confirmed State = "confirmed"
	// Compensated (terminal): an extra or unwanted effect was undone.
	Compensated State = "compensated"
	// Failed (terminal): the effect did not happen and will not be tried again.
	Failed State = "failed"
)

// AllStates lists every state in lifecycle order.
func AllStates() []State {
	return []State{AwaitingApproval, Pending, InFlight, RetryWait, Ambiguous, Accepted,
		NeedsReview, Compensating, Confirmed, Compensated, Failed}
}

// transitions is the state machine: from → the states it may move to.
// Anything not listed is illegal and CheckTransition says so.
var transitions = map[State][]State{
	AwaitingApproval: {Pending, Failed},
	// pending and retry_wait also move on evidence (Weigh): confirmed when
	// it names one effect, accepted when it names the operation's job,
	// needs_review when it names several or contradicts, ambiguous when a
	// webhook claims an effect.
	Pending:     {InFlight, Confirmed, Accepted, Ambiguous, NeedsReview, Failed},
	InFlight:    {Confirmed, Accepted, RetryWait, Ambiguous, NeedsReview, Failed},
	RetryWait:   {InFlight, Confirmed, Accepted, Ambiguous, NeedsReview, Failed},
	Ambiguous:   {Confirmed, Accepted, RetryWait, NeedsReview, Failed},
	Accepted:    {Confirmed, Ambiguous, NeedsReview, Failed},
	NeedsReview: {Confirmed, Compensating, RetryWait, Failed},
	// compensating: until a reviewer says the undo is done (compensated)
	// or failed (back to review, reason compensation_failed).
	// compensating → confirmed: a keep_and_undo's kept resource, once the
	// other one's undo is confirmed.
	Compensating: {Compensated, Confirmed, NeedsReview},
	Confirmed:    {},
	Compensated:  {},
	Failed:       {},
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool {
	return s == Confirmed || s == Compensated || s == Failed
}

// Attemptable reports whether an attempt may be granted in s (subject to
// backoff and budgets).
func (s State) Attemptable() bool {
	return s == Pending || s == RetryWait
}

// CanTransition reports whether from → to is in the table.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition returns an error wrapping ErrInvalidTransition when from → to
// is not allowed.
func CheckTransition(from, to State) error {
	if !CanTransition(from, to) {
		return fmt.Errorf("%w: %s → %s", ErrInvalidTransition, from, to)
	}
	return nil
}
