package metrics_test

import (
	"context"
	"fmt"
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

// TestUnconfiguredDestinationsAreOther: a registration may name a
// destination the configuration does not, and each such name became a
// label of its own — in limbo_attempt_outcomes_total, in the in-flight and
// retry-budget gauges — on /metrics, which needs no sign-in. Any API token
// made series without bound, and published whatever its tenant typed
// (README: "no label names a tenant"). With a configuration, the
// destinations it names keep their label and any other is "other".
func TestUnconfiguredDestinationsAreOther(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		st := storetest.Open(t, e, store.Options{Config: approvalConfig()})
		h := handlers.New(st, nil)
		h.Metrics = metrics.New(st, nil)
		t.Cleanup(func() { h.Metrics.Close() })
		srv := httptest.NewServer(handlers.NewServer(h))
		defer srv.Close()
		token, err := st.CreateToken(ctx, review.Operator("test"), "acme", "test")
		if err != nil {
			t.Fatal(err)
		}
		call := func(path, body string, want int) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("POST %s: %d, want %d", path, resp.StatusCode, want)
			}
		}
		for i, dest := range []string{"files", "acme-private-1", "acme-private-2", "acme-private-3"} {
			op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: fmt.Sprintf("doc-%d", i), LogicalVersion: "1",
				Action: "render", Destination: dest, Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			call("/api/v1/operations/"+op.ID+"/attempts", "", http.StatusCreated)
			if i < 3 {
				call("/api/v1/operations/"+op.ID+"/attempts/1/outcome", `{"result":"timeout","phase":"after_send"}`, http.StatusOK)
			}
		}
		body := scrape(t, h.Metrics)
		if strings.Contains(body, "acme-private") {
			t.Errorf("/metrics names a destination the configuration does not:\n%s", grepLines(body, "acme-private"))
		}
		wantLines(t, body,
			`limbo_attempt_outcomes_total{destination="files",next="reconcile"} 1`,
			`limbo_attempt_outcomes_total{destination="other",next="reconcile"} 2`,
			`limbo_attempts_in_flight{destination="other"} 1`,
			`limbo_attempts_in_flight{destination="files"} 0`,
			`limbo_retry_budget_left{destination="files"} 10`)
		if !strings.Contains(body, `limbo_retry_budget_left{destination="other"}`) {
			t.Errorf("no retry budget series for the other destinations:\n%s", grepLines(body, "limbo_retry_budget"))
		}
	})
}

func grepLines(body, s string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
