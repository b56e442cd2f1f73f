package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
)

// maxAnswer is the largest probe answer read (per page of a search).
const maxAnswer = 4 << 20

// readable is the one status whose answer is read. Another 2xx is no
// answer about what was asked: 202 accepted the request without doing it,
// 206 is part of the answer, 203 an intermediary's rewrite of it and 204
// has none. An empty list in any of them proves nothing, so the probe
// fails as it does on a 500.
const readable = http.StatusOK

// ClassCredential is the class of a probe not sent because its credential
// is not set.
const ClassCredential = "credential"

// ErrGone: the destination answers (404 or 410) that a ref the ledger
// knows does not exist. That contradicts the ledger; it is never absence.
var ErrGone = errors.New("the destination does not find it")

// Prober sends the configured probes, each through netguard under its
// destination's allow_internal list.
type Prober struct {
	cfg *review.Config
	// getenv reads probe credentials (auth_env).
	getenv func(string) string

	// log hears of a probe that panicked (the reconciler's log).
	log *slog.Logger
	// beforeRequest, when set (by tests), runs as each probe request
	// about op starts: it can make a probe panic.
	beforeRequest func(op *review.Operation)

	mu sync.Mutex
	// clients by allow-list (netguard.Policy.Key): a connection opened
	// under one destination's allow-list is never reused for another's.
	clients map[string]*http.Client
}

// NewProber returns a prober for cfg's destinations, reading probe
// credentials from the environment.
func NewProber(cfg *review.Config) *Prober { return NewProberEnv(cfg, os.Getenv) }

// NewProberEnv returns a prober reading probe credentials through getenv.
func NewProberEnv(cfg *review.Config, getenv func(string) string) *Prober {
	return &Prober{cfg: cfg, getenv: getenv, log: slog.Default(), clients: map[string]*http.Client{}}
}

