package store_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
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

// TestSchemaCheck: Schema and CheckSchema say where a database stands —
// not a Limbo database, behind this binary, current, or migrated by a
// newer Limbo — and Migrate refuses the last, applying nothing. Before,
// Migrate called a schema with an unknown version up to date, and nothing
// told an empty database from an old one.
func TestSchemaCheck(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		st, err := store.Open(ctx, storetest.URL(t, e), store.Options{MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrNoDatabase) || !strings.Contains(err.Error(), "no schema_migrations table") {
			t.Errorf("empty database: CheckSchema = %v, want ErrNoDatabase", err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		sc, err := st.Schema(ctx)
		if err != nil || !sc.Current() || sc.Version != sc.Want || st.CheckSchema(ctx) != nil {
			t.Fatalf("migrated: Schema = %+v, %v; CheckSchema = %v; want current", sc, err, st.CheckSchema(ctx))
		}
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := st.DB().Exec(st.DB().Rebind(q), args...); err != nil {
				t.Fatal(err)
			}
		}
		exec(`DELETE FROM schema_migrations WHERE version = ?`, sc.Want)
		behind, err := st.Schema(ctx)
		if err != nil || behind.Current() || behind.Missing != 1 || behind.Version >= sc.Want {
			t.Fatalf("behind: Schema = %+v, %v", behind, err)
		}
		want := fmt.Sprintf("the database's schema is at %d, this limbo needs %d: run limbo migrate", behind.Version, sc.Want)
		if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaBehind) || err.Error() != want {
			t.Errorf("behind: CheckSchema = %v, want %q", err, want)
		}
		if ok, err := st.SchemaCurrent(ctx); ok || err != nil {
			t.Errorf("behind: SchemaCurrent = %v, %v", ok, err)
		}
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, sc.Want, "back", time.Now().UTC())
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, 9999, "from_the_future", time.Now().UTC())
		newer := func(err error) bool {
			return errors.Is(err, store.ErrSchemaNewer) && strings.Contains(err.Error(), "migrated by a newer Limbo (version 9999 is unknown")
		}
		if err := st.CheckSchema(ctx); !newer(err) {
			t.Errorf("newer: CheckSchema = %v, want ErrSchemaNewer naming 9999", err)
		}
		exec(`DELETE FROM schema_migrations WHERE version = ?`, sc.Want)
		if applied, err := st.MigrateApplied(ctx); !newer(err) || len(applied) != 0 {
			t.Errorf("newer: MigrateApplied = %v, %v; want ErrSchemaNewer and nothing applied", applied, err)
		}
		// /readyz: a running instance stays ready while a newer one migrates.
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, sc.Want, "back", time.Now().UTC())
		if ok, err := st.SchemaCurrent(ctx); !ok || err != nil {
			t.Errorf("newer: SchemaCurrent = %v, %v; want true (every migration of this binary's is applied)", ok, err)
		}
	})
}

// TestOpenSQLiteFile: Open creates a new SQLite database 0600 (it holds
// password and token hashes and payloads; SQLite made it 0644), leaves an
// existing file's mode alone, and with Existing refuses a missing file
// without creating it. A path it cannot use is named, with what is wrong.
func TestOpenSQLiteFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "limbo.db")
	if _, err := store.Open(ctx, "sqlite:"+path, store.Options{Existing: true}); !errors.Is(err, store.ErrNoDatabase) ||
		!strings.Contains(err.Error(), "no Limbo database at "+path) {
		t.Errorf("Existing, missing file: %v, want ErrNoDatabase naming %s", err, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Existing created %s: %v", path, err)
	}
	st, err := store.Open(ctx, "sqlite:"+path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", f, fi.Mode(), err)
		}
	}
	st.Close()
	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(other, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if st, err := store.Open(ctx, "sqlite:"+other, store.Options{Existing: true}); err != nil {
		t.Fatal(err)
	} else {
		st.Close()
	}
	if fi, err := os.Stat(other); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("an existing file's mode changed: %v, %v", fi.Mode(), err)
	}
	for url, want := range map[string]string{
		"sqlite:" + filepath.Join(dir, "no-dir", "x.db"): "its directory " + filepath.Join(dir, "no-dir") + " does not exist",
		"sqlite://tmp/x.db": `not a host ("tmp"): write sqlite:/tmp/x.db`,
		"sqlite:":           "sqlite: needs a file path",
		"sqlite:" + dir:     dir + " is a directory",
		"sqlite:" + filepath.Join(dir, "q.db") + "?mode=x": filepath.Join(dir, "q.db"),
	} {
		if st, err := store.Open(ctx, url, store.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", url, err, want)
			if st != nil {
				st.Close()
			}
		}
	}
}

