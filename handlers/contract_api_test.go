package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/limbo-dev/limbo/contract"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// A registration whose payload breaks the request schema the destination's
// OpenAPI document gives its operation is refused with 400 naming the
// field, and nothing is recorded, so nothing can be attempted; one that
// keeps it registers as any other. Both engines, through the API.
func TestRequestSchemaRefusesThroughAPI(t *testing.T) {
	block, err := contract.Import(context.Background(), sandbox.OpenAPI("http://127.0.0.1:9"), contract.Options{Name: "sandbox",
		AllowInternal: true, Body: "body", Actions: map[string]string{"upload_file": "uploadFile", "charge": "createCharge"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := review.ParseConfig(block)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		reg := func(key, action, body string) string {
			return `{"source_ref":"contract-7","logical_version":"7","action":"` + action + `","destination":"sandbox","key":"` + key +
				`","payload":{"method":"POST","path":"/files","body":` + body + `}}`
		}
		for _, tc := range []struct{ action, body, field string }{
			{"upload_file", `{"content":"v7"}`, "payload.body.name"},
			{"upload_file", `{"name":"","content":"v7"}`, "payload.body.name"},
			{"upload_file", `{"name":"c.docx","metadata":{"operation_id":7}}`, "payload.body.metadata.operation_id"},
			{"charge", `{"amount":0,"currency":"EUR"}`, "payload.body.amount"},
			{"charge", `{"amount":"12.50","currency":"EUR"}`, "payload.body.amount"},
		} {
			p := b.post("/api/v1/operations", reg("contract-7-key-000000001", tc.action, tc.body)).
				want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if p.Field != tc.field {
				t.Errorf("%s %s: field %q (%s), want %q", tc.action, tc.body, p.Field, p.Detail, tc.field)
			}
		}
		ops, _, err := b.store.ListOperations(context.Background(), "acme", store.OperationFilter{}, "", 10)
		if err != nil || len(ops) != 0 {
			t.Fatalf("after refusals: %d operations, %v; want none recorded", len(ops), err)
		}
		b.post("/api/v1/operations", reg("contract-7-key-000000001", "upload_file", `{"name":"c.docx","content":"v7"}`)).want(t, http.StatusCreated)
		// An action the document was not asked about is not checked.
		b.post("/api/v1/operations", reg("contract-7-key-000000002", "create_folder", `{}`)).want(t, http.StatusCreated)
	})
}
