package loop

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestDrainRunsFullBatchesAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A backlog of 3 full batches, then a short one that ends the run.
		Drain(ctx, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), "test", 10, func(context.Context) (int, error) {
			n := calls.Add(1)
			if n <= 3 {
				return 10, nil
			}
			cancel()
			return 0, nil
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not stop when its context ended")
	}
	if got := calls.Load(); got != 4 {
		t.Fatalf("calls = %d, want 4 (three full batches drained, then the short one)", got)
	}
}

func TestEveryStopsOnErrorUntilNextTick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), "test", func(context.Context) error {
			if calls.Add(1) == 2 {
				cancel()
			}
			return errors.New("boom")
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not stop when its context ended")
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("calls = %d, want 2 (one per tick)", got)
	}
}
