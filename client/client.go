// Package client is the Go integration package for Limbo's API v1. An
// integration registers each operation before its first call, asks for an
// attempt before every send, and reports every outcome:
//
//	c := client.New("http://127.0.0.1:8080", token, client.WithUserAgent("billing/1.2"))
//	op, _, _ := c.Register(ctx, client.Registration{...})
//	att, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{})
//	// send the request with att.Key as the idempotency key …
//	res, _ := c.ReportOutcome(ctx, op.ID, att.N, client.Outcome{...})
//	switch res.Next { case client.NextRetryAt: … }
//
// Do runs that loop for one operation. Decisions reads the tenant's
// decisions feed; WaitDecision waits for a person's decision on one.
//
// Errors from the server are *Problem values (RFC 9457); IsProblem tells
// them by type (ProblemPayloadMismatch, …). The package depends on the
// standard library only: its types are the JSON API's, not the server's.
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
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Client talks to one Limbo server as one tenant (the token's). It is safe
// for concurrent use.
type Client struct {
	base      string
	token     string
	http      *http.Client
	userAgent string
	retries   int
	retryWait time.Duration
}

// Option configures a Client (New).
type Option func(*options)

type options struct {
	hc        *http.Client
	timeout   time.Duration
	userAgent string
	retries   int
	retryWait time.Duration
}

// WithHTTPClient sends the client's requests to Limbo through hc (its
// transport, proxy, TLS settings). The default is a client of its own with
// a 30 s timeout.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithTimeout bounds each request to Limbo, from dial to the last byte of
// the answer (http.Client.Timeout; default 30 s). With WithHTTPClient it
// applies to a copy: the caller's client is left as it is. 0 means none.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithUserAgent names the integration in the User-Agent header, before the
// client's own product: "billing/1.2 limbo-go-client/v1.4.0".
func WithUserAgent(product string) Option { return func(o *options) { o.userAgent = product } }

// WithRetryBudget lets each call repeat its request up to retries times,
// waiting at most maxWait in all, when Limbo says it did nothing and to come
// back: a 503 (its database unreachable), a 429, or a 408 (the request's
// body arrived too slowly), after the answer's
// Retry-After (or, without one, 100 ms doubling). An answer whose
// Retry-After would overrun what is left of maxWait is returned at once, as
// a *Problem with RetryAfter set, for the caller to schedule. A request
// that failed in transit is repeated only when that cannot act twice: a GET
// or PUT, or any request that provably never left the client (a refused
// connection, as net/http's Transport reports it); a POST that may have
// reached Limbo is not, since a second StartAttempt would ask for a second
// attempt. Other answers are final.
//
// The default is no retries (retries 0): Do and WaitDecision wait out 429
// and 503 answers on their own, and a plain call returns them.
func WithRetryBudget(retries int, maxWait time.Duration) Option {
	return func(o *options) { o.retries, o.retryWait = max(retries, 0), max(maxWait, 0) }
}

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:8080)
// with an API token.
func New(baseURL, token string, opts ...Option) *Client {
	o := options{timeout: -1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	hc := o.hc
	switch {
	case hc == nil && o.timeout < 0:
		hc = &http.Client{Timeout: 30 * time.Second}
	case hc == nil:
		hc = &http.Client{Timeout: o.timeout}
	case o.timeout >= 0:
		cp := *hc
		cp.Timeout = o.timeout
		hc = &cp
	}
	ua := "limbo-go-client/" + Version()
	if o.userAgent != "" {
		ua = o.userAgent + " " + ua
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: hc, userAgent: ua,
		retries: o.retries, retryWait: o.retryWait}
}

// Version is this package's module version as the binary was built with it
// (runtime/debug.ReadBuildInfo), "dev" when unknown: a build from a work
// tree, or a test.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := bi.Main.Version
	if bi.Main.Path != modulePath {
		v = ""
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				v = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					v = d.Replace.Version
				}
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

const modulePath = "github.com/limbo-dev/limbo"

// Problem is an error answer from the server.
type Problem struct {
	Type        string       `json:"type"`
	Title       string       `json:"title"`
	Status      int          `json:"status"`
	Detail      string       `json:"detail"`
	Field       string       `json:"field,omitempty"`
	OperationID string       `json:"operation_id,omitempty"`
	State       State        `json:"state,omitempty"`
	Resource    *ResourceRef `json:"resource,omitempty"`
	// Dependency is what a waiting-for-dependency answer waits for.
	Dependency *ProblemDependency `json:"dependency,omitempty"`
	// RetryAfter is the server's Retry-After, for 429 answers.
	RetryAfter time.Duration `json:"-"`
	// RequestID is the id the server gave the request (its X-Request-Id),
	// to quote when reporting the error.
	RequestID string `json:"request_id,omitempty"`
}

// ProblemDependency is the operation a waiting operation waits for, and
// its state when Limbo answered.
type ProblemDependency struct {
	OperationID string `json:"operation_id"`
	State       State  `json:"state"`
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("limbo: %d %s: %s", p.Status, p.Type, p.Detail)
	if p.RequestID != "" {
		s += " (request " + p.RequestID + ")"
	}
	return s
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
	Risk           Risk            `json:"risk"`
	Flags          []Flag          `json:"flags,omitempty"`
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
	State           State  `json:"state,omitempty"`
	ResourceVersion string `json:"resource_version,omitempty"`
}

// Register records an operation (or returns the stored one for the same
// key and payload). created reports whether this call created it.
func (c *Client) Register(ctx context.Context, r Registration) (op *Operation, created bool, err error) {
	op = &Operation{}
	status, err := c.do(ctx, http.MethodPost, "/api/v1/operations", r, op)
	return op, status == http.StatusCreated, err
}

// MaxBatch is the most registrations one call of RegisterMany sends.
const MaxBatch = 1000

// Registered is one registration's answer in RegisterMany: the operation
// and whether this call created it, or Err, the *Problem that refused it
// (payload-mismatch, invalid-request, forbidden) as Register would have
// returned it.
type Registered struct {
	Op      *Operation
	Created bool
	Err     error
}

// RegisterMany registers rs in calls of up to MaxBatch registrations (POST
// /api/v1/operations/batch) and answers each in order, as Register would
// have answered it; one registration's refusal does not fail the others.
// The error is for a call as a whole (the network, the database, a body
// over 16 MiB): the answers before it are returned, and calling again with
// the same registrations is safe, since a recorded one answers as the same
// intention. A server busy with other batches makes a call wait its turn;
// one whose ctx ends while it still waits writes nothing (and, as for any
// call cut short, calling again is safe). When too many batches already
// wait, the call is refused at once with a ProblemBusy (503) and its
// RetryAfter, having written nothing; WithRetryBudget waits it out.
func (c *Client) RegisterMany(ctx context.Context, rs []Registration) ([]Registered, error) {
	out := make([]Registered, 0, len(rs))
	for len(rs) > 0 {
		n := min(len(rs), MaxBatch)
		var ans struct {
			Results []struct {
				Status    int        `json:"status"`
				Operation *Operation `json:"operation"`
				Problem   *Problem   `json:"problem"`
			} `json:"results"`
		}
		body := struct {
			Operations []Registration `json:"operations"`
		}{rs[:n]}
		if _, err := c.do(ctx, http.MethodPost, "/api/v1/operations/batch", body, &ans); err != nil {
			return out, err
		}
		if len(ans.Results) != n {
			return out, fmt.Errorf("limbo: %d results for %d registrations", len(ans.Results), n)
		}
		for _, r := range ans.Results {
			switch {
			case r.Problem != nil:
				out = append(out, Registered{Err: r.Problem})
			case r.Operation != nil:
				out = append(out, Registered{Op: r.Operation, Created: r.Status == http.StatusCreated})
			default:
				return out, fmt.Errorf("limbo: a batch result with status %d and neither operation nor problem", r.Status)
			}
		}
		rs = rs[n:]
	}
	return out, nil
}

// RegisterAndAttempt registers the operation and asks for its first
// attempt in the same call ("attempt": true), so an attempt cycle is two
// calls: this and ReportOutcome. The registration stands whatever the
// attempt's answer. When no attempt may start yet, op is set, g is nil and
// err is a *Problem saying why (retry-later with RetryAfter,
// not-attemptable, awaiting-approval, waiting-for-dependency), as
// StartAttempt would return it; registering again asks again. op is the
// operation as the registration left it: with a grant it is in flight,
// though op.State still says what it was before. Credential and model
// limits need StartAttempt.
func (c *Client) RegisterAndAttempt(ctx context.Context, r Registration) (op *Operation, created bool, g *Grant, err error) {
	var ans struct {
		Operation
		Attempt        *Grant `json:"attempt"`
		AttemptProblem *struct {
			Problem
			RetryAfter int `json:"retry_after"` // seconds; in a header for a whole answer
		} `json:"attempt_problem"`
	}
	body := struct {
		Registration
		Attempt bool `json:"attempt"`
	}{r, true}
	status, err := c.do(ctx, http.MethodPost, "/api/v1/operations", body, &ans)
	if err != nil {
		return nil, false, nil, err
	}
	op, created = &ans.Operation, status == http.StatusCreated
	if ans.AttemptProblem != nil {
		p := ans.AttemptProblem.Problem
		p.RetryAfter = time.Duration(ans.AttemptProblem.RetryAfter) * time.Second
		return op, created, nil, &p
	}
	if ans.Attempt == nil {
		return op, created, nil, fmt.Errorf("limbo: the registration answered neither attempt nor attempt_problem")
	}
	return op, created, ans.Attempt, nil
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
	KeyHeader string `json:"key_header"`
	// Generation is the attempt's generation, as Attempt.Generation
	// reports it: the operation's version when it was granted.
	Generation     int64     `json:"generation"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// After, for an operation with a dependency, is that dependency as
	// confirmed: After.Resource is what it was confirmed with (the PDF a
	// share link publishes), the input this attempt builds on.
	After *Dependency `json:"after,omitempty"`
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
	Operation *Operation `json:"operation"`
	Next      Next       `json:"next"`
	RetryAt   *time.Time `json:"retry_at,omitempty"`
	Reason    string     `json:"reason"`
}

// ReportOutcome reports what happened to attempt n.
func (c *Client) ReportOutcome(ctx context.Context, opID string, n int, o Outcome) (*OutcomeResult, error) {
	r := &OutcomeResult{}
	_, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", url.PathEscape(opID), n), o, r)
	return r, err
}

// Evidence is what the integrator observed at the destination.
type Evidence struct {
	Source        EvidenceSource `json:"source"`
	Authoritative bool           `json:"authoritative"`
	Candidates    []Candidate    `json:"candidates"`
}

// AddEvidence submits evidence and returns the operation's new state.
func (c *Client) AddEvidence(ctx context.Context, opID string, e Evidence) (*Operation, error) {
	op := &Operation{}
	_, err := c.do(ctx, http.MethodPost, "/api/v1/operations/"+url.PathEscape(opID)+"/evidence", e, op)
	return op, err
}

// JobUpdate is the body of a job report.
type JobUpdate struct {
	Status       JobStatus `json:"status"`
	InputVersion string    `json:"input_version,omitempty"`
	OutputRef    string    `json:"output_ref,omitempty"`
}

// PutJob records or updates a transformation job.
func (c *Client) PutJob(ctx context.Context, opID, ref string, j JobUpdate) (*Operation, error) {
	op := &Operation{}
	_, err := c.do(ctx, http.MethodPut, "/api/v1/operations/"+url.PathEscape(opID)+"/jobs/"+url.PathEscape(ref), j, op)
	return op, err
}

// Get returns an operation with its attempts, evidence and jobs.
func (c *Client) Get(ctx context.Context, opID string) (*Operation, error) {
	op := &Operation{}
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
// *Problem when it kept none, a 410 (ProblemPurged) when it kept one that
// the payload retention has emptied since.
func (c *Client) AttemptOutput(ctx context.Context, opID string, n int) (*AttemptOutput, error) {
	out := &AttemptOutput{}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations/"+url.PathEscape(opID)+"/attempts/"+strconv.Itoa(n)+"/output", nil, out)
	return out, err
}

// Page is one page of operations.
type Page struct {
	Operations []*Operation `json:"operations"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// List returns a page of operations, optionally in one state; pass the
// previous page's NextCursor to continue.
func (c *Client) List(ctx context.Context, state State, cursor string, limit int) (*Page, error) {
	return c.ListBy(ctx, ListFilter{State: state}, cursor, limit)
}

// ListFilter narrows ListBy; empty members match everything.
type ListFilter struct {
	State State
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
func (c *Client) Actions(ctx context.Context) ([]PublishedPolicy, error) {
	var p struct {
		Actions []PublishedPolicy `json:"actions"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/actions", nil, &p)
	return p.Actions, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		b, err := marshal(in)
		if err != nil {
			return 0, err
		}
		body = b
	}
	spent := time.Duration(0)
	backoff := 100 * time.Millisecond
	for retry := 0; ; retry++ {
		status, sent, err := c.once(ctx, method, path, body, in != nil, out)
		if err == nil || retry >= c.retries || ctx.Err() != nil {
			return status, err
		}
		var wait time.Duration
		var p *Problem
		switch {
		case errors.As(err, &p) && (p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests ||
			p.Status == http.StatusRequestTimeout):
			wait = p.RetryAfter
			if wait <= 0 {
				wait, backoff = backoff, 2*backoff
			}
		case errors.As(err, &p):
			return status, err // an answer
		case method == http.MethodGet || method == http.MethodPut || !sent:
			wait, backoff = backoff, 2*backoff
		default:
			return status, err // a POST that may have reached Limbo
		}
		if spent+wait > c.retryWait {
			return status, err
		}
		if err := sleep(ctx, wait); err != nil {
			return status, err
		}
		spent += wait
	}
}

// marshal is in as JSON, without HTML escaping: json.Marshal writes each
// <, > and & (in a payload or an output, say) as six bytes, so a body
// within Limbo's limits as written would arrive over them.
func marshal(in any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(in); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// once sends one request; sent reports whether any of it was written.
func (c *Client) once(ctx context.Context, method, path string, body []byte, hasBody bool, out any) (status int, sent bool, err error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	ctx, progress := traceSend(ctx, c.http)
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, progress.mayHaveSent(), err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return resp.StatusCode, true, err
		}
		p := &Problem{Status: resp.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Type == "" {
			p.Type, p.Detail = "http-"+strconv.Itoa(resp.StatusCode), string(data)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			p.RetryAfter = parseRetryAfter(ra, time.Now())
		}
		if p.RequestID == "" {
			p.RequestID = resp.Header.Get("X-Request-Id")
		}
		return resp.StatusCode, true, p
	}
	if out != nil {
		// Read as it comes, however long: a full batch's answer is larger
		// than the batch that was sent.
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, true, fmt.Errorf("limbo: decoding %s %s: %w", method, path, err)
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // so the connection is reused
	return resp.StatusCode, true, nil
}
