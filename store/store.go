// Package store holds all of Limbo's SQL. It persists what package review
// decides, on SQLite (embedded, the default) and PostgreSQL, with the same
// behaviour on both. Every state change writes its audit event in the same
// transaction; transitions are guarded in SQL by state and version.
package store

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
)

func init() {
	// sqlx does not know modernc's driver name; without this Rebind would
	// silently keep "?" placeholders for the wrong engine (STYLE trap 18).
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// Engine names a database engine.
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// Options configure a Store.
type Options struct {
	// Config holds destination settings; nil means safe defaults everywhere.
	Config *review.Config
	// Clock tells the time; nil means time.Now.
	Clock review.Clock
	// Rand feeds backoff jitter; nil means a random source.
	Rand review.Rand
	// Resolve looks up the host names of webhook endpoints as they are
	// added (the policy is Config's webhooks.allow_internal); nil means
	// the system resolver. Tests pass their own, so no query leaves the
	// machine.
	Resolve netguard.Resolver
	// AuditKey signs audit checkpoints. It lives outside the database (a
	// file or the environment, see cmd/limbo), so whoever can write the
	// database cannot forge a checkpoint. Without it the store cannot seal.
	AuditKey ed25519.PrivateKey
	// AuditSealMax: the sealer writes a checkpoint at least this often, even
	// when idle (0: DefaultSealMax). Each checkpoint records it.
	AuditSealMax time.Duration
	// MaxConns bounds the connection pool, open and idle alike (0: the
	// defaults, DefaultMaxConnsPostgres and DefaultMaxConnsSQLite). Several
	// stores sharing one PostgreSQL server, tests among them, set it small.
	MaxConns int
	// NoFastPath sends every call of the attempt cycle down the ordinary
	// path (a transaction that reads under a lock): no snapshots, no
	// group commit. The fast path must write exactly what the ordinary one
	// writes, and TestFastPathWritesWhatTheOrdinaryPathWrites compares the
	// two; an operator may also turn it off to rule it out.
	NoFastPath bool
	// Existing: the database must exist already. A SQLite file that is
	// missing is ErrNoDatabase instead of a new, empty database; only
	// what may create a database (serve, migrate, tests) leaves it false.
	Existing bool
}

// The pool sizes a store uses when Options.MaxConns is zero.
const (
	DefaultMaxConnsPostgres = 32
	DefaultMaxConnsSQLite   = 8
)

// Store is Limbo's persistence. Safe for concurrent use.
type Store struct {
	db      *sqlx.DB
	engine  Engine
	where   string // the database, for messages: a SQLite path, a PostgreSQL URL without its password
	cfg     *review.Config
	clock   review.Clock
	resolve netguard.Resolver

	// auditKey signs checkpoints (nil: the store cannot seal); auditPub is
	// its public half; sealMax the heartbeat interval.
	auditKey ed25519.PrivateKey
	auditPub ed25519.PublicKey
	sealMax  time.Duration

	randMu sync.Mutex
	rand   review.Rand

	// writeMu serialises write transactions on SQLite inside this process:
	// SQLite has one writer, and queueing here is fairer and faster than
	// spinning on the busy timeout. Other processes still meet busy_timeout.
	writeMu sync.Mutex

	// logins serialises sign-in checks per account and per address (gate.go).
	logins keyedGate
	// refusals counts refused sign-ins by rule (LoginRefusals).
	refusalsMu sync.Mutex
	refusals   map[string]int64

	stmts   stmtCache
	tokens  tokenCache
	tenants sync.Map // tenant name → struct{}: known to exist (tenants are never deleted)
	snaps   snapshots
	batch   batcher // group commit of the fast path on PostgreSQL (batch.go)
	live    liveHub // live case changes to subscribers (live.go)

	// fastHits and fastMisses count attempt-cycle calls that took the fast
	// path and those that fell back to the ordinary one (FastPath).
	fastHits, fastMisses atomic.Int64
	// concurrentRows: a table holding more rows has the indexes of a
	// concurrentMark migration built concurrently (migrate.go).
	concurrentRows int64
	// destLocks are the destinations whose destination_locks row this
	// store has written (ensureDestinationLock).
	destLocks sync.Map
	// retries count transactions run again, by cause (TxRetries).
	retries [nCauses]atomic.Int64
}

// FastPath reports how many attempt-cycle calls (register, attempt,
// outcome) this store answered with one guarded statement, and how many
// took the ordinary locked path instead.
func (s *Store) FastPath() (hits, misses int64) { return s.fastHits.Load(), s.fastMisses.Load() }

// Open connects to url: "sqlite:PATH" or "postgres://…". It asserts the
// durability settings Limbo relies on; it does not migrate.
func Open(ctx context.Context, dbURL string, opt Options) (*Store, error) {
	s := &Store{cfg: opt.Config, clock: opt.Clock, rand: opt.Rand, resolve: opt.Resolve, concurrentRows: defaultConcurrentRows}
	s.snaps.off = opt.NoFastPath
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.rand == nil {
		s.rand = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	if opt.AuditKey != nil {
		if len(opt.AuditKey) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("store.Open: the audit key must be an Ed25519 private key (%d bytes), got %d bytes", ed25519.PrivateKeySize, len(opt.AuditKey))
		}
		s.auditKey = opt.AuditKey
		s.auditPub = opt.AuditKey.Public().(ed25519.PublicKey)
	}
	s.sealMax = opt.AuditSealMax
	if s.sealMax <= 0 {
		s.sealMax = DefaultSealMax
	}
	if opt.MaxConns < 0 {
		return nil, fmt.Errorf("store.Open: MaxConns must not be negative, got %d", opt.MaxConns)
	}
	var err error
	switch {
	case strings.HasPrefix(dbURL, "sqlite:"):
		s.engine, s.where = SQLite, strings.TrimPrefix(dbURL, "sqlite:")
		s.db, err = openSQLite(ctx, strings.TrimPrefix(dbURL, "sqlite:"), cmp.Or(opt.MaxConns, DefaultMaxConnsSQLite), opt.Existing)
	case strings.HasPrefix(dbURL, "postgres://"), strings.HasPrefix(dbURL, "postgresql://"):
		s.engine, s.where = Postgres, redact(dbURL)
		s.db, err = openPostgres(ctx, dbURL, cmp.Or(opt.MaxConns, DefaultMaxConnsPostgres))
		if err == nil {
			var schema string
			if err = s.db.GetContext(ctx, &schema, `SELECT COALESCE(current_schema(), '')`); err != nil {
				s.db.Close()
				return nil, fmt.Errorf("store.Open: %w", err)
			}
			s.live.dsn, s.live.channel = dbURL, liveChannel(schema)
		}
	default:
		return nil, fmt.Errorf("store.Open: database URL must start with sqlite: or postgres://, got %q", redact(dbURL))
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openSQLite(ctx context.Context, dsn string, maxConns int, existing bool) (*sqlx.DB, error) {
	path, query, err := sqliteFile(dsn)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if err := ensureSQLiteFile(path, existing); err != nil {
			return nil, err
		}
	}
	// WAL + synchronous=FULL: a commit is on disk when it returns (NORMAL can
	// lose the last commits on power loss). _txlock=immediate takes the write
	// lock at BEGIN, so read-then-write transactions cannot deadlock into
	// SQLITE_BUSY. _time_format=sqlite stores sortable timestamps.
	// temp_store=MEMORY keeps statement journals in memory: a statement
	// that may fail halfway inside a transaction (an INSERT … ON CONFLICT
	// under unique indexes and triggers) journals every page it touches so
	// that it alone can be undone, and on disk that was a pwrite per page —
	// most of the CPU of a bulk registration (limbo bench, pprof). Nothing
	// durable lives there: a statement journal only outlives its statement
	// for as long as that statement runs.
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Set("_time_format", "sqlite")
	q.Set("_txlock", "immediate")
	// The URL's own parameters first: these pragmas, applied after them, win.
	params := q.Encode()
	if query != "" {
		params = query + "&" + params
	}
	before, _, _ := strings.Cut(dsn, "?")
	db, err := sqlx.Open("sqlite", "file:"+before+"?"+params)
	if err != nil {
		return nil, fmt.Errorf("store.Open: sqlite:%s: %w", dsn, err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	var mode string
	if err := db.GetContext(ctx, &mode, "PRAGMA journal_mode"); err != nil {
		db.Close()
		return nil, fmt.Errorf("store.Open: sqlite:%s: %w", dsn, err)
	}
	var sync int
	if err := db.GetContext(ctx, &sync, "PRAGMA synchronous"); err != nil {
		db.Close()
		return nil, fmt.Errorf("store.Open: %w", err)
	}
	if mode != "wal" || sync != 2 {
		db.Close()
		return nil, fmt.Errorf("store.Open: sqlite must run journal_mode=wal synchronous=FULL, got %s/%d", mode, sync)
	}
	return db, nil
}

// sqliteFile is the file a sqlite: URL names (what follows "sqlite:"), as
// SQLite reads it: the path before any query, percent-decoded; "" for an
// in-memory database (:memory:, mode=memory), which has no file. query is
// the URL's own parameters. A host (sqlite://host/path) is refused here,
// with what to write instead, rather than by SQLite as "invalid uri
// authority".
func sqliteFile(dsn string) (path, query string, err error) {
	path, query, _ = strings.Cut(dsn, "?")
	if path == "" {
		return "", "", errors.New("store.Open: sqlite: needs a file path, such as sqlite:limbo.db or sqlite:/var/lib/limbo/limbo.db")
	}
	if rest, ok := strings.CutPrefix(path, "//"); ok {
		host, p, _ := strings.Cut(rest, "/")
		if host != "" && host != "localhost" {
			return "", "", fmt.Errorf("store.Open: sqlite:%s: sqlite: takes a file path, not a host (%q): write sqlite:/%s for an absolute path, or sqlite:%s for one relative to the working directory", dsn, host, rest, rest)
		}
		path = "/" + p
	}
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if q, err := url.ParseQuery(query); err == nil && q.Get("mode") == "memory" || path == ":memory:" {
		return "", query, nil
	}
	return path, query, nil
}

// SQLiteFile is the file a sqlite: database URL opens, as Open reads it
// (its query left out, percent-decoding undone, //localhost/ taken as /):
// "" for another engine, an in-memory database or a URL Open refuses. The
// audit key beside a database is found by it (auditkey.BesideDatabase).
func SQLiteFile(dbURL string) string {
	dsn, ok := strings.CutPrefix(dbURL, "sqlite:")
	if !ok {
		return ""
	}
	path, _, err := sqliteFile(dsn)
	if err != nil {
		return ""
	}
	return path
}

// ensureSQLiteFile makes sure the database file at path is there to open.
// Missing, it is ErrNoDatabase when existing, else created empty with mode
// 0600 (SQLite would make it 0644, readable by every local user, holding
// password and token hashes and payloads; it gives its -wal and -shm files
// the database's mode). A file that exists is left as it is.
func ensureSQLiteFile(path string, existing bool) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("store.Open: sqlite: %s is a directory, not a database file", path)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("store.Open: sqlite: %w", err)
	case existing:
		return &schemaError{ErrNoDatabase, fmt.Sprintf("no Limbo database at %s (no such file)", path)}
	}
	if dir := filepath.Dir(path); dir != "" {
		if di, err := os.Stat(dir); err != nil || !di.IsDir() {
			return fmt.Errorf("store.Open: sqlite: cannot create %s: its directory %s does not exist", path, dir)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil // made meanwhile by another process: SQLite opens it
	}
	if err != nil {
		return fmt.Errorf("store.Open: sqlite: cannot create %s: %w", path, err)
	}
	return f.Close()
}

func openPostgres(ctx context.Context, dbURL string, maxConns int) (*sqlx.DB, error) {
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		return nil, fmt.Errorf("store.Open: %w", err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	var sc string
	if err := db.GetContext(ctx, &sc, "SHOW synchronous_commit"); err != nil {
		db.Close()
		return nil, fmt.Errorf("store.Open: %s: %w", redact(dbURL), err)
	}
	if sc != "on" && sc != "remote_apply" && sc != "remote_write" {
		db.Close()
		return nil, fmt.Errorf("store.Open: PostgreSQL synchronous_commit is %q; Limbo needs it on so an acknowledged write survives a crash", sc)
	}
	return db, nil
}

// RedactURL is a database URL with its password, if any, replaced by xxx:
// for logs, messages and summaries.
func RedactURL(dbURL string) string { return redact(dbURL) }

// redact hides a password in a database URL for error messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "xxx")
	}
	return p.String()
}

// Close closes the database.
func (s *Store) Close() error {
	s.live.close()
	s.closeStmts()
	return s.db.Close()
}

// Engine reports which database engine the store runs on.
func (s *Store) Engine() Engine { return s.engine }

// DB exposes the pool for tests and tools in this repository that must
// reach below the store (the audit tamper tests).
func (s *Store) DB() *sqlx.DB { return s.db }

// Config returns the destination configuration in use.
func (s *Store) Config() *review.Config { return s.cfg }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// now is the store's clock, in the form every TIMESTAMP column stores.
func (s *Store) now() time.Time { return dbTime(s.clock()) }

// dbTime is the one form of time written to the database: UTC, microseconds
// (PostgreSQL rounds to microseconds; TIMESTAMP drops the zone).
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Float64 lets the store act as a review.Rand safe for concurrent use.
func (s *Store) Float64() float64 {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rand.Float64()
}

// WithTx runs fn in a transaction: committed when fn returns nil, rolled
// back otherwise. The rollback ignores ctx cancellation so a cancelled
// request never leaves a transaction open. A serialisation failure or a
// busy database runs fn again, from the start: a closure that produces
// results returns them through inTx instead of writing captured variables.
func (s *Store) WithTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	if s.engine == SQLite {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	for try := 0; ; try++ {
		err := s.withTxOnce(ctx, fn)
		// A serialisation failure or deadlock on PostgreSQL, or a busy
		// SQLite after its timeout, is safe to retry: nothing committed.
		if err != nil && s.retryable(err) && try < 5 && ctx.Err() == nil {
			time.Sleep(time.Duration(1+try*try) * 5 * time.Millisecond)
			continue
		}
		return err
	}
}

// inTx runs fn in a transaction as WithTx does, retried the same way, and
// returns what fn returned on the try that committed. A closure hands its
// results back rather than writing variables it captured: a failed try's
// results are dropped with it, so a retry can neither double what a
// closure accumulates nor leave a stale value behind. On an error the
// result is T's zero value.
func inTx[T any](ctx context.Context, s *Store, fn func(tx *sqlx.Tx) (T, error)) (T, error) {
	var out T
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		v, err := fn(tx)
		if err != nil {
			return err
		}
		out = v
		return nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

func (s *Store) withTxOnce(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store.WithTx: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		s.live.settled(tx, false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		s.live.settled(tx, false)
		if ctx.Err() != nil {
			// database/sql rolled back when the context ended; say so
			// rather than "already committed or rolled back".
			return fmt.Errorf("store.WithTx: rolled back: %w", ctx.Err())
		}
		return fmt.Errorf("store.WithTx: commit: %w", err)
	}
	s.live.settled(tx, true) // SQLite: the case changes it held, to subscribers
	return nil
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// retryCause is why err may be retried with nothing committed: a
// deadlock or a serialisation failure on PostgreSQL, a busy SQLite after
// its timeout; none (-1) otherwise.
func retryCause(err error) int {
	var pe *pq.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40P01":
			return causeDeadlock
		case "40001":
			return causeSerialization
		}
		return -1
	}
	var se *sqlite.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED) {
		return causeBusy
	}
	return -1
}

const (
	causeDeadlock = iota
	causeSerialization
	causeBusy
	nCauses
)

// retryable reports whether err may be retried (retryCause), and counts
// it (TxRetries).
func (s *Store) retryable(err error) bool {
	c := retryCause(err)
	if c < 0 {
		return false
	}
	s.retries[c].Add(1)
	return true
}

// TxRetryStats counts the transactions the database refused with nothing
// committed, that the store then ran again, by cause.
type TxRetryStats struct {
	Deadlock, Serialization, Busy int64
}

// TxRetries reports the transactions this store has run again, by cause.
// A deadlock costs its callers PostgreSQL's deadlock_timeout (1 s) first:
// the lock order (attempts.go, batch.go) is meant to leave none.
func (s *Store) TxRetries() TxRetryStats {
	return TxRetryStats{Deadlock: s.retries[causeDeadlock].Load(), Serialization: s.retries[causeSerialization].Load(),
		Busy: s.retries[causeBusy].Load()}
}

// rebind turns "?" placeholders into the engine's own.
func (s *Store) rebind(q string) string {
	if s.engine == Postgres {
		return sqlx.Rebind(sqlx.DOLLAR, q)
	}
	return q
}

// newID returns a prefixed, roughly time-ordered id: 48 bits of
// milliseconds then 80 random bits in Crockford base32 (like a ULID). Base32
// keeps byte order, so keyset pages by id follow creation order.
func newID(prefix string, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return prefix + idEncoding.EncodeToString(b[:])
}

var idEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// Now is the store's clock (tests inject a fake one).
func (s *Store) Now() time.Time { return s.clock() }
