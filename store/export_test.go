package store

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// InTx is inTx, for the external tests.
func InTx[T any](ctx context.Context, s *Store, fn func(tx *sqlx.Tx) (T, error)) (T, error) {
	return inTx(ctx, s, fn)
}

// CaseChangedForTest is caseChanged, for the external tests: a change
// published in a transaction that then rolls back.
func CaseChangedForTest(ctx context.Context, s *Store, tx *sqlx.Tx, ev CaseEvent) error {
	return s.caseChanged(ctx, tx, ev)
}
