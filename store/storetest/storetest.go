// Package storetest opens fresh, migrated databases for tests, on every
// engine available: SQLite always; PostgreSQL when reachable, and required
// when LIMBO_REQUIRE_POSTGRES=1 (set by .ci/run, where a skip is a failure).
//
// PostgreSQL is found at LIMBO_TEST_POSTGRES, default
// postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable;
// every test gets its own schema in a shared database, dropped afterwards.
//
// LIMBO_TEST_ICU_LOCALE (an ICU locale such as en-US) puts that shared
// database under the locale's collation instead of the server's default:
// a stock server initialised under LANG=en_US.UTF-8 sorts and compares text
// that way, where SQLite and a C-locale server compare bytes. .ci/run runs
// the store's race pass so.
package storetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver for admin connections

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/store"
)

// DefaultPostgres is where tests look for PostgreSQL when LIMBO_TEST_POSTGRES is unset.
const DefaultPostgres = "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"

// MaxConns is the pool size of every store a test opens (store.Options
// MaxConns): Open and OpenTemp use it unless told otherwise, and a test
// calling store.Open passes it. The suite shares one PostgreSQL server with
// whatever else is connected to it (.ci/run holds 70 of a stock server's
// 100 connections), so each store keeps to a few connections; concurrent
// callers queue for them.
const MaxConns = 4

// admin opens a connection to url for creating and dropping test
// databases and schemas: one connection, not kept when idle.
func admin(url string) (*sqlx.DB, error) {
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(0)
	return db, nil
}

// Engines lists the engines to run store tests on.
func Engines(t testing.TB) []store.Engine {
	if pgAvailable(t) {
		return []store.Engine{store.SQLite, store.Postgres}
	}
	return []store.Engine{store.SQLite}
}

var (
	pgOnce sync.Once
	pgErr  error

	dbOnce sync.Once
	dbURL  string
	dbErr  error
)

// testDatabase makes sure the shared test database exists and returns its URL.
func testDatabase(t testing.TB) string {
	dbOnce.Do(func() {
		db, err := admin(adminURL())
		if err != nil {
			dbErr = err
			return
		}
		defer db.Close()
		name, create, err := sharedDatabase(os.Getenv("LIMBO_TEST_ICU_LOCALE"))
		if err != nil {
			dbErr = err
			return
		}
		var n int
		if dbErr = db.Get(&n, `SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name); dbErr != nil {
			return
		}
		if n == 0 {
			if _, err := db.Exec(create); err != nil {
				// Another test binary may have created it meanwhile.
				if dbErr = db.Get(&n, `SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name); dbErr == nil && n == 0 {
					dbErr = err
				}
			}
		}
		u, _ := url.Parse(adminURL())
		u.Path = "/" + name
		dbURL = u.String()
		// pg_trgm (migration 0032) once for the whole database, in public,
		// which every test's search_path names after its own schema: made
		// in a test's schema it would go with that schema's DROP CASCADE,
		// taking the other tests' trigram indexes along.
		tdb, err := admin(dbURL)
		if err != nil {
			dbErr = err
			return
		}
		defer tdb.Close()
		if _, err := tdb.Exec(`CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public`); err != nil {
			// Another test binary may have created it meanwhile.
			if dbErr = tdb.Get(&n, `SELECT COUNT(*) FROM pg_extension WHERE extname = 'pg_trgm'`); dbErr == nil && n == 0 {
				dbErr = err
			}
		}
	})
	if dbErr != nil {
		t.Fatalf("storetest: test database: %v", dbErr)
	}
	return dbURL
}

// sharedDatabase names the shared test database and the statement that
// creates it: limbo_test under the server's default collation, or, given
// an ICU locale, a database of that locale's own.
func sharedDatabase(icuLocale string) (name, create string, err error) {
	if icuLocale == "" {
		return "limbo_test", `CREATE DATABASE limbo_test`, nil
	}
	for _, r := range icuLocale {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "", "", fmt.Errorf("LIMBO_TEST_ICU_LOCALE %q: want an ICU locale such as en-US", icuLocale)
		}
	}
	name = "limbo_test_icu_" + strings.ToLower(strings.ReplaceAll(icuLocale, "-", "_"))
	return name, `CREATE DATABASE ` + name + ` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '` + icuLocale + `'`, nil
}

