package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

const (
	/* Store.ExpireDeadlines */
	selectPastDeadline = `
SELECT id, tenant FROM operations
WHERE state IN ('pending', 'awaiting_approval', 'retry_wait', 'accepted') AND deadline <= ?
ORDER BY deadline LIMIT ?`
	/* Store.ExpireDeadlines: approval requests that lapsed (cases_expiring). */
	selectLapsedApprovals = `
SELECT o.id, o.tenant FROM cases c JOIN operations o ON o.id = c.operation_id
WHERE c.status = 'open' AND c.expires_at IS NOT NULL AND c.expires_at <= ?
ORDER BY c.expires_at LIMIT ?`
	/* Store.ExpireDeadlines: open cases the clock alone changes now (cases_reassess). */
	selectCasesToReassess = `
SELECT operation_id AS id, tenant FROM cases
WHERE status = 'open' AND reassess_at IS NOT NULL AND reassess_at <= ?
ORDER BY reassess_at LIMIT ?`
)

const deadlineSweeper = "system:deadline-sweeper"

// reassessPerSweep bounds the cases one sweep assesses again. Each is a
// transaction of its own that reads the operation's whole record: about
// 8 ms on PostgreSQL on a loaded 2-core machine (124 a second, 581 on
// SQLite), so 500, the bound of the other sweeps, held a round — and the
// lease sweep behind it — for 4 s when many came due at once, as after
// migration 0060. A due case waits for the next round (a second) instead.
const reassessPerSweep = 100

// ExpireDeadlines ends operations whose deadline passed while nobody was
// working on them, so every operation ends terminal or in review within its
// deadline (I4): never attempted → failed; waiting to retry → failed, or
// ambiguous when an earlier attempt may have had its effect; an accepted
// job that never finished → needs_review; awaiting approval past its
// request's expiry or its deadline → failed, the request resolved as
// expired (review.ApprovalLapsed). Ambiguous operations are the
// reconciler's, in-flight ones the lease sweeper's. An operation that
// cannot be ended is skipped (*SkippedRows) and the rest are.
//
// Then it assesses again the open cases the clock has changed since they
// were last assessed (Case.ReassessAt): a deadline nearing, or the
// operation's wait reaching a step of age, ranks a case higher in the
// queue; a deadline passing in review changes it as
// evidence would — deadline_expired, a recommendation to fail rather than
// retry where nothing was made — and the form a reviewer has open is
// refused as stale. Before, such a case went on recommending a retry,
// preselected, where a case opened a minute later recommended failing.
// Those are not counted: the count is of operations ended.
func (s *Store) ExpireDeadlines(ctx context.Context) (int, error) {
	var due, lapsed, changed []dueOp
	if err := s.db.SelectContext(ctx, &due, s.rebind(selectPastDeadline), s.now(), 500); err != nil {
		return 0, fmt.Errorf("store.ExpireDeadlines: %w", err)
	}
	if err := s.db.SelectContext(ctx, &lapsed, s.rebind(selectLapsedApprovals), s.now(), 500); err != nil {
		return 0, fmt.Errorf("store.ExpireDeadlines: %w", err)
	}
	if err := s.db.SelectContext(ctx, &changed, s.rebind(selectCasesToReassess), s.now(), reassessPerSweep); err != nil {
		return 0, fmt.Errorf("store.ExpireDeadlines: %w", err)
	}
	n, err := s.expireDeadlines(ctx, append(due, lapsed...))
	var skipped *SkippedRows
	if err != nil && !errors.As(err, &skipped) {
		return n, err // the database is out of reach, or ctx ended
	}
	// After the operations ended above: an approval case expired there is
	// resolved, not updated first.
	_, err = eachRow(ctx, "store.ExpireDeadlines", skipped, changed, func(d dueOp) string { return d.ID }, movedOn, func(d dueOp) (bool, error) {
		return false, s.WithTx(ctx, func(tx *sqlx.Tx) error {
			if _, err := s.lockOperation(ctx, tx, d.Tenant, d.ID); err != nil {
				return err
			}
			return s.reassessOpenCase(ctx, tx, d.ID, d.Tenant, deadlineSweeper)
		})
	})
	return n, err
}

// dueOp is an operation a deadline sweep visits.
type dueOp = struct {
	ID     string `db:"id"`
	Tenant string `db:"tenant"`
}

// expireDeadlines ends the operations due (ExpireDeadlines).
func (s *Store) expireDeadlines(ctx context.Context, due []dueOp) (int, error) {
	return eachRow(ctx, "store.ExpireDeadlines", nil, due, func(d dueOp) string { return d.ID }, movedOn, func(d dueOp) (bool, error) {
		return inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
			row, err := s.lockOperation(ctx, tx, d.Tenant, d.ID)
			if err != nil {
				return false, err
			}
			if row.State == string(review.AwaitingApproval) {
				return s.expireApproval(ctx, tx, row)
			}
			if s.now().Before(row.Deadline) {
				return false, nil
			}
			op := row.operation()
			to, reason := review.Failed, review.WhyDeadlineBeforeRun
			detail := map[string]any{"escalation": []review.Reason{review.ReasonDeadlineExpired}}
			switch op.State {
			case review.RetryWait:
				prior, err := s.loadPriorEffect(ctx, tx, op, op.AttemptCount+1)
				if err != nil {
					return false, err
				}
				reason = review.WhyDeadlineWhileWaiting
				if to = review.BudgetEnded(op.Risk, prior); to == review.Ambiguous {
					reason += "; " + review.WhyEarlierMayHaveHadEffect
				}
			case review.Accepted:
				// Its job is still polled: its end is put before the person
				// deciding (pollJobWaitedOn, ClaimJobsInReview).
				to, reason = review.NeedsReview, review.WhyDeadlineBeforeJobFinished
			case review.Pending:
			default:
				return false, nil // moved on meanwhile
			}
			return true, s.transition(ctx, tx, row, to, reason, deadlineSweeper, "operation.deadline_expired", detail)
		})
	})
}

// expireApproval fails row, awaiting approval, once its request lapsed
// (review.ApprovalLapsed), and resolves the request as expired: it is
// answered, and nobody may approve it afterwards.
func (s *Store) expireApproval(ctx context.Context, tx *sqlx.Tx, row *opRow) (bool, error) {
	var c *Case
	var open Case
	switch err := tx.GetContext(ctx, &open, s.rebind(selectOpenCase), row.ID); {
	case err == nil:
		open.fill()
		c = &open
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("approval case: %w", err)
	}
	var expires *time.Time
	if c != nil {
		expires = c.ExpiresAt
	}
	now := s.now()
	lapsed, reason := review.ApprovalLapsed(expires, row.Deadline, now)
	if !lapsed {
		return false, nil
	}
	detail := map[string]any{"escalation": []review.Reason{review.ReasonApprovalRequired}}
	if err := s.transition(ctx, tx, row, review.Failed, reason, deadlineSweeper, "operation.approval_expired", detail); err != nil {
		return false, err
	}
	if c == nil {
		return true, nil
	}
	return true, s.resolveBySystem(ctx, tx, c.ID, "expired", deadlineSweeper)
}
