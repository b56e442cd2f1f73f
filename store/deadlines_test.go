package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func TestExpireDeadlines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
		cfg := &review.Config{Destinations: map[string]review.Destination{"keys": {HonoursKeys: true, Lease: time.Minute}}}
		s := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now})
		deadline := clk.Now().Add(time.Hour)
		reg := func(source, dest string, risk review.Risk) *review.Operation {
			op, _, err := s.Register(ctx, review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "1", Action: "act",
				Destination: dest, Risk: risk, Payload: []byte(`{}`), Deadline: &deadline, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			return op
		}
		attempt := func(op *review.Operation, o review.Outcome) {
			g, err := s.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecordOutcome(ctx, "acme", op.ID, g.N, o, "test"); err != nil {
				t.Fatal(err)
			}
		}
		never := reg("never", "files", review.RiskCompensableWrite)
		waitingClean := reg("clean", "keys", review.RiskIdempotentWrite)
		attempt(waitingClean, review.Outcome{Result: review.ResultConnectionError, Phase: review.PhaseBeforeSend})
		waitingUnknown := reg("unknown", "keys", review.RiskIdempotentWrite)
		attempt(waitingUnknown, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend})
		job := reg("job", "files", review.RiskCompensableWrite)
		attempt(job, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Job: &review.JobRef{Ref: "job-1", Status: "queued"}})

		if n, err := s.ExpireDeadlines(ctx); err != nil || n != 0 {
			t.Fatalf("before the deadline: %d, %v", n, err)
		}
		clk.Advance(2 * time.Hour)
		if n, err := s.ExpireDeadlines(ctx); err != nil || n != 4 {
			t.Fatalf("after the deadline: %d, %v; want 4", n, err)
		}
		for _, c := range []struct {
			op   *review.Operation
			want review.State
		}{{never, review.Failed}, {waitingClean, review.Failed}, {waitingUnknown, review.Ambiguous}, {job, review.NeedsReview}} {
			got, err := s.GetOperation(ctx, "acme", c.op.ID, "")
			if err != nil || got.State != c.want {
				t.Errorf("%s: %v %s, want %s", c.op.SourceRef, err, got.State, c.want)
			}
		}
		if cs, _ := s.CasesForOperation(ctx, job.ID); len(cs) != 1 {
			t.Errorf("the expired job has %d cases, want 1", len(cs))
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}