func adminURL() string {
	if u := os.Getenv("LIMBO_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultPostgres
}

func pgAvailable(t testing.TB) bool {
	pgOnce.Do(func() {
		db, err := admin(adminURL())
		if err != nil {
			pgErr = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		pgErr = db.PingContext(ctx)
	})
	if pgErr != nil {
		if os.Getenv("LIMBO_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("storetest: PostgreSQL is required (LIMBO_REQUIRE_POSTGRES=1) but unreachable at %s: %v", adminURL(), pgErr)
		}
		t.Logf("storetest: PostgreSQL unreachable, running SQLite only: %v", pgErr)
		return false
	}
	return true
}

// URL creates a fresh, empty database on engine and returns its URL. It is
// removed when the test ends.
func URL(t testing.TB, engine store.Engine) string {
	t.Helper()
	u, drop := fresh(t, engine)
	t.Cleanup(drop)
	return u
}

// fresh creates a fresh, empty database on engine; drop removes it.
func fresh(t testing.TB, engine store.Engine) (string, func()) {
	t.Helper()
	switch engine {
	case store.SQLite:
		dir, err := os.MkdirTemp("", "limbo-test-")
		if err != nil {
			t.Fatal(err)
		}
		return "sqlite:" + filepath.Join(dir, "limbo.db"), func() { os.RemoveAll(dir) }
	case store.Postgres:
		if !pgAvailable(t) {
			t.Skip("PostgreSQL unavailable")
		}
		// A schema per test in one shared database: CREATE DATABASE takes
		// a second or two, CREATE SCHEMA a millisecond.
		base := testDatabase(t)
		var b [6]byte
		rand.Read(b[:])
		schema := "t_" + hex.EncodeToString(b[:])
		// The admin connection is closed at once and opened again to drop
		// the schema, so a running test holds only its store's connections.
		db, err := admin(base)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec(`CREATE SCHEMA ` + schema)
		db.Close()
		if err != nil {
			t.Fatalf("storetest: create schema: %v", err)
		}
		u, _ := url.Parse(base)
		q := u.Query()
		q.Set("search_path", schema+",public") // public: pg_trgm (testDatabase)
		u.RawQuery = q.Encode()
		return u.String(), func() {
			db, err := admin(base)
			if err != nil {
				return
			}
			defer db.Close()
			db.Exec(`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`)
		}
	}
	t.Fatalf("storetest: unknown engine %q", engine)
	return "", func() {}
}

// PostgresDatabase creates a whole PostgreSQL database of its own, with
// nothing in it (no pg_trgm), for a test of what happens database-wide;
// it is dropped when the test ends. URL's shared database is quicker for
// everything else. The test is skipped where PostgreSQL is not available
// (and fails where it is required).
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	if !pgAvailable(t) {
		t.Skip("PostgreSQL unavailable")
	}
	var b [6]byte
	rand.Read(b[:])
	name := "limbo_fresh_" + hex.EncodeToString(b[:])
	db, err := admin(adminURL())
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`CREATE DATABASE ` + name)
	db.Close()
	if err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	t.Cleanup(func() {
		db, err := admin(adminURL())
		if err != nil {
			return
		}
		defer db.Close()
		db.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	})
	u, _ := url.Parse(adminURL())
	u.Path = "/" + name
	return u.String()
}

// AuditKey signs the audit checkpoints of test stores: one fixed key, so
// several stores opened on one test database seal the same chain. Open
// uses it when opt.AuditKey is nil; a store opened with store.Open needs it
// passed explicitly to seal.
var AuditKey = func() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("limbo storetest audit key"))
	return ed25519.NewKeyFromSeed(seed[:])
}()

