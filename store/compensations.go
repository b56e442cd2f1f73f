package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

const (
	/* Store.registerCompensation */
	insertCompensation = `
INSERT INTO compensations (operation_id, parent_id, case_id, decision_id, resource_ref, keep_ref, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	/* Store.settleParent */
	selectCompensationLink = `SELECT parent_id, case_id, resource_ref, keep_ref FROM compensations WHERE operation_id = ?`
	/* Store.Compensations */
	selectCompensations = `SELECT c.operation_id, c.case_id, c.decision_id, c.resource_ref, c.created_at, o.state, o.state_reason, o.key
FROM compensations c JOIN operations o ON o.id = c.operation_id WHERE c.parent_id = ? ORDER BY c.created_at, c.operation_id`
)

// compensationActor is who moves a parent when its compensation settles.
const compensationActor = "system:compensation"

// registerCompensation records the compensation operation decision d
// asked for on case c (dp.Undo), in the decision's transaction: the child
// operation (pending, its own key), its registration event, and its link
// to the parent, the case, the resource it undoes and the one kept.
func (s *Store) registerCompensation(ctx context.Context, tx *sqlx.Tx, c *Case, parentID string, d *Decision, dp *review.DecisionPlan) error {
	p := dp.Undo
	r := &p.Registration
	id := newID("op_", d.DecidedAt)
	res, err := s.exec(ctx, tx, insertOperation, id, r.Tenant, r.Key, r.SourceRef, r.LogicalVersion, r.Action, r.Destination,
		string(r.Risk), joinFlags(r.Flags), string(r.Payload), p.PayloadHash, string(p.State), p.Reason, dbTime(*r.Deadline),
		*r.MaxAttempts, nil, d.DecidedAt, d.DecidedAt)
	if err != nil {
		return fmt.Errorf("compensation: %w", err)
	}
	if rowsAffected(res) != 1 {
		return fmt.Errorf("%w: a compensation of this resource was already registered by this decision", review.ErrConflict)
	}
	if err := s.appendEvent(ctx, tx, plannedEvent(p.Event, d.DecidedAt, d.Actor, r.Tenant, id)); err != nil {
		return err
	}
	undo := d.ResourceRef
	if dp.UndoRef != "" {
		undo = dp.UndoRef
	}
	_, err = s.exec(ctx, tx, insertCompensation, id, parentID, c.ID, d.ID, undo, dp.Keep, d.DecidedAt)
	return err
}

// settleParent moves the parent of compensation child (now in state) as
// review.CompensationSettles says, in the transaction that moved the
// child: compensating → compensated (or confirmed with the kept resource)
// once the undo is confirmed, its case resolved; or back to needs_review
// with compensation_failed. A parent that stayed confirmed (an extra
// resource undone) keeps its state; its open case is resolved, or marked
// compensation_failed. A parent a reviewer has moved on by hand is left
// alone.
func (s *Store) settleParent(ctx context.Context, tx *sqlx.Tx, tenant, child string, state review.State) error {
	var link struct {
		ParentID    string `db:"parent_id"`
		CaseID      string `db:"case_id"`
		ResourceRef string `db:"resource_ref"`
		KeepRef     string `db:"keep_ref"`
	}
	err := s.get(ctx, tx, &link, selectCompensationLink, child)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // registered under the prefix some other way: nothing to settle
	}
	if err != nil {
		return fmt.Errorf("compensation link: %w", err)
	}
	parent, err := s.lockOperation(ctx, tx, tenant, link.ParentID)
	if err != nil {
		return err
	}
	to, reasons, why := review.CompensationSettles(state, link.KeepRef)
	if to == "" {
		return nil
	}
	detail := map[string]any{"compensation": child, "resource_ref": link.ResourceRef, "case_id": link.CaseID}
	switch review.State(parent.State) {
	case review.Compensating:
		if len(reasons) > 0 {
			detail["escalation"] = reasons
		}
		if to == review.Confirmed {
			if err := s.setResource(ctx, tx, parent.ID, review.ResourceRef{Ref: link.KeepRef}); err != nil {
				return err
			}
		}
		if err := s.transition(ctx, tx, parent, to, why, compensationActor, "compensation.settled", detail); err != nil {
			return err
		}
		if to == review.NeedsReview {
			return nil // its case stays open, now with compensation_failed
		}
		return s.resolveBySystem(ctx, tx, link.CaseID, "compensation_done", compensationActor)
	case review.Confirmed:
		// An extra resource's undo: the parent stays confirmed, and the
		// case the undo was decided on (while still open) says how it went.
		c, err := s.lockCase(ctx, tx, link.CaseID)
		if err != nil || c.Status != CaseOpen {
			return err
		}
		if len(reasons) > 0 {
			_, err := s.openCase(ctx, tx, parent.ID, parent.Tenant, reasons, compensationActor)
			return err
		}
		return s.resolveBySystem(ctx, tx, link.CaseID, "compensation_done", compensationActor)
	}
	// A reviewer settled the undo by hand meanwhile: the parent has moved
	// on, and what became of this compensation changes nothing.
	return nil
}

// Compensation is a compensation operation of a parent, as the case page
// lists it.
type Compensation struct {
	OperationID string       `db:"operation_id"`
	CaseID      string       `db:"case_id"`
	DecisionID  string       `db:"decision_id"`
	ResourceRef string       `db:"resource_ref"`
	State       review.State `db:"state"`
	StateReason string       `db:"state_reason"`
	Key         string       `db:"key"`
	CreatedAt   sql.NullTime `db:"created_at"`
}

// Compensations lists the compensation operations of parent, oldest first.
func (s *Store) Compensations(ctx context.Context, parent string) ([]Compensation, error) {
	var cs []Compensation
	if err := s.sel(ctx, nil, &cs, selectCompensations, parent); err != nil {
		return nil, fmt.Errorf("store.Compensations: %w", err)
	}
	return cs, nil
}
