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
			if ops, _, err := st.ListOperations(context.Background(), tenant, store.OperationFilter{State: review.Confirmed}, "", 500); err == nil {
				confirmed[tenant] = len(ops)
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
	for _, want := range []string{"API token (shown once)", "limbo_", "Sandbox destination at http://127.0.0.1:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	// Published links only follow a transformation confirmed for the same
	// version: every link's file is the output of a confirmed transform.
	ops, _, err := st.ListOperations(context.Background(), "acme", store.OperationFilter{}, "", 500)
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
		if op.Action == "share_link" && !transformed[op.SourceRef+"@"+op.LogicalVersion] {
			t.Errorf("link %s for %s v%s without a confirmed transformation of that version", op.ID, op.SourceRef, op.LogicalVersion)
		}
	}
}
