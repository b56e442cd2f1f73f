package store

import (
	"context"
	"sync"
)

// keyedGate lets one holder at a time through per key. Sign-in takes it per
// account and per address around "check the throttle, compare the
// password, record the failure": without it, requests sent at the same
// moment all pass the check before any of them records its failure, and
// an attacker gets as many guesses as requests in flight instead of
// maxPairFailures. It is per process: on several instances sharing one
// PostgreSQL, at most one guess per instance can race the count.
type keyedGate struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the holder leaves
}

// enter waits until key is free (or ctx ends) and takes it; the returned
// func gives it back.
func (g *keyedGate) enter(ctx context.Context, key string) (func(), error) {
	for {
		g.mu.Lock()
		busy, ok := g.held[key]
		if !ok {
			if g.held == nil {
				g.held = map[string]chan struct{}{}
			}
			done := make(chan struct{})
			g.held[key] = done
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.held, key)
				g.mu.Unlock()
				close(done)
			}, nil
		}
		g.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
