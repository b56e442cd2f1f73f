package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// A check (review.Checkable) asks the destination about an operation
// whose case is open — in review, or settled — at a person's word. Its probes are HTTP requests, sent outside
// any transaction: CheckCase says, before they are sent, whether the
// person may ask; RecordCheck says it again under the locks, records what
// the destination answered, and has the case recommend again.

// CheckCase is the operation of case id, with its details, when by may
// ask its destination about it now; otherwise why not: out of by's scope
// (ErrNotFound), decided already (*review.AlreadyDecidedError), held by
// another (*review.ClaimHeldError), a role that does not work the case
// (ErrForbidden), nothing to ask about or with, or asked a moment ago
// (ErrConflict).
func (s *Store) CheckCase(ctx context.Context, id string, by review.Principal, scope []string) (*review.Operation, error) {
	var op *review.Operation
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		op, _, err = s.checkable(ctx, tx, id, by, scope)
		return err
	})
	return op, err
}

// RecordCheck records a, what the destination answered a check of case
// id's operation (review.CheckAnswers), once CheckCase's conditions still
// hold under the locks, and weighs the operation's record again: it stays
// where it is and its case recommends from all the evidence, a person
// still deciding; the job the case waits on, as the job probe answered,
// is taken as a poll's answer is (its end put before the person); on a
// settled operation what the answers show that nobody answers for is put
// to the case. Audited by by (evidence.recorded, or
// evidence.extra_effect; job.updated), in the same transaction.
func (s *Store) RecordCheck(ctx context.Context, id string, by review.Principal, scope []string, a review.CheckAnswers) error {
	evs := a.Evidence
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		op, row, err := s.checkable(ctx, tx, id, by, scope)
		if err != nil {
			return err
		}
		verdicts := make([]review.Verdict, 0, len(evs))
		// One check, one instant: what its probes answered — the job's
		// end too — is read together (review.LastAnswers, a lookup and a
		// search that disagree). Before, each row took the clock as it
		// was written, microseconds apart, and the newest alone read as
		// the answer.
		now := s.now()
		for _, ev := range evs {
			ev.ObservedAt = now
			if err := s.insertEvidence(ctx, tx, op.ID, ev); err != nil {
				return err
			}
			verdicts = append(verdicts, ev.Verdict)
		}
		detail := map[string]any{"check": true, "probes": len(evs), "verdicts": verdicts}
		if j := a.Job; j != nil && op.State == review.NeedsReview {
			detail["job"], detail["job_status"] = j.Ref, j.Status
			switch err := s.putJobAt(ctx, tx, op.Tenant, op.ID, *j, by.Name, now); {
			case errors.Is(err, review.ErrConflict):
				// Not the ledger's job, or one it knows ended otherwise:
				// the ledger keeps its record, and the audit says why.
				detail["job_refused"] = err.Error()
			case err != nil:
				return err
			}
			if row, err = s.lockOperation(ctx, tx, op.Tenant, op.ID); err != nil {
				return err
			}
		}
		if !op.State.Terminal() {
			return s.weigh(ctx, tx, row, by.Name, detail)
		}
		// Settled: what the destination shows that nobody answers for is
		// put to the case, as by any path (AddEvidence); otherwise the case
		// recommends from all of it.
		if found, err := s.extraEvidence(ctx, tx, row, op, by.Name, detail, evs...); err != nil || found {
			return err
		}
		if err := s.reassessOpenCase(ctx, tx, op.ID, op.Tenant, by.Name); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{Actor: by.Name, Tenant: op.Tenant, OperationID: op.ID,
			Action: "evidence.recorded", Detail: detailJSON(detail)})
	})
	var already *review.AlreadyDecidedError
	var held *review.ClaimHeldError
	switch {
	case err == nil, errors.Is(err, review.ErrNotFound), errors.Is(err, review.ErrConflict), errors.Is(err, review.ErrForbidden),
		errors.As(err, &already), errors.As(err, &held):
		return err // the person's answer, as CheckCase gives it
	}
	return fmt.Errorf("store.RecordCheck: %w", err)
}

// checkable is CheckCase's judgement in tx, under the operation's and
// the case's locks (lockCaseAndOperation); it returns the operation's row
// too.
func (s *Store) checkable(ctx context.Context, tx *sqlx.Tx, id string, by review.Principal, scope []string) (*review.Operation, *opRow, error) {
	row, c, err := s.lockCaseAndOperation(ctx, tx, id, scope)
	if err != nil {
		return nil, nil, err
	}
	// The grant as it is now: a person disabled, demoted or moved off the
	// tenant meanwhile asks nothing; one whose role does not work this
	// case (review.Role.MayClaim) neither.
	name, err := s.claimant(ctx, tx, by, c, true)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	if c.Status != CaseOpen {
		return nil, nil, &review.AlreadyDecidedError{CaseID: c.ID, By: c.ResolvedBy, Action: c.Resolution, At: deref(c.ResolvedAt)}
	}
	if err := review.CheckClaim(c.ID, c.ClaimedBy, c.ClaimUntil, name, now); err != nil {
		return nil, nil, err
	}
	op, err := s.loadDetails(ctx, tx, row.operation())
	if err != nil {
		return nil, nil, err
	}
	if !review.Checkable(op, s.cfg.Destination(op.Destination)) {
		return nil, nil, fmt.Errorf("%w: the destination cannot be asked about this operation from here: it is %s, and only an operation in review or settled, whose destination has a status lookup or a search, is asked",
			review.ErrConflict, op.State)
	}
	if now.Sub(review.LastAsked(op)) < review.CheckInterval {
		return nil, nil, fmt.Errorf("%w: the destination was asked about this operation less than %d seconds ago: its answers are under Attempts and evidence",
			review.ErrConflict, int(review.CheckInterval/time.Second))
	}
	return op, row, nil
}
