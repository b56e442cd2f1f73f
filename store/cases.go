package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// Case is an operation escalated to people.
type Case struct {
	ID                string          `json:"id" db:"id"`
	Tenant            string          `json:"tenant" db:"tenant"`
	OperationID       string          `json:"operation_id" db:"operation_id"`
	Status            string          `json:"status" db:"status"`
	ReasonsText       string          `json:"-" db:"reasons"`
	Reasons           []review.Reason `json:"reasons" db:"-"`
	Priority          int             `json:"priority" db:"priority"`
	RecommendedAction string          `json:"recommended_action" db:"recommended_action"`
	RecommendedRef    string          `json:"recommended_ref,omitempty" db:"recommended_ref"`
	Rationale         string          `json:"rationale" db:"rationale"`
	Destination       string          `json:"destination" db:"destination"`
	Action            string          `json:"action" db:"action"`
	Flags             string          `json:"flags" db:"flags"`
	ClaimedBy         string          `json:"claimed_by,omitempty" db:"claimed_by"`
	ClaimUntil        *time.Time      `json:"claim_until,omitempty" db:"claim_until"`
	OpenedAt          time.Time       `json:"opened_at" db:"opened_at"`
	ResolvedAt        *time.Time      `json:"resolved_at,omitempty" db:"resolved_at"`
	ResolvedBy        string          `json:"resolved_by,omitempty" db:"resolved_by"`
	Resolution        string          `json:"resolution,omitempty" db:"resolution"`
	Version           int64           `json:"version" db:"version"`
	// RequestedBy and ExpiresAt are an approval case's: who asked for the
	// operation (and may not approve it), and when the request lapses.
	RequestedBy string     `json:"requested_by,omitempty" db:"requested_by"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty" db:"expires_at"`
	// ReassessAt is when the deadline sweeper assesses the case again
	// (review.Assessment.ChangesAt; nil: never on the clock alone).
	ReassessAt *time.Time `json:"-" db:"reassess_at"`
}

// Case statuses.
const (
	CaseOpen     = "open"
	CaseResolved = "resolved"
)

func (c *Case) fill() {
	c.Reasons = nil
	for _, r := range strings.Split(c.ReasonsText, ",") {
		if r != "" {
			c.Reasons = append(c.Reasons, review.Reason(r))
		}
	}
	c.OpenedAt = c.OpenedAt.UTC()
}

// changed is the event of c changing by kind, as actor: one version on
// from the c read under the lock.
func (c *Case) changed(kind CaseChange, actor string) CaseEvent {
	return CaseEvent{CaseID: c.ID, OperationID: c.OperationID, Tenant: c.Tenant, Kind: kind, Actor: actor, Version: c.Version + 1}
}

func joinReasons(rs []review.Reason) string {
	ss := make([]string, len(rs))
	for i, r := range rs {
		ss[i] = string(r)
	}
	return strings.Join(ss, ",")
}

const caseColumns = `id, tenant, operation_id, status, reasons, priority, recommended_action, recommended_ref,
rationale, destination, action, flags, claimed_by, claim_until, opened_at, resolved_at, resolved_by, resolution, version,
requested_by, expires_at, reassess_at`

const (
	/* Store.openCase */
	selectOpenCase = `SELECT ` + caseColumns + ` FROM cases WHERE operation_id = ? AND status = 'open'`
	/* Store.openCase */
	insertCase = `
INSERT INTO cases (id, tenant, operation_id, status, reasons, reason_bits, priority, recommended_action, recommended_ref,
    rationale, destination, action, flags, opened_at, reassess_at, version)
VALUES (?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`
	/* Store.openCase: new findings join an open case rather than opening a second one. */
	updateCaseAssessment = `
UPDATE cases SET reasons = ?, reason_bits = ?, priority = ?, recommended_action = ?, recommended_ref = ?, rationale = ?,
    reassess_at = ?, version = version + 1
WHERE id = ? AND version = ?`
	/* Store.openCase: an assessment that changed nothing a reader decides on: the queue's rank and the next visit. */
	rankCase = `UPDATE cases SET priority = ?, reassess_at = ? WHERE id = ?`
)

