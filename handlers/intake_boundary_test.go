package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestIntakeBoundaries walks openapi.json and sends every string of every
// operation — each member of its request body at any depth (arrays of
// objects included), each path and query parameter — its boundary values:
// a valid value of exactly maxLength characters (multi-byte where the
// pattern allows, so the limit is in characters), which must not be refused
// for that field; and maxLength+1, NUL, invalid UTF-8 (raw bytes in a body,
// %FF in a path or query), a C0 control, a C1 control (U+0085), a tab and a
// newline (the last two allowed only where the pattern is free text), each
// of which must answer 400 problem+json naming the field. Never a 5xx, and
// the same status, type and field on SQLite and on PostgreSQL.
func TestIntakeBoundaries(t *testing.T) {
	t.Parallel()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	cases := boundaryCases(t, handlers.NonNullable(doc).(map[string]any))
	if len(cases) < 300 {
		t.Fatalf("only %d boundary cases from openapi.json: is the walk broken?", len(cases))
	}
	var (
		mu      sync.Mutex
		answers = map[store.Engine][]string{}
	)
	t.Run("engines", func(t *testing.T) {
		storetest.Each(t, func(t *testing.T, engine store.Engine) {
			b := setup(t, engine, inboundConfig())
			op := b.registerAt(t, "boundary-op", "files", review.RiskCompensableWrite)
			b.attempt(t, op.ID)
			got := make([]string, len(cases))
			for i, c := range cases {
				res := c.send(t, b, op.ID, i)
				var p handlers.Problem
				if res.Status >= 400 {
					_ = json.Unmarshal(res.Body, &p)
				}
				if c.path == "/api/v1/operations/batch" && res.Status == http.StatusOK {
					res, p = batchItemAnswer(t, res)
				}
				got[i] = fmt.Sprintf("%s: %d %s field=%q", c.name, res.Status, p.Type, p.Field)
				switch {
				case c.field == "" && res.Status == http.StatusBadRequest:
					t.Errorf("%s: the base request is refused: %s", c.name, res.Body)
				case c.valid && res.Status == http.StatusBadRequest && p.Field == c.field:
					t.Errorf("%s: a valid value is refused for its own field: %s", c.name, res.Body)
				case !c.valid && (res.Status != http.StatusBadRequest || p.Type != "invalid-request" || p.Field != c.field):
					t.Errorf("%s: %d %s field=%q, want 400 invalid-request naming %q: %s", c.name, res.Status, p.Type, p.Field, c.field, res.Body)
				}
			}
			mu.Lock()
			answers[engine] = got
			mu.Unlock()
		})
	})
	sq, pg := answers[store.SQLite], answers[store.Postgres]
	if pg == nil {
		t.Log("PostgreSQL unavailable: answers not compared across engines")
		return
	}
	for i := range sq {
		if sq[i] != pg[i] {
			t.Errorf("engines disagree:\n  sqlite:   %s\n  postgres: %s", sq[i], pg[i])
		}
	}
}

// batchItemAnswer reads a one-registration batch's answer as the answer of
// that registration, its field named within the batch: a refused
// registration is answered in the results, and the call is 200.
func batchItemAnswer(t *testing.T, res *response) (*response, handlers.Problem) {
	t.Helper()
	var ans struct {
		Results []struct {
			Status  int               `json:"status"`
			Problem *handlers.Problem `json:"problem"`
		} `json:"results"`
	}
	if err := json.Unmarshal(res.Body, &ans); err != nil || len(ans.Results) != 1 {
		t.Errorf("%s: not a one-registration answer: %s", res.what, res.Body)
		return res, handlers.Problem{}
	}
	r := ans.Results[0]
	item := *res
	item.Status = r.Status
	if r.Problem == nil {
		return &item, handlers.Problem{}
	}
	p := *r.Problem
	if p.Field != "" {
		p.Field = "operations[0]." + p.Field
	}
	return &item, p
}

// boundaryCase is one request of TestIntakeBoundaries.
type boundaryCase struct {
	name   string
	method string
	path   string // with {id} standing for the test operation's id
	query  string
	body   string // "" for none
	field  string // the field the value is in
	valid  bool   // the value is valid: it must not be refused for field
	signed bool   // an inbound webhook: signed with the "files" secret
	// fresh: the case needs an operation of its own, so that a valid
	// value is stored rather than met by a state that refuses it: "op"
	// (registered), "attempt" (with attempt 1 granted).
	fresh string
}

