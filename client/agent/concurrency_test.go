package agent_test

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/client/agent"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// The same call proposed at once by goroutines sharing a Run and by agents
// that opened the run on their own (two workers on one run id) runs once:
// one Call runs it, every other answers from the ledger without running
// (in flight, or confirmed), and the sandbox holds one folder.
func TestConcurrentCallsRunOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		shared, err := w.controller(t, nil).Run(w.ctx, "run-concurrent")
		if err != nil {
			t.Fatal(err)
		}
		runs := []*agent.Run{shared, shared, shared, shared}
		for range 4 {
			r, err := w.controller(t, nil).Run(w.ctx, "run-concurrent")
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			ran     atomic.Int64
			results = make([]*agent.Result, len(runs))
		)
		for i, r := range runs {
			wg.Go(func() {
				<-start
				res, err := r.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"shared"}`))
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					return
				}
				if res.Ran {
					ran.Add(1)
				} else if res.State != client.InFlight && res.State != client.Confirmed {
					t.Errorf("call %d answered from the ledger: %s, want in_flight or confirmed", i, res)
				}
				results[i] = res
			})
		}
		close(start)
		wg.Wait()
		if n := ran.Load(); n != 1 {
			t.Errorf("%d calls ran the tool, want 1", n)
		}
		ops := map[string]bool{}
		for _, res := range results {
			if res != nil {
				ops[res.OperationID] = true
			}
		}
		if len(ops) != 1 {
			t.Errorf("the calls are %d operations, want 1", len(ops))
		}
		if n, s := w.effects(sandbox.KindFolder), w.sends["create_folder"].Load(); n != 1 || s != 1 {
			t.Errorf("the sandbox holds %d folders after %d sends, want 1 and 1", n, s)
		}
	})
}