// MissingCredentials lists the configured probes whose credential is not
// set. Their destinations' probes are not sent: serve warns of each at
// start and /readyz names them.
func (p *Prober) MissingCredentials() []review.MissingCredential {
	return p.cfg.MissingCredentials(p.getenv)
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

func esc(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// jsonEsc escapes s as the content of a JSON string, for a POST search's
// body template.
func jsonEsc(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func fieldsOf(op *review.Operation) probeFields { return fieldsWith(op, esc) }

func fieldsWith(op *review.Operation, esc func(string) string) probeFields {
	f := probeFields{ID: esc(op.ID), Tenant: esc(op.Tenant), Key: esc(op.Key), SourceRef: esc(op.SourceRef),
		LogicalVersion: esc(op.LogicalVersion), Action: esc(op.Action), Destination: esc(op.Destination)}
	if op.Resource != nil {
		f.ResourceRef = esc(op.Resource.Ref)
	}
	if j, ok := review.JobToPoll(op); ok {
		f.JobRef = esc(j.Ref)
	}
	if ref := review.CompensationResource(op); ref != "" {
		f.ResourceRef = esc(ref) // an undo is settled by looking up what it undoes
		if review.CompensationUndoesJob(op) {
			f.JobRef = f.ResourceRef // a cancel, by the job it cancels
		}
	}
	return f
}

// step is one probe request of a round and how its answer is read.
type step struct {
	kind review.ProbeKind
	pr   *review.Probe
	// ref is the ref a lookup asks about (review.LookupRef).
	ref string
	// job: the lookup is the job probe's, answered as a job.
	job bool
}

// Probe runs the hierarchy's probes for op: a status lookup of the ref the
// ledger knows (review.LookupRef), when the destination offers one that
// can ask about it, then the metadata search, read to its last page. A
// destination without probes yields no results; one whose probe
// credential is not set yields failed results without sending anything.
func (p *Prober) Probe(ctx context.Context, op *review.Operation, d review.Destination) []review.ProbeResult {
	f := fieldsOf(op)
	var steps []step
	if ref, isJob := review.LookupRef(op); ref != "" {
		switch {
		case d.Probes.Status != nil && asksFor(d.Probes.Status.URL, f, isJob):
			steps = append(steps, step{kind: review.ProbeStatus, pr: d.Probes.Status, ref: ref})
		case isJob && d.Probes.Job != nil:
			// A status probe written for resources cannot ask about a
			// job; the job probe can.
			steps = append(steps, step{kind: review.ProbeStatus, pr: d.Probes.Job, ref: ref, job: true})
		}
	}
	// A search cannot show an undo (review.settleUndo): not sent for one.
	if pr := d.Probes.Search; pr != nil && !review.IsCompensation(op.Action) {
		steps = append(steps, step{kind: review.ProbeSearch, pr: pr})
	}
	out := make([]review.ProbeResult, 0, len(steps))
	if miss := d.MissingCredentials(p.getenv); len(miss) > 0 {
		// Sent without its credential, a probe reads an unauthenticated
		// answer — often an empty one — as if it were the destination's.
		for _, s := range steps {
			out = append(out, review.ProbeResult{Kind: s.kind, Ref: s.ref, At: time.Now().UTC(), Class: ClassCredential,
				Err: fmt.Sprintf("credential %s is not set: this destination's probes are not sent", strings.Join(miss, ", "))})
		}
		return out
	}
	for _, s := range steps {
		start := time.Now()
		r := p.guardedSend(ctx, op, s, d.AllowInternal)
		r.Took = time.Since(start)
		out = append(out, r)
	}
	if d.Probes.History == nil {
		return out
	}
	// A resource found naming this operation at another version: its
	// history says whether this operation's version ever existed there.
	for _, ref := range laterVersions(op, out) {
		// The history URL names {{.ResourceRef}}: the resource found.
		about := *op
		about.Resource, about.Action = &review.ResourceRef{Ref: ref}, ""
		start := time.Now()
		r := p.guardedSend(ctx, &about, step{kind: review.ProbeHistory, pr: d.Probes.History, ref: ref}, d.AllowInternal)
		r.Ref, r.Took = ref, time.Since(start)
		out = append(out, r)
	}
	return out
}

// maxHistories bounds the history lookups of one round.
const maxHistories = 3

// laterVersions lists the refs this round's answers name for op at
// another version, once each, at most maxHistories.
func laterVersions(op *review.Operation, results []review.ProbeResult) []string {
	var refs []string
	for _, r := range results {
		for _, c := range r.Candidates {
			if c.OperationID == op.ID && c.Version != "" && c.Version != op.LogicalVersion &&
				!slices.Contains(refs, c.Ref) && len(refs) < maxHistories {
				refs = append(refs, c.Ref)
			}
		}
	}
	return refs
}

// asksFor reports whether a status URL template depends on the ref a
// lookup asks about ({{.JobRef}} for a job, {{.ResourceRef}} otherwise):
// one written as …/resources/{{.ResourceRef}} would, for a job, ask about
// nothing, and its 404 would say nothing about the job. A template that
// does not render is sent, so that its error is recorded.
func asksFor(tmpl string, f probeFields, job bool) bool {
	blank, marked := f, f
	if job {
		blank.JobRef, marked.JobRef = "", "limbo-ref-marker"
	} else {
		blank.ResourceRef, marked.ResourceRef = "", "limbo-ref-marker"
	}
	a, errA := render(tmpl, blank)
	b, errB := render(tmpl, marked)
	return errA != nil || errB != nil || a != b
}

func render(tmpl string, f probeFields) (string, error) {
	t, err := template.New("url").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("url template: %v", err)
	}
	var u bytes.Buffer
	if err := t.Execute(&u, f); err != nil {
		return "", fmt.Errorf("url template: %v", err)
	}
	return u.String(), nil
}

// guardedSend is send, with a panic in it (a bug reading an odd answer) a
// failed probe: logged with its stack, and the step's result an error, so
// the round records it and goes on with the rest. Probes run on goroutines
// of their own, where a panic nobody recovers ends the whole process.
func (p *Prober) guardedSend(ctx context.Context, op *review.Operation, s step, allow review.AllowList) (res review.ProbeResult) {
	defer loop.RecoverWith(ctx, p.log, "reconcile probe of "+op.ID, func(err error) {
		res = review.ProbeResult{Kind: s.kind, Ref: s.ref, At: time.Now().UTC(), Err: "the probe stopped on an internal error: " + err.Error()}
	})
	return p.send(ctx, op, s, allow)
}

// send runs one step: a lookup (one request) or a search (every page).
func (p *Prober) send(ctx context.Context, op *review.Operation, s step, allow review.AllowList) review.ProbeResult {
	res := review.ProbeResult{Kind: s.kind, Ref: s.ref, At: time.Now().UTC()}
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		body, status, err := p.get(ctx, s.pr, op, allow, cursor)
		where := ""
		if page > 1 {
			where = fmt.Sprintf("page %d: ", page)
		}
		var reqErr *requestError
		switch {
		case errors.As(err, &reqErr):
			// The request itself failed: recorded by its class and a
			// fixed message, as webhook deliveries are, never the raw
			// dial error.
			class, msg := netguard.Explain(reqErr.err)
			res.Class, res.Err, res.Candidates = string(class), where+msg, nil
			return res
		case err != nil:
			res.Err, res.Candidates = where+err.Error(), nil
			return res
		case s.kind == review.ProbeStatus && (status == http.StatusNotFound || status == http.StatusGone):
			res.NotFound = true
			return res
		case status != readable:
			class, msg := netguard.Status(status)
			res.Class, res.Err, res.Candidates = string(class), where+msg, nil
			return res
		}
		v, err := decode(body)
		var cands []review.Candidate
		if err == nil {
			if s.job {
				cands, err = jobCandidate(v, s.ref, op)
			} else {
				cands, err = candidates(v, s.pr.Candidates)
			}
		}
		if err == nil && s.kind == review.ProbeStatus && len(cands) == 0 {
			// A lookup answers about one thing. An empty list names no
			// ref at all: neither the one asked about nor a 404 saying it
			// does not exist, so it cannot contradict the ledger.
			err = fmt.Errorf("the lookup of %s answers an empty list, naming nothing", s.ref)
		}
		if err != nil {
			res.Err, res.Candidates = where+"answer: "+err.Error(), nil
			return res
		}
		res.Candidates = append(res.Candidates, cands...)
		if s.kind != review.ProbeSearch || s.pr.Next == "" {
			return res
		}
		next, err := cursorAt(v, s.pr.Next)
		switch {
		case err != nil:
			res.Err = where + "answer: " + err.Error()
		case next == "":
			return res // the last page
		case seen[next] || next == cursor:
			res.Err = fmt.Sprintf("%sthe search repeated cursor %q: it does not end, so it proves nothing", where, next)
		case page == review.MaxSearchPages:
			res.Err = fmt.Sprintf("the search has more than %d pages: the pages not read may hold anything, so it proves nothing", review.MaxSearchPages)
		}
		if res.Err != "" {
			res.Candidates = nil
			return res
		}
		seen[next], cursor = true, next
	}
}

// decode reads a probe answer with the API's strict JSON (review.CheckJSON:
// one value, no duplicate member, valid UTF-8): "the last member wins" or
// "the first value counts" would let an answer mean what it does not say.
func decode(body []byte) (any, error) {
	if _, err := review.CheckJSON(body); err != nil {
		return nil, fmt.Errorf("not strict JSON: %v", err)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return v, nil
}

// member walks a dot path (review.JSONPath) into v. found is false when a
// member on the way is absent.
func member(v any, path string) (out any, found bool, err error) {
	for _, part := range review.JSONPath(path) {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("no %q in the answer: what holds it is not an object", part)
		}
		if v, ok = m[part]; !ok {
			return nil, false, nil
		}
	}
	return v, true, nil
}

// candidates reads the candidate list at path (dot-separated; empty: the
// answer itself, an object or an array). Each candidate names its ref
// ("ref" or "id"), kind, version ("version", or "logical_version" when
// "version" is empty) and operation_id, each read by fields. A null or
// missing list is an unreadable answer, not an empty one.
func candidates(v any, path string) ([]review.Candidate, error) {
	v, found, err := member(v, path)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("no %q in the answer", path)
	}
	var items []any
	switch t := v.(type) {
	case []any:
		items = t
	case map[string]any:
		items = []any{t}
	case nil:
		return nil, fmt.Errorf("candidates at %q are null, not a list", cmp.Or(path, "$"))
	default:
		return nil, errors.New("candidates are neither a list nor an object")
	}
	out := make([]review.Candidate, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("candidate %d is not an object", i)
		}
		f := fields{m: m}
		c := review.Candidate{Ref: f.either("ref", "id"), Kind: f.text("kind"),
			Version: f.either("version", "logical_version"), OperationID: f.text("operation_id"), Status: f.text("status")}
		switch {
		case f.err != nil:
			return nil, fmt.Errorf("candidate %d: %v", i, f.err)
		case c.Ref == "":
			return nil, fmt.Errorf("candidate %d has no ref", i)
		}
		out = append(out, c)
	}
	return out, nil
}

