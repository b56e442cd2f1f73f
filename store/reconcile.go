package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// ProbeClaim is an ambiguous operation claimed by one reconciler for one
// round. Generation fences the round's completion write.
type ProbeClaim struct {
	Op         *review.Operation
	Owner      string
	Generation int64
	Round      int
	// LastWrite is the latest moment an attempt could have landed
	// (review.LastWriteAt).
	LastWrite time.Time
}

const (
	/* Store.ClaimAmbiguous: due, unclaimed (or claim expired) ambiguous operations. */
	selectDue = `
SELECT id FROM operations
WHERE state = ? AND (next_probe_at IS NULL OR next_probe_at <= ?)
  AND (probe_until IS NULL OR probe_until <= ?)
ORDER BY next_probe_at LIMIT ?`
	/* Store.ClaimAmbiguous: PostgreSQL lets several instances claim disjoint sets. */
	selectDueSkipLocked = selectDue + ` FOR UPDATE SKIP LOCKED`
	/* Store.ClaimJobsInReview: in review, next_probe_at is set only while
	   the case waits on a job (review.JobToWaitOn); NULL is never due. */
	selectDueInReview = `
SELECT id FROM operations
WHERE state = 'needs_review' AND next_probe_at <= ?
  AND (probe_until IS NULL OR probe_until <= ?)
ORDER BY next_probe_at LIMIT ?`
	/* Store.ClaimJobsInReview */
	selectDueInReviewSkipLocked = selectDueInReview + ` FOR UPDATE SKIP LOCKED`
	/* Store.ClaimAmbiguous */
	claimOperation = `
UPDATE operations SET probe_owner = ?, probe_until = ?, probe_generation = probe_generation + 1
WHERE id = ? AND state || '' = ? AND (probe_until IS NULL OR probe_until <= ?)`
	/* Store.ClaimAmbiguous */
	selectClaimed = `SELECT ` + opColumns + `, probe_generation, probe_round FROM operations WHERE id = ?`
	/* Store.ClaimAmbiguous */
	/* Store.ApplySettlement: fenced — only the current claim may complete the round. */
	releaseProbe = `
UPDATE operations SET probe_owner = NULL, probe_until = NULL, probe_round = probe_round + ?, next_probe_at = ?
WHERE id = ? AND state || '' = 'ambiguous' AND probe_owner = ? AND probe_generation = ?`
)

// ClaimAmbiguous claims up to n ambiguous operations due for probing, for
// lease. Each claim bumps the operation's probe generation.
func (s *Store) ClaimAmbiguous(ctx context.Context, owner string, n int, lease time.Duration) ([]ProbeClaim, error) {
	return s.claim(ctx, review.Ambiguous, owner, n, lease)
}

// ClaimAccepted claims up to n accepted operations due for a job status
// poll, the same way.
func (s *Store) ClaimAccepted(ctx context.Context, owner string, n int, lease time.Duration) ([]ProbeClaim, error) {
	return s.claim(ctx, review.Accepted, owner, n, lease)
}

// ClaimJobsInReview claims up to n operations in review due for a poll of
// the job their case waits on (review.JobToWaitOn: the deadline passed
// while they followed it), the same way: the job's end, polled as while
// accepted, is put before the person deciding (ApplyJobPoll).
func (s *Store) ClaimJobsInReview(ctx context.Context, owner string, n int, lease time.Duration) ([]ProbeClaim, error) {
	return s.claim(ctx, review.NeedsReview, owner, n, lease)
}

func (s *Store) claim(ctx context.Context, state review.State, owner string, n int, lease time.Duration) ([]ProbeClaim, error) {
	now := s.now()
	due, dueSkipLocked, args := selectDue, selectDueSkipLocked, []any{string(state), now, now}
	if state == review.NeedsReview {
		due, dueSkipLocked, args = selectDueInReview, selectDueInReviewSkipLocked, []any{now, now}
	}
	ids, err := s.claimDue(ctx, due, dueSkipLocked, args, n, claimOperation,
		func(id string) []any { return []any{owner, now.Add(lease), id, string(state), now} })
	var skipped *SkippedRows
	if err != nil && !errors.As(err, &skipped) {
		return nil, fmt.Errorf("store.claim: %w", err)
	}
	return readClaimed(ctx, skipped, "store.claim", ids, func(id string) (ProbeClaim, error) {
		var r struct {
			opRow
			Generation int64 `db:"probe_generation"`
			Round      int   `db:"probe_round"`
		}
		if err := s.db.GetContext(ctx, &r, s.rebind(selectClaimed), id); err != nil {
			return ProbeClaim{}, err
		}
		op, err := s.loadDetails(ctx, s.db, r.opRow.operation())
		if err != nil {
			return ProbeClaim{}, err
		}
		return ProbeClaim{Op: op, Owner: owner, Generation: r.Generation, Round: r.Round, LastWrite: review.LastWriteAt(op.Attempts)}, nil
	})
}

