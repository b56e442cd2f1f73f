package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// Prepared statements, kept for the life of the store.
//
// Why: on PostgreSQL lib/pq sends an unnamed statement as Parse, then Bind
// and Execute: two round trips and a fresh plan every time; a prepared one is
// a single round trip. modernc's SQLite compiles SQL on every call without
// them (a quarter of the CPU of the attempt cycle, measured by limbo bench).
// database/sql prepares a statement once per connection on first use and
// reuses it inside transactions on that connection (Tx.StmtContext).

// maxPrepared bounds the cache: the store's SQL is a fixed set of constants,
// but a few queries are built from filters, so the set is not closed.
const maxPrepared = 512

type stmtCache struct {
	mu sync.RWMutex
	// m is keyed by the query as written (with "?"): rebinding on every
	// call would allocate a new string each time.
	m map[string]*sqlx.Stmt
	// pending: queries being prepared in the background; bg waits for
	// them, so Close never leaves one holding a connection.
	pending map[string]bool
	bg      sync.WaitGroup
	closed  bool
}

// prepared returns the prepared statement for q (written with "?"), or nil
// when it is not prepared (yet): the caller then runs q unprepared.
//
// Inside a transaction nothing is prepared on the spot: preparing on the
// pool takes a second connection while the transaction holds one, and with
// every connection held by a transaction doing the same, nobody would ever
// get one. So q is prepared in the background and the call runs unprepared.
// No lock is held while waiting for a connection.
func (s *Store) prepared(ctx context.Context, q string, inTx bool) (*sqlx.Stmt, error) {
	s.stmts.mu.RLock()
	st := s.stmts.m[q]
	s.stmts.mu.RUnlock()
	if st != nil {
		return st, nil
	}
	if inTx {
		s.prepareLater(q)
		return nil, nil
	}
	return s.prepareNow(ctx, q)
}

func (s *Store) prepareNow(ctx context.Context, q string) (*sqlx.Stmt, error) {
	s.stmts.mu.RLock()
	full := len(s.stmts.m) >= maxPrepared || s.stmts.closed
	s.stmts.mu.RUnlock()
	if full {
		return nil, nil
	}
	st, err := s.db.PreparexContext(ctx, s.rebind(q))
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	s.stmts.mu.Lock()
	old := s.stmts.m[q]
	kept := old == nil && !s.stmts.closed
	if kept {
		if s.stmts.m == nil {
			s.stmts.m = map[string]*sqlx.Stmt{}
		}
		s.stmts.m[q] = st
	}
	s.stmts.mu.Unlock()
	if !kept {
		// Prepared twice at once, or the store closed meanwhile. Closed
		// outside the lock: closing waits for every connection the
		// statement is on, and a query on one of them may wait for a row
		// lock held by a transaction that waits for this lock.
		st.Close()
		return old, nil
	}
	return st, nil
}

// prepareLater prepares q in the background, once.
func (s *Store) prepareLater(q string) {
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	if s.stmts.pending[q] || s.stmts.closed || len(s.stmts.m) >= maxPrepared {
		return
	}
	if s.stmts.pending == nil {
		s.stmts.pending = map[string]bool{}
	}
	s.stmts.pending[q] = true
	s.stmts.bg.Add(1)
	go func() {
		defer s.stmts.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.prepareNow(ctx, q) // on failure the query keeps running unprepared
		s.stmts.mu.Lock()
		delete(s.stmts.pending, q)
		s.stmts.mu.Unlock()
	}()
}

func (s *Store) closeStmts() {
	s.stmts.mu.Lock()
	s.stmts.closed = true // no new background prepares
	s.stmts.mu.Unlock()
	s.stmts.bg.Wait()
	s.stmts.mu.Lock()
	m := s.stmts.m
	s.stmts.m = nil
	s.stmts.mu.Unlock()
	for _, st := range m { // outside the lock, as in prepareNow
		st.Close()
	}
}

// runner runs one query: a prepared *sqlx.Stmt, or an unprepared one.
type runner interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, args ...any) (*sql.Rows, error)
	GetContext(ctx context.Context, dest any, args ...any) error
	SelectContext(ctx context.Context, dest any, args ...any) error
}

// unprepared runs query on a transaction or the pool, unprepared.
type unprepared struct {
	on    sqlx.ExtContext
	query string
}

func (u unprepared) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return u.on.ExecContext(ctx, u.query, args...)
}

func (u unprepared) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return u.on.QueryContext(ctx, u.query, args...)
}

func (u unprepared) GetContext(ctx context.Context, dest any, args ...any) error {
	return sqlx.GetContext(ctx, u.on, dest, u.query, args...)
}

func (u unprepared) SelectContext(ctx context.Context, dest any, args ...any) error {
	return sqlx.SelectContext(ctx, u.on, dest, u.query, args...)
}

// stmt returns q ready to run in tx (or on the pool when tx is nil):
// prepared when it is, unprepared otherwise. q uses "?" and is rebound here.
func (s *Store) stmt(ctx context.Context, tx *sqlx.Tx, q string) (runner, error) {
	st, err := s.prepared(ctx, q, tx != nil)
	switch {
	case err != nil:
		return nil, err
	case st != nil && tx != nil:
		return tx.StmtxContext(ctx, st), nil
	case st != nil:
		return st, nil
	case tx != nil:
		return unprepared{tx, s.rebind(q)}, nil
	default:
		return unprepared{s.db, s.rebind(q)}, nil
	}
}

// exec runs q in tx (nil: on the pool).
func (s *Store) exec(ctx context.Context, tx *sqlx.Tx, q string, args ...any) (sql.Result, error) {
	r, err := s.stmt(ctx, tx, q)
	if err != nil {
		return nil, err
	}
	return r.ExecContext(ctx, args...)
}

// get scans one row of q into dest (sql.ErrNoRows if none).
func (s *Store) get(ctx context.Context, tx *sqlx.Tx, dest any, q string, args ...any) error {
	r, err := s.stmt(ctx, tx, q)
	if err != nil {
		return err
	}
	return r.GetContext(ctx, dest, args...)
}

// sel scans every row of q into dest, a pointer to a slice.
func (s *Store) sel(ctx context.Context, tx *sqlx.Tx, dest any, q string, args ...any) error {
	r, err := s.stmt(ctx, tx, q)
	if err != nil {
		return err
	}
	return r.SelectContext(ctx, dest, args...)
}
