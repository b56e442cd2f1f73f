package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBulkLoadBrowse: the rows store.BulkLoad writes for benchmarks are
// rows the operations browser reads like any other. Every keyset page
// walked to the end lists each operation once, none missed (on SQLite the
// bulk times must be text in the form the driver binds, or the cursor
// compares apart from them and deep pages repeat rows), and the search
// finds bulk rows by key, source ref and resource ref as it finds others.
func TestBulkLoadBrowse(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		const n, open = 1100, 20 // over BrowseSearchCountCap: a search past the cap too
		if err := s.BulkLoad(ctx, n, open); err != nil {
			t.Fatal(err)
		}
		// walk lists every page of f, 7 at a time, and checks no id twice.
		walk := func(f store.BrowseFilter) []string {
			t.Helper()
			var ids []string
			seen := map[string]bool{}
			after := ""
			for range n {
				p, err := s.BrowseOperations(ctx, nil, f, after, 7)
				if err != nil {
					t.Fatalf("BrowseOperations(%+v, %q): %v", f, after, err)
				}
				for _, r := range p.Rows {
					if seen[r.ID] {
						t.Fatalf("%+v: %s twice (after %q)", f, r.ID, after)
					}
					seen[r.ID] = true
					ids = append(ids, r.ID)
				}
				if after = p.Next; after == "" {
					return ids
				}
			}
			t.Fatalf("%+v: more pages than operations", f)
			return nil
		}
		id := func(x int) string { return fmt.Sprintf("op_bench%010d", x) }
		// Newest first: operation x was created x seconds before "now".
		want := func(match func(x int) bool) []string {
			var ids []string
			for x := range n {
				if match(x) {
					ids = append(ids, id(x))
				}
			}
			return ids
		}
		if got, all := walk(store.BrowseFilter{}), want(func(int) bool { return true }); !slices.Equal(got, all) {
			t.Errorf("all pages: %d rows %v…, want %d", len(got), got[:min(len(got), 10)], len(all))
		}
		if got, conf := walk(store.BrowseFilter{State: review.Confirmed}), want(func(x int) bool { return x >= open }); !slices.Equal(got, conf) {
			t.Errorf("confirmed pages: %d rows, want %d", len(got), len(conf))
		}
		if got, t3 := walk(store.BrowseFilter{Tenant: "bench-3"}), want(func(x int) bool { return x%10 == 3 }); !slices.Equal(got, t3) {
			t.Errorf("tenant pages: %d rows, want %d", len(got), len(t3))
		}

		// The search, against the same rule written out: key prefix,
		// source or resource ref containing the text, ASCII case aside.
		for _, q := range []string{"FILE-123.PDF", "123.pdf", "src-12", "key-29", "99", "7", ".PDF", "src-", "key-1", id(42), "no-such-ref"} {
			match := func(x int) bool {
				lq := strings.ToLower(q)
				refs := len(q) >= store.MinRefSearch // shorter: the id and the key prefix only
				return id(x) == q || strings.HasPrefix(fmt.Sprint("key-", x), q) || refs && strings.Contains(fmt.Sprint("src-", x), lq) ||
					refs && (x >= open && strings.Contains(fmt.Sprint("file-", x, ".pdf"), lq))
			}
			if got, w := walk(store.BrowseFilter{Search: q}), want(match); !slices.Equal(got, w) {
				t.Errorf("search %q: %v, want %v", q, got, w)
			}
		}
		p, err := s.BrowseOperations(ctx, nil, store.BrowseFilter{Search: "FILE-123.PDF"}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Rows) != 1 || p.Rows[0].ResourceRef.String != "file-123.pdf" || p.Rows[0].State != review.Confirmed {
			t.Errorf("resource ref search: %+v", p.Rows)
		}
		p, err = s.BrowseOperations(ctx, nil, store.BrowseFilter{}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		if p.Counts[review.Confirmed] != n-open || p.Counts[review.NeedsReview] != open || p.Total != n {
			t.Errorf("counts %v total %d", p.Counts, p.Total)
		}
		// A search matching more than its cap counts no state; one under
		// it counts each.
		p, err = s.BrowseOperations(ctx, nil, store.BrowseFilter{Search: "SRC-"}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Uncounted || !p.TotalCapped || len(p.Counts) != 0 || p.CountCap != store.BrowseSearchCountCap || len(p.Rows) != 50 || p.Rows[0].ID != id(0) {
			t.Errorf("search past the cap: uncounted %v capped %v counts %v cap %d, %d rows", p.Uncounted, p.TotalCapped, p.Counts, p.CountCap, len(p.Rows))
		}
		p, err = s.BrowseOperations(ctx, nil, store.BrowseFilter{Search: "src-1"}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		// src-1, src-1N, src-1NN, src-1000…1099: 1 + 10 + 100 + 100, the first open.
		if p.Uncounted || p.TotalCapped || p.Total != 211 || p.Counts[review.NeedsReview] != 11 || p.Counts[review.Confirmed] != 200 {
			t.Errorf("search under the cap: uncounted %v total %d counts %v", p.Uncounted, p.Total, p.Counts)
		}
	})
}

// TestBulkLoadAudit: store.BulkLoad writes each operation's
// operation.registered event, oldest first, about its tenant, hashed as
// every event is: the sealer seals the bulk trail (in checkpoints of at
// most a transaction's events on PostgreSQL) and it verifies, and a reader
// scoped to one tenant reads that tenant's events. Before, the bulk ledger
// had no trail, and limbo bench could not time the audit page.
func TestBulkLoadAudit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		const n = 12_345 // over one transaction of events
		if err := s.BulkLoad(ctx, n, 10); err != nil {
			t.Fatal(err)
		}
		evs, err := s.AuditEvents(ctx, 0, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != n {
			t.Fatalf("%d audit events, want %d", len(evs), n)
		}
		for i, ev := range evs {
			x := n - 1 - i // oldest first: the last operation was created first
			if ev.Action != "operation.registered" || ev.OperationID != fmt.Sprintf("op_bench%010d", x) || ev.Tenant != fmt.Sprintf("bench-%d", x%10) ||
				(i > 0 && !ev.At.After(evs[i-1].At)) {
				t.Fatalf("event %d: %+v; want op_bench%010d's registration, after the one before", i, ev, x)
			}
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("the bulk trail does not verify: %+v", rep)
		}
		page, _, err := s.SearchAudit(ctx, store.AuditFilter{Scope: []string{"bench-3"}}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 5 || page[0].OperationID != "op_bench0000000003" {
			t.Errorf("bench-3's reader reads %+v first; want op_bench0000000003's registration, the newest", page)
		}
	})
}
