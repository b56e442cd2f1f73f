package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// Payload retention. Once an operation has been terminal for its action's
// retention (review.Config.RetentionFor), the bytes that came from the
// caller or were derived from them are emptied, in every table that holds
// them:
//
//   - operations.payload ("", with payload_purged_at set);
//   - rejected_payloads.payload: payloads refused under the key ("");
//   - evidence.candidates: the resources a destination returned ("[]");
//   - attempt_outputs: a model's answer to the payload (output and invalid
//     "", with purged_at set: the row stays, so the attempt reads as having
//     kept one that retention purged, not as never having kept one).
//
// What stays: the key, payload_hash, states, attempts, evidence rows (source,
// verdict, note), decisions, and the audit trail, untouched. The trail's
// hash chain covers each event's time, actor, tenant, operation id, action,
// states and detail (ContentHash), and no event detail holds payload bytes
// (registration records the key and payload_hash; a mismatch, the names of
// the fields that differ; evidence, the number of candidates), so emptying
// these columns cannot break `limbo audit verify`.
//
// "Terminal for N days" is measured from updated_at: the last change to the
// operation, which for a terminal one is when it got there or a detail
// recorded later. Never earlier than the state change, so a payload is
// never purged early.
//
// Left alone: compensation operations (their payload is Limbo's own link to
// the parent, read to settle undos), operations with an open case (the
// reviewer needs what the case is about) and operations whose confirm
// window is still watched (watch_next_at: a duplicate the watch finds
// opens a case that names it from its evidence's candidates, which
// evidence on a purged operation no longer keeps); the last two are purged
// once that is no longer so. Webhook outbox bodies carry the decision, not
// the payload.

// retentionActor is the audit actor of a purge.
const retentionActor = "system:payload-retention"

// purgeBatch bounds how many operations one purge transaction empties.
const purgeBatch = 200

// PurgeReport says what a purge emptied, or would have (DryRun).
type PurgeReport struct {
	DryRun bool `json:"dry_run"`
	// Operations whose payload was (would be) purged.
	Operations int `json:"operations"`
	// RejectedPayloads, Evidence and Outputs are the rows emptied beside them.
	RejectedPayloads int `json:"rejected_payloads"`
	Evidence         int `json:"evidence"`
	Outputs          int `json:"outputs"`
	// IDs are the operations, oldest first (at most maxReportIDs).
	IDs []string `json:"ids"`
}

const maxReportIDs = 1000

const (
	/* Store.PurgePayloads: due candidates, by the partial index operations_retention.
	   The cursor is a row comparison, which both engines read as a range of
	   the index; spelt with OR it was only a filter, and every batch walked
	   the index from its start (178 ms at 250,000 rows deep, 0.4 ms now). */
	selectPurgeCandidates = `
SELECT o.id, o.tenant, o.destination, o.action, o.updated_at FROM operations o
WHERE o.payload_purged_at IS NULL AND o.state IN ('confirmed', 'compensated', 'failed')
  AND o.updated_at <= ? AND (o.updated_at, o.id) > (?, ?)
  AND o.action NOT LIKE 'compensate:%' AND o.watch_next_at IS NULL`
	/* Store.PurgePayloads: after the actions' filter (purgeFilter). */
	orderPurgeCandidates = ` ORDER BY o.updated_at, o.id LIMIT ?`
	/* Store.PurgePayloads: an open case, or a confirm window still watched, holds the payload. */
	selectOpenCaseFor = `SELECT (SELECT COUNT(*) FROM cases WHERE operation_id = ? AND status = 'open')
  + (SELECT COUNT(*) FROM operations WHERE id = ? AND watch_next_at IS NOT NULL)`
	/* Store.PurgePayloads */
	countRejectedFor = `SELECT COUNT(*) FROM rejected_payloads WHERE case_id IN (SELECT id FROM cases WHERE operation_id = ?) AND payload <> ''`
	countEvidenceFor = `SELECT COUNT(*) FROM evidence WHERE operation_id = ? AND candidates <> '[]'`
	countOutputsFor  = `SELECT COUNT(*) FROM attempt_outputs WHERE operation_id = ? AND purged_at IS NULL`
	/* Store.PurgePayloads: version untouched (no state change); detail_version moves so readers refresh. */
	updatePurgeOperation = `UPDATE operations SET payload = '', payload_purged_at = ?, detail_version = detail_version + 1
WHERE id = ? AND payload_purged_at IS NULL`
	updatePurgeRejected = `UPDATE rejected_payloads SET payload = '' WHERE case_id IN (SELECT id FROM cases WHERE operation_id = ?) AND payload <> ''`
	updatePurgeEvidence = `UPDATE evidence SET candidates = '[]' WHERE operation_id = ? AND candidates <> '[]'`
	updatePurgeOutputs  = `UPDATE attempt_outputs SET output = '', invalid = '', purged_at = ? WHERE operation_id = ? AND purged_at IS NULL`
)