// sameTime reports whether a and b are both nil or the same instant.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// reassessAt is the column value of an assessment's ChangesAt: NULL when
// zero.
func reassessAt(a review.Assessment) *time.Time {
	if a.ChangesAt.IsZero() {
		return nil
	}
	t := dbTime(a.ChangesAt)
	return &t
}

const (
	/* Store.countOpenCase: delta is +1 or -1. */
	upsertOpenCaseCount = `
INSERT INTO open_case_counts (tenant, destination, action, flags, reason_bits, n) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant, destination, action, flags, reason_bits) DO UPDATE SET n = open_case_counts.n + excluded.n`
	/* Store.BulkLoad, and the test that checks the counts */
	recountOpenCases = `
INSERT INTO open_case_counts (tenant, destination, action, flags, reason_bits, n)
SELECT tenant, destination, action, flags, reason_bits, COUNT(*)
FROM cases WHERE status = 'open'
GROUP BY tenant, destination, action, flags, reason_bits`
)

// countOpenCase adds delta to the open cases counted for c's tenant,
// destination, action, flags and reasons (open_case_counts), in the
// transaction that opens, re-assesses or resolves the case.
func (s *Store) countOpenCase(ctx context.Context, tx *sqlx.Tx, tenant, destination, action, flags string, bits int64, delta int) error {
	if _, err := s.exec(ctx, tx, upsertOpenCaseCount, tenant, destination, action, flags, bits, delta); err != nil {
		return fmt.Errorf("count open cases: %w", err)
	}
	return nil
}

// openCase opens (or refreshes) the operation's case inside tx, assessing it
// with review.Assess over everything known about the operation.
func (s *Store) openCase(ctx context.Context, tx *sqlx.Tx, opID, tenant string, extra []review.Reason, actor string) (*Case, error) {
	return s.assessCase(ctx, tx, opID, tenant, extra, actor, true)
}

// reassessOpenCase assesses the operation's open case again, after
// something it recommends on changed; it opens none where there is none.
func (s *Store) reassessOpenCase(ctx context.Context, tx *sqlx.Tx, opID, tenant, actor string) error {
	_, err := s.assessCase(ctx, tx, opID, tenant, nil, actor, false)
	return err
}

