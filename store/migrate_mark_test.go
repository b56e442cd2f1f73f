package store

import (
	"strings"
	"testing"
)

// TestIndexBuilds: a migration marked concurrentMark is read statement by
// statement, and one the mark does not fit is refused when the binary
// loads its migrations, not half applied on a large table.
func TestIndexBuilds(t *testing.T) {
	got, err := indexBuilds(concurrentMark + `
-- why
CREATE INDEX audit_events_at ON audit_events (at, seq);
create unique index one_key
    ON operations (tenant, key)
    WHERE key <> '';
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []indexBuild{
		{name: "audit_events_at", table: "audit_events", rest: "ON audit_events (at, seq)"},
		{name: "one_key", table: "operations", unique: true, rest: "ON operations (tenant, key) WHERE key <> ''"},
	}
	if len(got) != len(want) {
		t.Fatalf("indexBuilds = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("statement %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for name, body := range map[string]string{
		"another statement":  "ALTER TABLE operations ADD COLUMN x TEXT;",
		"already concurrent": "CREATE INDEX CONCURRENTLY a ON t (x);",
		"if not exists":      "CREATE INDEX IF NOT EXISTS a ON t (x);",
		"no name":            "CREATE INDEX ON t (x);",
		"a schema":           "CREATE INDEX a ON other.t (x);",
		"no semicolon":       "CREATE INDEX a ON t (x)",
		"two on a line":      "CREATE INDEX a ON t (x); CREATE INDEX b ON t (y);",
		"a comment after":    "CREATE INDEX a ON t (x); -- why",
		"a comment inside":   "CREATE INDEX a ON t (x) -- why\n;",
		"nothing":            "-- only words\n",
		"a transaction":      "BEGIN;\nCREATE INDEX a ON t (x);\nCOMMIT;",
		"a quoted name":      `CREATE INDEX "a" ON t (x);`,
		"an index then more": "CREATE INDEX a ON t (x);\nUPDATE t SET x = 1;",
	} {
		if got, err := indexBuilds(concurrentMark + "\n" + body); err == nil {
			t.Errorf("%s: indexBuilds = %+v, want it refused", name, got)
		}
	}

	// The marked migrations are the audit trail's indexes, the polls of
	// jobs in review and the cases the deadline sweeper visits again, read
	// as such.
	ms, err := migrationsFor(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	marked := map[int][]string{}
	for _, m := range ms {
		for _, ix := range m.indexes {
			marked[m.version] = append(marked[m.version], ix.table+"."+ix.name)
		}
	}
	if got := strings.Join([]string{strings.Join(marked[48], ","), strings.Join(marked[51], ","), strings.Join(marked[52], ","), strings.Join(marked[56], ","),
		strings.Join(marked[59], ",")}, " "); len(marked) != 5 ||
		got != "audit_events.audit_events_tenant audit_events.audit_events_person audit_events.audit_events_at,audit_events.audit_events_action operations.operations_review_job_poll cases.cases_reassess" {
		t.Errorf("marked migrations: %v", marked)
	}
}
