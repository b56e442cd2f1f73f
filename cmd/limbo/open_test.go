package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/internal/testlog"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// adminCommands are the commands that work on a database as it is: each
// must neither create nor migrate one. cfg is a configuration file.
func adminCommands(db, cfg string) [][]string {
	pub := auditkey.EncodePub(storetest.AuditKey.Public().(ed25519.PublicKey))
	return [][]string{
		{"token", "create", "--tenant", "acme", "--db", db},
		{"user", "add", "--email", "ada@example.com", "--role", "admin", "--db", db},
		{"purge", "--dry-run", "--config", cfg, "--db", db},
		{"purge", "--config", cfg, "--db", db},
		{"audit", "verify", "--pubkey", pub, "--db", db},
		{"audit", "verify", "--db", db}, // no key: the database is looked at first
		{"audit", "export", "--db", db},
	}
}

// emptyConfig writes a configuration file with a retention, for purge.
func emptyConfig(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "limbo.yaml")
	if err := os.WriteFile(f, []byte("payload_retention: 720h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// migrations counts db's schema_migrations rows and names the newest;
// -1 when it has no such table. (Plain SQL: what the store would say is
// under test.)
func migrations(t *testing.T, db string) (n, newest int) {
	t.Helper()
	st, err := store.Open(context.Background(), db, store.Options{MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var row struct {
		N      int `db:"n"`
		Newest int `db:"newest"`
	}
	if err := st.DB().Get(&row, `SELECT COUNT(*) AS n, COALESCE(MAX(version), 0) AS newest FROM schema_migrations`); err != nil {
		return -1, 0
	}
	return row.N, row.Newest
}

// TestCLIOpensNoNewDatabase: an admin command given a database that is not
// there (a mistyped --db or LIMBO_DB, a schema never migrated) says so and
// creates nothing; bad input is refused before anything is opened. Only
// serve and migrate create a database, migrate's 0600. Before, `echo
// longpassword123 | limbo user add …` in an empty directory said "user
// added" into a new, world-readable ./limbo.db.
func TestCLIOpensNoNewDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		db := storetest.URL(t, e)
		file := strings.TrimPrefix(db, "sqlite:")
		for _, args := range adminCommands(db, emptyConfig(t)) {
			code, _, errOut := limbo(t, args...)
			if code != 2 || !strings.Contains(errOut, "no Limbo database at ") || !strings.Contains(errOut, "give --db or LIMBO_DB, or run limbo migrate to create one") {
				t.Errorf("%s: code %d, stderr %q; want 2, no Limbo database", strings.Join(args[:2], " "), code, errOut)
			}
		}
		for _, bad := range [][]string{
			{"user", "add", "--email", "ada@example.com", "--role", "god", "--db", db},
			{"token", "create", "--tenant", "a,b", "--db", db},
		} {
			if code, _, errOut := limbo(t, bad...); code != 2 || strings.Contains(errOut, "no Limbo database") || !strings.Contains(errOut, "invalid input") {
				t.Errorf("%s: code %d, stderr %q; want the input refused before the database is opened", strings.Join(bad, " "), code, errOut)
			}
		}
		if e == store.SQLite {
			if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("an admin command created %s: %v", file, err)
			}
		} else if n, _ := migrations(t, db); n != -1 {
			t.Fatalf("an admin command created the schema: %d migrations", n)
		}
		if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
			t.Fatalf("migrate: %d %s", code, errOut)
		}
		if e == store.SQLite {
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("migrate created %s: %v, %v; want mode 0600", file, fi.Mode(), err)
			}
		}
		if code, out, errOut := limbo(t, "user", "add", "--email", "ada@example.com", "--role", "admin", "--db", db); code != 0 || !strings.Contains(out, "added") {
			t.Errorf("user add on the migrated database: code %d, stderr %q", code, errOut)
		}
	})
}

// TestCLIRefusesSchemaNotCurrent: admin commands refuse a schema behind
// this binary (run limbo migrate) and migrate nothing; every command,
// migrate and serve among them, refuses a schema a newer Limbo migrated.
// Before, `purge --dry-run` migrated an old schema, and an older binary
// called a newer schema up to date and served on it.
func TestCLIRefusesSchemaNotCurrent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
			t.Fatalf("migrate: %d %s", code, errOut)
		}
		st, err := store.Open(ctx, db, store.Options{MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := st.DB().Exec(st.DB().Rebind(q), args...); err != nil {
				t.Fatal(err)
			}
		}
		_, newest := migrations(t, db)
		exec(`DELETE FROM schema_migrations WHERE version = ?`, newest)
		behind, _ := migrations(t, db)
		for _, args := range adminCommands(db, emptyConfig(t)) {
			code, _, errOut := limbo(t, args...)
			if code != 2 || !strings.Contains(errOut, "this limbo needs") || !strings.Contains(errOut, "run limbo migrate") {
				t.Errorf("%s on an old schema: code %d, stderr %q; want 2, run limbo migrate", strings.Join(args[:2], " "), code, errOut)
			}
		}
		if n, _ := migrations(t, db); n != behind {
			t.Fatalf("an admin command migrated: %d migrations, was %d", n, behind)
		}

		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, newest, "back", time.Now().UTC())
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, 9999, "from_the_future", time.Now().UTC())
		keyFile := filepath.Join(t.TempDir(), "audit-key")
		if code, _, errOut := limbo(t, "audit", "keygen", "--out", keyFile); code != 0 {
			t.Fatalf("keygen: %d %s", code, errOut)
		}
		cmds := append(adminCommands(db, emptyConfig(t)), []string{"migrate", "--db", db},
			[]string{"serve", "--db", db, "--db-max-conns", "4", "--addr", "127.0.0.1:0", "--audit-key", keyFile})
		for _, args := range cmds {
			// serve on a schema it accepts serves until ctx ends, exit 0.
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			var out, errb testlog.Buffer
			code := run(ctx, args, strings.NewReader(""), &out, &errb)
			cancel()
			if errOut := errb.String(); code != 2 || !strings.Contains(errOut, "migrated by a newer Limbo (version 9999 is unknown to this binary") {
				t.Errorf("%s on a newer schema: code %d, stderr %q; want 2, a newer Limbo", strings.Join(args[:2], " "), code, tail(errOut, 3))
			}
		}
	})
}
