package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// Decision is a reviewer's act on a case, as integrators read it.
type Decision struct {
	Seq          int64  `json:"-" db:"seq"`
	TxID         int64  `json:"-" db:"txid"`
	ID           string `json:"id" db:"id"`
	Tenant       string `json:"tenant" db:"tenant"`
	CaseID       string `json:"case_id" db:"case_id"`
	OperationID  string `json:"operation_id" db:"operation_id"`
	Action       string `json:"action" db:"action"`
	ResourceRef  string `json:"resource_ref,omitempty" db:"resource_ref"`
	Compensation string `json:"compensation,omitempty" db:"compensation"`
	// UndoRef is the resource a keep_and_undo undoes (ResourceRef is kept).
	UndoRef string `json:"undo_ref,omitempty" db:"undo_ref"`
	// CompensationID is the compensation operation the decision
	// registered (compensate, keep_and_undo): what the integrator runs.
	CompensationID string    `json:"compensation_operation_id,omitempty" db:"compensation_id"`
	Reason         string    `json:"reason" db:"reason"`
	Actor          string    `json:"actor" db:"actor"`
	PayloadHash    string    `json:"payload_hash" db:"payload_hash"`
	Key            string    `json:"key" db:"key"`
	Status         string    `json:"status" db:"status"`
	FromState      string    `json:"from_state" db:"from_state"`
	ToState        string    `json:"to_state" db:"to_state"`
	DecidedAt      time.Time `json:"decided_at" db:"decided_at"`
	// VoidedApprovals are the first approvals this decision made void (by
	// id): they count no more. The feed lists each decision once, so this
	// is how a reader waiting on an approval learns it was voided.
	VoidedApprovals idList `json:"voided_approvals,omitempty" db:"voided_approvals"`
}

// idList is a list of ids stored as one text column, space-separated (an
// id holds no space); empty text is none.
type idList []string

// Value writes the list as stored.
func (l idList) Value() (driver.Value, error) { return strings.Join(l, " "), nil }

// Scan reads the list as stored.
func (l *idList) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	case nil:
	default:
		return fmt.Errorf("idList: cannot read %T", src)
	}
	*l = strings.Fields(s)
	return nil
}

// Decision statuses, as stored (review.DecisionStatus says what each did).
const (
	DecisionApplied        = string(review.DecisionApplied)
	DecisionFirstApproval  = string(review.DecisionFirstApproval)
	DecisionVoid           = string(review.DecisionVoid)
	DecisionRefusedPayload = string(review.DecisionRefusedPayload)
	DecisionExtraEffect    = string(review.DecisionExtraEffect)
)

// DecisionRequest is a reviewer's decision on a case.
type DecisionRequest struct {
	CaseID string
	// Scope limits the tenants the reviewer may act on; nil means all.
	Scope  []string
	Action string
	Ref    string
	// UndoRef is what keep_and_undo undoes (Ref is what it keeps).
	UndoRef      string
	Compensation string
	Reason       string
	Actor        string
	// UserID, when set, is the console user deciding: their grant is read
	// again under the case's lock (actingNow), so a reviewer disabled,
	// demoted or moved off the tenant since the request began is refused.
	UserID string
	// CaseVersion and OpVersion, when not zero, are the case's and the
	// operation's versions the reviewer saw: either changed since is
	// refused (review.ErrStale) rather than decided blind. The console
	// always sends both.
	CaseVersion, OpVersion int64
}

const decisionColumns = `seq, txid, id, tenant, case_id, operation_id, action, resource_ref, compensation, reason,
actor, payload_hash, key, status, from_state, to_state, decided_at, undo_ref, compensation_id, voided_approvals`

