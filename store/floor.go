package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// The floors of limbo bench (bench/floor.go) write the attempt cycle's rows
// straight to the database, with none of the store's reading, deciding or
// HTTP, as the yardstick the API is measured against. They write with the
// store's own statements and plans (writes.go), so the yardstick measures
// exactly what the store writes and cannot drift from it.

// ErrFloorGuard: a floor's guarded write matched no row.
var ErrFloorGuard = errors.New("store: floor write: the guard matched no row")

// FloorWrite writes one call of the attempt cycle as the fast path would:
// kind names the plan (register, attempt or outcome), values its
// parameters by their names in writes.go (:op_id is "op_id"), ev its audit
// event. oneTrip on PostgreSQL sends it through limbo_fast_batch as a
// batch of its own (one round trip, no commit shared); otherwise, and on
// SQLite, the plan's statements run in a transaction of their own, one
// round trip each.
func (s *Store) FloorWrite(ctx context.Context, kind string, values map[string]any, ev *AuditEvent, oneTrip bool) error {
	var plan []step
	for _, p := range plans {
		if p.kind == kind {
			plan = p.steps
		}
	}
	if plan == nil {
		return fmt.Errorf("store.FloorWrite: no plan %q", kind)
	}
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	ev.At = dbTime(ev.At)
	var a args
	a[pKind] = kind
	for name, v := range values {
		p, ok := paramByName(name)
		if !ok {
			return fmt.Errorf("store.FloorWrite: no parameter :%s", name)
		}
		a[p] = v
	}
	if oneTrip && s.engine == Postgres {
		c, err := s.newFastCall(ctx, &a, ev)
		if err != nil {
			return err
		}
		res, err := s.execBatch(ctx, []*fastCall{c})
		if err == nil && res[0].Ops != 1 {
			err = ErrFloorGuard
		}
		return err
	}
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		_, err := s.writeCall(ctx, tx, plan, &a, ev)
		return err
	})
	if errors.Is(err, errGuard) {
		return ErrFloorGuard
	}
	return err
}