type purgeCandidate struct {
	ID          string    `db:"id"`
	Tenant      string    `db:"tenant"`
	Destination string    `db:"destination"`
	Action      string    `db:"action"`
	UpdatedAt   time.Time `db:"updated_at"`
}

// PurgePayloads empties the payloads due at now under the configuration's
// retention, a batch of operations per transaction, each with its
// operation.payload_purged event in the same transaction. dryRun writes
// nothing and reports what would go. An operation purged once is not
// selected again. One that cannot be purged is skipped (*SkippedRows,
// with the report of the rest) and selected again next time.
func (s *Store) PurgePayloads(ctx context.Context, now time.Time, dryRun bool) (PurgeReport, error) {
	rep := PurgeReport{DryRun: dryRun, IDs: []string{}}
	shortest := s.shortestRetention()
	if shortest <= 0 {
		return rep, nil // nothing is ever purged
	}
	// Nothing terminal for less than the shortest retention can be due;
	// each candidate is then checked against its own action's.
	horizon := dbTime(now.Add(-shortest))
	filter, filterArgs := s.purgeFilter()
	cursorAt, cursorID := time.Time{}, ""
	var skipped *SkippedRows
	for {
		var cands []purgeCandidate
		args := append([]any{horizon, cursorAt, cursorID}, filterArgs...)
		if err := s.db.SelectContext(ctx, &cands, s.rebind(selectPurgeCandidates+filter+orderPurgeCandidates), append(args, purgeBatch)...); err != nil {
			return rep, fmt.Errorf("store.PurgePayloads: %w", err)
		}
		if len(cands) == 0 {
			return rep, skipped.orNil()
		}
		last := cands[len(cands)-1]
		cursorAt, cursorID = last.UpdatedAt, last.ID
		var due []purgeCandidate
		for _, c := range cands {
			if r := s.cfg.RetentionFor(c.Destination, c.Action); r > 0 && !c.UpdatedAt.After(now.Add(-r)) {
				due = append(due, c)
			}
		}
		if len(due) > 0 {
			batch, err := s.purgeBatch(ctx, now, due, dryRun)
			if err != nil && ctx.Err() == nil && !IsUnavailable(err) {
				// One operation that fails every time would fail its
				// batch, and hold back every batch after it, each round:
				// the batch goes again one operation per transaction, and
				// those that fail are skipped.
				batch, err = s.purgeEach(ctx, now, due, dryRun, &skipped)
			}
			if IsUnavailable(err) {
				rep.add(batch)
				return rep, roundEnds(skipped, "store.PurgePayloads", err)
			}
			if err != nil {
				return rep, err
			}
			rep.add(batch)
		}
		if len(cands) < purgeBatch {
			return rep, skipped.orNil()
		}
	}
}

func (r *PurgeReport) add(b PurgeReport) {
	r.Operations += b.Operations
	r.RejectedPayloads += b.RejectedPayloads
	r.Evidence += b.Evidence
	r.Outputs += b.Outputs
	for _, id := range b.IDs {
		if len(r.IDs) < maxReportIDs {
			r.IDs = append(r.IDs, id)
		}
	}
}

// shortestRetention is the shortest positive retention any action gets.
func (s *Store) shortestRetention() time.Duration {
	if s.cfg == nil {
		return 0
	}
	best := s.cfg.PayloadRetention
	for _, d := range s.cfg.Destinations {
		for _, ac := range d.Actions {
			if ac.Retention != nil && *ac.Retention > 0 && (best <= 0 || *ac.Retention < best) {
				best = *ac.Retention
			}
		}
	}
	return best
}

