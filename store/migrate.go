package store

import (
	"context"
	"database/sql"
	"errors"
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
	// A newer Limbo's migrations: this binary neither knows what they did
	// nor may run on what they made. Refused before anything is applied.
	var versions []int
	if err := conn.SelectContext(ctx, &versions, selectMigrationVersions); err != nil {
		return applied, fmt.Errorf("store.Migrate: %w", err)
	}
	if st := schemaOf(ms, true, versions); len(st.Unknown) > 0 {
		return applied, fmt.Errorf("store.Migrate: %w", st.Check())
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

// Errors of a database that this binary cannot work on as it is: Schema's
// Check returns them, Migrate returns ErrSchemaNewer, and Open with
// Options.Existing returns ErrNoDatabase for a SQLite file that is missing.
var (
	// ErrNoDatabase: there is no Limbo database there (no file, or no
	// schema_migrations table in it).
	ErrNoDatabase = errors.New("no Limbo database")
	// ErrSchemaBehind: migrations of this binary's are not applied yet.
	ErrSchemaBehind = errors.New("schema older than this Limbo")
	// ErrSchemaNewer: a newer Limbo migrated the database; this binary
	// does not know what its migrations changed.
	ErrSchemaNewer = errors.New("schema newer than this Limbo")
)

// schemaError is a sentence for a person, which errors.Is matches to its kind.
type schemaError struct {
	kind error
	msg  string
}

func (e *schemaError) Error() string { return e.msg }
func (e *schemaError) Unwrap() error { return e.kind }

// Schema is where a database's schema stands against this binary's migrations.
type Schema struct {
	// Exists: the database has a schema_migrations table. Without one it
	// is not (yet) a Limbo database.
	Exists bool
	// Version is the newest of this binary's migrations applied (0: none),
	// and Want the newest this binary has.
	Version, Want int
	// Missing counts this binary's migrations not applied.
	Missing int
	// Unknown lists applied versions this binary does not have, in order:
	// a newer Limbo migrated the database.
	Unknown []int
}

// Current: every migration of this binary's is applied, and none other.
func (sc Schema) Current() bool { return sc.Exists && sc.Missing == 0 && len(sc.Unknown) == 0 }

// Check is nil when the schema is current, else what is wrong with it
// (ErrNoDatabase, ErrSchemaNewer or ErrSchemaBehind), in words that say
// what to do.
func (sc Schema) Check() error {
	switch {
	case len(sc.Unknown) > 0:
		return &schemaError{ErrSchemaNewer, fmt.Sprintf("the database was migrated by a newer Limbo (version %d is unknown to this binary, which knows up to %d): run that version, or restore the backup taken before it", sc.Unknown[len(sc.Unknown)-1], sc.Want)}
	case !sc.Exists:
		return &schemaError{ErrNoDatabase, "no Limbo database (no schema_migrations table)"}
	case sc.Missing > 0:
		return &schemaError{ErrSchemaBehind, fmt.Sprintf("the database's schema is at %d, this limbo needs %d: run limbo migrate", sc.Version, sc.Want)}
	}
	return nil
}

// schemaOf compares the applied versions with ms.
func schemaOf(ms []migration, exists bool, applied []int) Schema {
	sc := Schema{Exists: exists}
	known := map[int]bool{}
	for _, m := range ms {
		known[m.version] = true
		sc.Want = max(sc.Want, m.version)
	}
	have := map[int]bool{}
	for _, v := range applied {
		have[v] = true
		if known[v] {
			sc.Version = max(sc.Version, v)
		} else {
			sc.Unknown = append(sc.Unknown, v)
		}
	}
	for _, m := range ms {
		if !have[m.version] {
			sc.Missing++
		}
	}
	sort.Ints(sc.Unknown)
	return sc
}

const (
	/* Store.Schema, Store.Migrate */
	selectMigrationVersions = `SELECT version FROM schema_migrations`
)

// Schema reads where the database's schema stands; it changes nothing.
func (s *Store) Schema(ctx context.Context) (Schema, error) {
	ms, err := migrationsFor(s.engine)
	if err != nil {
		return Schema{}, err
	}
	exists, err := s.tableExists(ctx, "schema_migrations")
	if err != nil {
		return Schema{}, fmt.Errorf("store.Schema: %w", err)
	}
	var applied []int
	if exists {
		if err := s.db.SelectContext(ctx, &applied, selectMigrationVersions); err != nil {
			return Schema{}, fmt.Errorf("store.Schema: %w", err)
		}
	}
	return schemaOf(ms, exists, applied), nil
}

// CheckSchema is nil when the schema is current, else Schema's Check,
// naming the database when it is not a Limbo database: for what works on
// a database as it is and must neither create nor migrate one.
func (s *Store) CheckSchema(ctx context.Context) error {
	sc, err := s.Schema(ctx)
	if err != nil {
		return err
	}
	if !sc.Exists && len(sc.Unknown) == 0 {
		return &schemaError{ErrNoDatabase, fmt.Sprintf("no Limbo database at %s (it has no schema_migrations table)", s.where)}
	}
	return sc.Check()
}

// SchemaCurrent reports whether every embedded migration has been applied
// (GET /readyz). Versions a newer Limbo applied do not count against it: a
// running instance keeps serving while a newer one migrates for a rolling
// upgrade; it is at start that an older binary refuses them.
func (s *Store) SchemaCurrent(ctx context.Context) (bool, error) {
	sc, err := s.Schema(ctx)
	if err != nil {
		return false, err
	}
	return sc.Exists && sc.Missing == 0, nil
}
