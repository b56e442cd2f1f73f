package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

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
}

// prepared returns the prepared statement for q (written with "?"), or nil
// when the cache is full.
func (s *Store) prepared(ctx context.Context, q string) (*sqlx.Stmt, error) {
	s.stmts.mu.RLock()
	st := s.stmts.m[q]
	s.stmts.mu.RUnlock()
	if st != nil {
		return st, nil
	}
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	if st = s.stmts.m[q]; st != nil {
		return st, nil
	}
	if len(s.stmts.m) >= maxPrepared {
		return nil, nil
	}
	st, err := s.db.PreparexContext(ctx, s.rebind(q))
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if s.stmts.m == nil {
		s.stmts.m = map[string]*sqlx.Stmt{}
	}
	s.stmts.m[q] = st
	return st, nil
}

func (s *Store) closeStmts() {
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	for _, st := range s.stmts.m {
		st.Close()
	}
	s.stmts.m = nil
}

// stmt returns q prepared for tx (or for the pool when tx is nil); nil when
// q cannot be cached, so the caller runs it unprepared. q uses "?" and is
// rebound here.
func (s *Store) stmt(ctx context.Context, tx *sqlx.Tx, q string) (*sqlx.Stmt, string, error) {
	st, err := s.prepared(ctx, q)
	if err != nil || st == nil {
		return nil, s.rebind(q), err
	}
	if tx != nil {
		return tx.StmtxContext(ctx, st), q, nil
	}
	return st, q, nil
}

// exec runs a prepared statement in tx (nil: on the pool).
func (s *Store) exec(ctx context.Context, tx *sqlx.Tx, q string, args ...any) (sql.Result, error) {
	st, q, err := s.stmt(ctx, tx, q)
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return st.ExecContext(ctx, args...)
	case tx != nil:
		return tx.ExecContext(ctx, q, args...)
	default:
		return s.db.ExecContext(ctx, q, args...)
	}
}

// get scans one row of a prepared query into dest (sql.ErrNoRows if none).
func (s *Store) get(ctx context.Context, tx *sqlx.Tx, dest any, q string, args ...any) error {
	st, q, err := s.stmt(ctx, tx, q)
	switch {
	case err != nil:
		return err
	case st != nil:
		return st.GetContext(ctx, dest, args...)
	case tx != nil:
		return tx.GetContext(ctx, dest, q, args...)
	default:
		return s.db.GetContext(ctx, dest, q, args...)
	}
}

// sel scans every row of a prepared query into dest, a pointer to a slice.
func (s *Store) sel(ctx context.Context, tx *sqlx.Tx, dest any, q string, args ...any) error {
	st, q, err := s.stmt(ctx, tx, q)
	switch {
	case err != nil:
		return err
	case st != nil:
		return st.SelectContext(ctx, dest, args...)
	case tx != nil:
		return tx.SelectContext(ctx, dest, q, args...)
	default:
		return s.db.SelectContext(ctx, dest, q, args...)
	}
}
