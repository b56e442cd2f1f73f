package release_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/examples/agent/release"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestAgentFaultRun is the example agent's fault run: agents runs at once
// against a sandbox that loses 30 % of its answers after the effect (and
// answers 500 after it for a few more), a model with scripted faults, and
// agents killed after a tool's effect 30 % of the time. Killed runs are
// resumed (and so is an agent that gave up waiting); between rounds
// leases run out, the reconciler settles, reviewers approve the
// notifications. Against the sandbox's ground truth: no tool call has two
// effects unless its operation is in an open case, and every run ends
// done or waiting on a person.
func TestAgentFaultRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run")
	}
	const agents, rounds = 8, 20
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
		var rngMu sync.Mutex
		draw := func() float64 { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() }

		w := newWorldWith(t, e, sandbox.Options{Seed: int64(seed >> 1), Loss: 0.30, ErrorAfterCommit: 0.05, SearchLag: 200 * time.Millisecond})
		sb, st, cfg, clk, c, ctx := w.sb, w.st, w.cfg, w.clk, w.c, w.ctx
		rec := reconcile.New(st, cfg, "reconciler", slog.New(slog.NewTextHandler(io.Discard, nil)))
		modelFaults := []string{"rate_limit", "server_error", "malformed_output", "malformed_arguments", "repeat_call", "reordered_call", "conflict"}

		finished := map[string]bool{}
		kills := 0
		var killsMu sync.Mutex
		for round := range rounds {
			// A few model faults for this round's turns.
			for range 3 {
				if draw() < 0.5 {
					_ = sb.QueueModelFaults(modelFaults[int(draw()*float64(len(modelFaults)))])
				}
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := range agents {
				id := fmt.Sprintf("run-%d", i)
				if finished[id] {
					continue
				}
				wg.Go(func() {
					// An agent gives up waiting after a few seconds (a slot
					// a killed attempt holds until its lease runs out, say)
					// and is resumed next round.
					rctx, kill := context.WithTimeout(ctx, 3*time.Second)
					defer kill()
					a := &release.Agent{Limbo: c, Sandbox: w.url, HTTP: &http.Client{Timeout: time.Second}, WaitApproval: 0,
						AfterEffect: func(tool string) {
							if tool == "get_release" {
								return
							}
							// The first effect always dies, so that no run
							// proves nothing by chance (3 to 6 kills a run;
							// none in about one run in fifty); the others
							// by chance.
							killsMu.Lock()
							die := kills == 0 || draw() < 0.30
							if die {
								kills++
							}
							killsMu.Unlock()
							if die {
								kill() // dies after the effect, before its outcome is reported
							}
						}}
					start := time.Now()
					rep, err := a.Run(rctx, id, "v1.2")
					if testing.Verbose() {
						t.Logf("round %d %s %s err=%v\n%s", round, id, time.Since(start), err, rep)
					}
					if err == nil && rep.Done {
						mu.Lock()
						finished[id] = true
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			// Time passes: leases of killed attempts run out, the
			// reconciler settles what it can, reviewers approve.
			clk.Advance(cfg.Destination(release.ToolsDestination).Lease + time.Second)
			if _, err := st.SweepLeases(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := rec.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			approveAll(t, st)
			if len(finished) == agents {
				t.Logf("all %d runs done after %d rounds, %d kills", agents, round+1, kills)
				break
			}
		}
		if kills == 0 {
			t.Error("no agent was killed: the fault run proved nothing")
		}

		// Ground truth: effects per operation, against the ledger's state.
		effects := map[string]int{}
		for _, ef := range sb.Truth() {
			if !ef.Compensated {
				effects[ef.OperationID]++
			}
		}
		for i := range agents {
			id := fmt.Sprintf("run-%d", i)
			ops, _, err := st.ListOperations(ctx, "acme", store.OperationFilter{SourceRef: id}, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			files, mails := 0, 0
			for _, op := range ops {
				n := effects[op.ID]
				switch op.Action {
				case "write_notes":
					files += n
				case "notify_team":
					mails += n
				}
				if n > 1 && op.State != review.NeedsReview {
					t.Errorf("DUPLICATE: %s %s (%s) has %d effects and is %s, not in an open case", id, op.Action, op.ID, n, op.State)
				}
			}
			if files > 1 || mails > 1 {
				t.Errorf("%s: %d notes files and %d emails at the sandbox, want at most one of each", id, files, mails)
			}
			if finished[id] && (files != 1 || mails != 1) {
				t.Errorf("%s is done with %d files and %d emails, want one of each", id, files, mails)
			}
			if !finished[id] {
				waiting := false
				for _, op := range ops {
					waiting = waiting || op.State == review.NeedsReview || op.State == review.AwaitingApproval
				}
				if !waiting {
					var states []string
					for _, op := range ops {
						states = append(states, fmt.Sprintf("%s %s (%s)", op.Action, op.State, op.StateReason))
					}
					t.Errorf("%s neither finished nor waits on a person:\n  %s", id, strings.Join(states, "\n  "))
				}
			}
		}
	})
}

// approveAll approves every notification waiting for approval, as two
// reviewers.
func approveAll(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	ops, _, err := st.ListOperations(ctx, "acme", store.OperationFilter{State: review.AwaitingApproval}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range cs {
			if cs.Status != "open" {
				continue
			}
			for _, who := range []string{"rita@example.com", "marco@example.com"} {
				if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: cs.ID, Action: review.DecideApprove, Actor: who, Reason: "fault run"}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
