package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCompensationThroughTheAPI (issue 14, part 4): the compensation a
// reviewer decides is an operation the integrator lists, runs and reports
// through the same API as any other, under its own key; the parent becomes
// compensated when it is confirmed. Integrators cannot register a
// compensate: action themselves.
func TestCompensationThroughTheAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ctx := context.Background()
		b.post("/api/v1/operations", registration("doc-x", "drive", review.RiskCompensableWrite, `"key":"my-own-key-0000001"`)).want(t, http.StatusCreated)
		p := b.post("/api/v1/operations", `{"source_ref":"doc-y","logical_version":"v1","action":"compensate:create_folder","destination":"drive",`+
			`"risk":"compensable_write","payload":{"name":"doc-y"}}`).want(t, http.StatusBadRequest).problem(t, "invalid-request")
		if p.Field != "action" {
			t.Errorf("problem names field %q, want action", p.Field)
		}

		parent := b.register(t, "doc-dup", review.RiskCompensableWrite)
		g := b.attempt(t, parent.ID)
		b.outcome(t, parent.ID, g.N, `{"result":"timeout","phase":"after_send"}`)
		b.post("/api/v1/operations/"+parent.ID+"/evidence", `{"source":"metadata_search","authoritative":true,"candidates":[`+
			`{"ref":"fld-1","kind":"folder","version":"v1","operation_id":"`+parent.ID+`"},`+
			`{"ref":"fld-2","kind":"folder","version":"v1","operation_id":"`+parent.ID+`"}]}`).want(t, http.StatusOK)
		cs, err := b.store.CasesForOperation(ctx, parent.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases %+v, %v", cs, err)
		}
		if _, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideCompensate, Ref: "fld-2",
			Compensation: "DELETE /folders/fld-2", Actor: "rita@example.com", Reason: "a retry made a second folder"}); err != nil {
			t.Fatal(err)
		}
		comps, err := b.store.Compensations(ctx, parent.ID)
		if err != nil || len(comps) != 1 {
			t.Fatalf("compensations %+v, %v", comps, err)
		}
		child := b.get("/api/v1/operations/"+comps[0].OperationID).want(t, http.StatusOK).op(t)
		if child.Action != "compensate:create_folder" || child.Key != comps[0].Key || child.State != review.Pending {
			t.Fatalf("the compensation as the API shows it: %+v", child)
		}
		g = b.attempt(t, child.ID)
		if g.Key != child.Key {
			t.Errorf("the undo is sent with key %s, want its own %s", g.Key, child.Key)
		}
		if a := b.outcome(t, child.ID, g.N, `{"result":"success","phase":"after_send","http_status":204}`); a.Next != review.NextDone {
			t.Errorf("the undo's outcome: next %s", a.Next)
		}
		if got := b.get("/api/v1/operations/"+parent.ID).want(t, http.StatusOK).op(t); got.State != review.Compensated {
			t.Errorf("parent after its compensation was confirmed: %s, want compensated", got.State)
		}
	})
}
