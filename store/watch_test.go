package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestWatchClaims: proven absence opens an operation's confirm window;
// concurrent claims take disjoint operations, a look that outlived its
// claim is fenced and writes nothing, and the window's end stops the
// watch.
func TestWatchClaims(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		dest := review.Destination{SearchLag: 2 * time.Second}
		b := setup(t, e, &review.Config{Destinations: map[string]review.Destination{"files": dest}})
		const n = 6
		var ops []*review.Operation
		for i := range n {
			op := b.newOp(t, "doc-"+string(rune('a'+i)), review.RiskCompensableWrite, "files")
			b.start(t, op)
			wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
			ops = append(ops, op)
		}
		b.clk.Advance(3 * time.Second)
		for _, op := range ops {
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
				Candidates: []review.Candidate{}}, "integrator")
			if err != nil || got.State != review.RetryWait {
				t.Fatalf("absence: %v %+v", err, got)
			}
		}
		if cs, err := b.s.ClaimWatches(b.ctx, 10, time.Minute); err != nil || len(cs) != 0 {
			t.Fatalf("claims before the first look is due: %d, %v", len(cs), err)
		}
		b.clk.Advance(dest.SearchLag)

		var mu sync.Mutex
		var wg sync.WaitGroup
		seen := map[string]int{}
		var all []store.WatchClaim
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs, err := b.s.ClaimWatches(b.ctx, 4, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, c := range cs {
					seen[c.Op.ID]++
					all = append(all, c)
				}
			}()
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("%d operations claimed, want %d", len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("operation %s claimed %d times", id, k)
			}
		}

		// The claims' lease passes; another reconciler claims again, and
		// the first one's late look is fenced.
		b.clk.Advance(2 * time.Minute)
		again, err := b.s.ClaimWatches(b.ctx, 10, time.Minute)
		if err != nil || len(again) != n {
			t.Fatalf("claims after the lease: %d, %v", len(again), err)
		}
		late := all[0]
		if err := b.s.ApplyWatch(b.ctx, late, review.Watching{Next: b.clk.Now().Add(time.Second)}); !errors.Is(err, store.ErrFenced) {
			t.Errorf("a look past its claim = %v, want ErrFenced", err)
		}
		// The window (20 s) has closed: each look ends its watch.
		for _, c := range again {
			w := review.Watch(c.Op, dest, nil, c.Until, b.clk.Now())
			if !w.Next.IsZero() {
				t.Fatalf("a look past the window schedules another at %s", w.Next)
			}
			if err := b.s.ApplyWatch(b.ctx, c, w); err != nil {
				t.Fatal(err)
			}
		}
		b.clk.Advance(time.Hour)
		if cs, err := b.s.ClaimWatches(b.ctx, 10, time.Minute); err != nil || len(cs) != 0 {
			t.Errorf("claims after every watch ended: %d, %v", len(cs), err)
		}
		assertSealed(t, b.s)
	})
}
