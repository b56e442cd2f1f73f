package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// t0 is where every test's fake clock starts.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// testBundle is one API server on a fresh database, with a fake clock and
// a token for tenant "acme".
type testBundle struct {
	t      testing.TB
	engine store.Engine
	store  *store.Store
	clock  *storetest.Clock
	srv    *httptest.Server
	token  string
}

// setup starts the real server (handlers.NewServer) over a fresh, migrated
// database on engine. cfg may be nil (safe defaults everywhere).
func setup(t testing.TB, engine store.Engine, cfg *review.Config) *testBundle {
	t.Helper()
	clk := storetest.NewClock(t0)
	s := storetest.Open(t, engine, store.Options{Config: cfg, Clock: clk.Now})
	srv := httptest.NewServer(handlers.NewServer(handlers.New(s, nil)))
	t.Cleanup(srv.Close)
	b := &testBundle{t: t, engine: engine, store: s, clock: clk, srv: srv}
	b.token = b.newToken("acme")
	return b
}

// on returns the bundle reporting to t (a subtest's).
func (b *testBundle) on(t testing.TB) *testBundle {
	c := *b
	c.t = t
	return &c
}

// newToken creates an API token for tenant.
func (b *testBundle) newToken(tenant string) string {
	b.t.Helper()
	tok, err := b.store.CreateToken(context.Background(), review.Operator("test"), tenant, "test")
	if err != nil {
		b.t.Fatalf("CreateToken(%s): %v", tenant, err)
	}
	return tok
}

// response is an answer read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	what   string // "POST /api/v1/…" for messages
}

// request describes one call; the zero value is a GET with tenant acme's
// token and no body.
type request struct {
	method      string
	path        string
	body        string
	token       *string // nil: the bundle's token; pointer to "": no Authorization header
	auth        string  // a raw Authorization header, overriding token
	contentType *string // nil: application/json when there is a body
	reader      io.Reader
	length      int64 // with reader: the Content-Length to declare (-1: chunked)
}

// do sends r through the real server and checks what every answer must
// satisfy: never a 5xx; every error is problem+json with a type and the
// status; every answer matches the OpenAPI document. Safe to call from
// several goroutines (it reports with t.Errorf).
func (b *testBundle) do(r request) *response {
	t := b.t
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	var body io.Reader
	if r.reader != nil {
		body = r.reader
	} else if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, b.srv.URL+r.path, body)
	if err != nil {
		t.Errorf("%s %s: %v", r.method, r.path, err)
		return &response{Status: -1, Header: http.Header{}}
	}
	if r.reader != nil {
		req.ContentLength = r.length
	}
	switch {
	case r.auth != "":
		req.Header.Set("Authorization", r.auth)
	case r.token == nil:
		req.Header.Set("Authorization", "Bearer "+b.token)
	case *r.token != "":
		req.Header.Set("Authorization", "Bearer "+*r.token)
	}
	switch {
	case r.contentType != nil:
		if *r.contentType != "" {
			req.Header.Set("Content-Type", *r.contentType)
		}
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", r.method, r.path, err)
		return &response{Status: -1, Header: http.Header{}}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: reading body: %v", r.method, r.path, err)
	}
	res := &response{Status: resp.StatusCode, Header: resp.Header, Body: data, what: r.method + " " + r.path}
	if resp.StatusCode >= 500 {
		t.Errorf("%s: %d (no test may see a 5xx): %s", res.what, resp.StatusCode, data)
	}
	if resp.StatusCode >= 400 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: %d with Content-Type %q, want application/problem+json", res.what, resp.StatusCode, ct)
		}
		var p handlers.Problem
		if err := json.Unmarshal(data, &p); err != nil || p.Type == "" || p.Title == "" || p.Status != resp.StatusCode {
			t.Errorf("%s: %d: not a problem with type, title and status %d: %s (%v)", res.what, resp.StatusCode, resp.StatusCode, data, err)
		}
	}
	for _, e := range checkAgainstDoc(r.method, r.path, r.body, res) {
		t.Errorf("%s: %d: answer does not match openapi.json: %s\nbody: %.2000s", res.what, res.Status, e, data)
	}
	return res
}

func strp(s string) *string { return &s }

