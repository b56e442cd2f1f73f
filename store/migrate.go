package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/migrations"
)

// migration is one numbered step for this engine.
type migration struct {
	version int
	name    string
	sql     string
	// indexes are the indexes a migration marked concurrentMark builds,
	// nothing else: on PostgreSQL, on a table already holding many rows,
	// they are built without blocking its writes (buildConcurrently).
	indexes []indexBuild
}

// concurrentMark, a migration's first line, says it only builds indexes,
// each with one "CREATE [UNIQUE] INDEX name ON table …" statement ending
// in a semicolon at the end of a line.
//
// A rolling upgrade migrates while the older instances keep serving
// (SchemaCurrent). CREATE INDEX holds a lock on its table that stops its
// writes until the index is built: on audit_events, which every audited
// call writes, tens of seconds at ten million events, in which no call is
// answered. CREATE INDEX CONCURRENTLY lets them go on. It waits for every
// older transaction of the database, though, so it is used only where the
// lock would be long: a table of more than Store.concurrentRows rows. A
// new or small table gets the plain statement, in the migration's
// transaction. SQLite, one process's, always has the plain statement.
const concurrentMark = "-- limbo: indexes, built concurrently on a large PostgreSQL table"

// indexBuild is one statement of a concurrentMark migration.
type indexBuild struct {
	name, table string
	unique      bool
	rest        string // from ON to the statement's end, without the semicolon
}

var createIndexStatement = regexp.MustCompile(`(?is)^CREATE\s+(UNIQUE\s+)?INDEX\s+([a-z_][a-z0-9_]*)\s+(ON\s+([a-z_][a-z0-9_]*)[\s(].*)$`)

// indexBuilds parses the statements of a concurrentMark migration.
func indexBuilds(body string) ([]indexBuild, error) {
	var out []indexBuild
	var stmt strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		stmt.WriteString(t)
		stmt.WriteByte(' ')
		if !strings.HasSuffix(t, ";") {
			continue
		}
		text := strings.TrimSuffix(strings.TrimSpace(stmt.String()), ";")
		stmt.Reset()
		m := createIndexStatement.FindStringSubmatch(text)
		if m == nil || strings.Contains(text, ";") || strings.Contains(text, "--") {
			return nil, fmt.Errorf("%q: want CREATE [UNIQUE] INDEX name ON table … alone, ending its line with a semicolon", text)
		}
		out = append(out, indexBuild{name: strings.ToLower(m[2]), table: strings.ToLower(m[4]), unique: m[1] != "", rest: m[3]})
	}
	if strings.TrimSpace(stmt.String()) != "" {
		return nil, fmt.Errorf("%q: no semicolon at its end", strings.TrimSpace(stmt.String()))
	}
	if len(out) == 0 {
		return nil, errors.New("no index to build")
	}
	return out, nil
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
		m := migration{version: v, name: rest, sql: string(body)}
		if strings.HasPrefix(m.sql, concurrentMark+"\n") {
			if m.indexes, err = indexBuilds(m.sql); err != nil {
				return nil, fmt.Errorf("store.migrations: %s: %w", f, err)
			}
		}
		byVersion[v] = m
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
	return s.MigrateReporting(ctx, nil)
}

// MigrationStep is Migrate's account of one migration, given to
// MigrateReporting's report as the migration starts and once it is
// applied: one may take minutes (an index over a large table), and the
// person upgrading should know what the process is doing meanwhile.
type MigrationStep struct {
	// Name is the migration's, the same on both engines
	// ("0052_audit_events_at_action").
	Name string
	// Upgrade: the schema had migrations applied before this run (false
	// for a new database, whose migrations take no time worth reporting
	// one by one).
	Upgrade bool
	// Concurrently: its indexes are built with CREATE INDEX CONCURRENTLY
	// (a large PostgreSQL table), its table's writes going on meanwhile.
	Concurrently bool
	// Done is false as it starts, true once it is applied; Took is then
	// how long it took.
	Done bool
	Took time.Duration
}

