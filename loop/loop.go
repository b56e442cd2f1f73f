// Package loop runs Limbo's background work (lease sweeps, audit sealing,
// reconciliation, webhook delivery) on a ticker until its context ends.
package loop

import (
	"context"
	"log/slog"
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
func Drain(ctx context.Context, d time.Duration, log *slog.Logger, name string, batch int, fn func(context.Context) (int, error)) {
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
				n, err := fn(ctx)
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
