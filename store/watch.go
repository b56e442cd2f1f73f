package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// The confirm window's watch (review/watch.go): an operation that moved on
// proven absence is searched for again until its window closes, so a
// destination whose search lags longer than configured cannot hide a
// duplicate. The watch lives in three columns of operations (migration
// 0021) and is claimed like a probe: several reconcilers take disjoint
// operations, and a look that outlived its claim is fenced.

// WatchClaim is one watched operation claimed for a look.
type WatchClaim struct {
	Op         *review.Operation
	Generation int64
	Until      time.Time
}

const (
	/* Store.startWatch: a proven absence opens (or extends) the window. */
	updateStartWatch = `UPDATE operations SET watch_until = ?, watch_next_at = ? WHERE id = ?`
	/* Store.ClaimWatches: watched operations due for a look. */
	selectWatchDue = `SELECT id FROM operations WHERE watch_next_at IS NOT NULL AND watch_next_at <= ? ORDER BY watch_next_at LIMIT ?`
	/* Store.ClaimWatches */
	selectWatchDueSkipLocked = selectWatchDue + ` FOR UPDATE SKIP LOCKED`
	/* Store.ClaimWatches: the claim holds until the lease ends. */
	claimWatch = `
UPDATE operations SET watch_next_at = ?, watch_generation = watch_generation + 1
WHERE id = ? AND watch_next_at IS NOT NULL AND watch_next_at <= ?`
	/* Store.ClaimWatches */
	selectWatchClaimed = `SELECT ` + opColumns + `, watch_generation, watch_until FROM operations WHERE id = ?`
	/* Store.ApplyWatch: fenced by the claim's generation; NULL ends the watch. */
	releaseWatch = `UPDATE operations SET watch_next_at = ?, watch_until = CASE WHEN ? THEN NULL ELSE watch_until END
WHERE id = ? AND watch_generation = ?`
)

// startWatch opens op's confirm window after proven absence moved it on.
func (s *Store) startWatch(ctx context.Context, tx *sqlx.Tx, opID string, d review.Destination) error {
	now := s.now()
	if _, err := tx.ExecContext(ctx, s.rebind(updateStartWatch), dbTime(now.Add(d.Window())), dbTime(now.Add(d.SearchLag)), opID); err != nil {
		return fmt.Errorf("start watch: %w", err)
	}
	return nil
}

// ClaimWatches claims up to n watched operations due for a look, for
// lease.
func (s *Store) ClaimWatches(ctx context.Context, n int, lease time.Duration) ([]WatchClaim, error) {
	now := s.now()
	ids, err := s.claimDue(ctx, selectWatchDue, selectWatchDueSkipLocked, []any{dbTime(now)}, n, claimWatch,
		func(id string) []any { return []any{dbTime(now.Add(lease)), id, dbTime(now)} })
	var skipped *SkippedRows
	if err != nil && !errors.As(err, &skipped) {
		return nil, fmt.Errorf("store.ClaimWatches: %w", err)
	}
	return readClaimed(ctx, skipped, "store.ClaimWatches", ids, func(id string) (WatchClaim, error) {
		var r struct {
			opRow
			Generation int64        `db:"watch_generation"`
			Until      sql.NullTime `db:"watch_until"`
		}
		if err := s.db.GetContext(ctx, &r, s.rebind(selectWatchClaimed), id); err != nil {
			return WatchClaim{}, err
		}
		op, err := s.loadDetails(ctx, s.db, r.opRow.operation())
		if err != nil {
			return WatchClaim{}, err
		}
		return WatchClaim{Op: op, Generation: r.Generation, Until: r.Until.Time.UTC()}, nil
	})
}

// extraEvidence puts to a person what evs, just recorded for op (the
// settled operation of the locked row, its details loaded), show the
// destination holds for it that nobody answers for — a duplicate beside
// the confirmed effect, any effect of a failed or compensated operation
// (review.ExtraEffects, each ref once) — audited as evidence.extra_effect
// with detail, the extra and the case's text added. It reports whether
// there was any. Every path that lands evidence on a settled operation
// asks it: an integrator's, a late report, a job's end, a webhook, a
// person's check.
func (s *Store) extraEvidence(ctx context.Context, tx *sqlx.Tx, row *opRow, op *review.Operation, actor string, detail map[string]any, evs ...review.Evidence) (bool, error) {
	var extra []review.Candidate
	for _, ev := range evs {
		for _, c := range review.ExtraEffects(op, ev) {
			if !slices.ContainsFunc(extra, func(e review.Candidate) bool { return e.Ref == c.Ref }) {
				extra = append(extra, c)
			}
		}
	}
	if len(extra) == 0 {
		return false, nil
	}
	detail["extra"], detail["reason"] = extra, review.ExtraEvidenceReason(op, extra)
	return true, s.extraEffect(ctx, tx, row, op, actor, "evidence.extra_effect", detail)
}

// extraEffect opens a case on op, the settled operation of the locked row,
// whose destination holds a resource for it that nobody answers for
// (review.ExtraEffects): the operation stays as it is, and a person undoes
// the extra (review.OnExtraEffect). Audited as action.
func (s *Store) extraEffect(ctx context.Context, tx *sqlx.Tx, row *opRow, op *review.Operation, actor, action string, detail map[string]any) error {
	if _, err := s.openCase(ctx, tx, row.ID, row.Tenant, []review.Reason{review.ExtraEffectCaseReason(op)}, actor); err != nil {
		return err
	}
	return s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Tenant: row.Tenant, OperationID: row.ID, Action: action, Detail: detailJSON(detail)})
}

// ApplyWatch records one look at a watched operation (review.Watch's
// conclusion): the probes' evidence, weighed where it may move the
// operation; for a settled operation with an extra resource, a case
// recommending its undo; then the next look, or
// the watch's end. Fenced by the claim's generation.
func (s *Store) ApplyWatch(ctx context.Context, c WatchClaim, w review.Watching) error {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		row, err := s.lockOperation(ctx, tx, c.Op.Tenant, c.Op.ID)
		if err != nil {
			return err
		}
		var next any
		if !w.Next.IsZero() {
			next = dbTime(w.Next)
		}
		res, err := tx.ExecContext(ctx, s.rebind(releaseWatch), next, w.Next.IsZero(), c.Op.ID, c.Generation)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return ErrFenced
		}
		if row.State != string(c.Op.State) {
			return nil // moved meanwhile: the next look reads it afresh
		}
		now := s.now() // one look, one instant, as a check's (RecordCheck)
		for _, ev := range w.Evidence {
			ev.ObservedAt = now
			if err := s.insertEvidence(ctx, tx, c.Op.ID, ev); err != nil {
				return err
			}
		}
		const actor = "system:reconciler"
		switch {
		case len(w.Extra) > 0:
			return s.extraEffect(ctx, tx, row, c.Op, actor, "watch.extra_effect", map[string]any{"extra": w.Extra, "reason": review.ExtraEffectReason(c.Op, w.Extra)})
		case review.Assessed(review.State(row.State)):
			return s.weigh(ctx, tx, row, actor, map[string]any{"source": "confirm_window"})
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrFenced) {
		return fmt.Errorf("store.ApplyWatch: %w", err)
	}
	return err
}
