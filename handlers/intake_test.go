package handlers

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// requestBodies maps each request body schema of openapi.json to the Go type
// its handler decodes into. TestIntakeLimitsMatchDocument fails when an
// operation's body has no entry here, so a new body cannot skip the check.
var requestBodies = map[string]reflect.Type{
	"Registration": reflect.TypeFor[registerRequest](),
	// Its elements are each read as a Registration (batchRegistration).
	"RegistrationBatch": reflect.TypeFor[batchRequest](),
	"AttemptRequest":    reflect.TypeFor[attemptRequest](),
	"Outcome":           reflect.TypeFor[review.Outcome](),
	"EvidenceRequest":   reflect.TypeFor[evidenceRequest](),
	"JobUpdate":         reflect.TypeFor[jobRequest](),
	"InboundWebhook":    reflect.TypeFor[inboundBody](),
}

// checkedElsewhere lists documented parameter patterns that are a format
// checked by the store rather than by checkParams (which applies the text
// rule and the limit only).
var checkedElsewhere = map[string]string{
	"GET /api/v1/decisions cursor":  store.DecisionCursorPattern,
	"GET /api/v1/operations cursor": store.OperationCursorPattern,
}

// TestRequestTypesDeclareEveryString walks every request body type: each
// string it can hold, at any depth, declares its intake rule, and the tags
// parse. Without this a forgotten tag would be a 500 on first use.
func TestRequestTypesDeclareEveryString(t *testing.T) {
	t.Parallel()
	for name, typ := range requestBodies {
		for _, problem := range undeclared(typ, "", false, map[reflect.Type]bool{}) {
			t.Errorf("%s (%v): %s", name, typ, problem)
		}
	}
	// The walker itself refuses an undeclared string, with an error that
	// is not the caller's.
	var v struct {
		Name string `json:"name"`
	}
	v.Name = "x"
	if err := checkStrings(&v); !errors.Is(err, errUndeclaredText) {
		t.Errorf("checkStrings on an untagged string = %v, want errUndeclaredText", err)
	}
}

// undeclared lists the strings reachable in t without a rule.
func undeclared(t reflect.Type, path string, ruled bool, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		if !ruled {
			return []string{path + ": a string without a text tag"}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() != reflect.Uint8 {
			return undeclared(t.Elem(), path+"[0]", ruled, seen)
		}
	case reflect.Map, reflect.Interface:
		return []string{path + ": the intake walker has no rule for maps or interfaces"}
	case reflect.Struct:
		if t == timeType || seen[t] {
			return nil
		}
		seen[t] = true
		plan := planFor(t)
		if plan.err != nil {
			return []string{path + ": " + plan.err.Error()}
		}
		var out []string
		for _, f := range plan.fields {
			out = append(out, undeclared(t.Field(f.index).Type, joinPath(path, f.name), f.rule != nil, seen)...)
		}
		return out
	}
	return nil
}

// nonNullable is a copy of an OpenAPI document node in which every member
// documented as "X or null" (type [X, "null"], anyOf [schema, null], null
// in an enum) is documented as X alone: null reads as absent (TestNull-
// MembersAreAbsent), and what these tests compare is the X.
func nonNullable(node any) any {
	switch n := node.(type) {
	case []any:
		out := make([]any, 0, len(n))
		for _, v := range n {
			out = append(out, nonNullable(v))
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(n))
		for k, v := range n {
			out[k] = nonNullable(v)
		}
		if ts, ok := out["type"].([]any); ok && len(ts) == 2 && slices.Contains(ts, any("null")) {
			out["type"] = ts[0]
			if ts[0] == "null" {
				out["type"] = ts[1]
			}
		}
		if alts, ok := out["anyOf"].([]any); ok && len(alts) == 2 {
			for i, alt := range alts {
				if m, _ := alt.(map[string]any); m["type"] == "null" && len(m) == 1 {
					delete(out, "anyOf")
					for k, v := range alts[1-i].(map[string]any) {
						out[k] = v
					}
				}
			}
		}
		if e, ok := out["enum"].([]any); ok {
			out["enum"] = slices.DeleteFunc(e, func(v any) bool { return v == nil })
		}
		return out
	}
	return node
}

// TestIntakeLimitsMatchDocument keeps the limits single-sourced in effect:
// every string a request body, path or query can carry has in openapi.json
// exactly the maxLength its rule enforces and the pattern of its kind (or
// format), and the document declares no string the server does not check.
func TestIntakeLimitsMatchDocument(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	doc = nonNullable(doc).(map[string]any)
	d := docWalker{t: t, doc: doc}
	paths := doc["paths"].(map[string]any)
	for _, p := range sortedKeys(paths) {
		for _, m := range sortedKeys(paths[p].(map[string]any)) {
			op := paths[p].(map[string]any)[m].(map[string]any)
			what := strings.ToUpper(m) + " " + p
			route := regexp.MustCompile(`\{([^}]+)\}`).ReplaceAllString(p, ":$1")
			for _, pn := range asList(op["parameters"]) {
				prm := d.deref(pn)
				name, in := prm["name"].(string), prm["in"].(string)
				var rule textRule
				var ok bool
				switch in {
				case "path":
					rule, ok = pathParams[name]
				case "query":
					rule, ok = queryParams[route][name]
				case "header":
					if name != "webhook-id" {
						continue // signature headers: read by webhook.Verify, never stored
					}
					rule, ok = webhookIDRule, true
				}
				if !ok {
					t.Errorf("%s: %s parameter %q has no rule in intake.go", what, in, name)
					continue
				}
				schema := d.deref(prm["schema"])
				if schema["type"] != "string" {
					continue // an integer: the text rule still applies, the document says "integer"
				}
				want := rule.kind.Pattern()
				if p, ok := checkedElsewhere[what+" "+name]; ok {
					want = p
				}
				d.compare(what+" "+in+" "+name, schema, rule, want)
			}
			rb, ok := op["requestBody"].(map[string]any)
			if !ok {
				continue
			}
			ref := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)["$ref"].(string)
			name := strings.TrimPrefix(ref, "#/components/schemas/")
			typ, ok := requestBodies[name]
			if !ok {
				t.Errorf("%s: request body %s has no Go type in requestBodies", what, name)
				continue
			}
			d.walk(name, d.deref(map[string]any{"$ref": ref}), typ, nil)
		}
	}
}

