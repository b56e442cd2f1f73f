// Package client is the Go integration package for Limbo's API v1. An
// integration registers each operation before its first call, asks for an
// attempt before every send, and reports every outcome:
//
//	op, _ := c.Register(ctx, client.Registration{...})
//	att, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{})
//	// send the request with att.Key as the idempotency key …
//	res, _ := c.ReportOutcome(ctx, op.ID, att.N, review.Outcome{...})
//	switch res.Next { case review.NextRetryAt: … }
//
// Errors from the server are *Problem values (RFC 9457).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// Client talks to one Limbo server as one tenant (the token's).
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:8080)
// with an API token. hc may be nil for a default client with a 30 s timeout.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: baseURL, token: token, http: hc}
}

// Problem is an error answer from the server.
type Problem struct {
	Type        string              `json:"type"`
	Title       string              `json:"title"`
	Status      int                 `json:"status"`
	Detail      string              `json:"detail"`
	Field       string              `json:"field,omitempty"`
	OperationID string              `json:"operation_id,omitempty"`
	State       review.State        `json:"state,omitempty"`
	Resource    *review.ResourceRef `json:"resource,omitempty"`
	// Dependency is what a waiting-for-dependency answer waits for.
	Dependency *ProblemDependency `json:"dependency,omitempty"`
	// RetryAfter is the server's Retry-After, for 429 answers.
	RetryAfter time.Duration `json:"-"`
}

// ProblemDependency is the operation a waiting operation waits for, and
// its state when Limbo answered.
type ProblemDependency struct {
	OperationID string       `json:"operation_id"`
	State       review.State `json:"state"`
}

func (p *Problem) Error() string {
	return fmt.Sprintf("limbo: %d %s: %s", p.Status, p.Type, p.Detail)
}

// IsProblem reports whether err is a Problem of the given type.
func IsProblem(err error, typ string) bool {
	var p *Problem
	return errors.As(err, &p) && p.Type == typ
}

// Registration is the body of a register call.
type Registration struct {
	SourceRef      string          `json:"source_ref"`
	LogicalVersion string          `json:"logical_version"`
	Action         string          `json:"action"`
	Destination    string          `json:"destination"`
	Risk           review.Risk     `json:"risk"`
	Flags          []review.Flag   `json:"flags,omitempty"`
	Payload        json.RawMessage `json:"payload"`
	Key            string          `json:"key,omitempty"`
	Deadline       *time.Time      `json:"deadline,omitempty"`
	MaxAttempts    *int            `json:"max_attempts,omitempty"`
	CostBudget     *float64        `json:"cost_budget,omitempty"`
	// After names the operation this one waits for: no attempt is granted
	// until it is confirmed (with ResourceVersion, when set), and this
	// one fails if it cannot be. Do waits for it.
	After *After `json:"after,omitempty"`
}

// After is a registration's dependency.
type After struct {
	OperationID string `json:"operation_id"`
	// State is confirmed (the default, and the only one).
	State           review.State `json:"state,omitempty"`
	ResourceVersion string       `json:"resource_version,omitempty"`
}

// Register records an operation (or returns the stored one for the same
// key and payload). created reports whether this call created it.
func (c *Client) Register(ctx context.Context, r Registration) (op *review.Operation, created bool, err error) {
	op = &review.Operation{}
	status, err := c.do(ctx, http.MethodPost, "/api/v1/operations", r, op)
	return op, status == http.StatusCreated, err
}

// AttemptOptions name the credential and model an attempt uses, for their
// concurrency limits.
type AttemptOptions struct {
	Credential string `json:"credential,omitempty"`
	Model      string `json:"model,omitempty"`
}