// get, post and put are the common calls with tenant acme's token.
func (b *testBundle) get(path string) *response { b.t.Helper(); return b.do(request{path: path}) }
func (b *testBundle) post(path, body string) *response {
	b.t.Helper()
	return b.do(request{method: http.MethodPost, path: path, body: body})
}
func (b *testBundle) put(path, body string) *response {
	b.t.Helper()
	return b.do(request{method: http.MethodPut, path: path, body: body})
}

// want fails the test unless the answer has status code.
func (r *response) want(t *testing.T, code int) *response {
	t.Helper()
	if r.Status != code {
		t.Fatalf("%s: status %d, want %d: %s", r.what, r.Status, code, r.Body)
	}
	return r
}

// decode unmarshals the body into v.
func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%s: decoding %T: %v: %s", r.what, v, err, r.Body)
	}
}

// op decodes an operation.
func (r *response) op(t *testing.T) *review.Operation {
	t.Helper()
	var op review.Operation
	r.decode(t, &op)
	return &op
}

// problem decodes a problem and checks its type.
func (r *response) problem(t *testing.T, typ string) *handlers.Problem {
	t.Helper()
	var p handlers.Problem
	r.decode(t, &p)
	if p.Type != typ {
		t.Fatalf("%s: problem type %q, want %q: %s", r.what, p.Type, typ, r.Body)
	}
	return &p
}

