package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Do runs an operation's external call under Limbo's policy: it asks for an
// attempt (waiting as a 429 says, and while a 409 waiting-for-dependency
// says the operation it waits for is not confirmed yet, for as long as ctx
// allows), calls send
// with the grant, reports the outcome, and, while Limbo answers retry_at,
// waits until then and starts over with the same key. It returns the last
// report's answer when what comes next is done, reconcile, review or
// failed.
//
// send performs one attempt: it sends the request with g.Key as the
// idempotency key (NewAttemptRequest) and classifies what happened
// (SendAttempt, OutcomeFromHTTP). It must not retry on its own: every send
// is one attempt, granted by Limbo.
//
// Errors: a *Problem from Limbo (a 409 not-attemptable when the operation
// is ambiguous, in review, in flight or terminal — its State and Resource
// say which), a transport error talking to Limbo, or ctx's error. When ctx
// ends between the grant and the report, the report is not sent: the
// attempt's lease expires and Limbo records its outcome as unknown, exactly
// as if the process had died there.
func (c *Client) Do(ctx context.Context, opID string, opts AttemptOptions, send func(ctx context.Context, g *Grant) Outcome) (*OutcomeResult, error) {
	for {
		g, err := c.grant(ctx, opID, opts)
		if err != nil {
			return nil, err
		}
		o := send(ctx, g)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := o.Validate(); err != nil {
			// An integrator bug: leave the attempt to the lease sweeper,
			// which records it as unknown — never guess a better outcome.
			return nil, fmt.Errorf("limbo: send for %s attempt %d returned an invalid outcome: %w", opID, g.N, err)
		}
		res, err := c.report(ctx, opID, g, o)
		if err != nil {
			return nil, err
		}
		if res.Next != NextRetryAt {
			return res, nil
		}
		var wait time.Duration
		if res.RetryAt != nil {
			wait = time.Until(*res.RetryAt)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// grant asks for an attempt until one is granted, waiting as long as each
// 429 says (backoff, concurrency limits, the retry budget), and, while the
// operation waits for its dependency, from 100 ms up to DependencyPoll
// between asks.
func (c *Client) grant(ctx context.Context, opID string, opts AttemptOptions) (*Grant, error) {
	depWait := 100 * time.Millisecond
	for {
		g, err := c.StartAttempt(ctx, opID, opts)
		var p *Problem
		if !errors.As(err, &p) || (p.Status != http.StatusTooManyRequests && p.Status != http.StatusServiceUnavailable &&
			p.Type != ProblemWaitingForDependency) {
			return g, err // a grant, or an answer that waiting cannot change
		}
		wait := p.RetryAfter
		if p.Type == ProblemWaitingForDependency {
			wait, depWait = depWait, min(2*depWait, DependencyPoll)
		}
		if wait <= 0 {
			wait = time.Second
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// report sends the outcome of attempt g, again and again while Limbo cannot
// be reached or answers 5xx, 408 or 429 (nothing was changed): the same report twice is answered unchanged,
// and an unreported attempt would turn ambiguous when its lease expires.
// It gives up when the lease has expired (the sweeper then owns the
// attempt) or ctx ends.
func (c *Client) report(ctx context.Context, opID string, g *Grant, o Outcome) (*OutcomeResult, error) {
	backoff := 100 * time.Millisecond
	for {
		res, err := c.ReportOutcome(ctx, opID, g.N, o)
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		var p *Problem
		again := errors.As(err, &p) && (p.Status == http.StatusRequestTimeout || p.Status == http.StatusTooManyRequests)
		if errors.As(err, &p) && p.Status < 500 && !again {
			return nil, err // refused: retrying the same report cannot help
		}
		if !g.LeaseExpiresAt.IsZero() && time.Now().After(g.LeaseExpiresAt) {
			return nil, fmt.Errorf("limbo: reporting %s attempt %d: lease expired: %w", opID, g.N, err)
		}
		wait := backoff
		if p != nil && p.RetryAfter > 0 {
			wait = p.RetryAfter
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// DependencyPoll is the longest Do waits between asking whether an
// operation's dependency is confirmed.
const DependencyPoll = 2 * time.Second

// sleep waits d, or returns ctx's error if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NewAttemptRequest builds the request that carries attempt g to the
// destination: the body (JSON, may be nil), and the grant's key in the
// header the destination deduplicates by (g.KeyHeader; none when it does
// not).
//
// net/http's Transport silently sends a request a second time when a
// reused keep-alive connection breaks before the answer and it deems the
// request replayable — and a POST carrying an Idempotency-Key header counts
// as replayable. That second send would happen behind Limbo's back, as part
// of an attempt Limbo believes was sent once. Replaying needs GetBody to
// rewind the body, so the request is built without it: net/http then never
// re-sends a request with a body. One with none (a POST that captures a
// payment) it replays when its Header map holds an "Idempotency-Key" or
// "X-Idempotency-Key" entry, so the key of such a request is set under its
// lowercase name instead (req.Header["idempotency-key"], which
// req.Header.Get does not find): the same header on the wire, header names
// being case-insensitive (HTTP/2 sends every name in lowercase). A GET,
// HEAD, OPTIONS or TRACE stays replayable for net/http whatever it
// carries; use those only for calls that are safe to repeat, or send them
// over a Transport with keep-alives disabled.
func NewAttemptRequest(ctx context.Context, g *Grant, method, url string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.GetBody = nil
	if g != nil && g.Key != "" && g.KeyHeader != "" {
		name := http.CanonicalHeaderKey(g.KeyHeader)
		if len(body) == 0 && (name == "Idempotency-Key" || name == "X-Idempotency-Key") {
			// No body to keep net/http from replaying it: the entry it
			// looks for is not there.
			name = strings.ToLower(name)
		}
		req.Header[name] = []string{g.Key}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// SendAttempt sends req once with hc and classifies what happened. It
// follows no redirect of its own accord beyond what hc does; give hc a
// CheckRedirect that returns http.ErrUseLastResponse so a redirect is an
// answer, not a second request. The response is returned for the caller
// to read (its body unread, but for an error answer's provider code, which
// stays readable); it is nil when the send failed. A failure is
// before_send only when hc's transport shows the request never left:
// net/http's Transport, or one that hands the request on to it, does; a
// transport that reports no progress (httptrace) makes every failure
// after_send.
func SendAttempt(hc *http.Client, req *http.Request) (*http.Response, Outcome) {
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, p := traceSend(req.Context(), hc)
	resp, err := hc.Do(req.WithContext(ctx))
	return resp, OutcomeFromHTTP(resp, err, p.mayHaveSent())
}

// sendProgress follows one request through its transport, to tell a
// failure that provably sent nothing from one that may have sent it.
// The header block is complete in the connection's buffer once
// WroteHeaders fires; before that no server can have acted on the
// request. That proves nothing, though, unless the transport reports its
// progress: net/http's Transport does (HTTP/1 and HTTP/2), as does a
// wrapper that hands the request on to one, which then reports asking for
// a connection (GetConn). A transport that reports nothing (another HTTP
// stack, one that re-sends the request under a context of its own) may
// have sent it: "nothing sent" would be a guess, and Limbo retries a
// before_send failure of an irreversible write at once.
type sendProgress struct {
	reports      bool // the transport is net/http's own
	asked, wrote atomic.Bool
}

// traceSend is ctx with a trace recording a request's progress through
// hc's transport.
func traceSend(ctx context.Context, hc *http.Client) (context.Context, *sendProgress) {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	_, reports := rt.(*http.Transport)
	p := &sendProgress{reports: reports}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn:      func(string) { p.asked.Store(true) },
		WroteHeaders: func() { p.wrote.Store(true) },
	}), p
}

// mayHaveSent reports whether the request may have reached the server:
// false only when the transport shows it never wrote the headers.
func (p *sendProgress) mayHaveSent() bool {
	return p.wrote.Load() || (!p.reports && !p.asked.Load())
}

// OutcomeFromHTTP classifies one send into what Limbo needs: resp and err
// are what http.Client.Do returned; sent says whether any part of the
// request may have reached the destination (SendAttempt tracks it).
//
//   - No answer and nothing sent: connection_error (or timeout),
//     before_send — no effect is possible.
//   - No answer after sending: timeout or connection_error, after_send —
//     the effect is unknown.
//   - A 2xx answer: success, with the status.
//   - Any other answer: error, with the status, the raw Retry-After, the
//     provider's error code (from a JSON body: "code", "error" as a
//     string, "error.code", "error.type", "type") and request id.
//
// The caller adds what a success created (Resource, Job) from the body.
func OutcomeFromHTTP(resp *http.Response, err error, sent bool) Outcome {
	if err != nil || resp == nil {
		o := Outcome{Result: ResultConnectionError, Phase: PhaseAfterSend}
		if isTimeout(err) {
			o.Result = ResultTimeout
		}
		if !sent {
			o.Phase = PhaseBeforeSend
		}
		return o
	}
	o := Outcome{Phase: PhaseAfterSend, HTTPStatus: resp.StatusCode, ProviderRequestID: requestID(resp.Header)}
	if o.HTTPStatus < 100 || o.HTTPStatus > 599 {
		// Not HTTP as Limbo knows it: an answer came, its meaning did not.
		return Outcome{Result: ResultError, Phase: PhaseAfterSend}
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		o.Result = ResultSuccess
		return o
	}
	o.Result = ResultError
	o.RetryAfter = retryAfter(resp.Header)
	o.ProviderCode = providerCode(resp)
	switch resp.Header.Get("X-Should-Retry") {
	case "true":
		o.ShouldRetry = ptr(true)
	case "false":
		o.ShouldRetry = ptr(false)
	}
	return o
}

// retryAfter is the wait the answer asks for: retry-after-ms (OpenAI and
// other Stainless-shaped APIs, more precise) as decimal seconds, else the
// raw Retry-After.
func retryAfter(h http.Header) string {
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v >= 0 && v < 1e12 {
			return strconv.FormatFloat(v/1000, 'f', -1, 64)
		}
	}
	return fit(h.Get("Retry-After"))
}

func ptr[T any](v T) *T { return &v }

// UsageFromBody reads a model call's token usage from an OpenAI-shaped
// answer ({"model": …, "usage": {"prompt_tokens": …, "completion_tokens":
// …}}), for the outcome's Usage; nil when the body carries none.
func UsageFromBody(body []byte) *Usage {
	var v struct {
		Model string `json:"model"`
		Usage *struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil || v.Usage.Prompt < 0 || v.Usage.Completion < 0 {
		return nil
	}
	return &Usage{Model: fit(v.Model), PromptTokens: min(v.Usage.Prompt, MaxTokens),
		CompletionTokens: min(v.Usage.Completion, MaxTokens)}
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// requestID is the provider's id for the request, under the usual names.
func requestID(h http.Header) string {
	for _, k := range []string{"X-Request-Id", "Request-Id", "X-Amzn-Requestid", "X-Amz-Request-Id", "X-Correlation-Id"} {
		if v := h.Get(k); v != "" {
			return fit(v)
		}
	}
	return ""
}

// maxPeek bounds how much of an error answer is read for its code.
const maxPeek = 64 << 10

// providerCode reads the provider's error code from an error answer's JSON
// body and puts the bytes back, so the caller can still read the body.
func providerCode(resp *http.Response) string {
	if resp.Body == nil || resp.Body == http.NoBody {
		return ""
	}
	peek, err := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
	if err != nil || len(peek) == 0 {
		return ""
	}
	var v struct {
		Code  json.RawMessage `json:"code"`
		Error json.RawMessage `json:"error"`
		Type  json.RawMessage `json:"type"`
	}
	if json.Unmarshal(peek, &v) != nil {
		return ""
	}
	var nested struct {
		Code json.RawMessage `json:"code"`
		Type json.RawMessage `json:"type"`
	}
	_ = json.Unmarshal(v.Error, &nested)
	for _, raw := range []json.RawMessage{v.Code, v.Error, nested.Code, nested.Type, v.Type} {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return fit(s)
		}
	}
	return ""
}

type readCloser struct {
	io.Reader
	io.Closer
}
