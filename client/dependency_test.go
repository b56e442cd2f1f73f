package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// Do on an operation that waits for another waits (409
// waiting-for-dependency) until that one is confirmed, then sends once,
// with the grant naming what the dependency was confirmed with; a broken
// dependency ends the wait with the dependent failed.
func TestDoWaitsForTheDependency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		l := newLimbo(t, e)
		ctx := context.Background()
		pdf := l.register(t, "contract-7-pdf", client.RiskCompensableWrite)
		link, _, err := l.client.Register(ctx, client.Registration{SourceRef: "contract-7", LogicalVersion: "7", Action: "share_link",
			Destination: "dest", Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"share":"pdf"}`),
			After: &client.After{OperationID: pdf.ID, ResourceVersion: "1"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.client.StartAttempt(ctx, link.ID, client.AttemptOptions{})
		var p *client.Problem
		if !client.IsProblem(err, "waiting-for-dependency") || !asProblem(err, &p) || p.Status != 409 || p.Dependency == nil ||
			p.Dependency.OperationID != pdf.ID || p.Dependency.State != client.Pending {
			t.Fatalf("StartAttempt = %v (%+v)", err, p)
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			res, err := l.client.Do(ctx, pdf.ID, client.AttemptOptions{}, func(context.Context, *client.Grant) client.Outcome {
				return client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201,
					Resource: &client.ResourceRef{Ref: "pdf-77", Kind: "file", Version: "1"}}
			})
			if err != nil {
				t.Errorf("the dependency's Do: %v", err)
			} else {
				t.Logf("dependency %s %+v", res.Operation.State, res.Operation.Resource)
			}
		}()
		sends := 0
		res, err := l.client.Do(ctx, link.ID, client.AttemptOptions{}, func(_ context.Context, g *client.Grant) client.Outcome {
			sends++
			if g.After == nil || g.After.Resource == nil || g.After.Resource.Ref != "pdf-77" {
				t.Errorf("grant after = %+v, want the confirmed pdf-77", g.After)
			}
			return client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201,
				Resource: &client.ResourceRef{Ref: "link-1", Kind: "link"}}
		})
		if err != nil || sends != 1 || res.Operation.State != client.Confirmed {
			t.Fatalf("Do = %+v, %v after %d sends", res, err, sends)
		}

		// A dependency that fails: the dependent's Do ends, not attemptable, failed.
		bad := l.register(t, "contract-8-pdf", client.RiskCompensableWrite)
		waiting, _, err := l.client.Register(ctx, client.Registration{SourceRef: "contract-8", LogicalVersion: "8", Action: "share_link",
			Destination: "dest", Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"share":"pdf"}`),
			After: &client.After{OperationID: bad.ID}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = l.client.Do(ctx, bad.ID, client.AttemptOptions{}, func(context.Context, *client.Grant) client.Outcome {
				return client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 422}
			})
		}()
		_, err = l.client.Do(ctx, waiting.ID, client.AttemptOptions{}, func(context.Context, *client.Grant) client.Outcome {
			t.Error("a dependent of a failed operation was sent")
			return client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201}
		})
		if !client.IsProblem(err, "not-attemptable") || !asProblem(err, &p) || p.State != client.Failed {
			t.Fatalf("Do after the dependency failed = %v", err)
		}
	})
}

func asProblem(err error, p **client.Problem) bool {
	q, ok := err.(*client.Problem)
	if ok {
		*p = q
	}
	return ok
}
