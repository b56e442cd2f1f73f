package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestRegisterAndAttempt runs the two-call cycle against a real server:
// register with its attempt, report the outcome. The same registration
// while the attempt is in flight is still registered, and the refusal is a
// *client.Problem.
func TestRegisterAndAttempt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		l := newLimbo(t, engine)
		reg := client.Registration{SourceRef: "folder-1", LogicalVersion: "1", Action: "create_folder", Destination: "dest",
			Risk: client.RiskIdempotentWrite, Payload: json.RawMessage(`{"name":"folder-1"}`)}
		op, created, g, err := l.client.RegisterAndAttempt(ctx, reg)
		if err != nil || !created || g == nil || g.N != 1 || g.OperationID != op.ID || g.Key == "" {
			t.Fatalf("RegisterAndAttempt: %v, created %v, grant %+v", err, created, g)
		}
		again, created, g2, err := l.client.RegisterAndAttempt(ctx, reg)
		var p *client.Problem
		if !errors.As(err, &p) || p.Type != "not-attemptable" || p.State != client.InFlight || g2 != nil || created || again == nil || again.ID != op.ID {
			t.Fatalf("again: %v (%T), created %v, grant %+v, op %+v", err, err, created, g2, again)
		}
		res, err := l.client.ReportOutcome(ctx, op.ID, g.N, client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201})
		if err != nil || res.Next != client.NextDone || res.Operation.State != client.Confirmed {
			t.Fatalf("ReportOutcome: %v, %+v", err, res)
		}
	})
}
