package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestDoOneKeyManyGoroutines: goroutines that each register the same
// intention and run it with Do, at once, send it exactly once: one is
// granted the attempt, every other is told by the ledger (409
// not-attemptable, in flight or already confirmed) and sends nothing.
func TestDoOneKeyManyGoroutines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		l := newLimbo(t, engine)
		var effects atomic.Int64
		dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			effects.Add(1)
			time.Sleep(50 * time.Millisecond) // the others ask meanwhile
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"ref":"fld-1"}`))
		}))
		defer dest.Close()

		const n = 12
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var (
			wg                 sync.WaitGroup
			start              = make(chan struct{})
			sends, done, other atomic.Int64
			ids                sync.Map
		)
		for range n {
			wg.Go(func() {
				<-start
				op := l.register(t, "one-key", client.RiskCompensableWrite)
				ids.Store(op.ID, true)
				res, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
					sends.Add(1)
					return sendTo(dest.URL, nil)(ctx, g)
				})
				var p *client.Problem
				switch {
				case err == nil && res.Operation.State == client.Confirmed:
					done.Add(1)
				case errors.As(err, &p) && p.Type == client.ProblemNotAttemptable &&
					(p.State == client.InFlight || p.State == client.Confirmed):
					other.Add(1)
				default:
					t.Errorf("Do: %+v, %v", res, err)
				}
			})
		}
		close(start)
		wg.Wait()
		count := 0
		ids.Range(func(any, any) bool { count++; return true })
		if count != 1 {
			t.Errorf("%d operations for one key, want 1", count)
		}
		if sends.Load() != 1 || effects.Load() != 1 || done.Load() != 1 || other.Load() != n-1 {
			t.Errorf("%d sends, %d effects, %d done, %d told by the ledger; want 1, 1, 1, %d",
				sends.Load(), effects.Load(), done.Load(), other.Load(), n-1)
		}
	})
}
