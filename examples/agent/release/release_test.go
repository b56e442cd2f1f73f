package release_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/examples/agent/release"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

type world struct {
	t   *testing.T
	ctx context.Context
	sb  *sandbox.Sandbox
	url string
	cfg *review.Config
	st  *store.Store
	clk *storetest.ShiftClock
	c   *client.Client
}

func newWorld(t *testing.T, e store.Engine) *world {
	return newWorldWith(t, e, sandbox.Options{Seed: 1})
}

// newWorldWith is the sandbox with opts (its faults), the example's
// configuration for it, and Limbo's API on a clock tests can move ahead.
func newWorldWith(t *testing.T, e store.Engine, opts sandbox.Options) *world {
	t.Helper()
	sb := sandbox.New(opts)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() { srv.Close(); sb.Close() })
	cfg, err := release.Config(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	clk := &storetest.ShiftClock{}
	st := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now})
	api := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
	t.Cleanup(api.Close)
	tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "agent")
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, ctx: context.Background(), sb: sb, url: srv.URL, cfg: cfg, st: st, clk: clk, c: client.New(api.URL, tok)}
}

func (w *world) agent() *release.Agent {
	return &release.Agent{Limbo: w.c, Sandbox: w.url, HTTP: &http.Client{Timeout: 2 * time.Second}}
}

func (w *world) effects(kind string) int {
	n := 0
	for _, e := range w.sb.Truth() {
		if e.Kind == kind && !e.Compensated {
			n++
		}
	}
	return n
}

// approve approves the run's notification as two reviewers.
func (w *world) approve(runID string) {
	w.t.Helper()
	ops, _, err := w.st.ListOperations(w.ctx, "acme", store.OperationFilter{SourceRef: runID, State: review.AwaitingApproval}, "", 10)
	if err != nil || len(ops) != 1 {
		w.t.Fatalf("awaiting approval in %s: %v, %v", runID, ops, err)
	}
	cs, err := w.st.CasesForOperation(w.ctx, ops[0].ID)
	if err != nil || len(cs) != 1 {
		w.t.Fatalf("cases: %v %v", cs, err)
	}
	for _, who := range []string{"rita@example.com", "marco@example.com"} {
		if _, err := w.st.Decide(w.ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideApprove, Actor: who,
			Reason: "the notes are right"}); err != nil {
			w.t.Fatal(err)
		}
	}
}

// TestReleaseAgent: plan → read → write → notify; the notification waits
// for approval, and the resumed run finishes it. Each effect happens once.
func TestReleaseAgent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		// A plan that breaks its schema first: generated again.
		if err := w.sb.QueueModelFaults("malformed_output"); err != nil {
			t.Fatal(err)
		}
		rep, err := w.agent().Run(w.ctx, "run-1", "v1.2")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Done || !strings.Contains(rep.Waiting, "notify_team is awaiting_approval") {
			t.Fatalf("first run:\n%s want it waiting for the notification's approval", rep)
		}
		if !strings.Contains(rep.Steps[0].Detail, "(1 refused)") {
			t.Errorf("plan step %+v, want one refused generation", rep.Steps[0])
		}
		if w.effects(sandbox.KindFile) != 1 || w.effects(sandbox.KindEmail) != 0 {
			t.Fatalf("after the first run: %d files, %d emails; want 1, 0", w.effects(sandbox.KindFile), w.effects(sandbox.KindEmail))
		}
		w.approve("run-1")
		calls := w.sb.ModelCalls()
		rep, err = w.agent().Run(w.ctx, "run-1", "v1.2")
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Done {
			t.Fatalf("resumed run:\n%s want it done", rep)
		}
		for _, s := range rep.Steps {
			if s.Name == "write_notes" && s.Ran {
				t.Errorf("the resumed run wrote the notes again: %+v", s)
			}
			if s.Kind == "plan" && s.Ran {
				t.Errorf("the resumed run planned again: %+v", s)
			}
		}
		// Only the final turn is new: the earlier ones come from the ledger.
		if n := w.sb.ModelCalls() - calls; n != 1 {
			t.Errorf("the resumed run asked the model %d times, want 1 (the last turn)", n)
		}
		if w.effects(sandbox.KindFile) != 1 || w.effects(sandbox.KindEmail) != 1 {
			t.Errorf("after the run: %d files, %d emails; want 1 each", w.effects(sandbox.KindFile), w.effects(sandbox.KindEmail))
		}
	})
}

// TestReleaseAgentCrash: the agent dies after the notes were written but
// before the outcome was stored; the model proposes the write again, once
// identical and once with its arguments reordered. Resumed after the lease
// and reconciliation, the run reports the write from the ledger: one file.
func TestReleaseAgentCrash(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		ctx, die := context.WithCancel(w.ctx)
		a := w.agent()
		a.AfterEffect = func(tool string) {
			if tool == "write_notes" {
				die()
			}
		}
		if _, err := a.Run(ctx, "run-crash", "v1.2"); err == nil {
			t.Fatal("the dying run returned no error")
		}
		if n := w.effects(sandbox.KindFile); n != 1 {
			t.Fatalf("%d files after the crash, want 1", n)
		}
		w.clk.Advance(w.cfg.Destination(release.ToolsDestination).Lease + time.Second)
		if _, err := w.st.SweepLeases(w.ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := w.agent().Run(w.ctx, "run-crash", "v1.2")
		if err != nil || rep.Done || !strings.Contains(rep.Waiting, "write_notes is ambiguous") {
			t.Fatalf("resumed before reconciliation: %v\n%s want it waiting on the ambiguous write", err, rep)
		}
		w.clk.Advance(w.cfg.Destination(release.ToolsDestination).SearchLag + time.Second)
		rec := reconcile.New(w.st, w.cfg, "reconciler", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if _, err := rec.RunOnce(w.ctx); err != nil {
			t.Fatal(err)
		}
		// The model repeats the write, identical and reordered, before it
		// goes on: one intention, answered from the ledger.
		if err := w.sb.QueueModelFaults("repeat_call", "reordered_call"); err != nil {
			t.Fatal(err)
		}
		rep, err = w.agent().Run(w.ctx, "run-crash", "v1.2")
		if err != nil || !strings.Contains(rep.Waiting, "notify_team is awaiting_approval") {
			t.Fatalf("after reconciliation: %v\n%s want it on to the notification", err, rep)
		}
		for _, s := range rep.Steps {
			if s.Name == "write_notes" && (s.Ran || s.State != client.Confirmed) {
				t.Errorf("write_notes step %+v, want confirmed from the ledger", s)
			}
		}
		if n := w.effects(sandbox.KindFile); n != 1 {
			t.Errorf("%d files, want exactly 1", n)
		}
	})
}
