package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
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

// TestPanicIsAFailedRound: a round that panics is logged with its stack
// and counted, its context ends (so a transaction it left open is rolled
// back), and the loop goes on: before, the panic ended the whole process.
func TestPanicIsAFailedRound(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	st := &Status{}
	ctx, cancel := context.WithCancel(WithStatus(context.Background(), st))
	var calls atomic.Int32
	left := make(chan context.Context, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, log, "sweep", func(c context.Context) error {
			switch calls.Add(1) {
			case 1:
				left <- c
				panic("nil map")
			case 3:
				cancel()
			}
			return nil
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not go on after a panic")
	}
	if err := (<-left).Err(); err == nil {
		t.Error("the panicked round's context did not end")
	}
	s := st.Snapshot()
	if s.Panics != 1 || s.Failures != 1 || s.LastOK.IsZero() || !s.Running.IsZero() {
		t.Errorf("status %+v, want one panic, one failure, a success since, no round running", s)
	}
	if out := buf.String(); !strings.Contains(out, `msg="sweep panicked" panic="nil map"`) || !strings.Contains(out, "loop_test.go") ||
		!strings.Contains(out, `msg="sweep recovered"`) {
		t.Errorf("log:\n%s", out)
	}
}

// TestStuckRoundIsSeen: a round that does not return (a query waiting on a
// lock) is logged once it has run StuckAfter, and its status says since
// when it runs.
func TestStuckRoundIsSeen(t *testing.T) {
	defer func(d time.Duration) { StuckAfter = d }(StuckAfter)
	StuckAfter = 20 * time.Millisecond
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	st := &Status{}
	ctx, cancel := context.WithCancel(WithStatus(context.Background(), st))
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, log, "audit-seal", func(context.Context) error {
			<-release
			return nil
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), `msg="audit-seal round still running"`) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := st.Snapshot(); s.Running.IsZero() || !s.LastOK.IsZero() {
		t.Errorf("status %+v while stuck, want a round running and no success", s)
	}
	cancel()
	close(release)
	<-done
	if !strings.Contains(buf.String(), "still running") {
		t.Errorf("a stuck round was not logged:\n%s", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger in another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// skippedErr is a round's error that skipped n rows.
type skippedErr int

func (e skippedErr) Error() string    { return fmt.Sprintf("%d rows skipped", int(e)) }
func (e skippedErr) SkippedRows() int { return int(e) }

// TestSkippedRowsAreCounted: a round whose error says it skipped rows
// (store.SkippedRows), alone, wrapped or joined with others, is a failed
// round, and its rows are counted, for limbo_loop_rows_skipped_total.
func TestSkippedRowsAreCounted(t *testing.T) {
	st := &Status{}
	ctx, cancel := context.WithCancel(WithStatus(context.Background(), st))
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), "sweep", func(context.Context) error {
			switch calls.Add(1) {
			case 1:
				return skippedErr(2)
			case 2:
				return errors.Join(fmt.Errorf("leases: %w", skippedErr(1)), errors.New("down"), skippedErr(3))
			case 3:
				cancel()
			}
			return nil
		})
	}()
	<-done
	if s := st.Snapshot(); s.Skipped != 6 || s.Failures != 2 {
		t.Errorf("status %+v, want 6 rows skipped in 2 failed rounds", s)
	}
}
