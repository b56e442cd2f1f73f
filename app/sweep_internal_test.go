package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSweepGoesPastAPoisonLease: an expired lease that cannot be closed
// (a trigger refuses its operation's audit events) is a skipped row of the
// lease-sweep round, named in its error, and the deadline sweep of the
// same round still runs: the round used to end at the lease sweep's error,
// so one such lease kept every deadline from expiring. Both engines.
func TestSweepGoesPastAPoisonLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2030, 6, 7, 8, 0, 0, 0, time.UTC))
		st := storetest.Open(t, e, store.Options{Clock: clk.Now})
		register := func(source string) *review.Operation {
			deadline := clk.Now().Add(time.Hour)
			op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "1", Action: "render",
				Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Deadline: &deadline, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			return op
		}
		stuck := register("stuck")
		if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: stuck.ID, Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		due := register("due")
		storetest.FailOn(t, st, "INSERT", "audit_events", "NEW.operation_id = '"+stuck.ID+"'")
		clk.Advance(2 * time.Hour)

		a := &App{Store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		err := a.sweep(ctx)
		var sk *store.SkippedRows
		if !errors.As(err, &sk) || len(sk.Rows) != 1 || sk.Rows[0].ID != stuck.ID+"/1" {
			t.Fatalf("sweep = %v, want the stuck lease skipped", err)
		}
		got, err := st.GetOperation(ctx, "acme", due.ID, "")
		if err != nil || got.State != review.Failed {
			t.Fatalf("the due operation is %v (%v), want failed by its deadline", got.State, err)
		}
	})
}
