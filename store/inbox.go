package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// InboundEvent is a verified destination webhook.
type InboundEvent struct {
	Source      string
	EventID     string
	OperationID string
	Body        string
	Candidates  []review.Candidate
	Note        string
}

const (
	/* Store.Inbound: the primary key deduplicates by (source, event id). */
	insertInbox = `INSERT INTO inbox (source, event_id, received_at, operation_id, body) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (source, event_id) DO NOTHING`
	/* Store.Inbound */
	selectOpTenant = `SELECT tenant FROM operations WHERE id = ? AND destination = ?`
	/* Store.Inbound: a webhook makes the reconciler look now — in review,
	   only where the case waits on a job (ClaimJobsInReview). */
	triggerProbe = `
UPDATE operations SET next_probe_at = ?
WHERE id = ? AND (state || '' IN ('ambiguous', 'accepted') OR state || '' = 'needs_review' AND next_probe_at IS NOT NULL)`
)

// Inbound records a verified webhook once per event id, attaches it to its
// operation as (never authoritative) evidence and asks the reconciler to
// probe now. duplicate reports an event id already seen. An operation that
// does not exist at that destination is review.ErrNotFound.
func (s *Store) Inbound(ctx context.Context, ev InboundEvent) (duplicate bool, err error) {
	duplicate, err = inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
		var tenant string
		err := tx.GetContext(ctx, &tenant, s.rebind(selectOpTenant), ev.OperationID, ev.Source)
		if errors.Is(err, sql.ErrNoRows) {
			return false, review.ErrNotFound
		}
		if err != nil {
			return false, err // not "not found": the database may be down
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, s.rebind(insertInbox), ev.Source, ev.EventID, now, ev.OperationID, ev.Body)
		if err != nil {
			return false, err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return true, nil
		}
		// Locked before the evidence is written, as on every other path.
		row, err := s.lockOperation(ctx, tx, tenant, ev.OperationID)
		if err != nil {
			return false, err
		}
		e := review.Evidence{Source: review.SourceWebhook, Verdict: review.VerdictInconclusive, Candidates: ev.Candidates,
			ObservedAt: now, Note: fmt.Sprintf(review.WhyWebhookNote, ev.EventID, ev.Note)}
		if err := s.insertEvidence(ctx, tx, ev.OperationID, e); err != nil {
			return false, err
		}
		actor, detail := "webhook:"+ev.Source, map[string]any{"source": "webhook", "event_id": ev.EventID}
		if review.State(row.State).Terminal() {
			// A resource it names that nobody answers for — beside a
			// confirmed operation's, or any of a failed or compensated
			// one — is for a person to look at (review.ExtraEffects).
			op, err := s.loadDetails(ctx, tx, row.operation())
			if err != nil {
				return false, err
			}
			found, err := s.extraEvidence(ctx, tx, row, op, actor, detail, e)
			if err != nil {
				return false, err
			}
			if found {
				// Only the destination's word names it so far: where it can
				// be searched, the reconciler looks (the confirm window's
				// watch, review.Watch), and what it finds goes on the case.
				return false, s.watchAgain(ctx, tx, row)
			}
		}
		// Weighed with everything else: a webhook never confirms, but a
		// pending or retry_wait operation it claims an effect for is
		// reconciled before anything is repeated.
		if err := s.weigh(ctx, tx, row, actor, detail); err != nil {
			return false, err
		}
		_, err = tx.ExecContext(ctx, s.rebind(triggerProbe), now, ev.OperationID)
		return false, err
	})
	if err != nil && !errors.Is(err, review.ErrNotFound) {
		return false, fmt.Errorf("store.Inbound: %w", err)
	}
	return duplicate, err
}
