package store

import (
	"context"
	"sync"
	"time"
)

// keyedGate lets one holder at a time through per key. Sign-in takes it per
// address and per account around "check the throttle, compare the
// password, record the failure": without it, requests sent at the same
// moment all pass the check before any of them records its failure, and
// an attacker gets as many guesses as requests in flight instead of
// maxPairFailures. It is per process; the one it lets through then takes
// the key's lease in the database (enterLoginGate), so that instances
// sharing it check one after another too.
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

const (
	// loginGateLease is how long a sign-in holds its key's lease across
	// instances: far longer than a check takes (a password compared, a
	// few rows written), so that only a holder that died loses it; then
	// the key's sign-ins wait for it at most this long.
	loginGateLease = 10 * time.Second
	// loginGatePoll is how often a sign-in looks whether a lease another
	// instance holds is free.
	loginGatePoll = 10 * time.Millisecond
)

const (
	/* Store.enterLoginGate: key's lease, unless another holds one that is
	not over. */
	takeLoginGate = `INSERT INTO login_gates (name, holder, until) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until WHERE login_gates.until <= ?`
	/* Store.enterLoginGate: the lease given back, and those whose holders
	died (a handful of rows: the sign-ins under way). */
	freeLoginGate = `DELETE FROM login_gates WHERE (name = ? AND holder = ?) OR until <= ?`
)

// enterLoginGate waits until no other sign-in on key is being checked, in
// this process (logins) or in another instance sharing the database (its
// lease in login_gates), or until ctx ends; the returned func lets the
// next one in. The lease's times are the machine's, not the store's
// clock: they bound real waits, which a test's frozen clock would not.
func (s *Store) enterLoginGate(ctx context.Context, key string) (func(), error) {
	leave, err := s.logins.enter(ctx, key)
	if err != nil {
		return nil, err
	}
	holder := randomToken()
	for {
		now := time.Now()
		res, err := s.db.ExecContext(ctx, s.rebind(takeLoginGate), key, holder, dbTime(now.Add(loginGateLease)), dbTime(now))
		if err != nil {
			leave()
			return nil, err
		}
		if rowsAffected(res) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			leave()
			return nil, ctx.Err()
		case <-time.After(loginGatePoll):
		}
	}
	return func() {
		// Given back even when the request has ended; if it cannot be,
		// the lease runs out.
		_, _ = s.db.ExecContext(context.WithoutCancel(ctx), s.rebind(freeLoginGate), key, holder, dbTime(time.Now()))
		leave()
	}, nil
}
