// Package undo is Limbo's own worker for compensations: for a destination
// configured with an undo call (review.Undo, a DELETE template), it runs
// the compensation operations reviewers decided, through the same ledger
// an integrator's attempts go through — an attempt granted by the store,
// one request sent with the compensation's key, the outcome reported and
// classified like any other. A lost answer leaves the compensation
// ambiguous for reconciliation; a refusal retries or fails it; the parent
// follows (review.CompensationSettles). Several instances may run: the
// store grants each attempt once.
package undo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Actor is who the ledger says ran a compensation.
const Actor = "system:undo"

// Worker runs due compensations against their destinations' undo calls.
type Worker struct {
	Store *store.Store
	// Batch is how many compensations one round takes.
	Batch int
	Log   *slog.Logger

	getenv func(string) string
	dests  []string // with an undo call, sorted
	calls  map[string]call
}

// call is one destination's undo call: its configuration, URL template
// and HTTP client (netguard under the destination's allow-list).
type call struct {
	undo *review.Undo
	// keyHeader carries the compensation's key: the destination's
	// idempotency_header, else Idempotency-Key — always sent, since an
	// undo repeated after a lost answer must not undo twice where the
	// destination can tell.
	keyHeader string
	url       *template.Template
	http      *http.Client
}

// New returns a worker for cfg's destinations that have an undo call,
// reading credentials through getenv (nil: the environment).
func New(st *store.Store, cfg *review.Config, log *slog.Logger, getenv func(string) string) (*Worker, error) {
	if log == nil {
		log = slog.Default()
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	w := &Worker{Store: st, Batch: 32, Log: log, getenv: getenv, calls: map[string]call{}}
	if cfg == nil {
		return w, nil
	}
	for name, d := range cfg.Destinations {
		if d.Undo == nil {
			continue
		}
		t, err := template.New("undo").Option("missingkey=error").Parse(d.Undo.URL)
		if err != nil {
			return nil, fmt.Errorf("undo: destination %q: %w", name, err)
		}
		// Keep-alives off: a DELETE has no body, so net/http would resend
		// it on a broken reused connection — a second send inside one
		// attempt, behind the ledger's back (client.NewAttemptRequest).
		tr := netguard.Transport(&netguard.Guard{Policy: netguard.Policy{Prefixes: d.AllowInternal.Prefixes, Hosts: d.AllowInternal.Hosts},
			Timeout: 5 * time.Second})
		tr.DisableKeepAlives = true
		hc := &http.Client{Transport: tr, CheckRedirect: netguard.NoRedirects, Timeout: d.Undo.Timeout}
		kh := d.IdempotencyHeader
		if kh == "" {
			kh = review.DefaultIdempotencyHeader
		}
		w.calls[name] = call{undo: d.Undo, keyHeader: kh, url: t, http: hc}
		w.dests = append(w.dests, name)
	}
	sort.Strings(w.dests)
	return w, nil
}

// Run runs rounds every interval until ctx ends.
func (w *Worker) Run(ctx context.Context, every time.Duration) {
	loop.Drain(ctx, every, w.Log, "undo round", w.Batch, w.RunOnce)
}

// RunOnce runs the compensations due now, one after another, and returns
// how many it started.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	due, err := w.Store.DueCompensations(ctx, w.runnable(), w.Batch)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, c := range due {
		ran, err := w.run(ctx, c)
		if err != nil {
			return started, err
		}
		if ran {
			started++
		}
	}
	return started, nil
}

// runnable is the destinations whose undo call can be sent now: the
// credential it names, if any, is set. The others' compensations stay due
// for the integrator to run (warned at start, review.MissingCredential);
// listed, they would fill every round's batch, oldest first, and hold back
// every other destination's.
func (w *Worker) runnable() []string {
	var out []string
	for _, d := range w.dests {
		if e := w.calls[d].undo.AuthEnv; e == "" || w.getenv(e) != "" {
			out = append(out, d)
		}
	}
	return out
}

