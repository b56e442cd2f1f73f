package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/limbo-dev/limbo/migrations"
)

// migration is one numbered step for this engine.
type migration struct {
	version int
	name    string
	sql     string
}

// migrationsFor lists the embedded migrations that apply to engine, in
// order: shared files plus this engine's twins.
func migrationsFor(engine Engine) ([]migration, error) {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]migration{}
	for _, f := range files {
		base := strings.TrimSuffix(f, ".sql")
		num, rest, ok := strings.Cut(base, "_")
		if !ok {
			return nil, fmt.Errorf("store.migrations: %s: want NNNN_name.sql", f)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("store.migrations: %s: %w", f, err)
		}
		if strings.HasSuffix(rest, "-postgres") && engine != Postgres ||
			strings.HasSuffix(rest, "-sqlite") && engine != SQLite {
			continue
		}
		if _, dup := byVersion[v]; dup {
			return nil, fmt.Errorf("store.migrations: two files for version %d", v)
		}
		body, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			return nil, err
		}
		byVersion[v] = migration{version: v, name: rest, sql: string(body)}
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

const createMigrationsTable = `
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMP NOT NULL
)`

// Migrate brings the schema up to date. Each migration runs in its own
// transaction together with its version row. On PostgreSQL an advisory lock
// keeps two starting instances from migrating at once.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.MigrateApplied(ctx)
	return err
}

// MigrateApplied is Migrate, and names the migrations it applied
// ("0032_operation_search"), in order: none when the schema was current.
func (s *Store) MigrateApplied(ctx context.Context) ([]string, error) {
	var applied []string
	ms, err := migrationsFor(s.engine)
	if err != nil {
		return nil, err
	}
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return applied, fmt.Errorf("store.Migrate: %w", err)
	}
	defer conn.Close()
	if s.engine == Postgres {
		var schema *string
		if err := conn.GetContext(ctx, &schema, `SELECT current_schema()`); err != nil {
			return applied, fmt.Errorf("store.Migrate: %w", err)
		}
		if schema == nil {
			return applied, fmt.Errorf("store.Migrate: no schema on the search_path exists; create it or fix search_path in the database URL")
		}
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext('migrate:' || current_schema()))`); err != nil {
			return applied, fmt.Errorf("store.Migrate: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('migrate:' || current_schema()))`)
	}
	if _, err := conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return applied, fmt.Errorf("store.Migrate: %w", err)
	}
	for _, m := range ms {
		var n int
		if err := conn.GetContext(ctx, &n, s.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version); err != nil {
			return applied, fmt.Errorf("store.Migrate: %w", err)
		}
		if n > 0 {
			continue
		}
		tx, err := conn.BeginTxx(ctx, &sql.TxOptions{})
		if err != nil {
			return applied, fmt.Errorf("store.Migrate: %w", err)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			tx.Rollback()
			return applied, fmt.Errorf("store.Migrate: %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
			m.version, m.name, s.now()); err != nil {
			tx.Rollback()
			return applied, fmt.Errorf("store.Migrate: %04d_%s: %w", m.version, m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return applied, fmt.Errorf("store.Migrate: %04d_%s: %w", m.version, m.name, err)
		}
		name := strings.TrimSuffix(m.name, "-"+string(s.engine)) // one name on both engines
		applied = append(applied, fmt.Sprintf("%04d_%s", m.version, name))
	}
	return applied, nil
}

// SchemaCurrent reports whether every embedded migration has been applied.
func (s *Store) SchemaCurrent(ctx context.Context) (bool, error) {
	ms, err := migrationsFor(s.engine)
	if err != nil {
		return false, err
	}
	var applied []int
	if err := s.db.SelectContext(ctx, &applied, `SELECT version FROM schema_migrations`); err != nil {
		// No table yet: nothing applied.
		return false, nil
	}
	have := map[int]bool{}
	for _, v := range applied {
		have[v] = true
	}
	for _, m := range ms {
		if !have[m.version] {
			return false, nil
		}
	}
	return true, nil
}
