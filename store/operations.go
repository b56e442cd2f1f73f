package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// opRow is an operations row as stored.
type opRow struct {
	ID              string          `db:"id"`
	Tenant          string          `db:"tenant"`
	Key             string          `db:"key"`
	SourceRef       string          `db:"source_ref"`
	LogicalVersion  string          `db:"logical_version"`
	Action          string          `db:"action"`
	Destination     string          `db:"destination"`
	Risk            string          `db:"risk"`
	Flags           string          `db:"flags"`
	Payload         string          `db:"payload"`
	PayloadHash     string          `db:"payload_hash"`
	State           string          `db:"state"`
	StateReason     string          `db:"state_reason"`
	Deadline        time.Time       `db:"deadline"`
	MaxAttempts     int             `db:"max_attempts"`
	CostBudget      sql.NullFloat64 `db:"cost_budget"`
	CostSpent       float64         `db:"cost_spent"`
	AttemptCount    int             `db:"attempt_count"`
	NextAttemptAt   sql.NullTime    `db:"next_attempt_at"`
	FirstAttemptAt  sql.NullTime    `db:"first_attempt_at"`
	ResourceRef     sql.NullString  `db:"resource_ref"`
	ResourceKind    sql.NullString  `db:"resource_kind"`
	ResourceVersion sql.NullString  `db:"resource_version"`
	Version         int64           `db:"version"`
	DetailVersion   int64           `db:"detail_version"`
	CreatedAt       time.Time       `db:"created_at"`
	UpdatedAt       time.Time       `db:"updated_at"`
	PayloadPurgedAt sql.NullTime    `db:"payload_purged_at"`
}

const opColumns = `id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
attempt_count, next_attempt_at, first_attempt_at, resource_ref, resource_kind, resource_version,
version, detail_version, created_at, updated_at, payload_purged_at`

func (r *opRow) operation() *review.Operation {
	op := &review.Operation{
		ID: r.ID, Tenant: r.Tenant, Key: r.Key, SourceRef: r.SourceRef, LogicalVersion: r.LogicalVersion,
		Action: r.Action, Destination: r.Destination, Risk: review.Risk(r.Risk), Flags: []review.Flag{},
		Payload: json.RawMessage(r.Payload), PayloadHash: r.PayloadHash, State: review.State(r.State),
		StateReason: r.StateReason, Deadline: r.Deadline.UTC(), MaxAttempts: r.MaxAttempts,
		CostSpent: r.CostSpent, AttemptCount: r.AttemptCount, Version: r.Version,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Attempts: []review.Attempt{}, Evidence: []review.Evidence{}, Jobs: []review.Job{},
	}
	if r.PayloadPurgedAt.Valid {
		// Purged (store/retention.go): no bytes left; null in JSON, not "".
		t := r.PayloadPurgedAt.Time.UTC()
		op.Payload, op.PayloadPurgedAt = nil, &t
	}
	if r.Flags != "" {
		for _, f := range strings.Split(r.Flags, ",") {
			op.Flags = append(op.Flags, review.Flag(f))
		}
	}
	if r.CostBudget.Valid {
		v := r.CostBudget.Float64
		op.CostBudget = &v
	}
	if r.NextAttemptAt.Valid {
		t := r.NextAttemptAt.Time.UTC()
		op.NextAttemptAt = &t
	}
	if r.ResourceRef.Valid {
		op.Resource = &review.ResourceRef{Ref: r.ResourceRef.String, Kind: r.ResourceKind.String, Version: r.ResourceVersion.String}
	}
	return op
}

func joinFlags(fs []review.Flag) string {
	ss := make([]string, len(fs))
	for i, f := range fs {
		ss[i] = string(f)
	}
	return strings.Join(ss, ",")
}

