package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// Decision is a reviewer's act on one of the tenant's operations, as the
// decisions feed and GET /api/v1/operations/{id}/decisions list it.
type Decision struct {
	ID          string `json:"id"`
	CaseID      string `json:"case_id"`
	OperationID string `json:"operation_id"`
	Action      string `json:"action"`
	ResourceRef string `json:"resource_ref,omitempty"`
	UndoRef     string `json:"undo_ref,omitempty"`
	// CompensationID is the compensation operation the decision registered
	// (compensate, keep_and_undo): run it like any operation.
	CompensationID string       `json:"compensation_operation_id,omitempty"`
	Compensation   string       `json:"compensation,omitempty"`
	Reason         string       `json:"reason"`
	Actor          string       `json:"actor"`
	PayloadHash    string       `json:"payload_hash"`
	Key            string       `json:"key"`
	Status         string       `json:"status"`
	FromState      review.State `json:"from_state"`
	ToState        review.State `json:"to_state"`
	DecidedAt      time.Time    `json:"decided_at"`
}

// OperationDecisions is an operation's state and every decision on it,
// oldest first.
type OperationDecisions struct {
	OperationID string       `json:"operation_id"`
	State       review.State `json:"state"`
	Decisions   []Decision   `json:"decisions"`
}

// Decisions returns the operation's state and its decisions.
func (c *Client) Decisions(ctx context.Context, opID string) (*OperationDecisions, error) {
	out := &OperationDecisions{}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations/"+url.PathEscape(opID)+"/decisions", nil, out)
	return out, err
}

// ErrNoDecision: the operation stopped waiting for a person without one
// deciding — an approval request that expired, a deadline that passed.
var ErrNoDecision = errors.New("limbo: the operation stopped waiting without a decision")

// WaitDecision waits while the operation waits for a person — for its
// approval (awaiting_approval) or in review (needs_review, compensating) —
// and returns the newest decision that moved it (status applied). A
// decision that asked for an undo (compensate, keep_and_undo) is returned
// as soon as it is made, though the operation stays compensating: it
// waits for the compensation operation the decision names
// (CompensationID), which the integrator runs unless its destination has
// an undo call Limbo runs itself. If it
// stopped waiting without one, the error wraps ErrNoDecision and names its
// state. It polls, from every 250 ms up to every 5 s, until ctx ends; an
// answer that says to come back (503 while the database is away, 429) or
// a failed connection is waited out the same way, since a decision may
// take hours and the server may restart meanwhile.
func (c *Client) WaitDecision(ctx context.Context, opID string) (*Decision, error) {
	wait := 250 * time.Millisecond
	for {
		ds, err := c.Decisions(ctx, opID)
		if err != nil && ctx.Err() == nil && transient(err) {
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		if err != nil {
			return nil, err
		}
		last := lastApplied(ds.Decisions)
		if ds.State == review.Compensating && last != nil && last.CompensationID != "" {
			// The decision asked for an undo: the operation now waits for
			// its compensation operation, which is the integrator's to run.
			return last, nil
		}
		if !waitsForPerson(ds.State) {
			if last != nil {
				return last, nil
			}
			return nil, fmt.Errorf("%w: operation %s is %s", ErrNoDecision, opID, ds.State)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// lastApplied is the newest decision that moved the operation (nil: none).
func lastApplied(ds []Decision) *Decision {
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].Status == "applied" {
			return &ds[i]
		}
	}
	return nil
}

// transient reports whether err is worth asking again: the server said so
// (503, 429) or could not be reached. Any other problem is an answer.
func transient(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests
	}
	return true // the request did not reach Limbo, or its answer did not arrive
}

// waitsForPerson reports whether an operation in s waits for a reviewer.
func waitsForPerson(s review.State) bool {
	return s == review.AwaitingApproval || s == review.NeedsReview || s == review.Compensating
}