// Open returns a migrated store on a fresh database, closed at cleanup. It
// signs checkpoints with AuditKey unless opt names another key, and keeps
// to MaxConns connections unless opt says otherwise.
func Open(t testing.TB, engine store.Engine, opt store.Options) *store.Store {
	t.Helper()
	ctx := context.Background()
	if opt.Resolve == nil {
		opt.Resolve = Resolver(nil)
	}
	if opt.AuditKey == nil {
		opt.AuditKey = AuditKey
	}
	if opt.MaxConns == 0 {
		opt.MaxConns = MaxConns
	}
	s, err := store.Open(ctx, URL(t, engine), opt)
	if err != nil {
		t.Fatalf("storetest: open %s: %v", engine, err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("storetest: migrate %s: %v", engine, err)
	}
	return s
}

// OpenTemp is Open for a database that lives only until done is called,
// for a test that needs many fresh databases in turn (each case of a
// property test), so that connections and schemas do not pile up until
// the test ends. t only reports failures to open.
func OpenTemp(t testing.TB, engine store.Engine, opt store.Options) (s *store.Store, done func()) {
	t.Helper()
	ctx := context.Background()
	if opt.Resolve == nil {
		opt.Resolve = Resolver(nil)
	}
	if opt.AuditKey == nil {
		opt.AuditKey = AuditKey
	}
	if opt.MaxConns == 0 {
		opt.MaxConns = MaxConns
	}
	u, drop := fresh(t, engine)
	s, err := store.Open(ctx, u, opt)
	if err != nil {
		drop()
		t.Fatalf("storetest: open %s: %v", engine, err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		drop()
		t.Fatalf("storetest: migrate %s: %v", engine, err)
	}
	return s, func() {
		s.Close()
		drop()
	}
}

// Each runs fn as a parallel subtest per engine.
func Each(t *testing.T, fn func(t *testing.T, engine store.Engine)) {
	for _, e := range Engines(t) {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}

// Clock is a settable clock for deterministic tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now tells the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// String names the clock's time (for test logs).
func (c *Clock) String() string { return fmt.Sprint(c.Now()) }

// ShiftClock is the real clock moved ahead by Advance: a fault run's
// leases run out without waiting for them, while everything else keeps
// real time.
type ShiftClock struct {
	mu    sync.Mutex
	ahead time.Duration
}

// Now is the real time plus every Advance so far.
func (c *ShiftClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.ahead)
}

// Advance moves the clock ahead of real time by d more.
func (c *ShiftClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ahead += d
}

// Sealed seals the audit trail until every committed event is covered and
// returns the verification report: signatures by the store's key, and the
// age check at the store's clock, as a running server's trail is checked.
// On PostgreSQL a checkpoint only covers transactions older than every
// running one (in any test sharing the server), so sealing may take a few
// rounds; meanwhile the age check is left out, since an event waiting for
// an unrelated transaction is not a cut-off tail.
func Sealed(t testing.TB, s *store.Store) *store.VerifyReport {
	t.Helper()
	ctx := context.Background()
	pub := s.AuditPublicKey()
	if pub == nil {
		t.Fatalf("storetest: the store has no audit key (open it with storetest.AuditKey)")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := s.SealAll(ctx); err != nil {
			t.Fatalf("storetest: seal: %v", err)
		}
		rep, err := s.VerifyAudit(ctx, store.VerifyOptions{PublicKey: pub, SkipAge: true})
		if err != nil {
			t.Fatalf("storetest: verify: %v", err)
		}
		if !rep.OK || time.Now().After(deadline) {
			return rep
		}
		if rep.Unsealed == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep, err := s.VerifyAudit(ctx, store.VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatalf("storetest: verify: %v", err)
	}
	return rep
}

// Resolver is the tests' own DNS, which a store opened by Open uses unless
// told otherwise: names maps a host to its addresses, localhost is
// 127.0.0.1 and ::1 unless names says otherwise, and every other name does
// not resolve. No query leaves the machine.
func Resolver(names map[string][]string) netguard.Resolver {
	return func(_ context.Context, _, host string) ([]netip.Addr, error) {
		ips, ok := names[host]
		if !ok && host == "localhost" {
			ips, ok = []string{"127.0.0.1", "::1"}, true
		}
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]netip.Addr, 0, len(ips))
		for _, ip := range ips {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				return nil, fmt.Errorf("storetest.Resolver: %s: %v", host, err)
			}
			out = append(out, a)
		}
		return out, nil
	}
}

// FailOn installs a trigger that makes every event ("INSERT" or "UPDATE")
// on table fail when cond (SQL about NEW) holds, on either engine: a row
// that fails every time, for tests of what goes on past it. The returned
// func removes it.
func FailOn(t testing.TB, s *store.Store, event, table, cond string) func() {
	t.Helper()
	exec := func(q string) {
		t.Helper()
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatalf("storetest: %s: %v", q, err)
		}
	}
	name := "fail_" + strings.ToLower(event) + "_" + table
	if s.Engine() == store.SQLite {
		exec(fmt.Sprintf(`CREATE TRIGGER %s BEFORE %s ON %s WHEN %s BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, name, event, table, cond))
		return func() { exec(`DROP TRIGGER ` + name) }
	}
	exec(fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF %s THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$`, name, cond))
	exec(fmt.Sprintf(`CREATE TRIGGER %s BEFORE %s ON %s FOR EACH ROW EXECUTE FUNCTION %s()`, name, event, table, name))
	return func() { exec(fmt.Sprintf(`DROP TRIGGER %s ON %s`, name, table)) }
}