const (
	/* Store.Register */
	selectOperationByKey = `SELECT ` + opColumns + ` FROM operations WHERE tenant = ? AND key = ?`
	/* Store.GetOperation */
	selectOperation = `SELECT ` + opColumns + ` FROM operations WHERE tenant = ? AND id = ?`
	/* Store.Register: the refused payload, for the reviewer's diff. */
	insertRejectedPayload = `INSERT INTO rejected_payloads (case_id, payload_hash, payload, received_at) VALUES (?, ?, ?, ?)
ON CONFLICT (case_id, payload_hash) DO NOTHING`
	/* Store.ensureTenant */
	insertTenant = `INSERT INTO tenants (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`
)

// Register records a new operation, or returns the stored one when the same
// key arrives with the same intention (created is then false). The same key
// with a different payload or intention is a *review.PayloadMismatchError.
func (s *Store) Register(ctx context.Context, r review.Registration) (op *review.Operation, created bool, err error) {
	now := s.now()
	p, err := review.PlanRegistration(r, s.cfg, now)
	if err != nil {
		if op, rerr := s.repeatDespitePolicy(ctx, err); op != nil || rerr != nil {
			return op, false, rerr
		}
		return nil, false, err
	}
	if err := s.knownTenant(ctx, p.Registration.Tenant, now); err != nil {
		return nil, false, fmt.Errorf("store.Register: %w", err)
	}
	if op, err := s.registerFast(ctx, p, now); err != nil || op != nil {
		if err != nil {
			return nil, false, fmt.Errorf("store.Register: %w", err)
		}
		if !s.snaps.off { // a new key is written as the fast path writes it
			s.fastHits.Add(1)
		}
		return op, true, nil
	}
	s.fastMisses.Add(1)
	// The key exists (registerFast's insert met it, committed: rows are
	// never deleted): compare intentions, and record a refusal with its case
	// in one transaction.
	taken, err := inTx(ctx, s, func(tx *sqlx.Tx) (keyTaken, error) { return s.registerTakenTx(ctx, tx, p, now) })
	if err != nil {
		return nil, false, fmt.Errorf("store.Register: %w", err)
	}
	if taken.plan.Mismatch != nil {
		return nil, false, taken.plan.Mismatch
	}
	op, err = s.loadDetails(ctx, s.db, taken.op)
	return op, false, err
}

// repeatDespitePolicy is the operation a registration the policy refused
// (planErr, a *review.PolicyRefusal) was made as before the policy changed
// (review.PolicyRefusal.IsRepeat), or nil when there is none.
func (s *Store) repeatDespitePolicy(ctx context.Context, planErr error) (*review.Operation, error) {
	var refused *review.PolicyRefusal
	if !errors.As(planErr, &refused) || refused.Registration.Key == "" {
		return nil, nil
	}
	r := refused.Registration
	op, err := s.GetOperation(ctx, r.Tenant, "", r.Key)
	switch {
	case errors.Is(err, review.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !refused.IsRepeat(op):
		return nil, nil
	}
	if op.After, err = s.dependencyOf(ctx, nil, op.ID); err != nil {
		return nil, err
	}
	return op, nil
}

// keyTaken is the operation holding a registration's key, and what the
// registration does about it.
type keyTaken struct {
	op   *review.Operation
	plan review.KeyTakenPlan
}

// registerTakenTx reads the operation holding p's key under its lock, asks
// p what to do about it, and persists that: nothing for the same
// intention; for another, the audited refusal, its case and the refused
// payload.
func (s *Store) registerTakenTx(ctx context.Context, tx *sqlx.Tx, p *review.RegistrationPlan, now time.Time) (keyTaken, error) {
	r := &p.Registration
	// Locked: concurrent refusals under one key queue here, so the
	// second finds the first one's case and joins it.
	q := selectOperationByKey
	if s.engine == Postgres {
		q += " FOR UPDATE"
	}
	var row opRow
	if err := s.get(ctx, tx, &row, q, r.Tenant, r.Key); err != nil {
		return keyTaken{}, fmt.Errorf("select existing: %w", err)
	}
	op := row.operation()
	after, err := s.dependencyOf(ctx, tx, op.ID)
	if err != nil {
		return keyTaken{}, err
	}
	op.After = after
	kp := p.ExistingKey(op)
	if kp.Mismatch == nil {
		return keyTaken{op: op, plan: kp}, nil
	}
	if err := s.appendEvent(ctx, tx, plannedEvent(kp.Event, now, r.Actor, r.Tenant, op.ID)); err != nil {
		return keyTaken{}, err
	}
	c, err := s.openCase(ctx, tx, op.ID, op.Tenant, kp.CaseReasons, r.Actor)
	if err != nil {
		return keyTaken{}, err
	}
	refused := string(r.Payload)
	if row.PayloadPurgedAt.Valid {
		// Past retention the case keeps the refused payload's hash only, as
		// the purge leaves refusals: the case page shows no diff beside a
		// purged payload, and the purge never comes back for this one.
		refused = ""
	}
	if _, err := tx.ExecContext(ctx, s.rebind(insertRejectedPayload), c.ID, p.PayloadHash, refused, now); err != nil {
		return keyTaken{}, err
	}
	return keyTaken{op: op, plan: kp}, nil
}

// knownTenant makes sure the tenant exists, asking the database once per
// tenant and process (tenants are never deleted).
func (s *Store) knownTenant(ctx context.Context, tenant string, now time.Time) error {
	if _, ok := s.tenants.Load(tenant); ok {
		return nil
	}
	if err := s.WithTx(ctx, func(tx *sqlx.Tx) error { return s.ensureTenant(ctx, tx, tenant, now) }); err != nil {
		return err
	}
	s.tenants.Store(tenant, struct{}{})
	return nil
}

func (s *Store) ensureTenant(ctx context.Context, tx sqlx.ExtContext, tenant string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, s.rebind(insertTenant), tenant, now); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	return nil
}