// TestMigrateBuildsIndexesConcurrently: on PostgreSQL, a migration that
// only builds indexes (migrations 0048, 0051, 0052, marked so) builds them
// with CREATE INDEX CONCURRENTLY on a table holding many rows, so that a
// rolling upgrade's migration does not stop the serving instances'
// writes: a registration, which writes its audit event, goes through
// while the index on audit_events waits for an older transaction. Before,
// CREATE INDEX's lock queued every write behind it, for as long as the
// build took (tens of seconds at ten million events). An invalid index an
// interrupted build left is dropped and built again.
func TestMigrateBuildsIndexesConcurrently(t *testing.T) {
	ctx := context.Background()
	base := storetest.PostgresDatabase(t)
	st, err := store.Open(ctx, base, store.Options{MaxConns: 4, AuditKey: storetest.AuditKey})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := st.DB()
	for _, src := range []string{"doc-1", "doc-2"} {
		if _, _, err := st.Register(ctx, intention(src, review.RiskIdempotentWrite, "keyed")); err != nil {
			t.Fatal(err)
		}
	}
	// 0052 as if not applied yet, and a build of audit_events_at that
	// was interrupted: a unique index meeting duplicates stays invalid.
	for _, q := range []string{`DROP INDEX audit_events_at`, `DROP INDEX audit_events_action`, `DELETE FROM schema_migrations WHERE version = 52`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`CREATE UNIQUE INDEX CONCURRENTLY audit_events_at ON audit_events ((1))`); err == nil {
		t.Fatal("the unique index over two events was built")
	}
	// Two events are "many" here.
	store.SetConcurrentRowsForTest(st, 1)

	// An older transaction, which the build waits for.
	older, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback()
	var olderPID int
	if err := older.Get(&olderPID, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if _, err := older.Exec(`LOCK TABLE audit_events IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		applied []string
		err     error
	}
	done := make(chan result, 1)
	var steps []store.MigrationStep
	go func() {
		applied, err := st.MigrateReporting(ctx, func(m store.MigrationStep) { steps = append(steps, m) })
		done <- result{applied, err}
	}()
	// The migration's statement waits for it.
	var waiting string
	for deadline := time.Now().Add(30 * time.Second); waiting == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var qs []string
		if err := db.Select(&qs, `SELECT query FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, olderPID); err != nil {
			t.Fatal(err)
		}
		if len(qs) > 0 {
			waiting = qs[0]
		}
	}
	if waiting == "" {
		t.Fatal("the migration never waited for the older transaction")
	}
	t.Logf("waiting: %s", waiting)

	// Meanwhile an integrator registers: it is answered.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, _, err = st.Register(wctx, intention("doc-3", review.RiskIdempotentWrite, "keyed"))
	cancel()
	if err != nil {
		t.Errorf("a registration while the index was built (%s): %v", waiting, err)
	}

	if err := older.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.applied) != 1 || r.applied[0] != "0052_audit_events_at_action" {
			t.Fatalf("MigrateApplied = %v, %v; want 0052_audit_events_at_action", r.applied, r.err)
		}
		if len(steps) != 2 || !steps[0].Concurrently || !steps[0].Upgrade || !steps[1].Concurrently || !steps[1].Done {
			t.Errorf("steps reported: %+v, want 0052 started and done, concurrently, as an upgrade", steps)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the migration did not end once the older transaction had")
	}
	var defs []string
	if err := db.Select(&defs, `SELECT pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' ELSE ' INVALID' END
		FROM pg_index i WHERE i.indexrelid IN (to_regclass('audit_events_at'), to_regclass('audit_events_action')) ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if len(defs) != 2 || !strings.Contains(defs[1], "audit_events_at ON public.audit_events USING btree (at, seq)") ||
		!strings.Contains(defs[0], "audit_events_action ON public.audit_events USING btree (action, seq) WHERE") ||
		strings.Contains(strings.Join(defs, " "), "INVALID") {
		t.Errorf("indexes after the migration: %q", defs)
	}
	if rep := storetest.Sealed(t, st); !rep.OK {
		t.Errorf("audit trail: %+v", rep)
	}
}

// TestMigrateReports: MigrateReporting tells each migration as it starts
// and once applied, in order, naming what it returns; a new database's
// are not an upgrade, and a migration applied to a database migrated
// before is (serve and limbo migrate name those one by one).
func TestMigrateReports(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		st, err := store.Open(ctx, storetest.URL(t, e), store.Options{MaxConns: 2, AuditKey: storetest.AuditKey})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var steps []store.MigrationStep
		record := func(m store.MigrationStep) { steps = append(steps, m) }
		applied, err := st.MigrateReporting(ctx, record)
		if err != nil || len(applied) < 40 || len(steps) != 2*len(applied) {
			t.Fatalf("a new database: %d applied, %d steps, %v", len(applied), len(steps), err)
		}
		for i, name := range applied {
			start, done := steps[2*i], steps[2*i+1]
			if start.Name != name || done.Name != name || start.Done || !done.Done || start.Upgrade || done.Upgrade ||
				start.Concurrently || done.Concurrently || start.Took != 0 || done.Took <= 0 {
				t.Errorf("migration %s: steps %+v then %+v", name, start, done)
			}
		}

		// An upgrade: 0052 not yet applied to a database migrated before.
		for _, q := range []string{`DROP INDEX audit_events_at`, `DROP INDEX audit_events_action`, `DELETE FROM schema_migrations WHERE version = 52`} {
			if _, err := st.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		steps = nil
		applied, err = st.MigrateReporting(ctx, record)
		want := []store.MigrationStep{{Name: "0052_audit_events_at_action", Upgrade: true}, {Name: "0052_audit_events_at_action", Upgrade: true, Done: true}}
		if err != nil || len(applied) != 1 || applied[0] != want[0].Name || len(steps) != 2 || steps[1].Took <= 0 {
			t.Fatalf("an upgrade: applied %v, %v; steps %+v", applied, err, steps)
		}
		steps[1].Took = 0
		if steps[0] != want[0] || steps[1] != want[1] {
			t.Errorf("an upgrade's steps: %+v, want %+v", steps, want)
		}
		if applied, err := st.MigrateReporting(ctx, record); err != nil || len(applied) != 0 || len(steps) != 2 {
			t.Errorf("a current schema: applied %v, %v; %d steps", applied, err, len(steps))
		}
	})
}

// TestMigrateReadsAcceptedJobsAgain: evidence recorded before 0057 took a
// job accepted for an effect confirmed. The migration reads such rows as
// the store writes them now (inconclusive), and leaves a success that
// named its resource confirming.
func TestMigrateReadsAcceptedJobsAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		job := b.register(t, intention("doc-job", review.RiskCompensableWrite, "transform"))
		b.start(t, job)
		b.report(t, job, 1, accepted("job-1"))
		done := b.register(t, intention("doc-done", review.RiskCompensableWrite, "transform"))
		b.start(t, done)
		b.report(t, done, 1, success("file-1"))

		db := b.s.DB()
		for _, q := range []string{`UPDATE evidence SET verdict = 'confirms' WHERE source = 'response'`,
			`DELETE FROM schema_migrations WHERE version = 57`} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.s.Migrate(b.ctx); err != nil {
			t.Fatal(err)
		}
		for op, want := range map[*review.Operation]review.Verdict{job: review.VerdictInconclusive, done: review.VerdictConfirms} {
			got := b.get(t, op).Evidence
			if len(got) != 1 || got[0].Verdict != want {
				t.Errorf("%s: evidence %+v, want one response that %s", op.SourceRef, got, want)
			}
		}
	})
}

// TestMigrateSchedulesOpenCases: cases open before 0058 had no time to be
// assessed again. The migration schedules each one not yet told its
// deadline passed, at that deadline: one whose deadline passed before the
// upgrade gets deadline_expired at the next sweep, one whose deadline is
// ahead when it passes.
func TestMigrateSchedulesOpenCases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, _ := searchable(t, e, "plain")
		inReview := func(ref string, deadline time.Time) *store.Case {
			r := intention(ref, review.RiskIrreversible, "plain")
			r.Deadline = &deadline
			_, c := b.inReview(t, r, true)
			return c
		}
		passed := inReview("doc-passed", b.clk.Now().Add(time.Hour))
		ahead := inReview("doc-ahead", b.clk.Now().Add(5*time.Hour))
		b.clk.Advance(2 * time.Hour)

		// The schema as it was before 0058.
		for _, q := range []string{`DROP INDEX cases_reassess`, `ALTER TABLE cases DROP COLUMN reassess_at`,
			`DELETE FROM schema_migrations WHERE version IN (58, 59)`} {
			exec(t, b.s, q)
		}
		if err := b.s.Migrate(b.ctx); err != nil {
			t.Fatal(err)
		}
		expired := func(c *store.Case) bool {
			t.Helper()
			got, err := b.s.GetCase(b.ctx, c.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(got.Reasons, review.ReasonDeadlineExpired) && got.RecommendedAction == review.RecommendFail
		}
		if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		if !expired(passed) || expired(ahead) {
			t.Errorf("the first sweep after the upgrade: passed %v, ahead %v; want only the case whose deadline passed told so", expired(passed), expired(ahead))
		}
		b.clk.Advance(4 * time.Hour)
		if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		if !expired(ahead) {
			t.Error("the case whose deadline passed after the upgrade was not told so")
		}
	})
}

// TestMigrateRanksOpenCasesByAge: a case open at the upgrade to 0060 (its
// operation far from any deadline, so nothing scheduled) is ranked by its
// age at the first sweep after it, with no new version, and scheduled for
// the next step of age. Before 0060, age counted only when something else
// assessed a case.
func TestMigrateRanksOpenCasesByAge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, _ := searchable(t, e, "plain")
		r := intention("doc-old", review.RiskIrreversible, "plain")
		far := b.clk.Now().Add(7 * 24 * time.Hour)
		r.Deadline = &far
		_, c := b.inReview(t, r, true)
		created := c.OpenedAt
		b.clk.Advance(5 * time.Hour)

		// As the case was before 0060: nothing scheduled for its age.
		exec(t, b.s, `UPDATE cases SET reassess_at = NULL`)
		exec(t, b.s, `DELETE FROM schema_migrations WHERE version = 60`)
		if err := b.s.Migrate(b.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.ExpireDeadlines(b.ctx); err != nil {
			t.Fatal(err)
		}
		got, err := b.s.GetCase(b.ctx, c.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		next := created.Add(12 * time.Hour)
		if got.Priority != c.Priority+4 || got.Version != c.Version || got.ReassessAt == nil || !got.ReassessAt.Equal(next) {
			t.Errorf("the case after the first sweep: priority %d, version %d, next at %v; want %d (four hours' wait), %d, %s",
				got.Priority, got.Version, got.ReassessAt, c.Priority+4, c.Version, next)
		}
	})
}
