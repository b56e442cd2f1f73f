// Package openapigen_test checks that oapi-codegen, the usual Go generator,
// accepts handlers/openapi.json: the client it generates compiles, passes
// go vet, and talks to the real server. (tools/openapi/check.sh checks the
// document with the linters and openapi-typescript.)
package openapigen_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	// The one package the generated client imports: required here so that
	// go.mod keeps it (go mod tidy drops a module nothing imports).
	_ "github.com/oapi-codegen/runtime"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// modulePath is this package's import path: the generated code is written
// below it, inside the module, so that it builds against go.mod and go.sum.
const modulePath = "github.com/limbo-dev/limbo/handlers/openapigen"

// program drives the generated client through one operation's life on a
// real server: register, attempt, outcome, read back, list, and a problem.
// It prints "ok" and exits 0 when every answer decoded into the generated
// types as expected.
const program = `package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	api "` + modulePath + `/DIR/limboapi"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	base, token := os.Args[1], os.Args[2]
	ctx := context.Background()
	auth := api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
	c, err := api.NewClientWithResponses(base, auth)
	if err != nil {
		fail("client: %v", err)
	}

	reg, err := c.RegisterOperationWithResponse(ctx, api.Registration{SourceRef: "contract-583", LogicalVersion: "v1",
		Action: "create_folder", Destination: "drive", Payload: map[string]any{"name": "Contract 583"}})
	if err != nil || reg.JSON201 == nil {
		fail("register: %v, %d %s", err, reg.StatusCode(), reg.Body)
	}
	op := reg.JSON201
	if op.State != "pending" || op.Key == "" || op.CreatedAt.IsZero() {
		fail("registered: %+v", op)
	}

	g, err := c.StartAttemptWithResponse(ctx, op.Id, api.AttemptRequest{})
	if err != nil || g.JSON201 == nil {
		fail("attempt: %v, %d %s", err, g.StatusCode(), g.Body)
	}
	if g.JSON201.N != 1 || g.JSON201.Key != op.Key || g.JSON201.LeaseExpiresAt.IsZero() {
		fail("grant: %+v", g.JSON201)
	}

	status := 201
	out, err := c.RecordOutcomeWithResponse(ctx, op.Id, g.JSON201.N, api.Outcome{Result: "success", Phase: "after_send",
		HttpStatus: &status, Resource: &api.ResourceRef{Ref: "fld_1"}})
	if err != nil || out.JSON200 == nil {
		fail("outcome: %v, %d %s", err, out.StatusCode(), out.Body)
	}
	if out.JSON200.Next != "done" || out.JSON200.Operation.State != "confirmed" {
		fail("outcome result: next %s, state %s", out.JSON200.Next, out.JSON200.Operation.State)
	}

	got, err := c.GetOperationWithResponse(ctx, op.Id)
	if err != nil || got.JSON200 == nil || got.JSON200.Resource == nil || got.JSON200.Resource.Ref != "fld_1" ||
		len(got.JSON200.Attempts) != 1 {
		fail("get: %v, %d %s", err, got.StatusCode(), got.Body)
	}

	page, err := c.ListOperationsWithResponse(ctx, &api.ListOperationsParams{})
	if err != nil || page.JSON200 == nil || len(page.JSON200.Operations) != 1 || page.JSON200.Operations[0].Id != op.Id {
		fail("list: %v, %d %s", err, page.StatusCode(), page.Body)
	}

	missing, err := c.GetOperationWithResponse(ctx, "op_none")
	if err != nil || missing.ApplicationproblemJSON404 == nil || missing.ApplicationproblemJSON404.Type != "not-found" {
		fail("missing: %v, %d %s", err, missing.StatusCode(), missing.Body)
	}

	// What a webhook receiver decodes a decision into (a type only the
	// webhooks section names).
	var ev api.DecisionEvent
	ev.Data.Status = "applied"
	fmt.Println("ok", op.Id, ev.Data.Status)
}
`

// goCommand returns the go command of the toolchain running the test.
func goCommand(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command: %v", err)
	}
	return p
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestGoClient generates the Go client with `go tool oapi-codegen` (the
// version go.mod pins) into a temporary folder of this package, builds and
// vets it with a program that uses it, and runs that program against the
// real server.
func TestGoClient(t *testing.T) {
	goCmd := goCommand(t)
	tmp, err := os.MkdirTemp(".", "tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	dir := filepath.Base(tmp)
	if err := os.Mkdir(filepath.Join(tmp, "limboapi"), 0o755); err != nil {
		t.Fatal(err)
	}

	run(t, ".", goCmd, "tool", "oapi-codegen", "-config", "oapi-codegen.yaml",
		"-o", filepath.Join(tmp, "limboapi", "client.go"), filepath.Join("..", "openapi.json"))
	if err := os.WriteFile(filepath.Join(tmp, "main.go"), []byte(strings.ReplaceAll(program, "DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, tmp, goCmd, "vet", "./...")
	bin := filepath.Join(t.TempDir(), "client-check")
	run(t, tmp, goCmd, "build", "-o", bin, ".")

	s := storetest.Open(t, store.SQLite, store.Options{})
	srv := httptest.NewServer(handlers.NewServer(handlers.New(s, nil)))
	defer srv.Close()
	token, err := s.CreateToken(t.Context(), review.Operator("test"), "acme", "oapi-codegen client")
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, tmp, bin, srv.URL, token); !strings.HasPrefix(out, "ok ") {
		t.Errorf("client program printed %q", out)
	}
}
