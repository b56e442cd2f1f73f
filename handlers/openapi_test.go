package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/store"
)

// servedDoc fetches GET /api/v1/openapi.json through the real server (no
// token: the document is public) and parses it.
func servedDoc(t *testing.T, b *testBundle) map[string]any {
	t.Helper()
	res := b.do(request{path: "/api/v1/openapi.json", token: strp("")}).want(t, http.StatusOK)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("openapi.json Content-Type = %q", ct)
	}
	var doc map[string]any
	if err := decodeNumbers(res.Body, &doc); err != nil {
		t.Fatalf("served document is not JSON: %v", err)
	}
	return doc
}

var paramRE = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// apiSurface reports whether an Echo route belongs to what openapi.json
// describes: the integration API under /api/ and the two probes. Console
// pages (/, /static*, later /cases…) are HTML and out of its scope.
func apiSurface(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/healthz" || path == "/readyz"
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	doc := servedDoc(t, b)

	t.Run("version", func(t *testing.T) {
		v, _ := doc["openapi"].(string)
		if !strings.HasPrefix(v, "3.1") {
			t.Errorf("openapi = %q, want 3.1.x", v)
		}
		info, _ := doc["info"].(map[string]any)
		if info["title"] == nil || info["version"] == nil {
			t.Errorf("info needs title and version: %v", info)
		}
	})

	t.Run("routes", func(t *testing.T) {
		e := handlers.NewServer(handlers.New(b.store, nil))
		registered := map[string]bool{}
		for _, r := range e.Routes() {
			switch {
			case r.Method == "echo_route_not_found": // Group.Use's 404 emulation
				continue
			case r.Path == "/api/v1/*": // the catch-all Any route: 404 as a problem
				continue
			case !apiSurface(r.Path):
				t.Logf("not in the API document (console): %s %s", r.Method, r.Path)
				continue
			}
			registered[r.Method+" "+paramRE.ReplaceAllString(r.Path, "{$1}")] = true
		}
		documented := map[string]bool{}
		paths, _ := doc["paths"].(map[string]any)
		for p, item := range paths {
			for m := range item.(map[string]any) {
				switch m {
				case "get", "put", "post", "delete", "options", "head", "patch", "trace":
					documented[strings.ToUpper(m)+" "+p] = true
				}
			}
		}
		for r := range registered {
			if !documented[r] {
				t.Errorf("route %s is registered but not in openapi.json", r)
			}
		}
		for d := range documented {
			if !registered[d] {
				t.Errorf("openapi.json describes %s, which is not registered", d)
			}
		}
		for _, probe := range []string{"GET /healthz", "GET /readyz", "GET /api/v1/openapi.json"} {
			if !documented[probe] {
				t.Errorf("%s is not documented", probe)
			}
		}
	})

	t.Run("problem types", func(t *testing.T) {
		slugs, prefixes := problemTypesInSource(t)
		if len(slugs) < 10 {
			t.Fatalf("found only %d problem types in handlers/*.go: %v (is the grep broken?)", len(slugs), slugs)
		}
		typeSchema, err := resolve(doc, "#/components/schemas/Problem/properties/type")
		if err != nil {
			t.Fatal(err)
		}
		enum := problemEnum(t, typeSchema)
		for _, s := range slugs {
			if !slices.Contains(enum, s) {
				t.Errorf("problem type %q (handlers source) is not in the Problem type enum", s)
			}
		}
		for _, s := range enum {
			if !slices.Contains(slugs, s) {
				t.Errorf("Problem type enum lists %q, which no handler produces", s)
			}
		}
		// A type built from a prefix ("http-" + status) must be accepted
		// by the schema for a concrete status.
		for _, p := range prefixes {
			v := &validator{doc: doc}
			v.check(typeSchema, p+"418", "type")
			if len(v.errs) > 0 {
				t.Errorf("problem type prefix %q: %q is not accepted by the Problem type schema: %v", p, p+"418", v.errs)
			}
		}
		v := &validator{doc: doc}
		v.check(typeSchema, "no-such-type", "type")
		if len(v.errs) == 0 {
			t.Error("the Problem type schema accepts any string")
		}
	})

	t.Run("refs resolve", func(t *testing.T) {
		n := 0
		walk(doc, "$", func(at string, m map[string]any) {
			ref, ok := m["$ref"].(string)
			if !ok {
				return
			}
			n++
			if _, err := resolve(doc, ref); err != nil {
				t.Errorf("%s: %v", at, err)
			}
		})
		if n < 20 {
			t.Errorf("only %d $refs found", n)
		}
	})

	t.Run("operations", func(t *testing.T) {
		paths, _ := doc["paths"].(map[string]any)
		v := &validator{doc: doc}
		for p, item := range paths {
			for m, opNode := range item.(map[string]any) {
				op := opNode.(map[string]any)
				what := strings.ToUpper(m) + " " + p
				// Every path parameter is declared, in path and required.
				declared := map[string]bool{}
				for _, pn := range asSlice(op["parameters"]) {
					prm, err := v.deref(pn)
					if err != nil {
						t.Errorf("%s: %v", what, err)
						continue
					}
					if prm["in"] == "path" {
						if prm["required"] != true {
							t.Errorf("%s: path parameter %v must be required", what, prm["name"])
						}
						declared[fmt.Sprint(prm["name"])] = true
					}
				}
				for _, want := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(p, -1) {
					if !declared[want[1]] {
						t.Errorf("%s: path parameter %s is not declared", what, want[1])
					}
				}
				responses, _ := op["responses"].(map[string]any)
				if len(responses) == 0 {
					t.Errorf("%s: no responses", what)
				}
				for code, rn := range responses {
					r, err := v.deref(rn)
					if err != nil {
						t.Errorf("%s %s: %v", what, code, err)
						continue
					}
					if r["description"] == nil {
						t.Errorf("%s %s: no description", what, code)
					}
					content, _ := r["content"].(map[string]any)
					if code >= "400" {
						if _, ok := content["application/problem+json"]; !ok || len(content) != 1 {
							t.Errorf("%s %s: errors are application/problem+json only, got %v", what, code, mapKeys(content))
						}
					}
				}
				// Authenticated API routes answer 401; public ones say so
				// (inbound webhooks authenticate by signature, not a token).
				public := p == "/healthz" || p == "/readyz" || p == "/api/v1/openapi.json" || p == "/api/v1/inbound/{source}"
				sec, hasSec := op["security"].([]any)
				switch {
				case public && (!hasSec || len(sec) != 0):
					t.Errorf("%s is public: it needs security: []", what)
				case !public && hasSec:
					t.Errorf("%s overrides the bearer requirement", what)
				case !public && responses["401"] == nil:
					t.Errorf("%s does not document 401", what)
				}
				if op["operationId"] == nil {
					t.Errorf("%s: no operationId", what)
				}
			}
		}
		schemes, err := resolve(doc, "#/components/securitySchemes/bearerAuth")
		if err != nil {
			t.Fatal(err)
		}
		if s := schemes.(map[string]any); s["type"] != "http" || s["scheme"] != "bearer" {
			t.Errorf("bearerAuth = %v, want http bearer", s)
		}
		if sec := fmt.Sprint(doc["security"]); sec != "[map[bearerAuth:[]]]" {
			t.Errorf("top-level security = %s, want bearerAuth", sec)
		}
	})

	t.Run("schemas", func(t *testing.T) {
		schemas, _ := resolve(doc, "#/components/schemas")
		for _, name := range []string{"Operation", "Attempt", "Evidence", "Job", "Candidate", "ResourceRef",
			"Grant", "Outcome", "OutcomeResult", "Registration", "EvidenceRequest", "JobUpdate", "OperationPage", "Problem"} {
			if schemas.(map[string]any)[name] == nil {
				t.Errorf("schema %s is missing", name)
			}
		}
		page, _ := resolve(doc, "#/components/schemas/OperationPage/properties/next_cursor")
		if page == nil {
			t.Error("OperationPage has no next_cursor")
		}
		for name, members := range map[string][]string{
			"Operation": {"id", "tenant", "source_ref", "logical_version", "action", "destination", "risk", "flags",
				"key", "payload", "payload_hash", "state", "attempts", "evidence", "jobs", "resource", "created_at", "updated_at"},
			"Registration": {"source_ref", "logical_version", "action", "destination", "risk", "flags", "payload",
				"key", "deadline", "max_attempts", "cost_budget"},
			"AttemptRequest": {"credential", "model"},
			"Grant":          {"operation_id", "n", "key", "lease_expires_at"},
			"Outcome": {"result", "phase", "http_status", "retry_after", "provider_code", "provider_request_id",
				"resource", "job", "cost"},
			"OutcomeResult":   {"operation", "next", "retry_at", "reason"},
			"EvidenceRequest": {"source", "authoritative", "candidates"},
			"Candidate":       {"ref", "kind", "version", "operation_id"},
			"Problem":         {"type", "title", "status", "detail", "operation_id", "state"},
		} {
			props, err := resolve(doc, "#/components/schemas/"+name+"/properties")
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for _, m := range members {
				if props.(map[string]any)[m] == nil {
					t.Errorf("schema %s lacks %q (SPEC's Integration API shape)", name, m)
				}
			}
		}
	})
}