func (c boundaryCase) send(t *testing.T, b *testBundle, opID string, i int) *response {
	t.Helper()
	if c.fresh != "" {
		opID = b.registerAt(t, fmt.Sprintf("boundary-%d", i), "files", review.RiskCompensableWrite).ID
		if c.fresh == "attempt" {
			b.attempt(t, opID)
		}
	}
	path := strings.ReplaceAll(c.path, "{id}", opID)
	body := strings.ReplaceAll(c.body, "{id}", opID)
	if c.query != "" {
		path += "?" + c.query
	}
	if c.signed {
		d := signed(t, strings.TrimPrefix(path, "/api/v1/inbound/"), filesSecret, "msg_boundary_"+strconv.Itoa(i), b.clock.Now(), body)
		return b.on(t).deliver(t, d)
	}
	return b.on(t).do(request{method: c.method, path: path, body: body})
}

// A string value in three spellings: in a JSON body (a literal, raw bytes
// allowed), in a path segment and in a query (percent-escaped).
type boundaryValue struct {
	name         string
	json, escape string
	valid        bool
}

// invalidValues are the values every string must refuse. Tab and newline
// are refused too unless the pattern is free text (then they are valid).
func invalidValues(freeText bool) []boundaryValue {
	return []boundaryValue{
		{name: "NUL", json: `"a\u0000b"`, escape: "a%00b"},
		{name: "invalid UTF-8", json: "\"a\xffb\"", escape: "a%FFb"},
		{name: "C0 control", json: `"a\u001bb"`, escape: "a%1Bb"},
		{name: "C1 control", json: `"a\u0085b"`, escape: "a%C2%85b"},
		{name: "tab", json: `"a\tb"`, escape: "a%09b", valid: freeText},
		{name: "newline", json: `"a\nb"`, escape: "a%0Ab", valid: freeText},
	}
}

// maxValue is a valid value of exactly n characters for a string with this
// pattern: multi-byte characters for the text rules, so that a limit
// counted in bytes would fail; the syntax itself for formats.
func maxValue(t *testing.T, pattern string, n int) string {
	switch pattern {
	case review.IdentifierPattern, review.FreeTextPattern:
		return strings.Repeat("é", n)
	case review.KeyPattern:
		return strings.Repeat("k", n)
	case review.TimePattern:
		base, zone := "2031-01-02T03:04:05.", "+00:00"
		return base + strings.Repeat("0", n-len(base)-len(zone)) + zone
	case store.OperationCursorPattern:
		return "op_" + strings.Repeat("A", n-len("op_"))
	case store.DecisionCursorPattern:
		if n != 39 {
			t.Fatalf("decision cursor maxLength %d, want 39", n)
		}
		return strings.Repeat("1", 19) + "-" + strings.Repeat("1", 19)
	}
	t.Fatalf("no valid value for pattern %q: add one to maxValue", pattern)
	return ""
}