// cursorAt reads the next page's cursor at path: "" when it is absent,
// null or empty (the last page).
func cursorAt(v any, path string) (string, error) {
	v, found, err := member(v, path)
	if err != nil || !found {
		return "", err
	}
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	}
	return "", fmt.Errorf("the cursor at %q is neither text nor null", path)
}

// fields reads the members of one candidate or job answer as text, as
// the destination wrote them or not at all; err is the first member that
// cannot be read, which makes the whole answer unreadable (inconclusive).
type fields struct {
	m   map[string]any
	err error
}

// text is member key: a string, or a number's literal; "" when it is
// absent or null. Anything else fails the answer: a version of the wrong
// type is not "the destination does not version". So does text breaking
// the rule the API holds the same fields to (review.CheckText: an
// Identifier of at most MaxFieldLen characters): it is stored as
// evidence, and cut or replaced to fit, two refs could read as one.
func (f *fields) text(key string) string {
	if f.err != nil {
		return ""
	}
	var s string
	switch v := f.m[key].(type) {
	case nil:
		return ""
	case string:
		s = v
	case json.Number:
		s = v.String()
	default:
		f.err = fmt.Errorf("%q is %s, not text", key, jsonType(v))
		return ""
	}
	if p := review.TextProblem(review.Identifier, review.MaxFieldLen, s); p != "" {
		f.err = fmt.Errorf("%q: %s", key, p)
		return ""
	}
	return s
}

