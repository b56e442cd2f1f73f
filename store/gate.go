package store

import (
	"context"
	"sync"
)

// keyedGate lets one holder at a time through per key. Sign-in takes it per
// address and per account around "check the throttle, compare the
// password, record the failure": without it, requests sent at the same
// moment all pass the check before any of them records its failure, and
// an attacker gets as many guesses as requests in flight instead of
// maxPairFailures. It is per process: on several instances sharing one
// PostgreSQL, at most one guess per instance can race the count.
//
// Waiters are let in first come, first served: the holder hands the key to
// the oldest waiter. (Waking them all to race for it let the newest of a
// flood win as often as a request that had waited for seconds.)
type keyedGate struct {
	mu   sync.Mutex
	held map[string]*gateQueue
}

// gateQueue is a held key's waiters, oldest first; each channel is closed
// when the key is handed to its waiter.
type gateQueue struct{ waiters []chan struct{} }

// enter waits until key is free (or ctx ends) and takes it; the returned
// func gives it back.
func (g *keyedGate) enter(ctx context.Context, key string) (func(), error) {
	leave := func() { g.leave(key) }
	g.mu.Lock()
	q, busy := g.held[key]
	if !busy {
		if g.held == nil {
			g.held = map[string]*gateQueue{}
		}
		g.held[key] = &gateQueue{}
		g.mu.Unlock()
		return leave, nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	g.mu.Unlock()
	select {
	case <-turn:
		return leave, nil
	case <-ctx.Done():
		g.mu.Lock()
		for i, w := range q.waiters {
			if w == turn {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				g.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		g.mu.Unlock()
		// Handed over as ctx ended: passed on to the next.
		g.leave(key)
		return nil, ctx.Err()
	}
}

// leave hands key to its oldest waiter, or frees it.
func (g *keyedGate) leave(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.held[key]
	if len(q.waiters) == 0 {
		delete(g.held, key)
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next)
}
