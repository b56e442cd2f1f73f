package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Live case changes: the console's queue and case pages update when a case
// changes, on whichever instance changed it. Every change to a case is
// published through one helper, caseChanged, inside the transaction that
// makes it:
//
//   - on PostgreSQL as pg_notify, which the server delivers at commit (a
//     rolled-back change notifies nobody, a committed one always does) to
//     every instance LISTENing on the database — one dedicated connection
//     per store (pq.Listener, which reconnects), never a pool connection
//     per subscriber;
//   - on SQLite (one process) held with the transaction and handed to this
//     process's subscribers after it commits, dropped if it rolls back.
//
// An event says which case changed and how, never what the operation
// carries; its tenant lets each subscriber hear only its scope. A
// subscriber that may have missed events (the listening connection was
// lost, or it fell too far behind) gets a ChangeResync, and re-reads.

// CaseChange is how a case changed.
type CaseChange string

// The case changes published.
const (
	ChangeOpened    CaseChange = "opened"     // a case was opened
	ChangeUpdated   CaseChange = "updated"    // re-assessed with new findings
	ChangeClaimed   CaseChange = "claimed"    // someone claimed it
	ChangeReleased  CaseChange = "released"   // its holder let it go
	ChangeTakenOver CaseChange = "taken_over" // someone took it over from its holder
	ChangeDecided   CaseChange = "decided"    // a reviewer decided (it may stay open: an approval, a compensation)
	ChangeClosed    CaseChange = "closed"     // settled without a person (expired, undo done)
	// ChangeProgress: the case's compensation moved on; the case itself
	// did not change (no new version).
	ChangeProgress CaseChange = "progress"
	// ChangeResync carries no case: events may have been lost, read again.
	ChangeResync CaseChange = "resync"
)

// CaseEvent is one committed change to a case.
type CaseEvent struct {
	CaseID      string     `json:"case_id,omitempty"`
	OperationID string     `json:"operation_id,omitempty"`
	Tenant      string     `json:"tenant,omitempty"`
	Kind        CaseChange `json:"kind"`
	// Actor is who made the change (a reviewer's email, or a system actor).
	Actor string `json:"actor,omitempty"`
	// Version is the case's version after the change.
	Version int64 `json:"version,omitempty"`
}

// caseChanged publishes ev in tx: delivered when tx commits, never if it
// rolls back. Every write to the cases table that a reader could see
// calls it.
func (s *Store) caseChanged(ctx context.Context, tx *sqlx.Tx, ev CaseEvent) error {
	if s.engine == Postgres {
		payload, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, s.live.channel, string(payload)); err != nil {
			return fmt.Errorf("notify case change: %w", err)
		}
		return nil
	}
	s.live.hold(tx, ev)
	return nil
}

// liveChannel is the NOTIFY channel of the database's schema: channels are
// per database, and several Limbo databases may be schemas of one (the
// tests' are), so a schema other than public has a channel of its own.
func liveChannel(schema string) string {
	if schema == "" || schema == "public" {
		return "limbo_cases"
	}
	ch := "limbo_cases_" + schema
	if len(ch) > 63 { // NAMEDATALEN - 1: longer names are cut, and might meet
		h := sha256.Sum256([]byte(schema))
		ch = "limbo_cases_" + hex.EncodeToString(h[:12])
	}
	return ch
}

// subscriptionBacklog bounds the events a subscription keeps unread; past
// it they are dropped and the subscriber told to resync.
const subscriptionBacklog = 256

// liveWait bounds how long Subscribe waits for the listening connection.
const liveWait = 5 * time.Second

// liveHub fans committed case changes out to this process's subscribers.
type liveHub struct {
	dsn, channel string // PostgreSQL: where to LISTEN

	mu      sync.Mutex
	subs    map[*Subscription]struct{}
	pending map[*sqlx.Tx][]CaseEvent // SQLite: held until commit
	closed  bool

	// PostgreSQL: the listener, started by the first Subscribe.
	listener  *pq.Listener
	listening chan struct{} // closed once LISTEN first succeeded
	stop      chan struct{} // closed by close: the pinger ends
	wg        sync.WaitGroup
}

// hold keeps ev with tx until it commits (SQLite).
func (h *liveHub) hold(tx *sqlx.Tx, ev CaseEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		h.pending = map[*sqlx.Tx][]CaseEvent{}
	}
	h.pending[tx] = append(h.pending[tx], ev)
}

// settled hands what tx held to the subscribers if it committed, and drops
// it otherwise.
func (h *liveHub) settled(tx *sqlx.Tx, committed bool) {
	h.mu.Lock()
	evs, ok := h.pending[tx]
	delete(h.pending, tx)
	h.mu.Unlock()
	if ok && committed {
		for _, ev := range evs {
			h.publish(ev)
		}
	}
}

// publish gives ev to every subscriber whose scope covers its tenant (a
// resync goes to all).
func (h *liveHub) publish(ev CaseEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if ev.Kind == ChangeResync || sub.scope == nil || slices.Contains(sub.scope, ev.Tenant) {
			sub.push(ev)
		}
	}
}

