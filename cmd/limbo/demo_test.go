package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/demo"
	"github.com/limbo-dev/limbo/internal/testlog"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// TestServeDemo: `limbo serve --demo` prints the demo token, runs the
// sandbox in process and sends traffic for several tenants that the
// reconciler and the sandbox carry to confirmed operations.
func TestServeDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for several seconds")
	}
	db := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	// The traffic's operations are the ones registered from now on; the
	// seeded history's are older.
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--demo", "--addr", "127.0.0.1:0", "--db", db}, strings.NewReader(""), &out, &errOut)
	}()

	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	confirmed := map[string]int{}
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) && (confirmed["acme"] < 3 || confirmed["globex"] < 3 || confirmed["demo"] < 3) {
		time.Sleep(500 * time.Millisecond)
		for _, tenant := range demo.Tenants {
			if ops, err := allOperations(st, tenant, review.Confirmed); err == nil {
				confirmed[tenant] = 0
				for _, op := range ops {
					if op.CreatedAt.After(began) {
						confirmed[tenant]++
					}
				}
			}
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("limbo serve --demo exited %d\n%s", code, tail(errOut.String(), 30))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("limbo serve --demo did not stop within 30 s of the signal")
	}
	if confirmed["acme"] < 3 || confirmed["globex"] < 3 || confirmed["demo"] < 3 {
		t.Fatalf("confirmed operations per tenant after the demo ran: %v\n%s", confirmed, tail(errOut.String(), 30))
	}
	for _, want := range []string{"API token (shown once)", "limbo_", "Sandbox destination at http://127.0.0.1:", "Server logs: ", "Seeded 7 days of history"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	// The logins are the last thing printed: the server's logs go to the file.
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "/api/v1/operations") || strings.Contains(errOut.String(), "level=INFO") {
		t.Errorf("the demo's welcome is not the last thing on screen:\nstdout:\n%s\nstderr:\n%s", out.String(), tail(errOut.String(), 10))
	}
	// Published links only follow a transformation confirmed for the same
	// version: every link the traffic made has its file from a confirmed
	// transform (the seeded history's links stand alone).
	ops, err := allOperations(st, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	transformed := map[string]bool{}
	for _, op := range ops {
		if op.Action == "transform_pdf" && op.State == review.Confirmed {
			transformed[op.SourceRef+"@"+op.LogicalVersion] = true
		}
	}
	for _, op := range ops {
		if op.Action == "share_link" && op.CreatedAt.After(began) && !transformed[op.SourceRef+"@"+op.LogicalVersion] {
			t.Errorf("link %s for %s v%s without a confirmed transformation of that version", op.ID, op.SourceRef, op.LogicalVersion)
		}
	}
}

// allOperations lists every operation of tenant (in state, when named).
func allOperations(st *store.Store, tenant string, state review.State) ([]*review.Operation, error) {
	var all []*review.Operation
	cursor := ""
	for {
		ops, next, err := st.ListOperations(context.Background(), tenant, store.OperationFilter{State: state}, cursor, 500)
		if err != nil {
			return nil, err
		}
		all = append(all, ops...)
		if cursor = next; next == "" {
			return all, nil
		}
	}
}

// TestServeDemoRefusesRealDatabase: --demo on a database holding a user
// the demo did not make is refused before it seeds anything: no demo
// operations, no demo users with their published passwords.
func TestServeDemoRefusesRealDatabase(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "limbo.db")
	if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, errOut)
	}
	if code, _, errOut := limbo(t, "user", "add", "--email", "ops@example.com", "--role", "admin", "--tenants", "*", "--db", db); code != 0 {
		t.Fatalf("user add: %d %s", code, errOut)
	}
	code, errOut := serveRefused(t, "--demo", "--db", db)
	if code != 2 || !strings.Contains(errOut, "did not make") || !strings.Contains(errOut, "ops@example.com") {
		t.Fatalf("serve --demo on a real database: exit %d:\n%s", code, tail(errOut, 10))
	}
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for q, want := range map[string]int{`SELECT COUNT(*) FROM operations`: 0, `SELECT COUNT(*) FROM users`: 1} {
		var n int
		if err := st.DB().Get(&n, q); err != nil || n != want {
			t.Errorf("%s = %d (%v), want %d", q, n, err, want)
		}
	}
}

// TestDemoLogsOfTheirOwn: each demo start logs to a new file, so two demos
// running at once do not truncate each other's log.
func TestDemoLogsOfTheirOwn(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a, pa, err := demoLog()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, pb, err := demoLog()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if pa == pb || !strings.Contains(filepath.Base(pa), "limbo-demo-") || !strings.HasSuffix(pa, ".log") {
		t.Errorf("demo logs %q and %q: want two limbo-demo-*.log files", pa, pb)
	}
}