// boundaryCases derives every case from the document.
func boundaryCases(t *testing.T, doc map[string]any) []boundaryCase {
	g := bodyGen{t: t, v: &validator{doc: doc}}
	paramValue := map[string]string{"id": "{id}", "n": "1", "ref": "job-1", "source": "files"}
	var cases []boundaryCase
	paths := doc["paths"].(map[string]any)
	for _, p := range mapKeys(paths) {
		if !strings.HasPrefix(p, "/api/v1/") || p == "/api/v1/openapi.json" {
			continue
		}
		for _, m := range mapKeys(paths[p].(map[string]any)) {
			op := paths[p].(map[string]any)[m].(map[string]any)
			method := strings.ToUpper(m)
			what := method + " " + p
			// fill puts the usual value in every path parameter but name.
			fill := func(name, value string) string {
				out := p
				for k, v := range paramValue {
					if k == name {
						v = value
					}
					out = strings.ReplaceAll(out, "{"+k+"}", v)
				}
				return out
			}
			add := func(c boundaryCase) {
				c.method, c.signed = method, strings.HasPrefix(p, "/api/v1/inbound/")
				switch {
				case strings.HasSuffix(p, "/outcome"):
					c.fresh = "attempt"
				case strings.HasSuffix(p, "/attempts"):
					c.fresh = "op"
				}
				cases = append(cases, c)
			}
			var bodySchema any
			base := ""
			if rb, ok := op["requestBody"].(map[string]any); ok {
				bodySchema = rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
				base = string(mustJSON(t, g.minimal(bodySchema)))
			}
			add(boundaryCase{name: what + " base", path: fill("", ""), body: base, valid: true})

			for _, pn := range asSlice(op["parameters"]) {
				prm, _ := g.resolve(pn)
				name, in := prm["name"].(string), prm["in"].(string)
				if in != "path" && in != "query" {
					continue
				}
				at := func(value string) (path, query string) {
					if in == "path" {
						return fill(name, value), ""
					}
					return fill("", ""), name + "=" + value
				}
				ps, _ := g.resolve(prm["schema"])
				if ps["type"] == "string" {
					pattern, max := stringLimits(t, what+" "+name, ps)
					if ps["enum"] == nil {
						path, query := at(url.PathEscape(maxValue(t, pattern, max)))
						add(boundaryCase{name: what + " " + name + " at maxLength", path: path, query: query, body: base, field: name,
							valid: !issuedOnly[what+" "+name]})
					}
					path, query := at(strings.Repeat("a", max+1))
					add(boundaryCase{name: what + " " + name + " over maxLength", path: path, query: query, body: base, field: name})
				}
				// Integers too: the text rule comes before the number.
				for _, bv := range invalidValues(false) {
					path, query := at(bv.escape)
					add(boundaryCase{name: what + " " + name + " " + bv.name, path: path, query: query, body: base, field: name, valid: bv.valid})
				}
			}
			if bodySchema == nil {
				continue
			}
			for _, f := range g.stringFields(bodySchema, nil) {
				pattern, max := stringLimits(t, what+" "+f.path(), f.schema)
				put := func(literal string) string { return g.bodyWith(bodySchema, f.steps, literal) }
				if f.schema["enum"] == nil {
					add(boundaryCase{name: what + " " + f.path() + " at maxLength", path: fill("", ""), body: put(strconv.Quote(maxValue(t, pattern, max))), field: f.path(),
						valid: !disagreesWithBase[what+" "+f.path()]})
				}
				add(boundaryCase{name: what + " " + f.path() + " over maxLength", path: fill("", ""), body: put(strconv.Quote(strings.Repeat("a", max+1))), field: f.path()})
				for _, bv := range invalidValues(pattern == review.FreeTextPattern) {
					add(boundaryCase{name: what + " " + f.path() + " " + bv.name, path: fill("", ""), body: put(bv.json), field: f.path(), valid: bv.valid})
				}
			}
		}
	}
	return cases
}

// stringLimits insists that a string schema declares maxLength and pattern,
// and returns them.
func stringLimits(t *testing.T, what string, s map[string]any) (string, int) {
	t.Helper()
	pattern, _ := s["pattern"].(string)
	n, ok := num(s["maxLength"])
	if pattern == "" || !ok {
		t.Fatalf("%s: a string without maxLength and pattern in openapi.json", what)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		t.Fatalf("%s: pattern: %v", what, err)
	}
	return pattern, int(n)
}

// bodyGen builds request bodies from the document's schemas.
type bodyGen struct {
	t *testing.T
	v *validator
}

// resolve follows $refs; name is the component schema reached ("" inline).
func (g bodyGen) resolve(node any) (s map[string]any, name string) {
	for range 16 {
		m, ok := node.(map[string]any)
		if !ok {
			g.t.Fatalf("schema is not an object: %v", node)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, name
		}
		name = ref[strings.LastIndex(ref, "/")+1:]
		var err error
		if node, err = resolve(g.v.doc, ref); err != nil {
			g.t.Fatal(err)
		}
	}
	g.t.Fatalf("$ref chain too long")
	return nil, ""
}

// baseValues make the generated bodies valid where the first enum value
// or a placeholder would not be, by component schema and member.
var baseValues = map[string]any{
	"Outcome.phase":               "after_send", // a success cannot be before_send
	"InboundWebhook.operation_id": "{id}",       // a webhook must name its operation
	"Registration.payload":        map[string]any{"k": "v"},
}