// ErrFenced: the claim was superseded (its lease expired and another
// reconciler claimed the operation, or the operation moved on).
var ErrFenced = errors.New("probe claim superseded")

// claimDue claims, in one transaction, up to n operations the query due
// lists (its args, then the limit) — skipLocked on PostgreSQL, so several
// instances claim disjoint sets — each with the update claim and
// claimArgs(id), and returns the ids it claimed. Nothing due, an idle tick
// reads and takes no write lock (SQLite has one writer, which the API's
// calls need). An operation whose claim fails every time would fail the
// batch, every round, and nothing would be claimed: when the batch fails,
// the operations due are claimed one per transaction, and those that fail
// are skipped (*SkippedRows, with the ids of the others).
func (s *Store) claimDue(ctx context.Context, due, skipLocked string, args []any, n int, claim string, claimArgs func(id string) []any) ([]string, error) {
	var probe []string
	if err := s.sel(ctx, nil, &probe, due, append(slices.Clone(args), 1)...); err != nil {
		return nil, err
	}
	if len(probe) == 0 {
		return nil, nil
	}
	ids, err := inTx(ctx, s, func(tx *sqlx.Tx) ([]string, error) {
		q := due
		if s.engine == Postgres {
			q = skipLocked
		}
		var listed []string
		if err := tx.SelectContext(ctx, &listed, s.rebind(q), append(slices.Clone(args), n)...); err != nil {
			return nil, err
		}
		var ids []string
		for _, id := range listed {
			res, err := tx.ExecContext(ctx, s.rebind(claim), claimArgs(id)...)
			if err != nil {
				return nil, err
			}
			if k, _ := res.RowsAffected(); k == 1 {
				ids = append(ids, id)
			}
		}
		return ids, nil
	})
	if err == nil || ctx.Err() != nil {
		return ids, err
	}
	var listed []string
	if err := s.sel(ctx, nil, &listed, due, append(slices.Clone(args), n)...); err != nil {
		return nil, err
	}
	ids = nil
	var skipped *SkippedRows
	for _, id := range listed {
		// The claim re-checks that it is still due and unclaimed.
		claimed, err := inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
			res, err := tx.ExecContext(ctx, s.rebind(claim), claimArgs(id)...)
			if err != nil {
				return false, err
			}
			k, _ := res.RowsAffected()
			return k == 1, nil
		})
		switch {
		case IsUnavailable(err):
			return ids, roundEnds(skipped, "store.claimDue", err)
		case err != nil:
			skip(&skipped, "store.claimDue", id, err)
		case claimed:
			ids = append(ids, id)
		}
	}
	return ids, skipped.orNil()
}

// ApplySettlement completes a reconciliation round: records every probe's
// evidence and moves the operation where review.Settle says — or, when it
// settled nothing, schedules the next round. It is fenced by the claim's
// generation: a reconciler that paused past its lease gets ErrFenced and
// writes nothing.
func (s *Store) ApplySettlement(ctx context.Context, c ProbeClaim, st review.Settlement) error {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		row, err := s.lockOperation(ctx, tx, c.Op.Tenant, c.Op.ID)
		if err != nil {
			return err
		}
		var next any
		if !st.NextProbe.IsZero() {
			next = dbTime(st.NextProbe)
		}
		counted := 1
		if st.Uncounted {
			counted = 0 // a search inside the lag proved nothing yet
		}
		res, err := tx.ExecContext(ctx, s.rebind(releaseProbe), counted, next, c.Op.ID, c.Owner, c.Generation)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return ErrFenced
		}
		now := s.now() // one round, one instant, as a check's (RecordCheck)
		for _, ev := range st.Evidence {
			ev.ObservedAt = now
			if err := s.insertEvidence(ctx, tx, c.Op.ID, ev); err != nil {
				return err
			}
		}
		actor := "system:reconciler"
		if st.State == "" {
			return s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Tenant: row.Tenant, OperationID: row.ID,
				Action: "reconcile.inconclusive", Detail: detailJSON(map[string]any{"reason": st.Reason, "probes": len(st.Evidence), "next_probe_at": st.NextProbe})})
		}
		if st.Resource != nil {
			if err := s.setResource(ctx, tx, row.ID, *st.Resource); err != nil {
				return err
			}
		}
		if st.Job != nil {
			// Found for the attempts so far: the latest's.
			if err := s.upsertJob(ctx, tx, row.ID, *st.Job, row.AttemptCount, s.now()); err != nil {
				return err
			}
		}
		detail := map[string]any{"probes": len(st.Evidence)}
		if len(st.Reasons) > 0 {
			detail["escalation"] = st.Reasons
		}
		if err := s.transition(ctx, tx, row, st.State, st.Reason, actor, "reconcile.settled", detail); err != nil {
			return err
		}
		if st.Watch {
			if err := s.startWatch(ctx, tx, row.ID, s.cfg.Destination(row.Destination)); err != nil {
				return err
			}
		}
		if st.State == review.RetryWait {
			return s.setNextAttempt(ctx, tx, row.ID)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrFenced) {
			return err
		}
		return fmt.Errorf("store.ApplySettlement: %w", err)
	}
	return nil
}

