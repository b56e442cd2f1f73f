package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"time"
)

// Status is what one loop's rounds said so far: when it last succeeded,
// whether a round runs now and since when, and how many failed or
// panicked. A nil *Status ignores everything.
type Status struct {
	mu sync.Mutex
	s  Snapshot
}

// Snapshot is a Status at one moment.
type Snapshot struct {
	// Started is when the loop started; LastOK when a round last
	// succeeded (zero: none yet); Running when the round running now
	// started (zero between rounds).
	Started, LastOK, Running time.Time
	// Failures counts failed rounds, panics included; Panics those alone.
	Failures, Panics int64
	// Skipped counts the rows rounds went past because each failed on
	// its own (see SkippedRows); they are tried again next round.
	Skipped int64
}

func (st *Status) begin(now time.Time) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Started = now
}

func (st *Status) roundStarted(now time.Time) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Running = now
}

func (st *Status) roundEnded(now time.Time, err error, panicked bool) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Running = time.Time{}
	st.s.Skipped += int64(skippedRows(err))
	switch {
	case panicked:
		st.s.Failures++
		st.s.Panics++
	case err != nil:
		st.s.Failures++
	default:
		st.s.LastOK = now
	}
}

// SkippedRows is what the error of a round that went past rows it could
// not handle says of them (store.SkippedRows): the round is a failed one,
// and the rows are counted, so that one row failing every time shows as
// such and not as a loop that fails.
type SkippedRows interface {
	SkippedRows() int
}

// skippedRows sums the rows every SkippedRows in err's tree skipped (a
// round may join several: the lease sweep's three).
func skippedRows(err error) int {
	switch e := err.(type) {
	case nil:
		return 0
	case SkippedRows:
		return e.SkippedRows()
	case interface{ Unwrap() []error }:
		n := 0
		for _, inner := range e.Unwrap() {
			n += skippedRows(inner)
		}
		return n
	default:
		return skippedRows(errors.Unwrap(err))
	}
}

// Snapshot reads the status.
func (st *Status) Snapshot() Snapshot {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.s
}

// Statuses are the loops of one process, by name.
type Statuses struct {
	mu sync.Mutex
	m  map[string]*Status
}

// NewStatuses returns an empty set.
func NewStatuses() *Statuses { return &Statuses{m: map[string]*Status{}} }

// For returns the status of the loop named name, made on first use.
func (s *Statuses) For(name string) *Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[name]
	if st == nil {
		st = &Status{}
		s.m[name] = st
	}
	return st
}

// Snapshot reads every loop's status, by name.
func (s *Statuses) Snapshot() map[string]Snapshot {
	s.mu.Lock()
	all := maps.Clone(s.m)
	s.mu.Unlock()
	out := make(map[string]Snapshot, len(all))
	for name, st := range all {
		out[name] = st.Snapshot()
	}
	return out
}

type statusKey struct{}

// WithStatus returns ctx carrying st: Every and Drain run under it report
// their rounds to st.
func WithStatus(ctx context.Context, st *Status) context.Context {
	return context.WithValue(ctx, statusKey{}, st)
}

func statusFrom(ctx context.Context) *Status {
	st, _ := ctx.Value(statusKey{}).(*Status)
	return st
}

// Recover, deferred by a goroutine a round starts (one delivery, one
// probe), turns a panic there into a log line with its stack, counted as a
// panic of the loop whose Status ctx carries: a round's own recovery does
// not reach another goroutine, whose panic would end the process.
func Recover(ctx context.Context, log *slog.Logger, what string) {
	if p := recover(); p != nil {
		panicked(ctx, log, what, p)
	}
}

// RecoverWith is Recover for work whose panic has an answer of its own (a
// probe that panics is a failed probe): after the log line and the count,
// failed hears of the panic as an error.
func RecoverWith(ctx context.Context, log *slog.Logger, what string, failed func(error)) {
	if p := recover(); p != nil {
		panicked(ctx, log, what, p)
		failed(fmt.Errorf("panic: %v", p))
	}
}

// panicked logs panic p of what with its stack and counts it.
func panicked(ctx context.Context, log *slog.Logger, what string, p any) {
	log.Error(what+" panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	if st := statusFrom(ctx); st != nil {
		st.mu.Lock()
		st.s.Panics++
		st.mu.Unlock()
	}
}
