package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Decision is a reviewer's act on one of the tenant's operations, as the
// decisions feed and GET /api/v1/operations/{id}/decisions list it.
type Decision struct {
	ID          string `json:"id"`
	Tenant      string `json:"tenant"`
	CaseID      string `json:"case_id"`
	OperationID string `json:"operation_id"`
	Action      string `json:"action"`
	ResourceRef string `json:"resource_ref,omitempty"`
	UndoRef     string `json:"undo_ref,omitempty"`
	// CompensationID is the compensation operation the decision registered
	// (compensate, keep_and_undo): run it like any operation.
	CompensationID string    `json:"compensation_operation_id,omitempty"`
	Compensation   string    `json:"compensation,omitempty"`
	Reason         string    `json:"reason"`
	Actor          string    `json:"actor"`
	PayloadHash    string    `json:"payload_hash"`
	Key            string    `json:"key"`
	Status         string    `json:"status"`
	FromState      State     `json:"from_state"`
	ToState        State     `json:"to_state"`
	DecidedAt      time.Time `json:"decided_at"`
	// VoidedApprovals are the first approvals (by id) this decision made
	// void: they count no more, and the operation waits for as many
	// approvals again.
	VoidedApprovals []string `json:"voided_approvals,omitempty"`
}

// OperationDecisions is an operation's state and every decision on it,
// oldest first.
type OperationDecisions struct {
	OperationID string     `json:"operation_id"`
	State       State      `json:"state"`
	Decisions   []Decision `json:"decisions"`
}

// OperationDecisions returns the operation's state and every decision on
// it (GET /api/v1/operations/{id}/decisions).
func (c *Client) OperationDecisions(ctx context.Context, opID string) (*OperationDecisions, error) {
	out := &OperationDecisions{}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations/"+url.PathEscape(opID)+"/decisions", nil, out)
	return out, err
}

// Decisions reads the tenant's decisions feed (GET /api/v1/decisions) from
// cursor ("" for the first decision) to its current end, oldest first,
// paging transparently. A failed page is yielded as an error and ends the
// sequence. To learn where to resume, use a DecisionFeed instead:
// Decisions(ctx, cur) is DecisionFeed(cur).All(ctx).
func (c *Client) Decisions(ctx context.Context, cursor string) iter.Seq2[Decision, error] {
	return c.DecisionFeed(cursor).All(ctx)
}

// DecisionFeed follows the tenant's decisions feed from a cursor, and
// knows the cursor to resume from:
//
//	feed := c.DecisionFeed(saved)
//	for d, err := range feed.All(ctx) {
//		if err != nil { … break }
//		handle(d)
//	}
//	saved = feed.Cursor()
//
// The feed lists each decision once, in the order they committed; a
// decision committed later comes after the cursor, so calling All again
// (after a pause: it polls) follows the feed. A DecisionFeed is not safe
// for concurrent use.
type DecisionFeed struct {
	c      *Client
	cursor string
	// page is the rest of the last page read, not yet yielded (a loop that
	// broke off mid-page): the next All yields it first.
	page []Decision
	next string
}

// DecisionFeed returns a feed that starts after cursor ("" for the start).
func (c *Client) DecisionFeed(cursor string) *DecisionFeed {
	return &DecisionFeed{c: c, cursor: cursor}
}

// Cursor is where the feed stands: every decision before it has been
// yielded. The server issues cursors per page, so after a loop that broke
// off mid-page Cursor is still that page's start: a new feed resumed from
// it yields that page's decisions again (they have the same ID) and skips
// none. The same DecisionFeed, though, goes on exactly where it stopped.
func (f *DecisionFeed) Cursor() string { return f.cursor }

// All yields the decisions after Cursor up to the feed's current end,
// reading page after page; a failed read is yielded as the error (with a
// zero Decision) and ends the sequence, the cursor unchanged, so All can
// be called again.
func (f *DecisionFeed) All(ctx context.Context) iter.Seq2[Decision, error] {
	return func(yield func(Decision, error) bool) {
		for {
			for len(f.page) > 0 {
				d := f.page[0]
				f.page = f.page[1:]
				if len(f.page) == 0 {
					f.cursor = f.next
				}
				if !yield(d, nil) {
					return
				}
			}
			var p struct {
				Decisions  []Decision `json:"decisions"`
				NextCursor string     `json:"next_cursor"`
			}
			path := "/api/v1/decisions"
			if f.cursor != "" {
				path += "?cursor=" + url.QueryEscape(f.cursor)
			}
			if _, err := f.c.do(ctx, http.MethodGet, path, nil, &p); err != nil {
				yield(Decision{}, err)
				return
			}
			if len(p.Decisions) == 0 {
				return
			}
			f.page, f.next = p.Decisions, p.NextCursor
		}
	}
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
		ds, err := c.OperationDecisions(ctx, opID)
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
		if ds.State == Compensating && last != nil && last.CompensationID != "" {
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
// (503, 429, 408) or could not be reached, or its answer did not arrive.
// Any other problem is an answer; a URL that cannot be sent, or an answer
// that is not Limbo's JSON (a proxy's page), would fail the same way again.
func transient(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests || p.Status == http.StatusRequestTimeout
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // a *url.Error is a net.Error whatever it wraps
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// waitsForPerson reports whether an operation in s waits for a reviewer.
func waitsForPerson(s State) bool {
	return s == AwaitingApproval || s == NeedsReview || s == Compensating
}
