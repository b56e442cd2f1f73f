package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// exportsLedger reports whether an exposition carries the database-wide
// gauges, and checks it says so in limbo_metrics_leader.
func exportsLedger(t *testing.T, name, body string) bool {
	t.Helper()
	has := strings.Contains(body, "\nlimbo_operations{")
	leader := strings.Contains(body, "\nlimbo_metrics_leader 1\n")
	if has != leader || (!leader && !strings.Contains(body, "\nlimbo_metrics_leader 0\n")) {
		t.Fatalf("%s: limbo_operations exported %v but limbo_metrics_leader says otherwise:\n%s", name, has, body)
	}
	for _, g := range []string{"limbo_open_cases{", "limbo_outbox_pending ", "limbo_open_case_oldest_age_seconds ",
		"limbo_audit_unsealed_oldest_age_seconds "} {
		if strings.Contains(body, "\n"+g) != has {
			t.Errorf("%s: %s exported %v, limbo_operations %v", name, g, !has, has)
		}
	}
	if !strings.Contains(body, "\nlimbo_database_up 1\n") || !strings.Contains(body, "\nlimbo_build_info{") {
		t.Errorf("%s: the per-instance gauges are missing", name)
	}
	return has
}

// TestOneLeaderOnPostgres: two instances on one PostgreSQL schema; exactly
// one exports the database-wide gauges. When the leader closes, the other
// takes over at its next scrape; when the leader's connection breaks, it
// stops exporting and the other takes over.
func TestOneLeaderOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := storetest.URL(t, store.Postgres) // skips without PostgreSQL
	open := func() *store.Store {
		st, err := store.Open(ctx, url, store.Options{AuditKey: storetest.AuditKey, MaxConns: storetest.MaxConns,
			Resolve: storetest.Resolver(nil)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return st
	}
	stA, stB := open(), open()
	a, b := metrics.New(stA, nil), metrics.New(stB, nil)
	t.Cleanup(func() { a.Close(); b.Close() })

	if !exportsLedger(t, "a", scrape(t, a)) {
		t.Fatal("the first instance scraped did not take the free leadership")
	}
	for range 2 {
		if exportsLedger(t, "b", scrape(t, b)) {
			t.Fatal("two instances export the database-wide gauges")
		}
		if !exportsLedger(t, "a", scrape(t, a)) {
			t.Fatal("the leader lost leadership on its own")
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if exportsLedger(t, "a", scrape(t, a)) {
		t.Error("a closed instance still leads")
	}
	if !exportsLedger(t, "b", scrape(t, b)) {
		t.Fatal("the other instance did not take over when the leader closed")
	}

	// A third instance waits; then the leader's session is cut.
	c := metrics.New(open(), nil)
	t.Cleanup(func() { c.Close() })
	if exportsLedger(t, "c", scrape(t, c)) {
		t.Fatal("two instances export the database-wide gauges")
	}
	var killed bool
	if err := stA.DB().GetContext(ctx, &killed, `
SELECT pg_terminate_backend(pid) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = hashtext('limbo-metrics:' || current_schema())::bigint`); err != nil || !killed {
		t.Fatalf("terminating the leader's session: %v %v", killed, err)
	}
	if exportsLedger(t, "b", scrape(t, b)) {
		t.Fatal("the leader still exports after its session was cut")
	}
	if !exportsLedger(t, "c", scrape(t, c)) {
		t.Fatal("no instance took over the cut leader's place")
	}
	if exportsLedger(t, "b", scrape(t, b)) {
		t.Fatal("the former leader took the lock back from the new one")
	}
}