// disagreesWithBase lists the members whose every other value disagrees
// with the base body: a webhook's data.operation_id must be the top-level
// operation_id the base body names, so a valid text there is refused
// naming it.
var disagreesWithBase = map[string]bool{
	"POST /api/v1/inbound/{source} data.operation_id": true,
}

// issuedOnly lists the parameters whose valid values are only those the
// server issued: a decisions cursor must name a decision of the tenant's,
// so any other well-formed one is refused naming it.
var issuedOnly = map[string]bool{
	"GET /api/v1/decisions cursor": true,
}

// minimal is the smallest valid value of a schema: an object's required
// members (and baseValues), the first enum value, the minimum, minItems
// elements.
func (g bodyGen) minimal(node any) any {
	s, name := g.resolve(node)
	if e, ok := s["enum"].([]any); ok {
		return e[0]
	}
	switch s["type"] {
	case "string":
		if s["format"] == "date-time" {
			return "2031-01-02T03:04:05Z"
		}
		n, _ := num(s["minLength"])
		return strings.Repeat("x", max(int(n), 1))
	case "integer", "number":
		if n, ok := num(s["minimum"]); ok {
			return n
		}
		return 1
	case "boolean":
		return false
	case "array":
		out := []any{}
		n, _ := num(s["minItems"])
		for range int(n) {
			out = append(out, g.minimal(s["items"]))
		}
		return out
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asSlice(s["required"]) {
			out[r.(string)] = g.member(name, r.(string), props[r.(string)])
		}
		for key, v := range baseValues {
			if owner, member, _ := strings.Cut(key, "."); owner == name {
				out[member] = v
			}
		}
		return out
	}
	return map[string]any{"k": "v"} // no type: any JSON value
}

func (g bodyGen) member(owner, name string, node any) any {
	if v, ok := baseValues[owner+"."+name]; ok {
		return v
	}
	return g.minimal(node)
}

// stringField is a string member of a body: the steps to it (member names,
// and "[0]" into an array) and its schema.
type stringField struct {
	steps  []string
	schema map[string]any
}

// path names the field as problems do: "candidates[0].ref".
func (f stringField) path() string {
	var b strings.Builder
	for _, s := range f.steps {
		if b.Len() > 0 && s != "[0]" {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// stringFields lists every string member of a schema, at any depth.
func (g bodyGen) stringFields(node any, steps []string) []stringField {
	s, _ := g.resolve(node)
	switch s["type"] {
	case "string":
		return []stringField{{steps: steps, schema: s}}
	case "array":
		return g.stringFields(s["items"], append(slices.Clone(steps), "[0]"))
	case "object":
		var out []stringField
		props, _ := s["properties"].(map[string]any)
		for _, name := range mapKeys(props) {
			out = append(out, g.stringFields(props[name], append(slices.Clone(steps), name))...)
		}
		return out
	}
	return nil
}

// bodyWith is the base body of a schema with the member at steps set to a
// raw JSON literal (which may hold bytes json.Marshal would not write);
// objects and one-element arrays on the way get their required members.
func (g bodyGen) bodyWith(node any, steps []string, literal string) string {
	const marker = "\u0001boundary-value\u0001"
	var with func(node, base any, steps []string) any
	with = func(node, base any, steps []string) any {
		if len(steps) == 0 {
			return marker
		}
		s, owner := g.resolve(node)
		if steps[0] == "[0]" {
			return []any{with(s["items"], g.minimal(s["items"]), steps[1:])}
		}
		obj, ok := base.(map[string]any)
		if !ok {
			g.t.Fatalf("bodyWith: %v is not an object at %s", base, steps[0])
		}
		props := s["properties"].(map[string]any)
		child, ok := obj[steps[0]]
		if !ok {
			child = g.member(owner, steps[0], props[steps[0]])
		}
		obj[steps[0]] = with(props[steps[0]], child, steps[1:])
		return obj
	}
	body := string(mustJSON(g.t, with(node, g.minimal(node), steps)))
	quoted := string(mustJSON(g.t, marker))
	if strings.Count(body, quoted) != 1 {
		g.t.Fatalf("bodyWith(%v): marker not placed once in %s", steps, body)
	}
	return strings.Replace(body, quoted, literal, 1)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