const (
	/* Store.Decide */
	insertDecision = `
INSERT INTO decisions (seq, txid, id, tenant, case_id, operation_id, action, resource_ref, compensation, reason,
    actor, payload_hash, key, status, from_state, to_state, decided_at, undo_ref, compensation_id, voided_approvals)
VALUES (?, %s, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	/* Store.Decide */
	selectApprovals = `SELECT ` + decisionColumns + ` FROM decisions WHERE case_id = ? AND status = 'first_approval' ORDER BY seq`
	/* Store.lastApplied */
	selectLastApplied = `SELECT ` + decisionColumns + ` FROM decisions WHERE case_id = ? AND status = 'applied' ORDER BY seq DESC LIMIT 1`
	/* Store.Decide */
	voidDecision = `UPDATE decisions SET status = 'void' WHERE seq = ? AND status = 'first_approval'`
	/* Store.closeCase: guarded by version and status, so two reviewers cannot both win. */
	resolveCase = `
UPDATE cases SET status = 'resolved', resolved_at = ?, resolved_by = ?, resolution = ?, claimed_by = '', claim_until = NULL,
    version = version + 1
WHERE id = ? AND status = 'open' AND version = ?`
	/* Store.Decide and Store.closeCase: a first approval, or a decision that keeps the case open. */
	bumpCase = `UPDATE cases SET version = version + 1 WHERE id = ? AND status = 'open' AND version = ?`
	/* Store.closeCase: a decision that keeps the case open and lets its claim go. */
	bumpCaseReleased = `UPDATE cases SET version = version + 1, claimed_by = '', claim_until = NULL WHERE id = ? AND status = 'open' AND version = ?`
	/* Store.Decide: an approved retry gets room to run. */
	updateOpRetryBudget = `UPDATE operations SET max_attempts = ?, deadline = ?, next_attempt_at = ?, cost_budget = ? WHERE id = ?`
	/* Store.lockCase */
	selectCaseForUpdate = `SELECT ` + caseColumns + ` FROM cases WHERE id = ?`
	/* Store.decideTx: whose case it is, read before any lock. */
	selectCaseOperation = `SELECT tenant, operation_id FROM cases WHERE id = ?`
)

// Decide applies a reviewer's decision. Exactly one of several concurrent
// deciders wins; the others get a *review.AlreadyDecidedError naming who
// decided what. An approve_retry on a financial or irreversible operation
// needs two different reviewers: the first approval is recorded, bound to
// the payload hash and key, and the case stays open.
//
// What a decision may do is review.PlanDecision's rule, planned here
// under the case's and the operation's locks: it moves the operation only
// from needs_review (and, for the word on an undo, from compensating); on
// a payload_mismatch case whose operation is elsewhere, fail is recorded
// as a verdict on the refused payload and nothing moves; anything else is
// review.ErrInvalidTransition. compensate and compensation_failed keep
// the case open (review.KeepsCaseOpen): the undo is still to be settled.
func (s *Store) Decide(ctx context.Context, req DecisionRequest) (*Decision, error) {
	if err := review.ValidateDecision(req.Action, req.Ref, req.Compensation, req.Reason); err != nil {
		return nil, err
	}
	req.Reason, _ = review.NormalizeReason(req.Reason)
	req.Ref, req.UndoRef, req.Compensation = strings.TrimSpace(req.Ref), strings.TrimSpace(req.UndoRef), strings.TrimSpace(req.Compensation)
	out, err := inTx(ctx, s, func(tx *sqlx.Tx) (*Decision, error) { return s.decideTx(ctx, tx, req) })
	if err != nil {
		return nil, s.decideError(ctx, req.CaseID, err)
	}
	return out, nil
}

// decideTx is Decide in its transaction: it reads the case, the
// operation and the case's earlier decisions under the locks, has review
// plan the decision (review.PlanDecision), and persists the plan.
func (s *Store) decideTx(ctx context.Context, tx *sqlx.Tx, req DecisionRequest) (*Decision, error) {
	row, c, err := s.lockCaseAndOperation(ctx, tx, req.CaseID, req.Scope)
	if err != nil {
		return nil, err
	}
	if req.UserID != "" {
		// The grant as it is now, not as the session read it when the
		// request began: a reviewer disabled, demoted or moved off the
		// tenant meanwhile decides nothing.
		by, err := s.actingOnCase(ctx, tx, review.Principal{Name: req.Actor, UserID: req.UserID}, c.Tenant)
		if err != nil {
			return nil, err
		}
		if !by.Role.CanDecide(row.operation(), req.Action) {
			return nil, fmt.Errorf("%w: your role may not decide this case", review.ErrForbidden)
		}
	}
	if c.Status != CaseOpen {
		return nil, &review.AlreadyDecidedError{CaseID: c.ID, By: c.ResolvedBy, Action: c.Resolution, At: deref(c.ResolvedAt)}
	}
	if req.CaseVersion != 0 && req.CaseVersion != c.Version {
		// Lost to another decider (a decision that kept the case open):
		// say who won (decideError). Otherwise it was claimed, released or
		// re-assessed since.
		if last, err := s.lastApplied(ctx, tx, c.ID); err != nil {
			return nil, err
		} else if last != nil {
			return nil, &review.AlreadyDecidedError{CaseID: c.ID}
		}
		// Say what happened, and who did it: another reviewer holds the
		// case now, or gave an approval since.
		if by := review.ClaimHolder(c.ClaimedBy, c.ClaimUntil, s.now()); by != "" && !strings.EqualFold(by, req.Actor) {
			return nil, &review.ClaimHeldError{CaseID: c.ID, By: by, Until: deref(c.ClaimUntil)}
		}
		approvals, err := s.approvals(ctx, tx, c.ID)
		if err != nil {
			return nil, err
		}
		if n := len(approvals); n > 0 {
			return nil, fmt.Errorf("%w: %s gave an approval meanwhile; reload the case and decide again", review.ErrStale, approvals[n-1].Actor)
		}
		return nil, fmt.Errorf("%w: it was claimed, released or re-assessed since (version %d, now %d); reload the case and decide again",
			review.ErrStale, req.CaseVersion, c.Version)
	}
	if req.OpVersion != 0 && req.OpVersion != row.Version {
		return nil, fmt.Errorf("%w: the operation moved on since (it is %s now); reload the case and decide again", review.ErrStale, row.State)
	}
	approvals, err := s.approvals(ctx, tx, c.ID)
	if err != nil {
		return nil, err
	}
	last, err := s.lastApplied(ctx, tx, c.ID)
	if err != nil {
		return nil, err
	}
	children, err := s.openCompensations(ctx, tx, row.ID)
	if err != nil {
		return nil, err
	}
	op, now := row.operation(), s.now()
	if err := s.approversNow(ctx, tx, approvals, c.Tenant, op); err != nil {
		return nil, err
	}
	if req.Action == review.DecideCompensate || req.Action == review.DecideKeepAndUndo || req.Action == review.DecideCompensationDone {
		// What the operation is known to have: the only resources Limbo's
		// own undo may be sent for (review.CheckUndoRef), and a person may
		// say are undone (review.CheckDoneRef).
		if op, err = s.loadDetails(ctx, tx, op); err != nil {
			return nil, err
		}
	}
	dest := s.cfg.Destination(op.Destination)
	var alsoBy []string
	if ref := review.UndoTarget(req.Action, req.Ref, req.UndoRef); ref != "" && dest.Undo != nil {
		if alsoBy, err = s.alsoWrittenBy(ctx, tx, op, ref); err != nil {
			return nil, err
		}
	}
	id := newID("dec_", now)
	p, err := review.PlanDecision(review.DecisionInput{Op: op, CaseID: c.ID, CaseReasons: c.Reasons, CaseRef: c.RecommendedRef, DecisionID: id,
		Action: req.Action, Ref: req.Ref, UndoRef: req.UndoRef, Compensation: req.Compensation, Reason: req.Reason, Actor: req.Actor,
		Approvals: approvals, LastApplied: last.Prior(), RequestedBy: c.RequestedBy, ClaimedBy: c.ClaimedBy, ClaimUntil: c.ClaimUntil, ApprovalExpires: c.ExpiresAt,
		Compensations: children, AlsoWrittenBy: alsoBy, Destination: dest, Now: now})
	if err != nil {
		return nil, err
	}
	d := &Decision{ID: id, Tenant: c.Tenant, CaseID: c.ID, OperationID: op.ID, Action: req.Action,
		ResourceRef: p.ResourceRef, UndoRef: p.UndoRef, Compensation: p.Compensation, Reason: req.Reason, Actor: req.Actor,
		PayloadHash: op.PayloadHash, Key: op.Key, Status: string(p.Status), FromState: string(p.From), ToState: string(p.To), DecidedAt: now}
	if p.Undo != nil {
		d.CompensationID = newID("op_", now)
	}
	for _, a := range approvals {
		if slices.Contains(p.Void, a.Seq) {
			d.VoidedApprovals = append(d.VoidedApprovals, a.ID)
		}
	}
	if err := s.persistDecision(ctx, tx, c, row, p, d); err != nil {
		return nil, err
	}
	if p.From == review.Compensating && p.Move != nil && last != nil && review.State(row.State).Terminal() {
		// A person's word settled the undo: what evidence showed while it
		// ran is weighed now, as when the undo itself settles it.
		if err := s.extraSinceUndo(ctx, tx, row, last.DecidedAt); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// persistDecision writes plan p of decision d on case c, in tx: the
// approvals it voids, the case resolved or kept open (guarded by the
// version read under the lock, so two deciders cannot both win), the
// decision and its announcement, the operation's move with its evidence,
// resource and retry budget, and the audit events.
func (s *Store) persistDecision(ctx context.Context, tx *sqlx.Tx, c *Case, row *opRow, p *review.DecisionPlan, d *Decision) error {
	for _, seq := range p.Void {
		if _, err := tx.ExecContext(ctx, s.rebind(voidDecision), seq); err != nil {
			return err
		}
	}
	if err := s.closeCase(ctx, tx, c, d, p.ResolveCase, p.ReleaseClaim); err != nil {
		return err
	}
	if err := s.insertDecision(ctx, tx, d); err != nil {
		return err
	}
	if p.Announce {
		if err := s.enqueueDecision(ctx, tx, d); err != nil { // outbound webhooks, same transaction
			return err
		}
	}
	if p.Evidence != nil {
		if err := s.insertEvidence(ctx, tx, row.ID, *p.Evidence); err != nil {
			return err
		}
	}
	if p.Resource != nil {
		if err := s.setResource(ctx, tx, row.ID, *p.Resource); err != nil {
			return err
		}
	}
	if r := p.Retry; r != nil {
		if _, err := tx.ExecContext(ctx, s.rebind(updateOpRetryBudget), r.MaxAttempts, dbTime(r.Deadline), dbTime(r.NextAttemptAt), r.CostBudget, row.ID); err != nil {
			return err
		}
	}
	if m := p.Move; m != nil {
		if err := s.transition(ctx, tx, row, m.To, p.MoveReason, d.Actor, m.Action, m.Detail); err != nil {
			return err
		}
	}
	if p.Undo != nil {
		if err := s.registerCompensation(ctx, tx, c, row.ID, d, p); err != nil {
			return err
		}
		if !p.ResolveCase {
			// The case waits for the undo now: assessed again, its
			// recommendation no longer names what is being undone (the
			// form would preselect it, and a second undo is refused).
			if _, err := s.openCase(ctx, tx, row.ID, c.Tenant, nil, d.Actor); err != nil {
				return err
			}
		}
	}
	if err := s.cancelCompensations(ctx, tx, c.Tenant, p.Cancel, d); err != nil {
		return err
	}
	for _, e := range p.Events {
		if err := s.appendEvent(ctx, tx, plannedEvent(e, d.DecidedAt, d.Actor, c.Tenant, c.OperationID)); err != nil {
			return err
		}
	}
	return nil
}

// Prior is d as review plans the next decision with it (nil: none).
func (d *Decision) Prior() *review.PriorDecision {
	if d == nil {
		return nil
	}
	return &review.PriorDecision{Seq: d.Seq, ID: d.ID, Action: d.Action, Actor: d.Actor, ResourceRef: d.ResourceRef, UndoRef: d.UndoRef, Compensation: d.Compensation,
		PayloadHash: d.PayloadHash, Key: d.Key}
}

// decideError is what Decide says of err: a refusal as it is, with who
// won when another decider did; anything else wrapped.
func (s *Store) decideError(ctx context.Context, caseID string, err error) error {
	var already *review.AlreadyDecidedError
	var held *review.ClaimHeldError
	if errors.As(err, &held) {
		return err
	}
	if errors.As(err, &already) && already.By == "" {
		// Say who won, read after the winner committed: the resolution,
		// or, on a case a decision kept open (compensate), that decision.
		if c, gerr := s.caseByID(ctx, s.db, caseID); gerr == nil && c.Status != CaseOpen {
			already.By, already.Action, already.At = c.ResolvedBy, c.Resolution, deref(c.ResolvedAt)
		} else if d, gerr := s.lastApplied(ctx, s.db, caseID); gerr == nil && d != nil {
			already.By, already.Action, already.At = d.Actor, d.Action, d.DecidedAt
		}
	}
	if errors.As(err, &already) || errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrInvalid) ||
		errors.Is(err, review.ErrInvalidTransition) || errors.Is(err, review.ErrSecondApprover) || errors.Is(err, review.ErrOwnRequest) ||
		errors.Is(err, review.ErrStale) || errors.Is(err, review.ErrForbidden) {
		return err
	}
	return fmt.Errorf("store.Decide: %w", err)
}

// closeCase resolves c for decision d or, when the case stays open,
// moves its version on; either way guarded by the version read under the
// lock, so two deciders cannot both win.
func (s *Store) closeCase(ctx context.Context, tx *sqlx.Tx, c *Case, d *Decision, resolve, release bool) error {
	q, args := resolveCase, []any{d.DecidedAt, d.Actor, d.Action, c.ID, c.Version}
	switch {
	case !resolve && release:
		q, args = bumpCaseReleased, []any{c.ID, c.Version}
	case !resolve:
		q, args = bumpCase, []any{c.ID, c.Version}
	}
	res, err := tx.ExecContext(ctx, s.rebind(q), args...)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return &review.AlreadyDecidedError{CaseID: c.ID}
	}
	if err := s.caseChanged(ctx, tx, c.changed(ChangeDecided, d.Actor)); err != nil {
		return err
	}
	if !resolve {
		return nil
	}
	return s.countOpenCase(ctx, tx, c.Tenant, c.Destination, c.Action, c.Flags, reasonBits(c.Reasons), -1)
}

// lockCaseAndOperation reads case id and its operation in tx, both
// locked, the operation's lock first, as every path that moves an
// operation and then writes its case takes them (an outcome, evidence,
// an undo's report): the other way round, a decision and the undo's
// report on the same case each held the lock the other waited for
// (TestDecisionBesideUndo). A case's operation never changes, so it is
// read without a lock first. A case outside scope (nil: any) is not
// found.
func (s *Store) lockCaseAndOperation(ctx context.Context, tx *sqlx.Tx, id string, scope []string) (*opRow, *Case, error) {
	var owner struct {
		Tenant      string `db:"tenant"`
		OperationID string `db:"operation_id"`
	}
	if err := s.get(ctx, tx, &owner, selectCaseOperation, id); errors.Is(err, sql.ErrNoRows) {
		return nil, nil, review.ErrNotFound
	} else if err != nil {
		return nil, nil, err
	}
	if scope != nil && !slices.Contains(scope, owner.Tenant) {
		return nil, nil, review.ErrNotFound
	}
	row, err := s.lockOperation(ctx, tx, owner.Tenant, owner.OperationID)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.lockCase(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	return row, c, nil
}

func (s *Store) lockCase(ctx context.Context, tx *sqlx.Tx, id string) (*Case, error) {
	q := selectCaseForUpdate
	if s.engine == Postgres {
		q += " FOR UPDATE"
	}
	var c Case
	err := tx.GetContext(ctx, &c, s.rebind(q), id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	c.fill()
	return &c, nil
}

// lastApplied is the newest applied decision on a case, or nil.
func (s *Store) lastApplied(ctx context.Context, q sqlx.QueryerContext, caseID string) (*Decision, error) {
	var d Decision
	err := sqlx.GetContext(ctx, q, &d, s.rebind(selectLastApplied), caseID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// approvals are the case's approvals that were not the last one needed
// (status first_approval), oldest first.
func (s *Store) approvals(ctx context.Context, tx *sqlx.Tx, caseID string) ([]review.PriorDecision, error) {
	var ds []Decision
	if err := tx.SelectContext(ctx, &ds, s.rebind(selectApprovals), caseID); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	out := make([]review.PriorDecision, len(ds))
	for i := range ds {
		out[i] = *ds[i].Prior()
	}
	return out, nil
}

// approversNow marks the approvals whose approver may no longer decide
// the case (review.PriorDecision.Revoked), by the rules their own decision
// would meet now: actingOnCase (disabled, or moved off tenant) and
// review.Role.CanDecide. An approver who is no console user (the operator,
// a program deciding through the store) is taken as given, as actingOnCase
// takes them. The grants are read in the decision's transaction, so a
// change to them commits wholly before it or after it.
func (s *Store) approversNow(ctx context.Context, tx *sqlx.Tx, approvals []review.PriorDecision, tenant string, op *review.Operation) error {
	for i := range approvals {
		a := &approvals[i]
		var u User
		// A console decision is recorded under its user's email as stored.
		if err := tx.GetContext(ctx, &u, s.rebind(selectUserByEmail), a.Actor); errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return fmt.Errorf("approver %s: %w", a.Actor, err)
		}
		by, err := s.actingOnCase(ctx, tx, review.Principal{Name: a.Actor, UserID: u.ID}, tenant)
		switch {
		case errors.Is(err, review.ErrForbidden):
			a.Revoked = review.WhyApproverDisabled
		case errors.Is(err, review.ErrNotFound):
			a.Revoked = fmt.Sprintf(review.WhyApproverOffTenant, tenant)
		case err != nil:
			return fmt.Errorf("approver %s: %w", a.Actor, err)
		case !by.Role.CanDecide(op, a.Action):
			a.Revoked = fmt.Sprintf(review.WhyApproverRole, by.Role)
		}
	}
	return nil
}

// VoidApprovals says which first approvals on case c no longer count,
// by id, and why (review.WhyApprover*): their approver may no longer
// decide it, by the rules the next decision applies (approversNow) and
// would audit as decision.approval_voided. The case page shows them so
// until then, rather than as given.
func (s *Store) VoidApprovals(ctx context.Context, c *Case, op *review.Operation) (map[string]string, error) {
	out := map[string]string{}
	// A page view: on SQLite a read transaction, not the one write lock
	// every write queues for. PostgreSQL's must be read-write:
	// approversNow reads the users FOR SHARE there, which a read-only
	// transaction refuses (and which holds up no other reader).
	run := s.readTx
	if s.engine == Postgres {
		run = s.WithTx
	}
	err := run(ctx, func(tx *sqlx.Tx) error {
		approvals, err := s.approvals(ctx, tx, c.ID)
		if err != nil || len(approvals) == 0 {
			return err
		}
		if err := s.approversNow(ctx, tx, approvals, c.Tenant, op); err != nil {
			return err
		}
		for _, a := range approvals {
			if a.Revoked != "" {
				out[a.ID] = a.Revoked
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store.VoidApprovals: %w", err)
	}
	return out, nil
}

func (s *Store) insertDecision(ctx context.Context, tx *sqlx.Tx, d *Decision) error {
	seqQ, txid := `SELECT COALESCE(MAX(seq), 0) + 1 FROM decisions`, "0"
	if s.engine == Postgres {
		seqQ, txid = `SELECT nextval('decisions_seq')`, "pg_current_xact_id()::text::bigint"
	}
	if err := tx.GetContext(ctx, &d.Seq, seqQ); err != nil {
		return fmt.Errorf("decision seq: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.rebind(fmt.Sprintf(insertDecision, txid)), d.Seq, d.ID, d.Tenant, d.CaseID, d.OperationID,
		d.Action, d.ResourceRef, d.Compensation, d.Reason, d.Actor, d.PayloadHash, d.Key, d.Status, d.FromState, d.ToState, d.DecidedAt, d.UndoRef, d.CompensationID, d.VoidedApprovals); err != nil {
		return fmt.Errorf("insert decision: %w", err)
	}
	return nil
}

/* Store.OperationDecisions */
const selectOperationDecisions = `SELECT ` + decisionColumns + ` FROM decisions WHERE tenant = ? AND operation_id = ? ORDER BY seq LIMIT 1000`

// OperationDecisions returns every decision on the tenant's operation
// opID, oldest first; another tenant's operation is review.ErrNotFound.
func (s *Store) OperationDecisions(ctx context.Context, tenant, opID string) (*review.Operation, []Decision, error) {
	var row opRow
	err := s.get(ctx, nil, &row, selectOperation, tenant, opID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, review.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store.OperationDecisions: %w", err)
	}
	ds := []Decision{}
	if err := s.sel(ctx, nil, &ds, selectOperationDecisions, tenant, opID); err != nil {
		return nil, nil, fmt.Errorf("store.OperationDecisions: %w", err)
	}
	for i := range ds {
		ds[i].DecidedAt = ds[i].DecidedAt.UTC()
	}
	return row.operation(), ds, nil
}

// DecisionCursorPattern is the form of the decisions feed's cursor: the
// transaction and sequence number of the last decision read. (ParseInt
// alone would also take "+1-2".)
const DecisionCursorPattern = `^[0-9]{1,19}-[0-9]{1,19}$`

var decisionCursor = regexp.MustCompile(DecisionCursorPattern)

const (
	/* Store.Decisions: the decision a cursor names, by primary key. */
	selectDecisionCursor = `SELECT EXISTS (SELECT 1 FROM decisions WHERE seq = ? AND tenant = ? AND txid = ?)`
	/* Store.Decisions (SQLite): seqs commit in order. */
	selectDecisionsSQLite = `SELECT ` + decisionColumns + ` FROM decisions WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?`
	/* Store.Decisions (PostgreSQL): in commit order, up to the oldest
	   transaction still running. The cursor is a row comparison on the
	   index decisions_feed (migration 0035), so a page reads its own rows
	   however deep in the feed it starts. */
	selectDecisionsPostgres = `SELECT ` + decisionColumns + ` FROM decisions
WHERE tenant = ? AND (txid, seq) > (?, ?) AND txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
ORDER BY txid, seq LIMIT ?`
)

// Decisions returns the tenant's decisions after cursor, in order. On
// PostgreSQL only decisions of transactions older than every running one
// are listed, ordered by transaction then sequence: a decision that
// commits late can never appear before a cursor already handed out.
func (s *Store) Decisions(ctx context.Context, tenant, cursor string, limit int) ([]Decision, string, error) {
	var afterTx, afterSeq int64
	if cursor != "" {
		a, b, ok := strings.Cut(cursor, "-")
		var err1, err2 error
		afterTx, err1 = strconv.ParseInt(a, 10, 64)
		afterSeq, err2 = strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || !decisionCursor.MatchString(cursor) {
			return nil, "", fmt.Errorf("%w: field \"cursor\": not a cursor this server issued", review.ErrInvalid)
		}
		// A cursor names the last decision a reader was given. One that
		// names none of this tenant's — made up, another Limbo's, or kept
		// across a restore of the database from a backup — would skip,
		// silently, every decision up to it: said instead.
		var issued bool
		if err := s.get(ctx, nil, &issued, selectDecisionCursor, afterSeq, tenant, afterTx); err != nil {
			return nil, "", fmt.Errorf("store.Decisions: %w", err)
		}
		if !issued {
			return nil, "", fmt.Errorf("%w: field \"cursor\": names no decision of this tenant (a cursor from another Limbo, or kept across a restore of the database?): read the feed again without a cursor", review.ErrInvalid)
		}
	}
	q, args := selectDecisionsSQLite, []any{tenant, afterSeq, limit}
	if s.engine == Postgres {
		q, args = selectDecisionsPostgres, []any{tenant, afterTx, afterSeq, limit}
	}
	var ds []Decision
	if err := s.db.SelectContext(ctx, &ds, s.rebind(q), args...); err != nil {
		return nil, "", fmt.Errorf("store.Decisions: %w", err)
	}
	next := cursor
	if len(ds) > 0 {
		last := ds[len(ds)-1]
		next = strconv.FormatInt(last.TxID, 10) + "-" + strconv.FormatInt(last.Seq, 10)
	}
	for i := range ds {
		ds[i].DecidedAt = ds[i].DecidedAt.UTC()
	}
	return ds, next, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
