package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestWaitDecision: an integrator registers an action that needs approval,
// is refused every attempt (409 awaiting-approval) until reviewers decide,
// and learns the decision from WaitDecision: approved, refused, or the
// request expired.
func TestWaitDecision(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		cfg := &review.Config{Destinations: map[string]review.Destination{
			"mail": {Lease: 30 * time.Second, Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true, ApprovalTimeout: time.Hour}}},
		}}
		clk := storetest.NewClock(time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC))
		st := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now})
		// The server answers the first two polls with 503, as while its
		// database restarts: WaitDecision waits them out.
		var refused atomic.Int32
		api := handlers.NewServer(handlers.New(st, nil))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/decisions") && refused.Add(1) <= 2 {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"type":"unavailable","title":"Service unavailable","status":503,"detail":"the database cannot be reached"}`))
				return
			}
			api.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		ctx := context.Background()
		tok, err := st.CreateToken(ctx, review.Operator("owner@example.com"), "acme", "mailer")
		if err != nil {
			t.Fatal(err)
		}
		c := client.New(srv.URL, tok)
		register := func(t *testing.T, ref string) (*client.Operation, *store.Case) {
			t.Helper()
			op, _, err := c.Register(ctx, client.Registration{SourceRef: ref, LogicalVersion: "1", Action: "send_email",
				Destination: "mail", Risk: client.RiskIrreversible, Payload: json.RawMessage(`{"to":"a@example.com"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if op.State != client.AwaitingApproval {
				t.Fatalf("registered %s, want awaiting_approval", op.State)
			}
			if _, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{}); !client.IsProblem(err, "awaiting-approval") {
				t.Errorf("an attempt before approval: %v, want 409 awaiting-approval", err)
			}
			cs, err := st.CasesForOperation(ctx, op.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases %+v, %v", cs, err)
			}
			return op, &cs[0]
		}
		decide := func(t *testing.T, cs *store.Case, action, actor string) {
			t.Helper()
			if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: cs.ID, Action: action, Actor: actor, Reason: "read the payload"}); err != nil {
				t.Fatal(err)
			}
		}
		wait := func(opID string) <-chan error {
			done := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				d, err := c.WaitDecision(wctx, opID)
				if err == nil && (d.OperationID != opID || d.Status != "applied") {
					err = errors.New("WaitDecision returned " + d.Action + " " + d.Status + " on " + d.OperationID)
				}
				if err == nil {
					err = errors.New(d.Action)
				}
				done <- err
			}()
			return done
		}

		t.Run("approved by two reviewers", func(t *testing.T) {
			op, cs := register(t, "mail-1")
			done := wait(op.ID)
			decide(t, cs, review.DecideApprove, "rita@example.com")
			select {
			case err := <-done:
				t.Fatalf("WaitDecision returned after one approval of two: %v", err)
			case <-time.After(600 * time.Millisecond): // two polls saw it still waiting
			}
			decide(t, cs, review.DecideApprove, "marco@example.com")
			if err := <-done; err.Error() != review.DecideApprove {
				t.Fatalf("WaitDecision = %v, want the approval", err)
			}
			if _, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{}); err != nil {
				t.Errorf("an attempt after approval: %v", err)
			}
		})
		t.Run("refused", func(t *testing.T) {
			op, cs := register(t, "mail-2")
			done := wait(op.ID)
			decide(t, cs, review.DecideRefuse, "rita@example.com")
			if err := <-done; err.Error() != review.DecideRefuse {
				t.Fatalf("WaitDecision = %v, want the refusal", err)
			}
			if _, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{}); !client.IsProblem(err, "not-attemptable") {
				t.Errorf("an attempt after refusal: %v, want not-attemptable", err)
			}
		})
		t.Run("a problem that is an answer ends the wait", func(t *testing.T) {
			if _, err := c.WaitDecision(ctx, "op_nope"); !client.IsProblem(err, "not-found") {
				t.Errorf("WaitDecision on an unknown operation = %v, want not-found", err)
			}
		})
		t.Run("expired", func(t *testing.T) {
			op, _ := register(t, "mail-3")
			done := wait(op.ID)
			clk.Advance(time.Hour)
			if n, err := st.ExpireDeadlines(ctx); err != nil || n != 1 {
				t.Fatalf("ExpireDeadlines = %d, %v", n, err)
			}
			if err := <-done; !errors.Is(err, client.ErrNoDecision) {
				t.Fatalf("WaitDecision = %v, want ErrNoDecision", err)
			}
		})
	})
}