const (
	/* Store.ApplyJobPoll: fenced like ApplySettlement. */
	releaseJobPoll = `
UPDATE operations SET probe_owner = NULL, probe_until = NULL, probe_round = probe_round + 1, next_probe_at = ?
WHERE id = ? AND state || '' IN ('accepted', 'needs_review') AND probe_owner = ? AND probe_generation = ?`
)

// ApplyJobPoll completes a job status poll of an accepted operation, or of
// one in review whose case waits on its job: the job as the destination
// reports it (nil when the poll failed) is recorded as PutJob would, which
// confirms, fails or escalates an accepted operation when the job has
// finished, and puts the end before the person deciding one in review
// (putJobTx); otherwise the next poll is scheduled at next.
//
// In review, whether the job is polled again is decided as every
// assessment of the case decides it (pollJobWaitedOn), from the operation
// as it is now: the next poll stays at next while the case waits on the
// job, and none is left once it does not. Before, it was decided here from
// the claim's snapshot, and a job whose end the integrator reported during
// the poll was polled again.
func (s *Store) ApplyJobPoll(ctx context.Context, c ProbeClaim, job *review.Job, next time.Time) error {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		row, err := s.lockOperation(ctx, tx, c.Op.Tenant, c.Op.ID)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.rebind(releaseJobPoll), dbTime(next), c.Op.ID, c.Owner, c.Generation)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return ErrFenced
		}
		if job != nil {
			if err := s.putJobTx(ctx, tx, c.Op.Tenant, c.Op.ID, *job, "system:reconciler"); err != nil {
				return err
			}
		}
		if row.State != string(review.NeedsReview) {
			return nil
		}
		return s.reassessOpenCase(ctx, tx, row.ID, row.Tenant, "system:reconciler")
	})
	if err != nil {
		if errors.Is(err, ErrFenced) || errors.Is(err, review.ErrConflict) {
			return err
		}
		return fmt.Errorf("store.ApplyJobPoll: %w", err)
	}
	return nil
}

// ApplyJobGone completes a job status poll whose answer contradicts the
// ledger — the destination no longer finds the operation's job: the answer
// is recorded as ev and the operation goes to a person with state_conflict
// (or, in review already, its case gains that reason and no longer waits
// on the job), in one transaction with its audit event. Polling again
// would wait for a job that, by the destination's word, is not there.
// Fenced like ApplyJobPoll.
func (s *Store) ApplyJobGone(ctx context.Context, c ProbeClaim, ev review.Evidence, reason string) error {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		row, err := s.lockOperation(ctx, tx, c.Op.Tenant, c.Op.ID)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.rebind(releaseJobPoll), nil, c.Op.ID, c.Owner, c.Generation)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return ErrFenced
		}
		ev.ObservedAt = s.now()
		if err := s.insertEvidence(ctx, tx, c.Op.ID, ev); err != nil {
			return err
		}
		if row.State == string(review.NeedsReview) {
			if _, err := s.assessCase(ctx, tx, row.ID, row.Tenant, []review.Reason{review.ReasonStateConflict}, "system:reconciler", false); err != nil {
				return err
			}
			return s.appendEvent(ctx, tx, &AuditEvent{Actor: "system:reconciler", Tenant: row.Tenant, OperationID: row.ID,
				Action: "evidence.recorded", Detail: detailJSON(map[string]any{"reason": reason, "probes": 1})})
		}
		return s.transition(ctx, tx, row, review.NeedsReview, reason, "system:reconciler", "reconcile.settled",
			map[string]any{"probes": 1, "escalation": []review.Reason{review.ReasonStateConflict}})
	})
	if err != nil {
		if errors.Is(err, ErrFenced) || errors.Is(err, review.ErrConflict) {
			return err
		}
		return fmt.Errorf("store.ApplyJobGone: %w", err)
	}
	return nil
}
