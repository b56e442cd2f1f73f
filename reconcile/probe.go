package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
)

// Prober sends the configured probes, each through netguard under its
// destination's allow_internal list.
type Prober struct {
	cfg *review.Config

	mu sync.Mutex
	// clients by allow-list (netguard.Policy.Key): a connection opened
	// under one destination's allow-list is never reused for another's.
	clients map[string]*http.Client
}

// NewProber returns a prober for cfg's destinations.
func NewProber(cfg *review.Config) *Prober {
	return &Prober{cfg: cfg, clients: map[string]*http.Client{}}
}

// policy is the netguard policy of a destination's allow-list.
func policy(a review.AllowList) netguard.Policy {
	return netguard.Policy{Prefixes: a.Prefixes, Hosts: a.Hosts}
}

// client returns the HTTP client for a destination's allow-list: dialling
// only what netguard allows, no proxy, redirects never followed.
func (p *Prober) client(a review.AllowList) *http.Client {
	pol := policy(a)
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[pol.Key()]
	if !ok {
		tr := netguard.Transport(&netguard.Guard{Policy: pol, Timeout: 5 * time.Second})
		tr.MaxIdleConnsPerHost = 16
		c = &http.Client{Transport: tr, CheckRedirect: netguard.NoRedirects}
		p.clients[pol.Key()] = c
	}
	return c
}

// probeFields are the operation's fields a probe URL template may use,
// URL-escaped: {{.ID}}, {{.Key}}, {{.ResourceRef}}, {{.JobRef}}, …
type probeFields struct {
	ID, Tenant, Key, SourceRef, LogicalVersion, Action, Destination, ResourceRef, JobRef string
}

func fieldsOf(op *review.Operation) probeFields {
	esc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	f := probeFields{ID: esc(op.ID), Tenant: esc(op.Tenant), Key: esc(op.Key), SourceRef: esc(op.SourceRef),
		LogicalVersion: esc(op.LogicalVersion), Action: esc(op.Action), Destination: esc(op.Destination)}
	if op.Resource != nil {
		f.ResourceRef = esc(op.Resource.Ref)
	}
	if n := len(op.Jobs); n > 0 {
		f.JobRef = esc(op.Jobs[n-1].Ref)
	}
	return f
}

// Probe runs the hierarchy's probes for op: a status lookup when a
// resource or job ref is known and the destination offers one, then the
// metadata search. A destination without probes yields no results.
func (p *Prober) Probe(ctx context.Context, op *review.Operation, d review.Destination) []review.ProbeResult {
	var out []review.ProbeResult
	f := fieldsOf(op)
	timed := func(kind review.ProbeKind, pr *review.Probe) review.ProbeResult {
		start := time.Now()
		r := p.send(ctx, kind, pr, f, d.AllowInternal)
		r.Took = time.Since(start)
		return r
	}
	if pr := d.Probes.Status; pr != nil && (f.ResourceRef != "" || f.JobRef != "") {
		out = append(out, timed(review.ProbeStatus, pr))
	}
	if pr := d.Probes.Search; pr != nil {
		out = append(out, timed(review.ProbeSearch, pr))
	}
	return out
}

func (p *Prober) send(ctx context.Context, kind review.ProbeKind, pr *review.Probe, f probeFields, allow review.AllowList) review.ProbeResult {
	res := review.ProbeResult{Kind: kind, At: time.Now().UTC()}
	fail := func(format string, args ...any) review.ProbeResult {
		res.Err = fmt.Sprintf(format, args...)
		return res
	}
	body, status, err := p.get(ctx, pr, f, allow)
	var reqErr *requestError
	if errors.As(err, &reqErr) {
		// The request itself failed: recorded by its class and a fixed
		// message, as webhook deliveries are, never the raw dial error.
		class, msg := netguard.Explain(reqErr.err)
		res.Class, res.Err = string(class), msg
		return res
	}
	if err != nil {
		return fail("%v", err)
	}
	switch {
	case status == http.StatusNotFound && kind == review.ProbeStatus:
		res.NotFound = true
		return res
	case status < 200 || status > 299:
		class, msg := netguard.Status(status)
		res.Class, res.Err = string(class), msg
		return res
	}
	cands, err := candidates(body, pr.Candidates)
	if err != nil {
		return fail("answer: %v", err)
	}
	res.Candidates = cands
	return res
}