// Subscription receives the case changes committed after Subscribe, of
// the tenants in its scope. Safe for concurrent use.
type Subscription struct {
	hub   *liveHub
	scope []string
	ready chan struct{} // holds a token while events wait
	done  chan struct{} // closed when the subscription ends
	once  sync.Once

	mu    sync.Mutex
	queue []CaseEvent
	lost  bool
}

// Ready has a value while events wait to be taken.
func (sub *Subscription) Ready() <-chan struct{} { return sub.ready }

// Done is closed when the subscription ends: Close, or the store closing.
func (sub *Subscription) Done() <-chan struct{} { return sub.done }

// Take returns the events waiting, oldest first. After events were lost
// (the subscriber fell behind, or the listening connection was lost and
// found again) it is one ChangeResync instead.
func (sub *Subscription) Take() []CaseEvent {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	q := sub.queue
	sub.queue = nil
	if sub.lost {
		sub.lost = false
		return []CaseEvent{{Kind: ChangeResync}}
	}
	return q
}

func (sub *Subscription) push(ev CaseEvent) {
	sub.mu.Lock()
	switch {
	case ev.Kind == ChangeResync:
		sub.lost, sub.queue = true, nil
	case sub.lost:
	case len(sub.queue) >= subscriptionBacklog:
		sub.lost, sub.queue = true, nil
	default:
		sub.queue = append(sub.queue, ev)
	}
	sub.mu.Unlock()
	select {
	case sub.ready <- struct{}{}:
	default:
	}
}

// Close ends the subscription.
func (sub *Subscription) Close() {
	sub.hub.mu.Lock()
	delete(sub.hub.subs, sub)
	sub.hub.mu.Unlock()
	sub.end()
}

func (sub *Subscription) end() { sub.once.Do(func() { close(sub.done) }) }

// ErrLiveUnavailable: the store cannot deliver live changes now (closed,
// or the listening connection is not established in time). Readers poll.
var ErrLiveUnavailable = errors.New("store: live case changes unavailable")

// Subscribe delivers the case changes committed from now on to the tenants
// of scope (nil: every tenant), made by any instance sharing the database
// (PostgreSQL) or by this process (SQLite). On PostgreSQL it first makes
// sure the store's listening connection is up, waiting for it up to ctx's
// end or a few seconds (then ErrLiveUnavailable). Close the subscription
// when done.
func (s *Store) Subscribe(ctx context.Context, scope []string) (*Subscription, error) {
	h := &s.live
	sub := &Subscription{hub: h, scope: slices.Clone(scope), ready: make(chan struct{}, 1), done: make(chan struct{})}
	if scope != nil && sub.scope == nil {
		sub.scope = []string{} // an empty scope hears nothing, not everything
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrLiveUnavailable
	}
	if s.engine == Postgres && h.listener == nil {
		h.startListener()
	}
	if h.subs == nil {
		h.subs = map[*Subscription]struct{}{}
	}
	// Registered before waiting: a change committed once LISTEN is in
	// place reaches this subscription.
	h.subs[sub] = struct{}{}
	listening := h.listening
	h.mu.Unlock()
	if listening != nil {
		wait := time.NewTimer(liveWait)
		defer wait.Stop()
		select {
		case <-listening:
		case <-ctx.Done():
			sub.Close()
			return nil, fmt.Errorf("%w: %w", ErrLiveUnavailable, ctx.Err())
		case <-wait.C:
			sub.Close()
			return nil, fmt.Errorf("%w: the listening connection is not up", ErrLiveUnavailable)
		}
	}
	return sub, nil
}

// startListener opens the dedicated listening connection (h.mu held). It
// reconnects on its own; after a reconnection every subscriber resyncs.
func (h *liveHub) startListener() {
	h.listening, h.stop = make(chan struct{}), make(chan struct{})
	l := pq.NewListener(h.dsn, 100*time.Millisecond, 5*time.Second, nil)
	h.listener = l
	h.wg.Go(func() {
		// Listen returns once the connection is up and LISTEN done, or
		// when the listener is closed first.
		if err := l.Listen(h.channel); err == nil {
			close(h.listening)
		}
	})
	h.wg.Go(func() {
		for n := range l.Notify { // closed after l.Close
			if n == nil { // reconnected: what was sent meanwhile is lost
				h.publish(CaseEvent{Kind: ChangeResync})
				continue
			}
			var ev CaseEvent
			if err := json.Unmarshal([]byte(n.Extra), &ev); err != nil || ev.Kind == "" {
				continue
			}
			h.publish(ev)
		}
	})
	h.wg.Go(func() {
		// A quiet connection can die unnoticed (a NAT, a failover): a ping
		// finds out, and the listener reconnects.
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				_ = l.Ping()
			}
		}
	})
}

// close ends every subscription and the listener, and waits for its
// goroutines.
func (h *liveHub) close() {
	h.mu.Lock()
	h.closed = true
	subs := h.subs
	h.subs = nil
	l := h.listener
	if h.stop != nil {
		close(h.stop)
	}
	h.mu.Unlock()
	for sub := range subs {
		sub.end()
	}
	if l != nil {
		_ = l.Close()
	}
	h.wg.Wait()
}