// assessCase refreshes the operation's open case, or opens one (when
// open; otherwise it returns nil).
func (s *Store) assessCase(ctx context.Context, tx *sqlx.Tx, opID, tenant string, extra []review.Reason, actor string, open bool) (*Case, error) {
	var existing Case
	err := tx.GetContext(ctx, &existing, s.rebind(selectOpenCase), opID)
	found := err == nil
	switch {
	case found:
		existing.fill()
		extra = append(extra, existing.Reasons...)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("open case: %w", err)
	case !open:
		return nil, nil
	}
	var row opRow
	if err := tx.GetContext(ctx, &row, s.rebind(selectOperation), tenant, opID); err != nil {
		return nil, fmt.Errorf("open case: %w", err)
	}
	op, err := s.loadDetails(ctx, tx, row.operation())
	if err != nil {
		return nil, err
	}
	now := s.now()
	a := review.Assess(op, extra, now)
	if err := s.pollJobWaitedOn(ctx, tx, op, a.Reasons, now); err != nil {
		return nil, err
	}
	bits := reasonBits(a.Reasons)
	if found {
		if reasonBits(existing.Reasons) == bits && existing.RecommendedAction == a.Recommendation.Action &&
			existing.RecommendedRef == a.Recommendation.Ref && existing.Rationale == a.Recommendation.Rationale {
			// Nothing a reader decides on changed (a webhook's progress
			// report, evidence saying again what was known, the sweeper's
			// visit as the deadline nears): the case's version and the form
			// a reviewer has open stay as they are. Priority alone is no
			// such change: it moves with the clock (age, a nearing
			// deadline), so it only ranks the case afresh in the queue,
			// with when the clock next changes it — no version, no
			// case.updated. Before, any evidence an hour later bumped the
			// version, and the form a reviewer had open was refused as
			// stale for nothing they could see.
			if at := reassessAt(a); existing.Priority != a.Priority || !sameTime(existing.ReassessAt, at) {
				if _, err := s.exec(ctx, tx, rankCase, a.Priority, at, existing.ID); err != nil {
					return nil, fmt.Errorf("update case: %w", err)
				}
				existing.Priority, existing.ReassessAt = a.Priority, at
			}
			return &existing, nil
		}
		if old := reasonBits(existing.Reasons); old != bits {
			if err := s.countOpenCase(ctx, tx, existing.Tenant, existing.Destination, existing.Action, existing.Flags, old, -1); err != nil {
				return nil, err
			}
			if err := s.countOpenCase(ctx, tx, existing.Tenant, existing.Destination, existing.Action, existing.Flags, bits, 1); err != nil {
				return nil, err
			}
		}
		if _, err := tx.ExecContext(ctx, s.rebind(updateCaseAssessment), joinReasons(a.Reasons), bits, a.Priority,
			a.Recommendation.Action, a.Recommendation.Ref, a.Recommendation.Rationale, reassessAt(a), existing.ID, existing.Version); err != nil {
			return nil, fmt.Errorf("update case: %w", err)
		}
		if err := s.caseChanged(ctx, tx, existing.changed(ChangeUpdated, actor)); err != nil {
			return nil, err
		}
		if err := s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: tenant, OperationID: opID,
			Action: "case.updated", Detail: detailJSON(map[string]any{"case_id": existing.ID, "reasons": a.Reasons,
				"recommendation": a.Recommendation.String()})}); err != nil {
			return nil, err
		}
		return s.caseByID(ctx, tx, existing.ID)
	}
	id := newID("case_", now)
	if _, err := tx.ExecContext(ctx, s.rebind(insertCase), id, tenant, opID, joinReasons(a.Reasons), bits, a.Priority,
		a.Recommendation.Action, a.Recommendation.Ref, a.Recommendation.Rationale, op.Destination, op.Action,
		joinFlags(op.Flags), now, reassessAt(a)); err != nil {
		return nil, fmt.Errorf("insert case: %w", err)
	}
	if err := s.caseChanged(ctx, tx, CaseEvent{CaseID: id, OperationID: opID, Tenant: tenant, Kind: ChangeOpened, Actor: actor, Version: 1}); err != nil {
		return nil, err
	}
	if err := s.countOpenCase(ctx, tx, tenant, op.Destination, op.Action, joinFlags(op.Flags), bits, 1); err != nil {
		return nil, err
	}
	if err := s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: tenant, OperationID: opID,
		Action: "case.opened", Detail: detailJSON(map[string]any{"case_id": id, "reasons": a.Reasons,
			"priority": a.Priority, "recommendation": a.Recommendation.String(), "rationale": a.Recommendation.Rationale})}); err != nil {
		return nil, err
	}
	return s.caseByID(ctx, tx, id)
}

const (
	/* Store.pollJobWaitedOn: due now, unless a poll is scheduled already. */
	startJobPoll = `UPDATE operations SET next_probe_at = ? WHERE id = ? AND next_probe_at IS NULL`
	/* Store.pollJobWaitedOn */
	stopJobPoll = `UPDATE operations SET next_probe_at = NULL WHERE id = ? AND next_probe_at IS NOT NULL`
)

// pollJobWaitedOn keeps the job polls of op, in review, as its case is
// (its reasons): in review, next_probe_at schedules only the polls of the
// job the case waits on (review.JobToWaitOn; ClaimJobsInReview), due at
// once when the case starts waiting, stopped once it no longer does. The
// one rule for every path that puts an operation or a job there — a
// deadline passed while it followed the job, a late success beside it,
// a job named late, a job's end — so none leaves a case waiting on a job
// nobody asks about. An operation in another state is left as it is.
func (s *Store) pollJobWaitedOn(ctx context.Context, tx *sqlx.Tx, op *review.Operation, reasons []review.Reason, now time.Time) error {
	if op.State != review.NeedsReview {
		return nil
	}
	var err error
	if _, wait := review.JobToWaitOn(op, reasons); wait {
		_, err = s.exec(ctx, tx, startJobPoll, dbTime(now), op.ID)
	} else {
		_, err = s.exec(ctx, tx, stopJobPoll, op.ID)
	}
	if err != nil {
		return fmt.Errorf("job poll: %w", err)
	}
	return nil
}

