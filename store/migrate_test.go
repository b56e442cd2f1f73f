package store_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestMigrateSchemasShareTrigram migrates two Limbo schemas in one fresh
// PostgreSQL database, neither with public on its search_path, as two
// deployments (or a deployment and a bench run) can share a database. The
// second used to fail (pg_trgm's operator class was in the first schema,
// out of its reach), and dropping the first took the extension, and the
// second's trigram indexes, along.
func TestMigrateSchemasShareTrigram(t *testing.T) {
	ctx := context.Background()
	base := storetest.PostgresDatabase(t)
	db, err := sqlx.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	open := func(schema string) *store.Store {
		t.Helper()
		if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(base)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		st, err := store.Open(ctx, u.String(), store.Options{MaxConns: 2, AuditKey: storetest.AuditKey})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			t.Fatalf("migrate %s: %v", schema, err)
		}
		return st
	}
	trgmIndexes := func(schema string) int {
		var n int
		if err := db.Get(&n, `SELECT COUNT(*) FROM pg_indexes WHERE schemaname = $1 AND indexdef LIKE '%gin_trgm_ops%'`, schema); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := open("limbo_a")
	var where string
	if err := db.Get(&where, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'`); err != nil {
		t.Fatal(err)
	}
	if where != "public" {
		t.Errorf("pg_trgm made in %s, want public (shared by every schema of the database)", where)
	}
	b := open("limbo_b")
	defer b.Close()
	if trgmIndexes("limbo_a") != 2 || trgmIndexes("limbo_b") != 2 {
		t.Fatalf("trigram indexes: %d in limbo_a, %d in limbo_b, want 2 each", trgmIndexes("limbo_a"), trgmIndexes("limbo_b"))
	}
	a.Close()
	if _, err := db.Exec(`DROP SCHEMA limbo_a CASCADE`); err != nil {
		t.Fatal(err)
	}
	if trgmIndexes("limbo_b") != 2 {
		t.Errorf("dropping one schema took the other's trigram indexes: %d left", trgmIndexes("limbo_b"))
	}
	// The second schema still searches through them.
	if _, err := b.BrowseOperations(ctx, nil, store.BrowseFilter{Search: "nothing-here"}, "", 50); err != nil {
		t.Fatalf("search in limbo_b: %v", err)
	}
}