// MigrateReporting is MigrateApplied, calling report (when not nil) as
// each migration starts and once it is applied.
func (s *Store) MigrateReporting(ctx context.Context, report func(MigrationStep)) ([]string, error) {
	if report == nil {
		report = func(MigrationStep) {}
	}
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
		concurrently, err := s.buildsConcurrently(ctx, conn, m)
		if err != nil {
			return applied, fmt.Errorf("store.Migrate: %04d_%s: %w", m.version, m.name, err)
		}
		step := MigrationStep{Name: fmt.Sprintf("%04d_%s", m.version, strings.TrimSuffix(m.name, "-"+string(s.engine))),
			Upgrade: len(versions) > 0, Concurrently: concurrently}
		report(step)
		started := time.Now()
		if err := s.applyMigration(ctx, conn, m, concurrently); err != nil {
			return applied, fmt.Errorf("store.Migrate: %04d_%s: %w", m.version, m.name, err)
		}
		step.Done, step.Took = true, time.Since(started)
		report(step)
		applied = append(applied, step.Name)
	}
	return applied, nil
}

// applyMigration applies m and records its version: in one transaction,
// or, building its indexes concurrently, statement by statement.
func (s *Store) applyMigration(ctx context.Context, conn *sqlx.Conn, m migration, concurrently bool) error {
	if concurrently {
		return s.buildConcurrently(ctx, conn, m)
	}
	tx, err := conn.BeginTxx(ctx, &sql.TxOptions{})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.ExecContext(ctx, s.rebind(insertMigrationVersion), m.version, m.name, s.now()); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// defaultConcurrentRows is how many rows a table holds before a
// concurrentMark migration builds its indexes concurrently
// (Store.concurrentRows): below it, the plain statement's lock lasts a
// fraction of a second.
const defaultConcurrentRows = 100_000

// buildsConcurrently reports whether m builds its indexes concurrently: a
// concurrentMark migration on PostgreSQL whose tables hold more than
// s.concurrentRows rows between them. Counting stops there.
func (s *Store) buildsConcurrently(ctx context.Context, conn *sqlx.Conn, m migration) (bool, error) {
	if s.engine != Postgres || m.indexes == nil {
		return false, nil
	}
	seen := map[string]bool{}
	for _, ix := range m.indexes {
		if seen[ix.table] {
			continue
		}
		seen[ix.table] = true
		var n int64
		// The table's name is the migration's own, checked by indexBuilds.
		if err := conn.GetContext(ctx, &n, `SELECT COUNT(*) FROM (SELECT 1 FROM `+ix.table+` LIMIT $1) AS t`, s.concurrentRows+1); err != nil {
			return false, err
		}
		if n > s.concurrentRows {
			return true, nil
		}
	}
	return false, nil
}

// buildConcurrently builds m's indexes with CREATE INDEX CONCURRENTLY, one
// statement at a time outside a transaction (it cannot run in one), then
// records m as applied. A build that was interrupted (the process stopped,
// a unique index met a duplicate) leaves an invalid index of that name,
// which the next run drops and builds again; one built whole before the
// version row was written is kept.
func (s *Store) buildConcurrently(ctx context.Context, conn *sqlx.Conn, m migration) error {
	for _, ix := range m.indexes {
		var valid []bool
		if err := conn.SelectContext(ctx, &valid, `SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`, ix.name); err != nil {
			return err
		}
		if len(valid) == 1 && !valid[0] {
			if _, err := conn.ExecContext(ctx, `DROP INDEX CONCURRENTLY `+ix.name); err != nil {
				return fmt.Errorf("dropping the invalid index %s a build left: %w", ix.name, err)
			}
		}
		create := "CREATE INDEX CONCURRENTLY IF NOT EXISTS "
		if ix.unique {
			create = "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "
		}
		if _, err := conn.ExecContext(ctx, create+ix.name+" "+ix.rest); err != nil {
			return err
		}
	}
	_, err := conn.ExecContext(ctx, s.rebind(insertMigrationVersion),
		m.version, m.name, s.now())
	return err
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
	/* Store.Migrate */
	insertMigrationVersion = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`
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