/* Store.resolveBySystem */
const resolveOpenCase = `
UPDATE cases SET status = 'resolved', resolved_at = ?, resolved_by = ?, resolution = ?, claimed_by = '', claim_until = NULL,
    version = version + 1
WHERE id = ? AND status = 'open'`

// resolveBySystem resolves case id, if still open, for what settled it
// without a person's decision (resolution, e.g. expired), as actor: the
// open-case counts and the audit trail follow, in tx.
func (s *Store) resolveBySystem(ctx context.Context, tx *sqlx.Tx, id, resolution, actor string) error {
	c, err := s.lockCase(ctx, tx, id)
	if err != nil {
		return err
	}
	now := s.now()
	res, err := s.exec(ctx, tx, resolveOpenCase, now, actor, resolution, id)
	if err != nil || rowsAffected(res) != 1 {
		return err // resolved already: nothing to do
	}
	if err := s.countOpenCase(ctx, tx, c.Tenant, c.Destination, c.Action, c.Flags, reasonBits(c.Reasons), -1); err != nil {
		return err
	}
	if err := s.caseChanged(ctx, tx, c.changed(ChangeClosed, actor)); err != nil {
		return err
	}
	return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: c.Tenant, OperationID: c.OperationID,
		Action: "case.resolved", Detail: detailJSON(map[string]any{"case_id": c.ID, "resolution": resolution})})
}

/* Store.openApprovalCase */
const setCaseRequest = `UPDATE cases SET requested_by = ?, expires_at = ? WHERE id = ?`

// openApprovalCase opens the approval case a registration awaiting
// approval asks for (a, nil: none), in the transaction that registers it.
func (s *Store) openApprovalCase(ctx context.Context, tx *sqlx.Tx, row *opRow, a *review.ApprovalRequest, actor string) error {
	if a == nil {
		return nil
	}
	c, err := s.openCase(ctx, tx, row.ID, row.Tenant, a.Reasons, actor)
	if err != nil {
		return err
	}
	if _, err := s.exec(ctx, tx, setCaseRequest, a.RequestedBy, dbTime(a.ExpiresAt), c.ID); err != nil {
		return fmt.Errorf("approval case: %w", err)
	}
	return nil
}

func (s *Store) caseByID(ctx context.Context, q sqlx.QueryerContext, id string) (*Case, error) {
	var c Case
	err := sqlx.GetContext(ctx, q, &c, s.rebind(`SELECT `+caseColumns+` FROM cases WHERE id = ?`), id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	c.fill()
	return &c, nil
}

// GetCase returns a case, if its tenant is in scope (nil scope: all tenants).
func (s *Store) GetCase(ctx context.Context, id string, scope []string) (*Case, error) {
	c, err := s.caseByID(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if scope != nil && !slices.Contains(scope, c.Tenant) {
		return nil, review.ErrNotFound
	}
	return c, nil
}

// CasesForOperation returns every case of an operation, oldest first.
func (s *Store) CasesForOperation(ctx context.Context, opID string) ([]Case, error) {
	var cs []Case
	if err := s.db.SelectContext(ctx, &cs, s.rebind(`SELECT `+caseColumns+` FROM cases WHERE operation_id = ? ORDER BY opened_at, id`), opID); err != nil {
		return nil, fmt.Errorf("store.CasesForOperation: %w", err)
	}
	for i := range cs {
		cs[i].fill()
	}
	return cs, nil
}

// OpenCases returns up to limit open cases, most urgent first (the queue
// proper, with filters, comes with the console).
func (s *Store) OpenCases(ctx context.Context, limit int) ([]Case, error) {
	var cs []Case
	if err := s.db.SelectContext(ctx, &cs, s.rebind(`SELECT `+caseColumns+` FROM cases WHERE status = 'open' ORDER BY priority DESC, opened_at, id LIMIT ?`), limit); err != nil {
		return nil, fmt.Errorf("store.OpenCases: %w", err)
	}
	for i := range cs {
		cs[i].fill()
	}
	return cs, nil
}
