package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

const (
	/* Store.registerCompensation */
	insertCompensation = `
INSERT INTO compensations (operation_id, parent_id, case_id, decision_id, resource_ref, keep_ref, by_hand, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	/* Store.settleParent */
	selectCompensationLink = `SELECT parent_id, case_id, resource_ref, keep_ref, created_at FROM compensations WHERE operation_id = ?`
	/* Store.undoLeftToPerson */
	selectCompensationByHand = `SELECT parent_id, resource_ref, by_hand FROM compensations WHERE operation_id = ?`
	updateCompensationByHand = `UPDATE compensations SET by_hand = 1 WHERE operation_id = ?`
	updateOpReason           = `UPDATE operations SET state_reason = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?`
	/* Store.openCompensations */
	selectOpenCompensations = `SELECT o.id, o.state, c.resource_ref FROM compensations c JOIN operations o ON o.id = c.operation_id
WHERE c.parent_id = ? AND o.state NOT IN ('confirmed', 'compensated', 'failed') ORDER BY c.created_at, c.operation_id`
	/* Store.cancelCompensations */
	updateCompensationCanceled = `UPDATE compensations SET canceled_by = ? WHERE operation_id = ?`
	/* Store.alsoWrittenBy: the other operations whose resource is ref at
	the destination, compensations and the undone aside. The first
	condition narrows through the refs' search index (migration 0032):
	PostgreSQL's trigram index on the folded ref, SQLite's FTS5 trigram
	table; the equality then decides. */
	alsoWroteCond = ` AND o.resource_ref = ? AND o.destination = ? AND o.id <> ? AND o.state <> 'compensated'
AND NOT EXISTS (SELECT 1 FROM compensations c WHERE c.operation_id = o.id) ORDER BY o.created_at, o.id LIMIT 4`
	selectAlsoWrotePostgres = `SELECT o.id, o.tenant FROM operations o
WHERE translate(o.resource_ref, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') LIKE ? ESCAPE '\'` + alsoWroteCond
	selectAlsoWroteSQLite = `SELECT o.id, o.tenant FROM operations o
WHERE o.rowid IN (SELECT rowid FROM operations_search WHERE operations_search MATCH ?)` + alsoWroteCond
	// A ref too short for a trigram: no index holds it, and the scan is
	// rare (a decision to undo such a ref).
	selectAlsoWroteShort = `SELECT o.id, o.tenant FROM operations o WHERE 1 = 1` + alsoWroteCond
	/* Store.Compensations */
	selectCompensations = `SELECT c.operation_id, c.case_id, c.decision_id, c.resource_ref, c.canceled_by, c.by_hand, c.created_at, o.state, o.state_reason, o.key, o.deadline
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
	id := d.CompensationID
	row := opRow{ID: id, Tenant: r.Tenant, Key: r.Key, SourceRef: r.SourceRef, LogicalVersion: r.LogicalVersion,
		Action: r.Action, Destination: r.Destination, Risk: string(r.Risk), Flags: joinFlags(r.Flags), Payload: string(r.Payload),
		PayloadHash: p.PayloadHash, State: string(p.State), StateReason: p.Reason, Deadline: dbTime(*r.Deadline),
		MaxAttempts: *r.MaxAttempts, CreatedAt: d.DecidedAt}
	a := row.insertArgs()
	n, err := s.write(ctx, tx, insertOperation, &a)
	if err != nil {
		return fmt.Errorf("compensation: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("%w: a compensation of this resource was already registered by this decision", review.ErrConflict)
	}
	if err := s.appendEvent(ctx, tx, plannedEvent(p.Event, d.DecidedAt, d.Actor, r.Tenant, id)); err != nil {
		return err
	}
	undo := d.ResourceRef
	if dp.UndoRef != "" {
		undo = dp.UndoRef
	}
	byHand := 0
	if dp.UndoByHand {
		byHand = 1
	}
	_, err = s.exec(ctx, tx, insertCompensation, id, parentID, c.ID, d.ID, undo, dp.Keep, byHand, d.DecidedAt)
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
		ParentID    string    `db:"parent_id"`
		CaseID      string    `db:"case_id"`
		ResourceRef string    `db:"resource_ref"`
		KeepRef     string    `db:"keep_ref"`
		DecidedAt   time.Time `db:"created_at"`
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
		// The undo moved on and its parent waits: the case is as it was,
		// but its page shows the compensation's progress.
		return s.caseChanged(ctx, tx, CaseEvent{CaseID: link.CaseID, OperationID: link.ParentID, Tenant: tenant, Kind: ChangeProgress, Actor: compensationActor})
	}
	detail := map[string]any{"compensation": child, "resource_ref": link.ResourceRef, "case_id": link.CaseID}
	switch review.State(parent.State) {
	case review.Compensating:
		if to == review.Compensating { // the undo in doubt: say so on the case, wait for its reconciliation
			_, err := s.openCase(ctx, tx, parent.ID, parent.Tenant, reasons, compensationActor)
			return err
		}
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
		if err := s.resolveBySystem(ctx, tx, link.CaseID, "compensation_done", compensationActor); err != nil {
			return err
		}
		if err := s.extraSinceUndo(ctx, tx, parent, link.DecidedAt); err != nil {
			return err
		}
		if to == review.Confirmed {
			return s.watchAgain(ctx, tx, parent)
		}
		return nil
	case review.Confirmed, review.Failed, review.Compensated:
		// An extra resource's undo (review.OnExtraEffect): the parent
		// stays as it is, and the case the undo was decided on (while
		// still open) says how it went.
		c, err := s.lockCase(ctx, tx, link.CaseID)
		if err != nil || c.Status != CaseOpen {
			return err
		}
		if len(reasons) > 0 {
			_, err := s.openCase(ctx, tx, parent.ID, parent.Tenant, reasons, compensationActor)
			return err
		}
		open, err := s.openCompensations(ctx, tx, parent.ID)
		if err != nil {
			return err
		}
		if len(open) > 0 {
			// Another extra resource's undo is still unsettled: the case
			// waits for it (as a reviewer's word on this one leaves it
			// open, review.PlanDecision), assessed again without this one.
			_, err := s.openCase(ctx, tx, parent.ID, parent.Tenant, nil, compensationActor)
			return err
		}
		if err := s.resolveBySystem(ctx, tx, link.CaseID, "compensation_done", compensationActor); err != nil {
			return err
		}
		if review.State(parent.State) != review.Confirmed {
			return nil // no retry made it: nothing more to watch for
		}
		return s.watchAgain(ctx, tx, parent)
	}
	// A reviewer settled the undo by hand meanwhile: the parent has moved
	// on, and what became of this compensation changes nothing.
	return nil
}

// extraSinceUndo opens a case on parent, settled by its undo, for an
// effect the evidence recorded since the undo was decided (at) shows and
// nobody answers for (review.ExtraEffectsSince).
func (s *Store) extraSinceUndo(ctx context.Context, tx *sqlx.Tx, parent *opRow, at time.Time) error {
	op, err := s.loadDetails(ctx, tx, parent.operation())
	if err != nil {
		return err
	}
	extra := review.ExtraEffectsSince(op, at)
	if len(extra) == 0 {
		return nil
	}
	detail := map[string]any{"extra": extra, "reason": review.ExtraEvidenceReason(op, extra)}
	return s.extraEffect(ctx, tx, parent, op, compensationActor, "evidence.extra_effect", detail)
}

// openCompensations are parent's compensation operations not yet settled,
// read in the decision's transaction.
func (s *Store) openCompensations(ctx context.Context, tx *sqlx.Tx, parent string) ([]review.ChildCompensation, error) {
	var rows []struct {
		ID    string       `db:"id"`
		State review.State `db:"state"`
		Ref   string       `db:"resource_ref"`
	}
	if err := s.sel(ctx, tx, &rows, selectOpenCompensations, parent); err != nil {
		return nil, fmt.Errorf("open compensations: %w", err)
	}
	out := make([]review.ChildCompensation, len(rows))
	for i, r := range rows {
		out[i] = review.ChildCompensation{ID: r.ID, State: r.State, Ref: r.Ref}
	}
	return out, nil
}

// alsoWrittenBy lists the operations other than op that the ledger says
// wrote ref too, at op's destination (review.UndoByHand), oldest
// first and at most four: the tenant's own by id, then, once, whether
// another tenant's did (a reviewer is not shown another tenant's ids).
func (s *Store) alsoWrittenBy(ctx context.Context, tx *sqlx.Tx, op *review.Operation, ref string) ([]string, error) {
	if ref == "" {
		return nil, nil
	}
	q, args := selectAlsoWroteShort, []any{ref, op.Destination, op.ID}
	switch {
	case utf8.RuneCountInString(ref) < MinRefSearch:
	case s.engine == Postgres:
		// The part of the ref that sets it apart (numberRun), else all of it.
		part := numberRun(ref)
		if part == "" {
			part = ref
		}
		q, args = selectAlsoWrotePostgres, append([]any{"%" + escapeLike(asciiLower(part)) + "%"}, args...)
	default:
		q, args = selectAlsoWroteSQLite, append([]any{"resource_ref : " + ftsPhrase(ref)}, args...)
	}
	var rows []struct {
		ID     string `db:"id"`
		Tenant string `db:"tenant"`
	}
	if err := s.sel(ctx, tx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("who else wrote %s: %w", ref, err)
	}
	var out []string
	others := false
	for _, r := range rows {
		if r.Tenant == op.Tenant {
			out = append(out, r.ID)
		} else {
			others = true
		}
	}
	if others {
		out = append(out, review.AnotherTenantsOperation)
	}
	return out, nil
}

// undoLeftToPerson refuses an attempt at compensation row (op) whose undo
// is left to a person (review.UndoByHand): decided so, or so now because
// the ledger shows another operation wrote its resource since the
// decision (a version uploaded before the worker's send). Found now, the
// compensation is marked so, with its reason, audited, and the parent's
// open case assessed again (it recommends undo_by_hand); that commits
// with the refusal. nil: Limbo may send it.
func (s *Store) undoLeftToPerson(ctx context.Context, tx *sqlx.Tx, row *opRow, op *review.Operation, dest review.Destination, actor string) (refused error, err error) {
	var link struct {
		ParentID    string `db:"parent_id"`
		ResourceRef string `db:"resource_ref"`
		ByHand      bool   `db:"by_hand"`
	}
	if err := s.get(ctx, tx, &link, selectCompensationByHand, row.ID); errors.Is(err, sql.ErrNoRows) {
		return nil, nil // registered under the prefix some other way
	} else if err != nil {
		return nil, fmt.Errorf("compensation link: %w", err)
	}
	if link.ByHand {
		return &review.NotAttemptableError{Operation: op}, nil
	}
	// The parent unlocked: only its id and destination are read, which
	// never change, and the child's lock is held (settleParent's order).
	var parent opRow
	if err := s.get(ctx, tx, &parent, selectOperation, row.Tenant, link.ParentID); err != nil {
		return nil, fmt.Errorf("compensation's parent: %w", err)
	}
	others, err := s.alsoWrittenBy(ctx, tx, parent.operation(), link.ResourceRef)
	if err != nil {
		return nil, err
	}
	why := review.UndoByHand(dest, link.ResourceRef, others)
	if why == "" {
		return nil, nil
	}
	now := s.now()
	if _, err := s.exec(ctx, tx, updateCompensationByHand, row.ID); err != nil {
		return nil, err
	}
	if res, err := s.exec(ctx, tx, updateOpReason, why, now, row.ID, row.Version); err != nil {
		return nil, err
	} else if rowsAffected(res) != 1 {
		return nil, review.ErrConflict
	}
	row.StateReason, row.Version = why, row.Version+1
	if err := s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: row.Tenant, OperationID: row.ID,
		Action: "compensation.left_to_person", FromState: row.State, ToState: row.State,
		Detail: detailJSON(map[string]any{"parent_id": link.ParentID, "resource_ref": link.ResourceRef, "reason": why})}); err != nil {
		return nil, err
	}
	if err := s.reassessOpenCase(ctx, tx, link.ParentID, row.Tenant, actor); err != nil {
		return nil, err
	}
	op.StateReason = why
	return &review.NotAttemptableError{Operation: op}, nil
}

// cancelCompensations fails, as canceled, the compensations decision d
// made moot (review.SettlesByHand), after the parent moved: their
// settling then moves nothing.
func (s *Store) cancelCompensations(ctx context.Context, tx *sqlx.Tx, tenant string, ids []string, d *Decision) error {
	for _, id := range ids {
		row, err := s.lockOperation(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		reason := fmt.Sprintf(review.WhyCompensationCanceled, d.Actor, d.Action)
		if _, err := s.exec(ctx, tx, updateCompensationCanceled, d.Actor, id); err != nil {
			return err
		}
		if err := s.transition(ctx, tx, row, review.Failed, reason, d.Actor, "compensation.canceled",
			map[string]any{"decision_id": d.ID, "case_id": d.CaseID}); err != nil {
			return err
		}
	}
	return nil
}

// watchAgain reopens the confirm window of parent, confirmed once its
// duplicate is undone: the destination has just shown that it made more
// than one resource for this operation, and a third may surface later
// (a search that lags longer than it says). The watch searches for it,
// and a case opens if it does. Inbound uses it too, after a webhook names
// a resource of a settled operation that nobody answers for: a search
// shows whether it is there. A destination with no search lag is not
// watched.
func (s *Store) watchAgain(ctx context.Context, tx *sqlx.Tx, parent *opRow) error {
	d := s.cfg.Destination(parent.Destination)
	if d.Window() <= 0 {
		return nil
	}
	return s.startWatch(ctx, tx, parent.ID, d)
}

// Compensation is a compensation operation of a parent, as the case page
// lists it.
type Compensation struct {
	OperationID string `db:"operation_id"`
	CaseID      string `db:"case_id"`
	DecisionID  string `db:"decision_id"`
	ResourceRef string `db:"resource_ref"`
	// CanceledBy names the reviewer whose word on the undo canceled it
	// before it ran ("" when it was not).
	CanceledBy string `db:"canceled_by"`
	// ByHand: Limbo does not send this undo; a person does (its state
	// reason says why, review.UndoByHand).
	ByHand      bool         `db:"by_hand"`
	State       review.State `db:"state"`
	StateReason string       `db:"state_reason"`
	Key         string       `db:"key"`
	CreatedAt   sql.NullTime `db:"created_at"`
	// Deadline: unsettled by then, the undo fails (for one left to a
	// person: nobody said it was done), and its parent is back in review.
	Deadline time.Time `db:"deadline"`
}

// Compensations lists the compensation operations of parent, oldest first.
func (s *Store) Compensations(ctx context.Context, parent string) ([]Compensation, error) {
	var cs []Compensation
	if err := s.sel(ctx, nil, &cs, selectCompensations, parent); err != nil {
		return nil, fmt.Errorf("store.Compensations: %w", err)
	}
	return cs, nil
}

/*
Store.DueCompensations: a compensation a worker may start now (the

	destination is named by the caller's IN list).
*/
const selectDueCompensations = `SELECT c.operation_id, c.parent_id, c.resource_ref, o.tenant, o.key, o.destination
FROM compensations c JOIN operations o ON o.id = c.operation_id
WHERE c.by_hand = 0 AND o.state IN ('pending', 'retry_wait') AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= ?) AND `

// DueCompensation is a compensation Limbo's undo worker may run now.
type DueCompensation struct {
	OperationID string `db:"operation_id"`
	ParentID    string `db:"parent_id"`
	ResourceRef string `db:"resource_ref"`
	Tenant      string `db:"tenant"`
	Key         string `db:"key"`
	Destination string `db:"destination"`
}

// DueCompensations lists, oldest first, at most n compensations for the
// given destinations that wait for an attempt (pending, or retrying with
// its backoff over). Listing claims nothing: the worker asks for an
// attempt like any integrator, and StartAttempt lets one of several
// instances run it.
func (s *Store) DueCompensations(ctx context.Context, destinations []string, n int) ([]DueCompensation, error) {
	if len(destinations) == 0 {
		return nil, nil
	}
	in, args := inScope("o.destination", destinations)
	q := s.rebind(selectDueCompensations + in + " ORDER BY c.created_at, c.operation_id LIMIT ?")
	args = append([]any{s.now()}, append(args, n)...)
	var out []DueCompensation
	if err := s.db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("store.DueCompensations: %w", err)
	}
	return out, nil
}