// problemTypesInSource greps the non-test Go files of handlers for the
// problem types they can produce: `Type: "slug"` literals and the second
// argument of problemf. A literal followed by + is a prefix ("http-").
func problemTypesInSource(t *testing.T) (slugs, prefixes []string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	typeRE := regexp.MustCompile(`\bType:\s*"([^"]*)"(\s*\+)?`)
	problemfRE := regexp.MustCompile(`\bproblemf\(\s*[^,()]+,\s*"([^"]*)"(\s*\+)?`)
	add := func(m []string) {
		s, prefix := m[1], strings.TrimSpace(m[2]) == "+"
		switch {
		case prefix && !slices.Contains(prefixes, s):
			prefixes = append(prefixes, s)
		case !prefix && !slices.Contains(slugs, s):
			slugs = append(slugs, s)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range typeRE.FindAllStringSubmatch(string(src), -1) {
			add(m)
		}
		for _, m := range problemfRE.FindAllStringSubmatch(string(src), -1) {
			add(m)
		}
	}
	slices.Sort(slugs)
	return slugs, prefixes
}

// problemEnum collects the enum of the Problem type schema (directly or in
// one anyOf branch).
func problemEnum(t *testing.T, schema any) []string {
	t.Helper()
	s, _ := schema.(map[string]any)
	var out []string
	collect := func(node any) {
		m, _ := node.(map[string]any)
		for _, e := range asSlice(m["enum"]) {
			out = append(out, fmt.Sprint(e))
		}
	}
	collect(s)
	for _, alt := range asSlice(s["anyOf"]) {
		collect(alt)
	}
	if len(out) == 0 {
		t.Fatalf("the Problem type schema has no enum: %v", s)
	}
	return out
}

func asSlice(x any) []any {
	s, _ := x.([]any)
	return s
}

// walk calls fn on every object in the document.
func walk(node any, at string, fn func(at string, m map[string]any)) {
	switch n := node.(type) {
	case map[string]any:
		fn(at, n)
		for _, k := range mapKeys(n) {
			walk(n[k], at+"."+k, fn)
		}
	case []any:
		for i, e := range n {
			walk(e, fmt.Sprintf("%s[%d]", at, i), fn)
		}
	}
}

// TestOpenAPIServedMatchesFile checks the server serves handlers/openapi.json
// (the file the answer checks in the other tests read) unchanged.
func TestOpenAPIServedMatchesFile(t *testing.T) {
	t.Parallel()
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, store.SQLite, nil)
	res := b.do(request{path: "/api/v1/openapi.json", token: strp("")}).want(t, http.StatusOK)
	if string(res.Body) != string(file) {
		t.Error("the served document differs from handlers/openapi.json")
	}
	var doc any
	if err := json.Unmarshal(file, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
}
