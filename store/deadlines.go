package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

const (
	/* Store.ExpireDeadlines */
	selectPastDeadline = `
SELECT id, tenant FROM operations
WHERE state IN ('pending', 'awaiting_approval', 'retry_wait', 'accepted') AND deadline <= ?
ORDER BY deadline LIMIT ?`
)

// ExpireDeadlines ends operations whose deadline passed while nobody was
// working on them, so every operation ends terminal or in review within its
// deadline (I4): never attempted → failed; waiting to retry → failed, or
// ambiguous when an earlier attempt may have had its effect; an accepted
// job that never finished → needs_review. Ambiguous operations are the
// reconciler's, in-flight ones the lease sweeper's.
func (s *Store) ExpireDeadlines(ctx context.Context) (int, error) {
	var due []struct {
		ID     string `db:"id"`
		Tenant string `db:"tenant"`
	}
	if err := s.db.SelectContext(ctx, &due, s.rebind(selectPastDeadline), s.now(), 500); err != nil {
		return 0, fmt.Errorf("store.ExpireDeadlines: %w", err)
	}
	n := 0
	for _, d := range due {
		expired, err := inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
			row, err := s.lockOperation(ctx, tx, d.Tenant, d.ID)
			if err != nil {
				return false, err
			}
			if s.now().Before(row.Deadline) {
				return false, nil
			}
			op := row.operation()
			to, reason := review.Failed, "the deadline passed before the operation could run"
			detail := map[string]any{"escalation": []review.Reason{review.ReasonDeadlineExpired}}
			switch op.State {
			case review.RetryWait:
				prior, err := s.loadPriorEffect(ctx, tx, op, op.AttemptCount+1)
				if err != nil {
					return false, err
				}
				reason = "the deadline passed while waiting to retry"
				if to = review.BudgetEnded(op.Risk, prior); to == review.Ambiguous {
					reason += "; an earlier attempt may have had its effect"
				}
			case review.Accepted:
				to, reason = review.NeedsReview, "the deadline passed before the destination's job finished"
			case review.Pending, review.AwaitingApproval:
			default:
				return false, nil // moved on meanwhile
			}
			return true, s.transition(ctx, tx, row, to, reason, "system:deadline-sweeper", "operation.deadline_expired", detail)
		})
		if err != nil && !errors.Is(err, review.ErrConflict) && !errors.Is(err, review.ErrNotFound) {
			return n, fmt.Errorf("store.ExpireDeadlines: %s: %w", d.ID, err)
		}
		if expired {
			n++
		}
	}
	return n, nil
}