// GetOperation returns the tenant's operation by id (or, when id is empty,
// by key) with its attempts, evidence and jobs. Another tenant's operation
// is review.ErrNotFound.
func (s *Store) GetOperation(ctx context.Context, tenant, id, key string) (*review.Operation, error) {
	var row opRow
	var err error
	if id != "" {
		err = s.get(ctx, nil, &row, selectOperation, tenant, id)
	} else {
		err = s.get(ctx, nil, &row, selectOperationByKey, tenant, key)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.GetOperation: %w", err)
	}
	op, err := s.loadDetails(ctx, s.db, row.operation())
	if err != nil {
		return nil, err
	}
	// Read row first, details after: a detail newer than the row means the
	// row's version has moved too, and the snapshot's guard will fail.
	sn := &snapshot{op: copyOperation(op), detailVersion: row.DetailVersion}
	if row.FirstAttemptAt.Valid {
		t := row.FirstAttemptAt.Time.UTC()
		sn.firstAttemptAt = &t
	}
	s.snaps.put(sn)
	return op, nil
}

// lockOperation reads the tenant's operation inside tx, locked against
// concurrent writers until the transaction ends.
func (s *Store) lockOperation(ctx context.Context, tx *sqlx.Tx, tenant, id string) (*opRow, error) {
	q := selectOperation
	if s.engine == Postgres {
		q += " FOR UPDATE"
	}
	var row opRow
	err := s.get(ctx, tx, &row, q, tenant, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}

const (
	/* Store.loadDetails */
	selectAttempts = `
SELECT operation_id, n, generation, credential, model, started_at, lease_expires_at, finished_at, result,
    phase, http_status, provider_code, provider_request_id, retry_after, cost, next, next_reason, retry_at, outcome_hash
FROM attempts WHERE operation_id IN (?) ORDER BY operation_id, n`
	/* Store.loadDetails */
	selectEvidence = `
SELECT id, operation_id, source, authoritative, candidates, verdict, note, observed_at
FROM evidence WHERE operation_id IN (?) ORDER BY operation_id, id`
	/* Store.loadDetails */
	selectJobs = `
SELECT operation_id, ref, status, input_version, output_ref, attempt_n, found, created_at, updated_at
FROM jobs WHERE operation_id IN (?) ORDER BY operation_id, attempt_n, created_at, ref`
	/* Store.loadDetails: the resources whose undo is confirmed, or not settled yet;
	   and those a reviewer said are undone (compensation_done naming one,
	   with or without a compensation: keep_and_undo's names it in undo_ref),
	   which are as good as confirmed. */
	selectUndone = `
SELECT parent_id, resource_ref, by_hand, state FROM (
  SELECT c.parent_id, c.resource_ref, c.by_hand, o.state, c.created_at AS at
  FROM compensations c JOIN operations o ON o.id = c.operation_id
  WHERE c.parent_id IN (?) AND o.state <> 'failed'
  UNION ALL
  SELECT k.operation_id, CASE WHEN d.undo_ref <> '' THEN d.undo_ref ELSE d.resource_ref END, 0, 'confirmed', d.decided_at
  FROM cases k JOIN decisions d ON d.case_id = k.id
  WHERE k.operation_id IN (?) AND d.action = 'compensation_done' AND d.status IN ('applied', 'extra_effect')
    AND (d.undo_ref <> '' OR d.resource_ref <> '')
) u ORDER BY parent_id, at`
)

type evidenceRow struct {
	review.Evidence
	CandidatesJSON string `db:"candidates"`
}

// loadDetails fills attempts, evidence and jobs of ops with three queries,
// whatever the number of operations (no N+1).
func (s *Store) loadDetails(ctx context.Context, q sqlx.QueryerContext, op *review.Operation) (*review.Operation, error) {
	if err := s.loadDetailsMany(ctx, q, []*review.Operation{op}); err != nil {
		return nil, err
	}
	return op, nil
}

func (s *Store) loadDetailsMany(ctx context.Context, q sqlx.QueryerContext, ops []*review.Operation) error {
	if len(ops) == 0 {
		return nil
	}
	ids := make([]string, len(ops))
	byID := map[string]*review.Operation{}
	for i, op := range ops {
		ids[i] = op.ID
		byID[op.ID] = op
	}
	in := func(query string) (string, []any, error) {
		qs, args, err := sqlx.In(query, ids)
		return s.rebind(qs), args, err
	}
	qs, args, err := in(selectAttempts)
	if err != nil {
		return err
	}
	var atts []review.Attempt
	if err := sqlx.SelectContext(ctx, q, &atts, qs, args...); err != nil {
		return fmt.Errorf("store.loadDetails: attempts: %w", err)
	}
	for _, a := range atts {
		a.StartedAt, a.LeaseExpiresAt = a.StartedAt.UTC(), a.LeaseExpiresAt.UTC()
		byID[a.OperationID].Attempts = append(byID[a.OperationID].Attempts, a)
	}
	if qs, args, err = in(selectEvidence); err != nil {
		return err
	}
	var evs []evidenceRow
	if err := sqlx.SelectContext(ctx, q, &evs, qs, args...); err != nil {
		return fmt.Errorf("store.loadDetails: evidence: %w", err)
	}
	for _, e := range evs {
		ev := e.Evidence
		ev.Candidates = []review.Candidate{}
		_ = json.Unmarshal([]byte(e.CandidatesJSON), &ev.Candidates)
		ev.ObservedAt = ev.ObservedAt.UTC()
		byID[ev.OperationID].Evidence = append(byID[ev.OperationID].Evidence, ev)
	}
	if qs, args, err = in(selectJobs); err != nil {
		return err
	}
	var jobs []review.Job
	if err := sqlx.SelectContext(ctx, q, &jobs, qs, args...); err != nil {
		return fmt.Errorf("store.loadDetails: jobs: %w", err)
	}
	for _, j := range jobs {
		byID[j.OperationID].Jobs = append(byID[j.OperationID].Jobs, j)
	}
	if err := s.loadDependencies(ctx, q, ids, byID); err != nil {
		return err
	}
	return s.loadUndone(ctx, q, ops, byID)
}

// loadUndone fills Undone, Undoing and UndoingByHand of the ops a
// reviewer has been at
// (only they can have compensations; the attempt cycle's states never do).
func (s *Store) loadUndone(ctx context.Context, q sqlx.QueryerContext, ops []*review.Operation, byID map[string]*review.Operation) error {
	var ids []string
	for _, op := range ops {
		switch op.State {
		case review.Confirmed, review.NeedsReview, review.Compensating, review.Compensated, review.Failed:
			ids = append(ids, op.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	qs, args, err := sqlx.In(selectUndone, ids, ids)
	if err != nil {
		return err
	}
	var rows []struct {
		ParentID string       `db:"parent_id"`
		Ref      string       `db:"resource_ref"`
		ByHand   bool         `db:"by_hand"`
		State    review.State `db:"state"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, s.rebind(qs), args...); err != nil {
		return fmt.Errorf("store.loadDetails: undone: %w", err)
	}
	for _, r := range rows {
		op := byID[r.ParentID]
		switch {
		case r.State == review.Confirmed:
			if !slices.Contains(op.Undone, r.Ref) {
				op.Undone = append(op.Undone, r.Ref)
			}
		case (review.ChildCompensation{State: r.State, Ref: r.Ref}).Unsettled() && !slices.Contains(op.Undoing, r.Ref):
			op.Undoing = append(op.Undoing, r.Ref)
			if r.ByHand {
				op.UndoingByHand = append(op.UndoingByHand, r.Ref)
			}
		}
	}
	return nil
}

// OperationCursorPattern is the form of an operation id, and so of a
// cursor of GET /api/v1/operations: newID's with "op_", or the bench's
// bulk-loaded op_bench0000000001; at most 64 characters in all.
const OperationCursorPattern = `^op_[0-9A-Za-z]{1,61}$`

var operationID = regexp.MustCompile(OperationCursorPattern)

// ListOperations returns up to limit of the tenant's operations after the
// cursor (an operation id), optionally in one state, oldest first. next is
// OperationFilter narrows ListOperations: by state, and by source_ref (an
// agent run's tool calls share their run's source_ref). Empty: any.
type OperationFilter struct {
	State     review.State
	SourceRef string
}

// the cursor of the following page, empty at the end.
func (s *Store) ListOperations(ctx context.Context, tenant string, f OperationFilter, cursor string, limit int) (ops []*review.Operation, next string, err error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("%w: limit must be at least 1", review.ErrInvalid)
	}
	if cursor != "" && !operationID.MatchString(cursor) {
		// Read as an id, a mangled cursor would end the list at once
		// (past every id) or start it over: the client must know.
		return nil, "", fmt.Errorf("%w: field \"cursor\": not a cursor this server issued", review.ErrInvalid)
	}
	q := `SELECT ` + opColumns + ` FROM operations WHERE tenant = ? AND id > ?`
	args := []any{tenant, cursor}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	if f.SourceRef != "" {
		q += ` AND source_ref = ?`
		args = append(args, f.SourceRef)
	}
	q += ` ORDER BY id LIMIT ?`
	args = append(args, limit+1)
	var rows []opRow
	if err := s.db.SelectContext(ctx, &rows, s.rebind(q), args...); err != nil {
		return nil, "", fmt.Errorf("store.ListOperations: %w", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].ID
	}
	ops = make([]*review.Operation, len(rows))
	for i := range rows {
		ops[i] = rows[i].operation()
	}
	if err := s.loadDetailsMany(ctx, s.db, ops); err != nil {
		return nil, "", err
	}
	return ops, next, nil
}

// RejectedPayload is a payload refused for reusing a key.
type RejectedPayload struct {
	PayloadHash string    `db:"payload_hash"`
	Payload     string    `db:"payload"`
	ReceivedAt  time.Time `db:"received_at"`
}

// RejectedPayloads returns the payloads refused under a case's key, oldest first.
func (s *Store) RejectedPayloads(ctx context.Context, caseID string) ([]RejectedPayload, error) {
	var ps []RejectedPayload
	if err := s.db.SelectContext(ctx, &ps, s.rebind(`SELECT payload_hash, payload, received_at FROM rejected_payloads WHERE case_id = ? ORDER BY received_at`), caseID); err != nil {
		return nil, fmt.Errorf("store.RejectedPayloads: %w", err)
	}
	return ps, nil
}