// candidates reads the candidate list at path (dot-separated; empty: the
// answer itself, an object or an array). Each candidate names its ref
// ("ref" or "id"), kind, version ("version" or "logical_version") and
// operation_id.
func candidates(body []byte, path string) ([]review.Candidate, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	for _, part := range strings.Split(strings.TrimPrefix(path, "$."), ".") {
		if part == "" || part == "$" {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no %q in the answer", part)
		}
		if v, ok = m[part]; !ok {
			return nil, fmt.Errorf("no %q in the answer", part)
		}
	}
	var items []any
	switch t := v.(type) {
	case []any:
		items = t
	case map[string]any:
		items = []any{t}
	case nil:
		return nil, nil
	default:
		return nil, errors.New("candidates are neither a list nor an object")
	}
	out := make([]review.Candidate, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("candidate %d is not an object", i)
		}
		c := review.Candidate{Ref: str(m, "ref", "id"), Kind: str(m, "kind"), Version: str(m, "version", "logical_version"),
			OperationID: str(m, "operation_id")}
		if c.Ref == "" {
			return nil, fmt.Errorf("candidate %d has no ref", i)
		}
		out = append(out, c)
	}
	return out, nil
}

// str reads a member as text, fitted to the intake rule the API holds the
// same fields to (review.FitText): the destination's answer is stored as
// evidence, and a NUL or an over-long ref must not make it unstorable.
func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			return fit(v)
		case json.Number:
			return fit(v.String())
		}
	}
	return ""
}

func fit(s string) string { return review.FitText(review.Identifier, review.MaxFieldLen, s) }

// Job polls the accepted operation's latest job with the destination's job
// probe. The answer names status, output_ref and logical_version (or
// input_version). No probe, or no job known, is an error.
func (p *Prober) Job(ctx context.Context, op *review.Operation, d review.Destination) (*review.Job, error) {
	pr := d.Probes.Job
	f := fieldsOf(op)
	if pr == nil || f.JobRef == "" {
		return nil, errors.New("no job probe or no job ref")
	}
	body, status, err := p.get(ctx, pr, f, d.AllowInternal)
	if err != nil {
		return nil, err
	}
	if status < 200 || status > 299 {
		return nil, fmt.Errorf("HTTP %d", status)
	}
	var ans struct {
		Status         string `json:"status"`
		OutputRef      string `json:"output_ref"`
		LogicalVersion string `json:"logical_version"`
		InputVersion   string `json:"input_version"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("answer: %v", err)
	}
	js := review.JobStatus(ans.Status)
	if !js.Valid() {
		return nil, fmt.Errorf("answer: unknown job status %q", ans.Status)
	}
	return &review.Job{Ref: op.Jobs[len(op.Jobs)-1].Ref, Status: js, OutputRef: fit(ans.OutputRef),
		InputVersion: fit(cmp.Or(ans.InputVersion, ans.LogicalVersion))}, nil
}

// requestError is a probe request that got no answer: refused by
// netguard, or a DNS, connection, TLS or timeout failure.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// get sends one probe request and reads its answer (at most 4 MiB).
func (p *Prober) get(ctx context.Context, pr *review.Probe, f probeFields, allow review.AllowList) ([]byte, int, error) {
	tmpl, err := template.New("url").Option("missingkey=error").Parse(pr.URL)
	if err != nil {
		return nil, 0, fmt.Errorf("url template: %v", err)
	}
	var u bytes.Buffer
	if err := tmpl.Execute(&u, f); err != nil {
		return nil, 0, fmt.Errorf("url template: %v", err)
	}
	timeout := pr.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method := pr.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if pr.AuthHeader != "" && pr.AuthEnv != "" {
		req.Header.Set(pr.AuthHeader, os.Getenv(pr.AuthEnv))
	}
	resp, err := p.client(allow).Do(req)
	if err != nil {
		return nil, 0, &requestError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading answer: %v", err)
	}
	return body, resp.StatusCode, nil
}
