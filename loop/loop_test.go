package loop

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
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

// TestFailureLoggedOnceThenSummarised: a failure that goes on for many
// ticks logs its start, a summary per summaryEvery, and its recovery —
// not a line per tick.
func TestFailureLoggedOnceThenSummarised(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f failures
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	boom := errors.New("database down")
	for i := range 300 { // five minutes of one-second ticks
		f.note(log, "sweep", boom, start.Add(time.Duration(i)*time.Second))
	}
	f.note(log, "sweep", nil, start.Add(300*time.Second))
	f.note(log, "sweep", nil, start.Add(301*time.Second))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1+4+1 {
		t.Fatalf("%d lines for 300 failed ticks, want 6 (start, 4 summaries, recovery):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], `msg="sweep failed"`) || !strings.Contains(lines[1], `msg="sweep still failing"`) ||
		!strings.Contains(lines[1], "failures=61") || !strings.Contains(lines[5], `msg="sweep recovered" failures=300 for=5m0s`) {
		t.Fatalf("unexpected lines:\n%s", buf.String())
	}
}