// either is a member written under two names ("ref" or "id", "version"
// or "logical_version"): the one that is not empty. Two that differ
// contradict each other: neither is read.
func (f *fields) either(key, alias string) string {
	a, b := f.text(key), f.text(alias)
	if a != "" && b != "" && a != b && f.err == nil {
		f.err = fmt.Errorf("%q %q and %q %q disagree", key, a, alias, b)
	}
	return cmp.Or(a, b)
}

// jsonType names a decoded JSON value's type for a message.
func jsonType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// readJob reads a job probe's answer about job ref of op, each member by
// fields. It must name the job ("ref" or "id") and, when it names an
// operation, op (for a compensation, the parent whose job it cancels): an
// answer about another job is not this one's status. It
// names status, output_ref and input_version, the version the job ran on
// (or, without it, logical_version: the two are not one member written
// twice, since a job can run on another version than its operation's).
func readJob(v any, ref string, op *review.Operation) (*review.Job, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the answer is not an object")
	}
	f := fields{m: m}
	named, id, status := f.either("ref", "id"), f.text("operation_id"), f.text("status")
	j := &review.Job{Ref: ref, Status: review.JobStatus(status), OutputRef: f.text("output_ref"),
		InputVersion: cmp.Or(f.text("input_version"), f.text("logical_version"))}
	switch {
	case f.err != nil:
		return nil, f.err
	case named == "":
		return nil, fmt.Errorf("the answer names no job; expected %s", ref)
	case named != ref:
		return nil, fmt.Errorf("the answer is about job %s, not %s", named, ref)
	case id != "" && id != jobOwner(op):
		return nil, fmt.Errorf("the answer says job %s belongs to operation %s, not %s", ref, id, jobOwner(op))
	case !j.Status.Valid():
		return nil, fmt.Errorf("unknown job status %q", status)
	}
	return j, nil
}

// jobOwner is the operation a job op's job probe asks about belongs to: op,
// or for a compensation (a cancel) the parent whose job it is.
func jobOwner(op *review.Operation) string {
	if review.CompensationUndoesJob(op) {
		return review.CompensationParent(op)
	}
	return op.ID
}

