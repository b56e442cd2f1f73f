package metrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/buildinfo"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// scrape reads m's exposition as Prometheus would.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains("\n"+body, "\n"+l+"\n") {
			t.Errorf("/metrics lacks the line %q", l)
		}
	}
}

// approvalConfig: "mail" asks for approval before send_email, so
// registering one opens a case at once; "files" has no policy.
func approvalConfig() *review.Config {
	return &review.Config{Destinations: map[string]review.Destination{
		"mail":  {Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true}}},
		"files": {},
	}}
}

// TestZeroSeriesOnFreshDatabase: on a database with nothing in it, every
// known label value is there at 0, so a rate() or an alert has a series
// before the first event; the per-instance gauges say up and leader.
func TestZeroSeriesOnFreshDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		st := storetest.Open(t, e, store.Options{Config: approvalConfig()})
		m := metrics.New(st, nil)
		t.Cleanup(func() { m.Close() })
		body := scrape(t, m)
		var want []string
		for _, r := range review.AllReasons() {
			want = append(want, `limbo_open_cases{reason="`+string(r)+`"} 0`)
		}
		for _, s := range review.AllStates() {
			want = append(want, `limbo_operations{state="`+string(s)+`"} 0`)
		}
		for _, d := range []string{"files", "mail"} {
			for _, n := range metrics.Nexts() {
				want = append(want, `limbo_attempt_outcomes_total{destination="`+d+`",next="`+string(n)+`"} 0`)
			}
			for _, v := range metrics.Verdicts() {
				want = append(want, `limbo_reconcile_verdicts_total{destination="`+d+`",verdict="`+v+`"} 0`)
			}
			want = append(want, `limbo_attempts_in_flight{destination="`+d+`"} 0`)
		}
		bi := buildinfo.Read()
		want = append(want, "limbo_outbox_pending 0", "limbo_outbox_failed 0", "limbo_outbox_delivered_total 0",
			"limbo_outbox_delivery_latency_seconds_count 0", "limbo_open_case_oldest_age_seconds 0",
			"limbo_database_up 1", "limbo_metrics_leader 1",
			`limbo_build_info{goversion="`+bi.GoVersion+`",revision="`+bi.Revision+`",version="`+bi.Version+`"} 1`)
		wantLines(t, body, want...)
	})
}

// TestAgeGauges: the oldest open case's age and the audit seal lag follow
// the store's clock, and a seal brings the lag back to 0.
func TestAgeGauges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		st := storetest.Open(t, e, store.Options{Config: approvalConfig(), Clock: clk.Now})
		m := metrics.New(st, nil)
		t.Cleanup(func() { m.Close() })
		sealed := func() {
			// On PostgreSQL a seal waits for every older transaction of the
			// server (other tests'): Sealed seals until all is covered.
			if rep := storetest.Sealed(t, st); rep.Unsealed != 0 {
				t.Fatalf("%d audit events left unsealed", rep.Unsealed)
			}
		}
		sealed()
		wantLines(t, scrape(t, m), "limbo_audit_unsealed_oldest_age_seconds 0", "limbo_open_case_oldest_age_seconds 0")

		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "doc-1", LogicalVersion: "1",
			Action: "send_email", Destination: "mail", Risk: review.RiskIrreversible, Payload: json.RawMessage(`{}`),
			Actor: "test", RequestedBy: "owner@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if op.State != review.AwaitingApproval {
			t.Fatalf("state %s, want awaiting_approval with its case", op.State)
		}
		clk.Advance(90 * time.Second)
		wantLines(t, scrape(t, m), "limbo_open_case_oldest_age_seconds 90", "limbo_audit_unsealed_oldest_age_seconds 90",
			`limbo_open_cases{reason="approval_required"} 1`, `limbo_operations{state="awaiting_approval"} 1`)
		sealed()
		wantLines(t, scrape(t, m), "limbo_audit_unsealed_oldest_age_seconds 0", "limbo_open_case_oldest_age_seconds 90")
	})
}

// TestDatabaseDown: with its database gone, an instance says so, exports
// no database-wide gauge (nor leadership) and still serves its own series.
func TestDatabaseDown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		st := storetest.Open(t, e, store.Options{Config: approvalConfig()})
		m := metrics.New(st, nil)
		t.Cleanup(func() { m.Close() })
		wantLines(t, scrape(t, m), "limbo_database_up 1", "limbo_metrics_leader 1")
		st.Close()
		body := scrape(t, m)
		wantLines(t, body, "limbo_database_up 0", "limbo_metrics_leader 0",
			`limbo_attempt_outcomes_total{destination="mail",next="done"} 0`)
		if strings.Contains(body, "\nlimbo_operations{") {
			t.Error("database-wide gauges exported without a database")
		}
	})
}

// TestSealLagPastForgedHorizon: a newest checkpoint whose horizon lies
// beyond every event (a forged row; on PostgreSQL also a database restored
// into another cluster, whose transaction ids start lower) says nothing of
// the events written after it. Until a seal covers them, the seal lag must
// count them, not read 0.
func TestSealLagPastForgedHorizon(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		st := storetest.Open(t, e, store.Options{Config: approvalConfig(), Clock: clk.Now})
		m := metrics.New(st, nil)
		t.Cleanup(func() { m.Close() })
		register := func(ref string) {
			t.Helper()
			if _, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: ref, LogicalVersion: "1",
				Action: "send_email", Destination: "mail", Risk: review.RiskIrreversible, Payload: json.RawMessage(`{}`),
				Actor: "test", RequestedBy: "owner@example.com"}); err != nil {
				t.Fatal(err)
			}
		}
		register("doc-1")
		if rep := storetest.Sealed(t, st); rep.Unsealed != 0 {
			t.Fatalf("%d audit events left unsealed", rep.Unsealed)
		}
		if _, err := st.DB().ExecContext(ctx, st.DB().Rebind(
			`UPDATE audit_checkpoints SET horizon = ? WHERE id = (SELECT MAX(id) FROM audit_checkpoints)`), int64(1)<<50); err != nil {
			t.Fatal(err)
		}
		register("doc-2")
		clk.Advance(90 * time.Second)
		wantLines(t, scrape(t, m), "limbo_audit_unsealed_oldest_age_seconds 90")
		if lag, err := st.SealLag(ctx); err != nil || lag != 90*time.Second {
			t.Errorf("SealLag = %v, %v; want 1m30s", lag, err)
		}
	})
}
