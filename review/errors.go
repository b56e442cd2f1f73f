package review

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// NotAttemptableError: the operation's state forbids a new attempt
// (ambiguous, in review, in flight, awaiting approval or terminal).
type NotAttemptableError struct {
	Operation *Operation
}

func (e *NotAttemptableError) Error() string {
	return fmt.Sprintf("operation %s is %s: no attempt may start", e.Operation.ID, e.Operation.State)
}

// WaitError: an attempt may start later — backoff, a concurrency limit or
// the retry budget says wait until Until.
type WaitError struct {
	Until  time.Time
	Reason string
}

func (e *WaitError) Error() string { return "wait: " + e.Reason }

// PayloadMismatchError: the key is taken by an operation with a different
// payload. The stored operation is returned so the caller can see which.
type PayloadMismatchError struct {
	Operation *Operation
	// Fields lists what differs: "payload", "action", …
	Fields []string
}

func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("key is already used by operation %s with a different %s", e.Operation.ID, strings.Join(e.Fields, ", "))
}

// OutcomeConflictError: the report came late — the attempt already has a
// different outcome, the lease sweeper closed it, or the operation moved
// on while it was open. The late report is kept as evidence.
type OutcomeConflictError struct {
	Operation *Operation
	Reason    string
}

func (e *OutcomeConflictError) Error() string { return e.Reason }

// AlreadyDecidedError: the case was resolved (or changed) by someone else
// first. It says who decided what, so the loser sees it and nothing is
// overwritten.
type AlreadyDecidedError struct {
	CaseID string
	By     string
	Action string
	At     time.Time
}

func (e *AlreadyDecidedError) Error() string {
	if e.By == "" {
		return fmt.Sprintf("case %s changed meanwhile; reload it", e.CaseID)
	}
	return fmt.Sprintf("case %s was already decided: %s by %s at %s", e.CaseID, e.Action, e.By, e.At.UTC().Format(time.RFC3339))
}

// ErrSecondApprover: the second approval of a four-eyes decision must come
// from a different person than the first.
var ErrSecondApprover = errors.New("a second, different reviewer must approve")

// ErrStale: a decision made on a page older than the case or the
// operation it decides: refused, never applied blind.
var ErrStale = errors.New("the case changed since this page was opened")

// ErrOwnRequest: nobody approves an operation they asked for — one
// registered with an API token they created.
var ErrOwnRequest = errors.New("nobody approves their own request")
