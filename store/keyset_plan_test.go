package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

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
	if err := s.BulkLoad(ctx, 20000, 0); err != nil {
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
	for q, args := range store.GuardQueries(s) {
		var plan []string
		if err := s.DB().SelectContext(ctx, &plan, `EXPLAIN `+q, args...); err != nil {
			t.Fatalf("EXPLAIN %s: %v", q, err)
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "_pkey on") {
			t.Errorf("not by primary key:\n%s\nplan:\n%s", q, text)
		}
	}
}