// Grant is a granted attempt.
type Grant struct {
	OperationID string `json:"operation_id"`
	N           int    `json:"n"`
	Key         string `json:"key"`
	// KeyHeader is the header Key travels in; "" when the destination
	// does not deduplicate by key, and then NewAttemptRequest sends none.
	KeyHeader      string    `json:"key_header"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// After, for an operation with a dependency, is that dependency as
	// confirmed: After.Resource is what it was confirmed with (the PDF a
	// share link publishes), the input this attempt builds on.
	After *review.Dependency `json:"after,omitempty"`
}

// StartAttempt asks permission to send. A 429 is a *Problem with
// RetryAfter set; a 409 not-attemptable carries the state.
func (c *Client) StartAttempt(ctx context.Context, opID string, o AttemptOptions) (*Grant, error) {
	g := &Grant{}
	_, err := c.do(ctx, http.MethodPost, "/api/v1/operations/"+url.PathEscape(opID)+"/attempts", o, g)
	return g, err
}

// OutcomeResult says what comes next after an outcome.
type OutcomeResult struct {
	Operation *review.Operation `json:"operation"`
	Next      review.Next       `json:"next"`
	RetryAt   *time.Time        `json:"retry_at,omitempty"`
	Reason    string            `json:"reason"`
}

// ReportOutcome reports what happened to attempt n.
func (c *Client) ReportOutcome(ctx context.Context, opID string, n int, o review.Outcome) (*OutcomeResult, error) {
	r := &OutcomeResult{}
	_, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", url.PathEscape(opID), n), o, r)
	return r, err
}

// Evidence is what the integrator observed at the destination.
type Evidence struct {
	Source        review.EvidenceSource `json:"source"`
	Authoritative bool                  `json:"authoritative"`
	Candidates    []review.Candidate    `json:"candidates"`
}

// AddEvidence submits evidence and returns the operation's new state.
func (c *Client) AddEvidence(ctx context.Context, opID string, e Evidence) (*review.Operation, error) {
	op := &review.Operation{}
	_, err := c.do(ctx, http.MethodPost, "/api/v1/operations/"+url.PathEscape(opID)+"/evidence", e, op)
	return op, err
}

// JobUpdate is the body of a job report.
type JobUpdate struct {
	Status       review.JobStatus `json:"status"`
	InputVersion string           `json:"input_version,omitempty"`
	OutputRef    string           `json:"output_ref,omitempty"`
}

// PutJob records or updates a transformation job.
func (c *Client) PutJob(ctx context.Context, opID, ref string, j JobUpdate) (*review.Operation, error) {
	op := &review.Operation{}
	_, err := c.do(ctx, http.MethodPut, "/api/v1/operations/"+url.PathEscape(opID)+"/jobs/"+url.PathEscape(ref), j, op)
	return op, err
}

// Get returns an operation with its attempts, evidence and jobs.
func (c *Client) Get(ctx context.Context, opID string) (*review.Operation, error) {
	op := &review.Operation{}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations/"+url.PathEscape(opID), nil, op)
	return op, err
}

// AttemptOutput is the structured output kept with an attempt, and why the
// caller's schema refused it ("" when it was accepted).
type AttemptOutput struct {
	N       int             `json:"n"`
	Output  json.RawMessage `json:"output"`
	Invalid string          `json:"invalid,omitempty"`
}

// AttemptOutput reads the structured output of attempt n of opID; a 404
// *Problem when it kept none.
func (c *Client) AttemptOutput(ctx context.Context, opID string, n int) (*AttemptOutput, error) {
	out := &AttemptOutput{}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations/"+url.PathEscape(opID)+"/attempts/"+strconv.Itoa(n)+"/output", nil, out)
	return out, err
}

// Page is one page of operations.
type Page struct {
	Operations []*review.Operation `json:"operations"`
	NextCursor string              `json:"next_cursor,omitempty"`
}

// List returns a page of operations, optionally in one state; pass the
// previous page's NextCursor to continue.
func (c *Client) List(ctx context.Context, state review.State, cursor string, limit int) (*Page, error) {
	return c.ListBy(ctx, ListFilter{State: state}, cursor, limit)
}

// ListFilter narrows ListBy; empty members match everything.
type ListFilter struct {
	State review.State
	// SourceRef: only the operations about this source (an agent run's
	// tool calls share the run's id as source_ref).
	SourceRef string
}

// ListBy returns a page of the operations f matches.
func (c *Client) ListBy(ctx context.Context, f ListFilter, cursor string, limit int) (*Page, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.SourceRef != "" {
		q.Set("source_ref", f.SourceRef)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := &Page{}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations?"+q.Encode(), nil, p)
	return p, err
}

// Actions returns the action policies open to the token's tenant
// (GET /api/v1/actions). An action not listed has no policy.
func (c *Client) Actions(ctx context.Context) ([]review.PublishedPolicy, error) {
	var p struct {
		Actions []review.PublishedPolicy `json:"actions"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/actions", nil, &p)
	return p.Actions, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		p := &Problem{Status: resp.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Type == "" {
			p.Type, p.Detail = "http-"+strconv.Itoa(resp.StatusCode), string(data)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			p.RetryAfter, _ = review.ParseRetryAfter(ra, time.Now())
		}
		return resp.StatusCode, p
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("limbo: decoding %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}
