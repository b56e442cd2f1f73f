package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestAuditPersonReadsItsIndex: the audit page filtered by a person (or an
// operator) reads that actor's events from audit_events_person, on both
// engines, for every reader; filtered by a machine actor (a token, a
// worker), from the newest event down, as before. Without the index, a
// manager asking what someone did who rarely acts read the whole trail
// (62 ms at 1,000,000 events on PostgreSQL, limbo bench's
// audit:actor-none).
func TestAuditPersonReadsItsIndex(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		if err := s.BulkLoad(ctx, 20_000, 0); err != nil {
			t.Fatal(err)
		}
		plan := func(f store.AuditFilter) string {
			q, args := store.AuditPageQuery(s, f, 101)
			explain := "EXPLAIN "
			if e == store.SQLite {
				explain = "EXPLAIN QUERY PLAN "
			}
			rows, err := s.DB().QueryContext(ctx, explain+q, args...)
			if err != nil {
				t.Fatalf("%s%s: %v", explain, q, err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			var lines []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, toString(vals[len(vals)-1]))
			}
			return strings.Join(lines, "\n")
		}
		for _, f := range []store.AuditFilter{
			{Actor: "anna@example.com"},
			{Actor: "cli:ops"},
			{Actor: "anna@example.com", Scope: []string{"bench-3"}},
			{Actor: "anna@example.com", Action: "decision"},
		} {
			if p := plan(f); !strings.Contains(p, "audit_events_person") {
				t.Errorf("%+v: the plan does not read audit_events_person:\n%s", f, p)
			}
		}
		if p := plan(store.AuditFilter{Actor: "system:bench"}); strings.Contains(p, "audit_events_person") {
			t.Errorf("a worker's events: the plan reads audit_events_person, which leaves them out:\n%s", p)
		}
		// The same answers: the worker's events are found, a person's none.
		if evs, _, err := s.SearchAudit(ctx, store.AuditFilter{Actor: "system:bench"}, 5); err != nil || len(evs) != 5 {
			t.Errorf("system:bench's events: %d, %v; want 5", len(evs), err)
		}
		if evs, _, err := s.SearchAudit(ctx, store.AuditFilter{Actor: "anna@example.com"}, 5); err != nil || len(evs) != 0 {
			t.Errorf("anna's events: %d, %v; want none", len(evs), err)
		}
	})
}

func toString(v any) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	}
	return ""
}
