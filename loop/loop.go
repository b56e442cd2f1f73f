// Package loop runs Limbo's background work (lease sweeps, audit sealing,
// reconciliation, webhook delivery) on a ticker until its context ends.
package loop

import (
	"context"
	"log/slog"
	"time"
)

// Every runs fn every d until ctx ends, logging each failure once.
func Every(ctx context.Context, d time.Duration, log *slog.Logger, name string, fn func(context.Context) error) {
	Drain(ctx, d, log, name, 0, func(c context.Context) (int, error) { return 0, fn(c) })
}

// Drain is Every for batch work: fn reports how many items it took, and a
// full batch (n >= batch > 0) runs again at once instead of waiting for the
// next tick, so a backlog clears at full speed.
func Drain(ctx context.Context, d time.Duration, log *slog.Logger, name string, batch int, fn func(context.Context) (int, error)) {
	t := time.NewTicker(d)
	defer t.Stop()
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
				if err != nil && ctx.Err() == nil {
					log.Error(name+" failed", "err", err)
				}
				if batch <= 0 || n < batch || err != nil || ctx.Err() != nil {
					break
				}
			}
		}
	}
}