// purgeFilter keeps the scan off the actions never purged: with a default
// retention, those whose own retention is 0 (forever); without one, all
// but those whose own retention is set. (Actions kept longer than the
// shortest retention are still read, and skipped in Go.)
func (s *Store) purgeFilter() (string, []any) {
	var keep, purge []any
	for dn, d := range s.cfg.Destinations {
		for an, ac := range d.Actions {
			switch {
			case ac.Retention == nil:
			case *ac.Retention == 0:
				keep = append(keep, dn, an)
			default:
				purge = append(purge, dn, an)
			}
		}
	}
	pairs := func(args []any) string {
		return strings.TrimSuffix(strings.Repeat("(o.destination = ? AND o.action = ?) OR ", len(args)/2), " OR ")
	}
	switch {
	case s.cfg.PayloadRetention > 0 && len(keep) > 0:
		return " AND NOT (" + pairs(keep) + ")", keep
	case s.cfg.PayloadRetention <= 0:
		return " AND (" + pairs(purge) + ")", purge // shortestRetention > 0: purge is not empty
	}
	return "", nil
}

// purgeEach purges cands one per transaction, adding those that fail to
// *skipped; at a database that cannot be reached it stops, with that
// error (roundEnds).
func (s *Store) purgeEach(ctx context.Context, now time.Time, cands []purgeCandidate, dryRun bool, skipped **SkippedRows) (PurgeReport, error) {
	var rep PurgeReport
	for _, c := range cands {
		one, err := s.purgeBatch(ctx, now, []purgeCandidate{c}, dryRun)
		if IsUnavailable(err) {
			return rep, err
		}
		if err != nil {
			skip(skipped, "store.PurgePayloads", c.ID, err)
			continue
		}
		rep.add(one)
	}
	return rep, nil
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// purgeBatch purges cands in one transaction, re-reading each under its lock.
func (s *Store) purgeBatch(ctx context.Context, now time.Time, cands []purgeCandidate, dryRun bool) (PurgeReport, error) {
	rep, err := inTx(ctx, s, func(tx *sqlx.Tx) (PurgeReport, error) {
		var rep PurgeReport
		for _, c := range cands {
			row, err := s.lockOperation(ctx, tx, c.Tenant, c.ID)
			if err != nil {
				return rep, err
			}
			if row.PayloadPurgedAt.Valid || !review.State(row.State).Terminal() || !row.UpdatedAt.Equal(c.UpdatedAt) {
				continue // moved since it was selected: the next run decides again
			}
			var open int
			if err := s.get(ctx, tx, &open, selectOpenCaseFor, c.ID, c.ID); err != nil {
				return rep, err
			}
			if open > 0 {
				continue
			}
			var n [3]int
			for i, q := range []string{countRejectedFor, countEvidenceFor, countOutputsFor} {
				if err := s.get(ctx, tx, &n[i], q, c.ID); err != nil {
					return rep, err
				}
			}
			rep.Operations++
			rep.RejectedPayloads += n[0]
			rep.Evidence += n[1]
			rep.Outputs += n[2]
			rep.IDs = append(rep.IDs, c.ID)
			if dryRun {
				continue
			}
			for _, q := range []string{updatePurgeRejected, updatePurgeEvidence} {
				if _, err := s.exec(ctx, tx, q, c.ID); err != nil {
					return rep, err
				}
			}
			for _, q := range []string{updatePurgeOutputs, updatePurgeOperation} {
				if _, err := s.exec(ctx, tx, q, dbTime(now), c.ID); err != nil {
					return rep, err
				}
			}
			retention := s.cfg.RetentionFor(c.Destination, c.Action)
			detail := map[string]any{"payload_hash": row.PayloadHash, "retention": retention.String(),
				"terminal_since":    dbTime(row.UpdatedAt).Format(time.RFC3339Nano),
				"rejected_payloads": n[0], "evidence": n[1], "outputs": n[2]}
			if err := s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: retentionActor, Tenant: row.Tenant, OperationID: row.ID,
				Action: "operation.payload_purged", Detail: detailJSON(detail)}); err != nil {
				return rep, err
			}
		}
		if dryRun {
			// Locks were taken to count what a purge would see; nothing was written.
			return rep, errDryRunWith{rep}
		}
		return rep, nil
	})
	var dr errDryRunWith
	if errors.As(err, &dr) {
		return dr.rep, nil
	}
	if err != nil {
		return PurgeReport{}, fmt.Errorf("store.PurgePayloads: %w", err)
	}
	return rep, nil
}

// errDryRunWith carries a dry run's report out of the rolled-back transaction.
type errDryRunWith struct{ rep PurgeReport }

func (e errDryRunWith) Error() string { return errDryRun.Error() }
