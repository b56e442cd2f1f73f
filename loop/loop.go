// Package loop runs Limbo's background work (lease sweeps, audit sealing,
// reconciliation, webhook delivery) on a ticker until its context ends.
package loop

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// Every runs fn every d until ctx ends. A failure is logged when it starts;
// while it goes on, a summary once a minute rather than a line per tick;
// and a line when the work succeeds again.
func Every(ctx context.Context, d time.Duration, log *slog.Logger, name string, fn func(context.Context) error) {
	Drain(ctx, d, log, name, 0, func(c context.Context) (int, error) { return 0, fn(c) })
}

// Drain is Every for batch work: fn reports how many items it took, and a
// full batch (n >= batch > 0) runs again at once instead of waiting for the
// next tick, so a backlog clears at full speed.
//
// A round that panics is a failed round: logged with its stack, counted,
// and the loop goes on at the next tick (a panic would otherwise end the
// whole process, API included). Each round runs under a context of its
// own, ended when the round returns, so a transaction a panic left open is
// rolled back rather than holding its locks. A round still running after
// StuckAfter is logged, once. The Status in ctx (WithStatus), if any,
// hears of every round, for /metrics.
func Drain(ctx context.Context, d time.Duration, log *slog.Logger, name string, batch int, fn func(context.Context) (int, error)) {
	st := statusFrom(ctx)
	st.begin(time.Now())
	t := time.NewTicker(d)
	defer t.Stop()
	var f failures
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A tick and the end can both be ready; select picks either,
			// and work must not start once the context has ended.
			if ctx.Err() != nil {
				return
			}
			for {
				n, err := round(ctx, log, name, st, fn)
				if ctx.Err() == nil {
					f.note(log, name, err, time.Now())
				}
				if batch <= 0 || n < batch || err != nil || ctx.Err() != nil {
					break
				}
			}
		}
	}
}

// StuckAfter is how long a round may run before the log says so.
var StuckAfter = 2 * time.Minute

// round runs fn once, turning a panic into an error.
func round(ctx context.Context, log *slog.Logger, name string, st *Status, fn func(context.Context) (int, error)) (n int, err error) {
	start := time.Now()
	st.roundStarted(start)
	rctx, cancel := context.WithCancel(ctx)
	stuck := time.AfterFunc(StuckAfter, func() {
		log.Warn(name+" round still running", "for", time.Since(start).Round(time.Second).String())
	})
	defer func() {
		stuck.Stop()
		cancel()
		p := recover()
		if p != nil {
			log.Error(name+" panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			n, err = 0, fmt.Errorf("panic: %v", p)
		}
		if ctx.Err() == nil {
			st.roundEnded(time.Now(), err, p != nil)
		} else {
			st.roundEnded(time.Now(), nil, false) // ended by shutdown: no verdict
		}
	}()
	return fn(rctx)
}

// summaryEvery is how often a failure that goes on is logged again.
var summaryEvery = time.Minute

// failures is a loop's run of consecutive failures, so that a database
// that is down for an hour makes a handful of lines, not one per tick.
type failures struct {
	n         int       // failures in the current run
	since     time.Time // the run's first failure
	logged    time.Time // the last line about it
	sinceLine int       // failures since that line
}

func (f *failures) note(log *slog.Logger, name string, err error, now time.Time) {
	switch {
	case err == nil && f.n > 0:
		log.Info(name+" recovered", "failures", f.n, "for", now.Sub(f.since).Round(time.Second).String())
		*f = failures{}
	case err == nil:
	case f.n == 0:
		f.n, f.since, f.logged, f.sinceLine = 1, now, now, 0
		log.Error(name+" failed", "err", err)
	default:
		f.n++
		f.sinceLine++
		if now.Sub(f.logged) >= summaryEvery {
			log.Error(name+" still failing", "err", err, "failures", f.n, "since_last_line", f.sinceLine,
				"for", now.Sub(f.since).Round(time.Second).String())
			f.logged, f.sinceLine = now, 0
		}
	}
}
