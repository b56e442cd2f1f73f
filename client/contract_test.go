package client_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// TestProblemTypesMatchTheServer: every problem type the handlers write
// (a Problem literal's Type, problemf's type argument) has a constant, and
// every constant is one the handlers write. A type added server-side
// without a constant fails here.
func TestProblemTypesMatchTheServer(t *testing.T) {
	files, err := filepath.Glob("../handlers/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("handlers sources: %v %v", files, err)
	}
	server := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		str := func(e ast.Expr) {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				server[s] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Problem" {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Type" {
								str(kv.Value)
							}
						}
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "problemf" && len(n.Args) > 1 {
					str(n.Args[1])
				}
			}
			return true
		})
	}
	if len(server) < 10 {
		t.Fatalf("found only %d problem types in the handlers: %v", len(server), server)
	}
	consts := map[string]bool{}
	for _, c := range client.ProblemTypes() {
		consts[c] = true
		if !server[c] {
			t.Errorf("client constant %q: the handlers never send it", c)
		}
	}
	for s := range server {
		if !consts[s] {
			t.Errorf("the handlers send problem type %q: add a constant to client/problems.go and ProblemTypes", s)
		}
	}
}

// A problem the real server sends reaches IsProblem with its constant.
func TestProblemFromTheServer(t *testing.T) {
	t.Parallel()
	l := newLimbo(t, store.SQLite)
	_, err := l.client.Get(t.Context(), "op_does_not_exist")
	if !client.IsProblem(err, client.ProblemNotFound) {
		t.Errorf("Get of a missing operation = %v, want %s", err, client.ProblemNotFound)
	}
	_, _, err = l.client.Register(t.Context(), client.Registration{SourceRef: "x", LogicalVersion: "1", Action: "a",
		Destination: "dest", Risk: "reckless", Payload: json.RawMessage(`{}`)})
	if !client.IsProblem(err, client.ProblemInvalidRequest) {
		t.Errorf("Register with an unknown risk = %v, want %s", err, client.ProblemInvalidRequest)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, err = client.New(srv.URL, "tok").Get(t.Context(), "op_1")
	if !client.IsProblem(err, "http-404") {
		t.Errorf("a plain 404 = %v, want http-404", err)
	}
}

// TestProblemRequestID: a problem carries the request id the server gave
// it, to quote in a report (README "Errors"), and its text says it; an
// answer whose body lacks it has it from X-Request-Id.
func TestProblemRequestID(t *testing.T) {
	t.Parallel()
	l := newLimbo(t, store.SQLite)
	_, err := l.client.Get(t.Context(), "op_does_not_exist")
	var p *client.Problem
	if !errors.As(err, &p) || p.RequestID == "" {
		t.Fatalf("Get of a missing operation = %#v, want a problem with its request_id", err)
	}
	if !strings.HasSuffix(p.Error(), " (request "+p.RequestID+")") {
		t.Errorf("Error() = %q, want it to end with the request id %s", p.Error(), p.RequestID)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-from-header")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"type":"unavailable","title":"Unavailable","status":502,"detail":"proxy"}`))
	}))
	t.Cleanup(srv.Close)
	_, err = client.New(srv.URL, "tok").Get(t.Context(), "op_1")
	if !errors.As(err, &p) || p.RequestID != "req-from-header" {
		t.Errorf("a problem without request_id, X-Request-Id req-from-header = %#v", err)
	}
	if got := (&client.Problem{Status: 404, Type: "not-found", Detail: "no such operation"}).Error(); got != "limbo: 404 not-found: no such operation" {
		t.Errorf("Error() without a request id = %q", got)
	}
}

// TestTypesMatchTheServer: the client's types carry the JSON fields the
// server's do, and its enumerations the server's values.
func TestTypesMatchTheServer(t *testing.T) {
	pairs := []struct {
		c, s any
		// serverOnly is a server's field the client reads elsewhere.
		serverOnly string
	}{
		// A problem's retry_after (in seconds) is also its Retry-After
		// header, which the client reads into Problem.RetryAfter.
		{client.Problem{}, handlers.Problem{}, "retry_after:int"},
		{client.ProblemDependency{}, handlers.Problem{}.Dependency, ""},
		{client.Grant{}, store.Grant{}, ""},
		{client.Operation{}, review.Operation{}, ""},
		{client.Attempt{}, review.Attempt{}, ""},
		{client.EvidenceEntry{}, review.Evidence{}, ""},
		{client.Job{}, review.Job{}, ""},
		{client.Candidate{}, review.Candidate{}, ""},
		{client.ResourceRef{}, review.ResourceRef{}, ""},
		{client.JobRef{}, review.JobRef{}, ""},
		{client.Dependency{}, review.Dependency{}, ""},
		{client.Outcome{}, review.Outcome{}, ""},
		{client.Usage{}, review.Usage{}, ""},
		{client.PublishedPolicy{}, review.PublishedPolicy{}, ""},
		{client.Decision{}, store.Decision{}, ""},
	}
	for _, p := range pairs {
		st := reflect.TypeOf(p.s)
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		c, s := jsonFields(reflect.TypeOf(p.c)), slices.DeleteFunc(jsonFields(st), func(f string) bool { return f == p.serverOnly })
		if !reflect.DeepEqual(c, s) {
			t.Errorf("%T has JSON fields\n%v\n%T has\n%v", p.c, c, p.s, s)
		}
	}
	enum := func(name string, c []string, s []string) {
		slices.Sort(c)
		slices.Sort(s)
		if !slices.Equal(c, s) {
			t.Errorf("%s: client %v, server %v", name, c, s)
		}
	}
	enum("states", strs(client.AwaitingApproval, client.Pending, client.InFlight, client.RetryWait, client.Ambiguous,
		client.Accepted, client.NeedsReview, client.Compensating, client.Confirmed, client.Compensated, client.Failed),
		strs(review.AllStates()...))
	enum("risks", strs(client.RiskRead, client.RiskGenerate, client.RiskIdempotentWrite, client.RiskCompensableWrite,
		client.RiskIrreversible), strs(review.AllRisks()...))
	enum("flags", strs(client.FlagFinancial, client.FlagIrreversible, client.FlagRegulated), strs(review.AllFlags()...))
	for _, s := range review.AllStates() {
		if c := client.State(s); c.Terminal() != s.Terminal() || c.Attemptable() != s.Attemptable() {
			t.Errorf("state %s: Terminal/Attemptable differ from the server's", s)
		}
	}
	if client.MaxOutputLen != review.MaxOutputLen || client.MaxTokens != review.MaxTokens || client.MaxFieldLen != review.MaxFieldLen {
		t.Error("the client's limits differ from the server's")
	}
}

func strs[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// jsonFields lists a struct's JSON names, with the field's kind.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		k := f.Type.Kind()
		if k == reflect.Pointer || k == reflect.Slice {
			k = f.Type.Elem().Kind()
		}
		out = append(out, name+":"+k.String())
	}
	slices.Sort(out)
	return out
}

// TestStandardLibraryOnly: the package depends on nothing outside the
// standard library (no YAML, no JSON Schema, no golang.org/x), so an
// integrator's build pulls in nothing of Limbo's server.
func TestStandardLibraryOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/limbo-dev/limbo/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var extra []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/limbo-dev/limbo/client" {
			extra = append(extra, p)
		}
	}
	if len(extra) > 0 {
		t.Errorf("the client imports packages outside the standard library: %v", extra)
	}
}
