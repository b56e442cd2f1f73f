package store_test

import (
	"fmt"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// TestSearchAfterVacuum: the SQLite search index (FTS5, external content
// keyed by operations' rowid, migration 0032) still matches its rows
// after an operator's VACUUM. operations has a text primary key, and
// SQLite's documentation allows VACUUM to renumber the rowids of such a
// table; this proves the engine Limbo ships keeps them, so the index
// stays true (FTS5's own integrity check agrees), and searches find the
// same operations as before.
func TestSearchAfterVacuum(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	// SQLite only: PostgreSQL's trigram indexes are ordinary indexes.
	for i := range 40 {
		r := intention(fmt.Sprintf("Vacuum-Ref-%03d", i), review.RiskCompensableWrite, "plain")
		r.Key = fmt.Sprintf("vacuum-key-%08d", i)
		b.register(t, r)
	}
	search := func(q string) []string {
		t.Helper()
		p, err := b.s.BrowseOperations(b.ctx, nil, store.BrowseFilter{Search: q}, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range p.Rows {
			out = append(out, r.ID)
		}
		return out
	}
	before := search("ref-01")
	if len(before) != 10 {
		t.Fatalf("before VACUUM: %d operations match ref-01, want 10", len(before))
	}
	db := b.s.DB()
	if _, err := db.ExecContext(b.ctx, `VACUUM`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(b.ctx, `INSERT INTO operations_search (operations_search) VALUES ('integrity-check')`); err != nil {
		t.Fatalf("the search index no longer matches operations after VACUUM: %v", err)
	}
	after := search("ref-01")
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after VACUUM: %v, before %v", after, before)
	}
}