// run asks for an attempt at compensation c, sends the undo call once and
// reports what happened. It runs nothing when the call's credential is
// not set (the integrator may run it) or another instance holds the
// attempt.
func (w *Worker) run(ctx context.Context, c store.DueCompensation) (bool, error) {
	cl := w.calls[c.Destination]
	var auth string
	if e := cl.undo.AuthEnv; e != "" {
		if auth = w.getenv(e); auth == "" {
			return false, nil // warned at start (review.MissingCredential)
		}
	}
	target, err := w.url(cl, c)
	if err != nil {
		return false, err
	}
	g, err := w.Store.StartAttempt(ctx, store.AttemptRequest{Tenant: c.Tenant, OperationID: c.OperationID, Actor: Actor})
	if err != nil {
		var na *review.NotAttemptableError
		var wait *review.WaitError
		if errors.As(err, &na) || errors.As(err, &wait) || errors.Is(err, review.ErrConflict) {
			return false, nil // moved meanwhile, held back, or another instance's
		}
		return false, err
	}
	o := w.send(ctx, cl, target, auth, g.Key)
	if _, err := w.Store.RecordOutcome(ctx, c.Tenant, c.OperationID, g.N, serverOutcome(o), Actor); err != nil {
		// The lease sweep will find the attempt and leave it ambiguous.
		return true, fmt.Errorf("undo %s: report outcome: %w", c.OperationID, err)
	}
	w.Log.Info("compensation sent", "operation", c.OperationID, "parent", c.ParentID, "resource", c.ResourceRef,
		"result", o.Result, "http_status", o.HTTPStatus)
	return true, nil
}

// url fills the destination's undo template for c, each field escaped.
func (w *Worker) url(cl call, c store.DueCompensation) (string, error) {
	esc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	var b bytes.Buffer
	f := review.UndoFields{Ref: esc(c.ResourceRef), ID: esc(c.OperationID), Key: esc(c.Key), ParentID: esc(c.ParentID), Tenant: esc(c.Tenant)}
	if err := cl.url.Execute(&b, f); err != nil {
		return "", fmt.Errorf("undo %s: url: %w", c.OperationID, err)
	}
	return b.String(), nil
}

// send sends the undo call once and classifies the answer.
func (w *Worker) send(ctx context.Context, cl call, target, auth, key string) client.Outcome {
	req, err := client.NewAttemptRequest(ctx, &client.Grant{Key: key, KeyHeader: cl.keyHeader}, cl.undo.Method, target, nil)
	if err != nil {
		return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
	}
	if auth != "" {
		req.Header.Set(cl.undo.AuthHeader, auth)
	}
	resp, o := client.SendAttempt(cl.http, req)
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	return o
}

// serverOutcome is the client's classification as the store records it:
// the same report the API would have received as JSON.
func serverOutcome(o client.Outcome) review.Outcome {
	r := review.Outcome{Result: review.Result(o.Result), Phase: review.Phase(o.Phase), HTTPStatus: o.HTTPStatus,
		RetryAfter: o.RetryAfter, ProviderCode: o.ProviderCode, ProviderRequestID: o.ProviderRequestID, Cost: o.Cost,
		ShouldRetry: o.ShouldRetry, Output: o.Output, OutputInvalid: o.OutputInvalid}
	if o.Resource != nil {
		r.Resource = &review.ResourceRef{Ref: o.Resource.Ref, Kind: o.Resource.Kind, Version: o.Resource.Version}
	}
	if o.Job != nil {
		r.Job = &review.JobRef{Ref: o.Job.Ref, Status: o.Job.Status}
	}
	if o.Usage != nil {
		r.Usage = &review.Usage{Model: o.Usage.Model, PromptTokens: o.Usage.PromptTokens, CompletionTokens: o.Usage.CompletionTokens}
	}
	return r
}
