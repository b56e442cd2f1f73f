package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestKeysetCursorsBoundTheIndex asks PostgreSQL's planner how it reads
// each query that pages from a cursor (the payload purge, the decisions
// feed). The cursor must be part of the index condition, a range read
// from where the last page ended: as a filter, each page walked the index
// from its start, and paging through a large table was quadratic. Sequential
// scans are switched off for the question, since a test's small tables
// would rather be read whole.
func TestKeysetCursorsBoundTheIndex(t *testing.T) {
	if !slices.Contains(storetest.Engines(t), store.Postgres) {
		t.Skip("PostgreSQL unavailable")
	}
	ctx := context.Background()
	s := storetest.Open(t, store.Postgres, store.Options{})
	conn, err := s.DB().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `RESET enable_seqscan`)
	for q, args := range store.KeysetQueries(s) {
		var plan []string
		if err := conn.SelectContext(ctx, &plan, `EXPLAIN `+q, args...); err != nil {
			t.Fatalf("EXPLAIN %s: %v", q, err)
		}
		text := strings.Join(plan, "\n")
		var cond string
		for _, line := range plan {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "Index Cond: "); ok {
				cond += c
			}
		}
		if !strings.Contains(cond, "ROW(") {
			t.Errorf("the cursor is not in the index condition of\n%s\nplan:\n%s", q, text)
		}
	}
}

// TestGuardsFindTheirRowByKey: a guarded write (the operation in the
// state and version its caller read, the attempt still open) finds its
// row by primary key. Where the statistics say a state is rare — as they
// do once ANALYZE has seen a ledger of settled operations — PostgreSQL
// preferred an index on the state (operations_state_created, a partial
// index of waiting or ambiguous operations, attempts_open_destination) and
// read every row in that state to find one: a cost that grows with the
// backlog, on the attempt cycle's every call.
func TestGuardsFindTheirRowByKey(t *testing.T) {
	if !slices.Contains(storetest.Engines(t), store.Postgres) {
		t.Skip("PostgreSQL unavailable")
	}
	ctx := context.Background()
	s := storetest.Open(t, store.Postgres, store.Options{})
	if err := s.BulkLoad(ctx, 20000, 2000); err != nil {
		t.Fatal(err)
	}
	// Their attempts, all closed, as a settled ledger's are.
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO attempts (operation_id, n, generation, destination, tenant, started_at,
    lease_expires_at, finished_at) SELECT id, 1, 2, destination, tenant, created_at, created_at, created_at FROM operations`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `ANALYZE operations; ANALYZE attempts`); err != nil {
		t.Fatal(err)
	}
	// The browser's tab of one state, whose newest rows are in other
	// states (the open ones), reads that state's rows from the newest or
	// from its cursor.
	for q, args := range store.BrowseStatePages(s, "confirmed", time.Now().Add(-time.Hour), "op_bench0000010000") {
		if plan := explain(t, s, q, args); !strings.Contains(plan, "Index Cond: ((state >= ") || !strings.Contains(plan, "operations_state_created") {
			t.Errorf("a state's tab does not read its range of operations_state_created:\n%s\nplan:\n%s", q, plan)
		}
	}
	for q, args := range store.GuardQueries(s) {
		if plan := explain(t, s, q, args); !strings.Contains(plan, "_pkey on") {
			t.Errorf("not by primary key:\n%s\nplan:\n%s", q, plan)
		}
	}
}

// explain is PostgreSQL's plan for q with args, as text.
func explain(t *testing.T, s *store.Store, q string, args []any) string {
	t.Helper()
	var plan []string
	if err := s.DB().Select(&plan, `EXPLAIN `+q, args...); err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	return strings.Join(plan, "\n")
}

// TestCommonSearchIsNotCounted: on PostgreSQL a search the statistics put
// in a large share of the ledger is over the cap without counting (its
// trigrams' lists are as long as its matches are many), and its page is
// still its newest matches; a rarer one is counted exactly.
func TestCommonSearchIsNotCounted(t *testing.T) {
	if !slices.Contains(storetest.Engines(t), store.Postgres) {
		t.Skip("PostgreSQL unavailable")
	}
	ctx := context.Background()
	s := storetest.Open(t, store.Postgres, store.Options{})
	const n = 60000 // src-1… is in a ninth of them: 6,667, over commonSearchRows
	if err := s.BulkLoad(ctx, n, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `ANALYZE operations`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q      string
		common bool
	}{
		{"src-1", true},
		{"SRC-1", true},
		{"src-12", false},  // 1,111 matches: counted, over the cap
		{"src-123", false}, // 111
		{"no-such-ref-9", false},
	} {
		common, err := store.CommonSearch(ctx, s, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if common != c.common {
			t.Errorf("%q: common %v, want %v", c.q, common, c.common)
		}
		p, err := s.BrowseOperations(ctx, nil, store.BrowseFilter{Search: c.q}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for x := range n {
			if strings.Contains(fmt.Sprintf("src-%d", x), strings.ToLower(c.q)) {
				want++
			}
		}
		switch {
		case c.common && !p.Uncounted:
			t.Errorf("%q: counted (%d), want uncounted", c.q, p.Total)
		case !c.common && want > store.BrowseSearchCountCap && !(p.Uncounted && p.Total == store.BrowseSearchCountCap+1):
			t.Errorf("%q: total %d (uncounted %v), want over the cap", c.q, p.Total, p.Uncounted)
		case !c.common && want <= store.BrowseSearchCountCap && (p.Uncounted || p.Total != want):
			t.Errorf("%q: total %d (uncounted %v), want %d", c.q, p.Total, p.Uncounted, want)
		}
		if want > 0 && (len(p.Rows) == 0 || p.Rows[0].ID != fmt.Sprintf("op_bench%010d", firstMatch(n, strings.ToLower(c.q)))) {
			t.Errorf("%q: page starts %v, want the newest match", c.q, p.Rows)
		}
	}
}

// firstMatch is the newest bulk-loaded operation (the lowest x) whose
// source ref holds q.
func firstMatch(n int, q string) int {
	for x := range n {
		if strings.Contains(fmt.Sprintf("src-%d", x), q) {
			return x
		}
	}
	return -1
}

// TestBrowsePageReadsNoOtherCases: the browser's page looks up the open
// case of its own rows only. Joined to cases, SQLite read every open case
// into a Bloom filter before the first row (100 ms per page at 10,000,000
// operations with 500,000 open).
func TestBrowsePageReadsNoOtherCases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t, store.SQLite, store.Options{})
	if err := s.BulkLoad(ctx, 20000, 5000); err != nil {
		t.Fatal(err)
	}
	for q, args := range store.BrowsePages(s) {
		rows, err := s.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if text := strings.Join(plan, "\n"); strings.Contains(text, "BLOOM") || strings.Contains(text, "SCAN c") {
			t.Errorf("the page reads cases beyond its rows':\n%s\nplan:\n%s", q, text)
		}
	}
}
