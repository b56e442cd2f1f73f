package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// RegisterMany against a real server: answers in order across more than
// one call of MaxBatch, a refusal as a *Problem beside its registered
// neighbours, and the same registrations again answer as stored.
func TestRegisterMany(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		l := newLimbo(t, engine)
		reg := func(ref, name string) client.Registration {
			return client.Registration{SourceRef: ref, LogicalVersion: "1", Action: "create_folder", Destination: "dest",
				Risk: client.RiskIdempotentWrite, Payload: json.RawMessage(`{"name":"` + name + `"}`)}
		}
		var rs []client.Registration
		for i := range client.MaxBatch + 5 {
			rs = append(rs, reg(fmt.Sprintf("folder-%d", i), fmt.Sprintf("folder-%d", i)))
		}
		rs[3] = reg("folder-2", "another") // folder-2's key, another payload
		got, err := l.client.RegisterMany(ctx, rs)
		if err != nil || len(got) != len(rs) {
			t.Fatalf("RegisterMany: %d answers, %v", len(got), err)
		}
		for i, r := range got {
			if i == 3 {
				var p *client.Problem
				if !errors.As(r.Err, &p) || p.Type != "payload-mismatch" || p.Status != 422 || p.OperationID != got[2].Op.ID {
					t.Fatalf("the mismatch: %+v", r)
				}
				continue
			}
			if r.Err != nil || !r.Created || r.Op.SourceRef != rs[i].SourceRef {
				t.Fatalf("registration %d: %+v", i, r)
			}
		}
		again, err := l.client.RegisterMany(ctx, rs[:3])
		if err != nil || len(again) != 3 || again[2].Created || again[2].Op.ID != got[2].Op.ID {
			t.Fatalf("again: %+v, %v", again, err)
		}
	})
}