// jobCandidate reads a job probe's answer in a reconciliation round: the
// job the ledger ties to op, found, is a candidate of kind job. For a
// cancel, the job is its parent's, and its status says whether the cancel
// took (review.settleUndo).
func jobCandidate(v any, ref string, op *review.Operation) ([]review.Candidate, error) {
	j, err := readJob(v, ref, op)
	if err != nil {
		return nil, err
	}
	c := review.Candidate{Ref: ref, Kind: "job", Version: j.InputVersion, OperationID: op.ID}
	if review.CompensationUndoesJob(op) {
		c.OperationID, c.Status = jobOwner(op), string(j.Status)
	}
	return []review.Candidate{c}, nil
}

// Job polls op's job with the destination's job probe: the one
// review.JobToPoll names (an accepted operation's latest, the one the case
// of one in review waits on); see readJob for what the answer must say.
// No probe, no job known, a missing credential or an unreadable answer is
// an error; a job the destination does not find (404 or 410) is one
// wrapping ErrGone.
func (p *Prober) Job(ctx context.Context, op *review.Operation, d review.Destination) (job *review.Job, err error) {
	// A panic here is a failed poll, as in guardedSend.
	defer loop.RecoverWith(ctx, p.log, "reconcile job probe of "+op.ID, func(e error) { job, err = nil, e })
	pr := d.Probes.Job
	polled, ok := review.JobToPoll(op)
	if pr == nil || !ok || polled.Ref == "" {
		return nil, errors.New("no job probe or no job ref")
	}
	ref := polled.Ref
	if miss := d.MissingCredentials(p.getenv); len(miss) > 0 {
		return nil, fmt.Errorf("credential %s is not set: this destination's probes are not sent", strings.Join(miss, ", "))
	}
	body, status, err := p.get(ctx, pr, op, d.AllowInternal, "")
	switch {
	case err != nil:
		return nil, err
	case status == http.StatusNotFound || status == http.StatusGone:
		return nil, fmt.Errorf("job %s: HTTP %d: %w", ref, status, ErrGone)
	case status != readable:
		return nil, fmt.Errorf("HTTP %d", status)
	}
	v, err := decode(body)
	if err != nil {
		return nil, fmt.Errorf("answer: %v", err)
	}
	j, err := readJob(v, ref, op)
	if err != nil {
		return nil, fmt.Errorf("answer: %v", err)
	}
	return j, nil
}

// requestError is a probe request that got no answer: refused by
// netguard, or a DNS, connection, TLS or timeout failure.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// get sends one probe request about op and reads its answer (at most
// maxAnswer). A cursor, when set, is sent as the probe's cursor_param. The
// method is GET, or POST for a search the configuration allows to be one
// (review.Probe.check), with its body template rendered.
func (p *Prober) get(ctx context.Context, pr *review.Probe, op *review.Operation, allow review.AllowList, cursor string) ([]byte, int, error) {
	if p.beforeRequest != nil {
		p.beforeRequest(op)
	}
	u, err := render(pr.URL, fieldsOf(op))
	if err != nil {
		return nil, 0, err
	}
	if cursor != "" {
		pu, err := url.Parse(u)
		if err != nil {
			return nil, 0, fmt.Errorf("url: %v", err)
		}
		q := pu.Query()
		q.Set(pr.CursorParam, cursor)
		pu.RawQuery = q.Encode()
		u = pu.String()
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
	var reqBody io.Reader
	if method == http.MethodPost {
		b, err := render(pr.Body, fieldsWith(op, jsonEsc))
		if err != nil {
			return nil, 0, fmt.Errorf("body %v", strings.TrimPrefix(err.Error(), "url "))
		}
		reqBody = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, reqBody)
	if err != nil {
		return nil, 0, fmt.Errorf("request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if reqBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if pr.AuthHeader != "" && pr.AuthEnv != "" {
		req.Header.Set(pr.AuthHeader, p.getenv(pr.AuthEnv))
	}
	resp, err := p.client(allow).Do(req)
	if err != nil {
		return nil, 0, &requestError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading answer: %v", err)
	}
	if len(body) > maxAnswer {
		return nil, resp.StatusCode, fmt.Errorf("the answer is larger than %d MiB", maxAnswer>>20)
	}
	return body, resp.StatusCode, nil
}
