package store

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// InTx is inTx, for the external tests.
func InTx[T any](ctx context.Context, s *Store, fn func(tx *sqlx.Tx) (T, error)) (T, error) {
	return inTx(ctx, s, fn)
}
