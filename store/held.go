package store

import (
	"context"
	"fmt"
)

// heldTables are the tables only use fills: a freshly migrated database
// has no row in any of them. what names each in messages.
var heldTables = []struct{ table, what string }{
	{"operations", "operations"},
	{"audit_events", "audit events"},
	{"audit_checkpoints", "audit checkpoints"},
	{"users", "users"},
	{"api_tokens", "API tokens"},
	{"tenants", "tenants"},
	{"webhook_endpoints", "webhook endpoints"},
}

const (
	/* Store.tableExists (the schema may not be created yet); PostgreSQL
	   resolves the name through search_path, as every query does. */
	selectTableExistsSQLite   = `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	selectTableExistsPostgres = `SELECT COUNT(*) FROM (SELECT to_regclass($1) AS t) x WHERE t IS NOT NULL`
	/* Store.Held: whether a table holds a row; %s is a name from heldTables. */
	selectTableUsed = `SELECT COUNT(*) FROM (SELECT 1 FROM %s LIMIT 1) x`
)

// Held names, in words, the Limbo data the database holds: the tables of
// heldTables that have a row. It is empty for a database Limbo never
// wrote to, migrated or not. It reads only, so the benchmark and the fault
// run can refuse a real database before they write anything into it.
func (s *Store) Held(ctx context.Context) ([]string, error) {
	var held []string
	for _, t := range heldTables {
		exists, err := s.tableExists(ctx, t.table)
		if err != nil {
			return nil, fmt.Errorf("store.Held: %w", err)
		}
		if !exists {
			continue
		}
		var n int
		if err := s.db.GetContext(ctx, &n, fmt.Sprintf(selectTableUsed, t.table)); err != nil {
			return nil, fmt.Errorf("store.Held: %s: %w", t.table, err)
		}
		if n > 0 {
			held = append(held, t.what)
		}
	}
	return held, nil
}

// tableExists says whether the database has the table (a database not yet
// migrated has none of Limbo's).
func (s *Store) tableExists(ctx context.Context, table string) (bool, error) {
	q := selectTableExistsSQLite
	if s.engine == Postgres {
		q = selectTableExistsPostgres
	}
	var n int
	if err := s.db.GetContext(ctx, &n, q, table); err != nil {
		return false, err
	}
	return n > 0, nil
}