type docWalker struct {
	t   *testing.T
	doc map[string]any
}

func (d docWalker) deref(node any) map[string]any {
	m, _ := node.(map[string]any)
	for range 16 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		cur := any(d.doc)
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = cur.(map[string]any)[part]
		}
		m, _ = cur.(map[string]any)
	}
	d.t.Fatalf("$ref chain too long at %v", node)
	return nil
}

// compare checks one string schema against the rule that checks it.
func (d docWalker) compare(what string, schema map[string]any, rule textRule, pattern string) {
	if n, ok := schema["maxLength"].(float64); !ok || int(n) != rule.max {
		d.t.Errorf("%s: maxLength %v in openapi.json, %d in the rule", what, schema["maxLength"], rule.max)
	}
	if p, _ := schema["pattern"].(string); p != pattern {
		d.t.Errorf("%s: pattern %q in openapi.json, want %q (%v)", what, p, pattern, rule.kind)
	}
}

// walk compares a body schema with the Go type decoded from it.
func (d docWalker) walk(at string, schema map[string]any, t reflect.Type, rule *textRule) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		return // the payload: any JSON value
	case t.Kind() == reflect.String:
		if schema["type"] != "string" {
			d.t.Errorf("%s: a Go string, documented as %v", at, schema["type"])
			return
		}
		if rule == nil {
			d.t.Errorf("%s: no text tag", at)
			return
		}
		pattern := rule.kind.Pattern()
		if rule.format != "" {
			pattern = textFormats[rule.format].pattern
		}
		d.compare(at, schema, *rule, pattern)
	case t.Kind() == reflect.Slice:
		if schema["type"] != "array" {
			d.t.Errorf("%s: a Go slice, documented as %v", at, schema["type"])
			return
		}
		d.walk(at+"[0]", d.deref(schema["items"]), t.Elem(), rule)
	case t.Kind() == reflect.Struct:
		props, _ := schema["properties"].(map[string]any)
		plan := planFor(t)
		var goNames []string
		for _, f := range plan.fields {
			goNames = append(goNames, f.name)
			ps, ok := props[f.name]
			if !ok {
				d.t.Errorf("%s: member %q is decoded but not documented", at, f.name)
				continue
			}
			d.walk(joinPath(at, f.name), d.deref(ps), t.Field(f.index).Type, f.rule)
		}
		// A documented string the Go type does not decode would be
		// documented limits that nothing enforces.
		for _, name := range sortedKeys(props) {
			ps := d.deref(props[name])
			if ps["type"] == "string" && !slices.Contains(goNames, name) {
				d.t.Errorf("%s: documented string %q is not decoded by %v", at, name, t)
			}
		}
	}
}

func asList(x any) []any {
	s, _ := x.([]any)
	return s
}

// TestCheckStringsPaths: a problem names the member by its full path, and
// a body that passes costs no allocation (the walk runs on every call of
// the attempt cycle).
func TestCheckStringsPaths(t *testing.T) { // not parallel: AllocsPerRun
	ev := evidenceRequest{Source: "response", Candidates: []review.Candidate{{Ref: "a"}, {Ref: "b", Kind: "x\x00"}}}
	var fe *FieldError
	if err := checkStrings(&ev); !errors.As(err, &fe) || fe.Field != "candidates[1].kind" {
		t.Errorf("checkStrings = %v, want a problem at candidates[1].kind", err)
	}
	o := review.Outcome{Result: "success", Phase: "after_send", Resource: &review.ResourceRef{Ref: strings.Repeat("r", 256)}}
	if err := checkStrings(&o); !errors.As(err, &fe) || fe.Field != "resource.ref" {
		t.Errorf("checkStrings = %v, want a problem at resource.ref", err)
	}
	reg := registerRequest{SourceRef: "s", Flags: []review.Flag{"financial", "\u0085"}}
	if err := checkStrings(&reg); !errors.As(err, &fe) || fe.Field != "flags[1]" {
		t.Errorf("checkStrings = %v, want a problem at flags[1]", err)
	}
	deadline := "2031-01-02T03:04:05Z"
	ok := registerRequest{SourceRef: "contract-583", LogicalVersion: "7", Action: "create_folder", Destination: "files",
		Risk: "compensable_write", Flags: []review.Flag{"financial"}, Key: "0123456789abcdef", Deadline: &deadline}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := checkStrings(&ok); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("checkStrings of a valid registration: %v allocations, want 0", allocs)
	}
}

func BenchmarkCheckStrings(b *testing.B) {
	deadline := "2031-01-02T03:04:05Z"
	req := registerRequest{SourceRef: "contract-583", LogicalVersion: "7", Action: "create_folder", Destination: "files",
		Risk: "compensable_write", Flags: []review.Flag{"financial"}, Key: "0123456789abcdef", Deadline: &deadline}
	for b.Loop() {
		if err := checkStrings(&req); err != nil {
			b.Fatal(err)
		}
	}
}
