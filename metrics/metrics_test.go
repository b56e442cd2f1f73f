package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func TestMetricsExposition(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		st := storetest.Open(t, e, store.Options{})
		h := handlers.New(st, nil)
		h.Metrics = metrics.New(st, nil)
		t.Cleanup(func() { h.Metrics.Close() })
		srv := httptest.NewServer(handlers.NewServer(h))
		defer srv.Close()

		token, err := st.CreateToken(ctx, review.Operator("test"), "acme", "test")
		if err != nil {
			t.Fatal(err)
		}
		call := func(method, path, body string) int {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "doc-1", LogicalVersion: "1",
			Action: "render", Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if code := call("POST", "/api/v1/operations/"+op.ID+"/attempts", ""); code != 201 {
			t.Fatalf("attempt: %d", code)
		}
		if code := call("POST", "/api/v1/operations/"+op.ID+"/attempts/1/outcome", `{"result":"timeout","phase":"after_send"}`); code != 200 {
			t.Fatalf("outcome: %d", code)
		}

		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/metrics: %d", resp.StatusCode)
		}
		// Each of the three calls went alone: nothing ran beside them.
		batches := "3"
		for _, want := range []string{
			"limbo_store_fast_batches_total " + batches,
			"limbo_store_fast_batch_calls_total " + batches,
			"limbo_store_fast_batch_splits_total 0",
			`limbo_store_tx_retries_total{cause="deadlock"} 0`,
			`limbo_operations{state="ambiguous"} 1`,
			`limbo_operations{state="confirmed"} 0`,
			`limbo_attempt_outcomes_total{destination="files",next="reconcile"} 1`,
			`limbo_http_request_duration_seconds_count{code="2xx",method="POST",route="/api/v1/operations/:id/attempts/:n/outcome"} 1`,
			`limbo_retry_budget_left{destination="files"} 10`,
			`limbo_retry_budgets_exhausted{destination="files"} 0`,
			`limbo_store_fast_path_total{path="fast"} 3`, // register, attempt, outcome: one statement each
			`limbo_store_fast_path_total{path="ordinary"} 0`,
			`limbo_metrics_leader 1`,
			`limbo_database_up 1`,
			`go_goroutines`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		// Served without sign-in: no label names a tenant.
		if strings.Contains(string(body), "tenant=") {
			t.Error("/metrics names a tenant")
		}
	})
}