// grant is the answer to a granted attempt.
type grant struct {
	OperationID    string    `json:"operation_id"`
	N              int       `json:"n"`
	Key            string    `json:"key"`
	Generation     int64     `json:"generation"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// outcomeAnswer is the answer to an outcome report.
type outcomeAnswer struct {
	Operation *review.Operation `json:"operation"`
	Next      review.Next       `json:"next"`
	RetryAt   *time.Time        `json:"retry_at"`
	Reason    string            `json:"reason"`
}

// page is one page of GET /operations.
type page struct {
	Operations []*review.Operation `json:"operations"`
	NextCursor string              `json:"next_cursor"`
}

// registration builds a register body: source_ref ref, logical_version v1,
// action create_folder at destination dest, with extra members appended.
func registration(ref, dest string, risk review.Risk, extra ...string) string {
	fields := []string{
		`"source_ref":` + strconv.Quote(ref),
		`"logical_version":"v1"`,
		`"action":"create_folder"`,
		`"destination":` + strconv.Quote(dest),
		`"risk":` + strconv.Quote(string(risk)),
		`"payload":{"name":` + strconv.Quote(ref) + `}`,
	}
	return "{" + strings.Join(append(fields, extra...), ",") + "}"
}

// register creates an operation at destination "drive" (201) and returns it.
func (b *testBundle) register(t *testing.T, ref string, risk review.Risk, extra ...string) *review.Operation {
	t.Helper()
	return b.registerAt(t, ref, "drive", risk, extra...)
}

// registerAt creates an operation at dest (201) and returns it.
func (b *testBundle) registerAt(t *testing.T, ref, dest string, risk review.Risk, extra ...string) *review.Operation {
	t.Helper()
	res := b.post("/api/v1/operations", registration(ref, dest, risk, extra...)).want(t, http.StatusCreated)
	op := res.op(t)
	if loc := res.Header.Get("Location"); loc != "/api/v1/operations/"+op.ID {
		t.Errorf("Location = %q, want /api/v1/operations/%s", loc, op.ID)
	}
	return op
}

// attempt asks for an attempt (201) and returns the grant.
func (b *testBundle) attempt(t *testing.T, id string) *grant {
	t.Helper()
	var g grant
	b.post("/api/v1/operations/"+id+"/attempts", "").want(t, http.StatusCreated).decode(t, &g)
	return &g
}

// outcome reports an outcome for attempt n (200) and returns the answer.
func (b *testBundle) outcome(t *testing.T, id string, n int, body string) *outcomeAnswer {
	t.Helper()
	var a outcomeAnswer
	b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", id, n), body).want(t, http.StatusOK).decode(t, &a)
	return &a
}

// ---------------------------------------------------------------------------
// The OpenAPI document as a contract: every answer a test sees is checked
// against it (status documented, media type, required headers, schema).

var (
	docOnce sync.Once
	docVal  map[string]any
	docErr  error
)

// openAPIDoc parses handlers/openapi.json (the file the server embeds).
func openAPIDoc() (map[string]any, error) {
	docOnce.Do(func() {
		data, err := os.ReadFile("openapi.json")
		if err != nil {
			docErr = err
			return
		}
		docErr = decodeNumbers(data, &docVal)
	})
	return docVal, docErr
}

func decodeNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// matchPath finds the documented path template for a request path.
func matchPath(paths map[string]any, path string) (string, bool) {
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	var found []string
	for tmpl := range paths {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		ok := true
		for i := range ts {
			if strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}") {
				if segs[i] == "" {
					ok = false
				}
				continue
			}
			if ts[i] != segs[i] {
				ok = false
			}
		}
		if ok {
			found = append(found, tmpl)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	// A literal segment beats a parameter: the template with fewest braces.
	sort.Slice(found, func(i, j int) bool { return strings.Count(found[i], "{") < strings.Count(found[j], "{") })
	return found[0], true
}

// checkAgainstDoc returns what is wrong with an answer according to the
// document; for an accepted (2xx) request, also what is wrong with the
// request body, so the document never forbids what the server accepts.
// Requests to undocumented routes (the /api/v1/* catch-all, a method a
// route does not take) are not checked.
func checkAgainstDoc(method, path, reqBody string, res *response) []string {
	doc, err := openAPIDoc()
	if err != nil {
		return []string{"openapi.json: " + err.Error()}
	}
	paths, _ := doc["paths"].(map[string]any)
	tmpl, ok := matchPath(paths, path)
	if !ok {
		return nil
	}
	item, _ := paths[tmpl].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		return nil
	}
	var errs []string
	if body := acceptedPart(tmpl, reqBody, res); res.Status < 300 && strings.TrimSpace(body) != "" {
		errs = append(errs, checkRequestBody(doc, op, body)...)
	}
	responses, _ := op["responses"].(map[string]any)
	spec, ok := responses[strconv.Itoa(res.Status)]
	if !ok {
		return append(errs, fmt.Sprintf("status %d is not documented for %s %s", res.Status, method, tmpl))
	}
	v := &validator{doc: doc}
	rs, err := v.deref(spec)
	if err != nil {
		return append(errs, err.Error())
	}
	if hs, ok := rs["headers"].(map[string]any); ok {
		for name := range hs {
			if res.Header.Get(name) == "" {
				errs = append(errs, "documented header "+name+" is missing")
			}
		}
	}
	content, _ := rs["content"].(map[string]any)
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	media, ok := content[mt].(map[string]any)
	if !ok {
		return append(errs, fmt.Sprintf("media type %q is not documented (documented: %v)", mt, mapKeys(content)))
	}
	schema, ok := media["schema"]
	if !ok {
		return errs
	}
	var body any
	if err := decodeNumbers(res.Body, &body); err != nil {
		return append(errs, "body is not JSON: "+err.Error())
	}
	v.check(schema, body, "$")
	return append(errs, v.errs...)
}

// acceptedPart is what of an accepted request body the server took: a
// batch of registrations takes those whose result is a success, and answers
// each of the others with its own problem.
func acceptedPart(tmpl, body string, res *response) string {
	if tmpl != "/api/v1/operations/batch" {
		return body
	}
	var req struct{ Operations []json.RawMessage }
	var ans struct{ Results []struct{ Status int } }
	if json.Unmarshal([]byte(body), &req) != nil || json.Unmarshal(res.Body, &ans) != nil || len(req.Operations) != len(ans.Results) {
		return body // checked whole: the mismatch shows
	}
	var took []json.RawMessage
	for i, r := range ans.Results {
		if r.Status < 300 {
			took = append(took, req.Operations[i])
		}
	}
	if len(took) == 0 {
		return "" // nothing taken: the call refused every registration
	}
	out, _ := json.Marshal(map[string]any{"operations": took})
	return string(out)
}

// checkRequestBody validates an accepted request body against the
// operation's documented request schema.
func checkRequestBody(doc, op map[string]any, body string) []string {
	rb, ok := op["requestBody"].(map[string]any)
	if !ok {
		return []string{"the server accepted a body the document does not describe"}
	}
	media, _ := rb["content"].(map[string]any)["application/json"].(map[string]any)
	var x any
	if err := decodeNumbers([]byte(body), &x); err != nil {
		return []string{"accepted request body is not JSON: " + err.Error()}
	}
	v := &validator{doc: doc}
	v.check(media["schema"], x, "request")
	return v.errs
}

func mapKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// validator checks a JSON value against the subset of JSON Schema 2020-12
// that openapi.json uses: $ref, type, enum, allOf (of objects), anyOf, properties, required,
// additionalProperties, items, minimum, maximum, minLength, maxLength,
// pattern and format date-time. It is strict about objects: a member the
// schema does not declare is an error unless additionalProperties allows
// it, so an undocumented field in an answer fails the test.
type validator struct {
	doc  map[string]any
	errs []string
}

func (v *validator) errorf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
}

// resolve follows a local JSON pointer ("#/components/schemas/Operation").
func resolve(doc map[string]any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var cur any = doc
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

// deref returns the object a $ref (or a chain of them) points at.
func (v *validator) deref(node any) (map[string]any, error) {
	for range 16 {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("not an object: %v", node)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		var err error
		if node, err = resolve(v.doc, ref); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("$ref chain too long")
}

func jsonType(x any) string {
	switch n := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := n.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", x)
}

func (v *validator) check(schemaNode, x any, at string) {
	s, err := v.deref(schemaNode)
	if err != nil {
		v.errorf("%s: schema: %v", at, err)
		return
	}
	got := jsonType(x)
	if t, ok := s["type"]; ok {
		var allowed []string
		switch tt := t.(type) {
		case string:
			allowed = []string{tt}
		case []any:
			for _, e := range tt {
				allowed = append(allowed, fmt.Sprint(e))
			}
		}
		if !slices.Contains(allowed, got) && !(got == "integer" && slices.Contains(allowed, "number")) {
			v.errorf("%s: %s, want %v", at, got, allowed)
			return
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(x) && jsonType(e) == got {
				found = true
			}
		}
		if !found {
			v.errorf("%s: %v is not in enum %v", at, x, enum)
		}
	}
	if allOf, ok := s["allOf"].([]any); ok {
		// Object parts, merged into one: each part's members are the
		// others' undocumented ones, so they are checked together.
		merged := map[string]any{"type": "object"}
		props, req := map[string]any{}, []any{}
		for _, part := range allOf {
			ps, err := v.deref(part)
			if err != nil || ps["type"] != "object" {
				v.errorf("%s: allOf holds a part that is not an object schema", at)
				return
			}
			if m, ok := ps["properties"].(map[string]any); ok {
				maps.Copy(props, m)
			}
			if r, ok := ps["required"].([]any); ok {
				req = append(req, r...)
			}
		}
		merged["properties"], merged["required"] = props, req
		v.check(merged, x, at)
		return
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		passed := false
		for _, alt := range anyOf {
			sub := &validator{doc: v.doc}
			sub.check(alt, x, at)
			if len(sub.errs) == 0 {
				passed = true
				break
			}
		}
		if !passed {
			v.errorf("%s: %v matches none of anyOf", at, x)
		}
	}
	switch xx := x.(type) {
	case string:
		if p, ok := s["pattern"].(string); ok {
			if re, err := regexp.Compile(p); err != nil || !re.MatchString(xx) {
				v.errorf("%s: %q does not match pattern %s", at, xx, p)
			}
		}
		if n, ok := num(s["minLength"]); ok && float64(len([]rune(xx))) < n {
			v.errorf("%s: %q shorter than %v", at, xx, n)
		}
		if n, ok := num(s["maxLength"]); ok && float64(len([]rune(xx))) > n {
			v.errorf("%s: %q longer than %v", at, xx, n)
		}
		if s["format"] == "date-time" {
			if _, err := review.ParseRFC3339(xx); err != nil {
				v.errorf("%s: %q is not an RFC 3339 date-time", at, xx)
			}
		}
	case json.Number:
		f, _ := xx.Float64()
		if n, ok := num(s["minimum"]); ok && f < n {
			v.errorf("%s: %v below minimum %v", at, f, n)
		}
		if n, ok := num(s["maximum"]); ok && f > n {
			v.errorf("%s: %v above maximum %v", at, f, n)
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, e := range xx {
				v.check(items, e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := xx[fmt.Sprint(r)]; !ok {
					v.errorf("%s: required member %q is missing", at, r)
				}
			}
		}
		for _, k := range mapKeys(xx) {
			if ps, ok := props[k]; ok {
				v.check(ps, xx[k], at+"."+k)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if ap {
					continue
				}
			case map[string]any:
				v.check(ap, xx[k], at+"."+k)
				continue
			}
			if props != nil || s["additionalProperties"] != nil {
				v.errorf("%s: member %q is not documented", at, k)
			}
		}
	}
}

func num(x any) (float64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}
