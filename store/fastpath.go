package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// The fast path of the attempt cycle: one round trip per call.
//
// Register, StartAttempt and RecordOutcome are on the path of every external
// call an integration makes. On PostgreSQL each round trip costs more than
// the work it carries, so when this process holds an exact snapshot of the
// operation (snapshots.go) these calls decide in Go, with the same review
// functions as the ordinary path, and write everything — the operation, the
// attempt, the evidence and the audit event — as one plan of guarded
// writes (writes.go): through limbo_fast_batch on PostgreSQL, which runs
// the calls of concurrent callers in one round trip and one commit
// (batch.go); a short transaction of the same statements on SQLite (in
// process, nothing to save but the reads).
//
// The fast path covers the common case only; anything else returns ok=false
// and the ordinary path (a transaction that reads under a lock) runs, so
// refusals, limits, cases and jobs have exactly one implementation:
//   - register: a new key (an existing one needs the comparison);
//   - attempt: a first attempt that no concurrency limit counts (limits and
//     the retry budget count other operations' attempts under a lock);
//   - outcome: one that neither opens a case nor reports a job.

// errGuard: a fast write's guard matched nothing; the ordinary path decides.
var errGuard = errors.New("store: fast path guard failed")

// registerFast persists p, a registration planned for a new key, with one
// statement. It returns nil when the key already exists: the ordinary path
// compares intentions (RegistrationPlan.ExistingKey).
func (s *Store) registerFast(ctx context.Context, p *review.RegistrationPlan, now time.Time) (*review.Operation, error) {
	r := &p.Registration
	row, ev := registrationRow(p, now)
	var created bool
	// An approval case or a dependency is written beside the operation,
	// in the ordinary transaction.
	if bulkable(p) && !s.snaps.off {
		a := row.insertArgs()
		res, err := s.fast(ctx, &a, ev)
		if err != nil {
			return nil, err
		}
		created = res.Ops == 1
	} else {
		var err error
		created, err = inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
			ok, err := s.insertRegistered(ctx, tx, &row, ev)
			if err != nil || !ok {
				return false, err
			}
			if r.After != nil {
				if err := s.writeDependency(ctx, tx, &row, r.After); err != nil {
					return false, err
				}
			}
			return true, s.openApprovalCase(ctx, tx, &row, p.Approval, r.Actor)
		})
		if err != nil {
			return nil, err
		}
	}
	if !created {
		return nil, nil
	}
	op := row.operation()
	if r.After != nil {
		after := *r.After
		after.DependencyState = "" // read with the operation, not known here
		op.After = &after
	}
	s.snaps.put(&snapshot{op: op})
	return copyOperation(op), nil
}

// registrationRow is the operation row and audit event a new key's
// registration writes.
func registrationRow(p *review.RegistrationPlan, now time.Time) (opRow, *AuditEvent) {
	r := &p.Registration
	row := opRow{ID: newID("op_", now), Tenant: r.Tenant, Key: r.Key, SourceRef: r.SourceRef, LogicalVersion: r.LogicalVersion,
		Action: r.Action, Destination: r.Destination, Risk: string(r.Risk), Flags: joinFlags(r.Flags), Payload: string(r.Payload),
		PayloadHash: p.PayloadHash, State: string(p.State), StateReason: p.Reason, Deadline: dbTime(*r.Deadline), MaxAttempts: *r.MaxAttempts,
		Version: 1, CreatedAt: now, UpdatedAt: now}
	if r.CostBudget != nil {
		row.CostBudget = sql.NullFloat64{Float64: *r.CostBudget, Valid: true}
	}
	return row, plannedEvent(p.Event, now, r.Actor, r.Tenant, row.ID)
}

// insertArgs are insertOperation's parameters for r, created at
// r.CreatedAt, as registerPlan's call.
func (r *opRow) insertArgs() args {
	var a args
	a[pKind], a[pOpID], a[pTenant], a[pKey], a[pSourceRef] = "register", r.ID, r.Tenant, r.Key, r.SourceRef
	a[pLogicalVersion], a[pAction], a[pDestination], a[pRisk], a[pFlags] = r.LogicalVersion, r.Action, r.Destination, r.Risk, r.Flags
	a[pPayload], a[pPayloadHash], a[pState], a[pStateReason] = r.Payload, r.PayloadHash, r.State, r.StateReason
	a[pDeadline], a[pMaxAttempts], a[pCostBudget], a[pAt] = r.Deadline, r.MaxAttempts, nullFloat(r.CostBudget), r.CreatedAt
	return a
}

// insertRegistered writes row and its registration event in tx
// (registerPlan); false when the key exists (nothing is written).
func (s *Store) insertRegistered(ctx context.Context, tx *sqlx.Tx, row *opRow, ev *AuditEvent) (bool, error) {
	a := row.insertArgs()
	_, err := s.writeCall(ctx, tx, registerPlan, &a, ev)
	if errors.Is(err, errGuard) {
		return false, nil
	}
	return err == nil, err
}

// startAttemptFast grants a first attempt from the snapshot with one
// statement; ok is false when the ordinary path must decide.
func (s *Store) startAttemptFast(ctx context.Context, req AttemptRequest) (g *Grant, ok bool, err error) {
	sn := s.snaps.get(req.Tenant, req.OperationID)
	if sn == nil {
		return nil, false, nil
	}
	op, now := sn.op, s.now()
	if op.After != nil || review.IsCompensation(op.Action) {
		// Its dependency, or whether its undo is left to a person
		// (undoLeftToPerson), is read under the ordinary path's lock.
		return nil, false, nil
	}
	n := op.AttemptCount + 1
	dest := s.cfg.Destination(op.Destination)
	if review.Grantable(op, dest, now) != review.GrantNow {
		// A refusal, a wait, or a retry whose key the destination may
		// have forgotten: the ordinary path says which.
		return nil, false, nil
	}
	g, reason, ev := newGrant(op, n, dest, req, now)
	a := grantArgs(op, sn.detailVersion, g, reason, req, now)
	if limitsApply(dest, op.Action, n, req) {
		// Counted against the destination's limits or the retry budget,
		// in the batch's transaction under the destination's lock: a
		// batch holds it once for all its grants, where the ordinary path
		// holds it for one grant and its commit. No room: the ordinary
		// path says why.
		if err := s.ensureDestinationLock(ctx, op.Destination); err != nil {
			return nil, false, err
		}
		a[pKind], a[pAction] = "attempt_limited", op.Action
		setLimits(&a, dest, op.Action, req)
		setRetryBudget(&a, s.cfg.Budget(), n, now)
	}
	r, err := s.fast(ctx, &a, ev)
	if err != nil {
		return nil, false, err
	}
	if r.Ops != 1 { // the guard: the ordinary path decides
		s.snaps.drop(op.ID)
		return nil, false, nil
	}
	next := copyOperation(op)
	next.State, next.StateReason, next.AttemptCount, next.NextAttemptAt = review.InFlight, reason, n, nil
	next.Version, next.UpdatedAt = g.Generation, now
	next.Attempts = append(next.Attempts, review.Attempt{OperationID: op.ID, N: n, Generation: g.Generation,
		Credential: req.Credential, Model: req.Model, StartedAt: now, LeaseExpiresAt: g.LeaseExpiresAt})
	first := sn.firstAttemptAt
	if first == nil {
		first = &now
	}
	s.snaps.put(&snapshot{op: next, firstAttemptAt: first, detailVersion: sn.detailVersion})
	return g, true, nil
}

// ensureDestinationLock writes destination's row in destination_locks,
// which limited grants lock, unless this store knows it is there.
func (s *Store) ensureDestinationLock(ctx context.Context, destination string) error {
	if _, ok := s.destLocks.Load(destination); ok {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, s.rebind(insertDestinationLock), destination); err != nil {
		return fmt.Errorf("destination lock: %w", err)
	}
	s.destLocks.Store(destination, true)
	return nil
}

// recordOutcomeFast applies a first report for attempt n from the snapshot
// with one statement; ok is false when the ordinary path must decide.
func (s *Store) recordOutcomeFast(ctx context.Context, tenant, opID string, n int, o review.Outcome, hash, actor string) (res *OutcomeResult, ok bool, err error) {
	p, ok, err := s.decideOutcomeFast(tenant, opID, n, o, hash, actor)
	if !ok || err != nil {
		return nil, false, err
	}
	evID, err := s.writeOutcomeFast(ctx, p)
	if errors.Is(err, errGuard) {
		s.snaps.drop(p.op.ID)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return s.afterOutcomeFast(p, evID), true, nil
}

// fastOutcome is a first report for attempt n decided from the snapshot:
// what recordOutcomeFast writes, and what the snapshot becomes.
type fastOutcome struct {
	sn   *snapshot
	op   *review.Operation
	ai   int // attempt n's index in op.Attempts
	n    int
	o    review.Outcome
	hash string
	now  time.Time
	d    review.Decision
	// res is the operation's resource when the plan confirms it.
	res *review.ResourceRef
	// ev is the response's evidence (on success), cands its candidates
	// as stored, bump 1 when it adds to the operation's details.
	ev    *review.Evidence
	cands string
	bump  int
	audit *AuditEvent
}

// decideOutcomeFast decides the report from the snapshot, with the same
// review functions as the ordinary path; ok is false for anything but a
// first report for the current attempt that opens no case and names no job.
func (s *Store) decideOutcomeFast(tenant, opID string, n int, o review.Outcome, hash, actor string) (p *fastOutcome, ok bool, err error) {
	sn := s.snaps.get(tenant, opID)
	if sn == nil || sn.op.State != review.InFlight || o.Job != nil || review.IsCompensation(sn.op.Action) {
		return nil, false, nil // a compensation's outcome moves its parent too: the ordinary path
	}
	op, now := sn.op, s.now()
	if op.After != nil {
		return nil, false, nil // its dependency is read under the ordinary path's lock
	}
	ai := -1
	for i, a := range op.Attempts {
		if a.N == n {
			ai = i
		}
	}
	if ai < 0 || op.Attempts[ai].FinishedAt != nil || op.Attempts[ai].Generation != op.Version {
		return nil, false, nil // unknown, repeated, late or fenced: the ordinary path answers
	}
	first := now
	if sn.firstAttemptAt != nil {
		first = *sn.firstAttemptAt
	}
	plan := review.PlanOutcome(review.DecideInput{Op: op, N: n, FirstAttemptAt: first, Outcome: o,
		Destination: s.cfg.Destination(op.Destination), Now: now, Rand: s})
	if plan.OpensCase() || plan.Job != nil {
		return nil, false, nil // opens a case or follows a job: the ordinary path
	}
	d := plan.Decision
	if err := review.CheckTransition(op.State, d.State); err != nil {
		return nil, false, err
	}
	o.Cost = plan.Cost // with its tokens priced
	p = &fastOutcome{sn: sn, op: op, ai: ai, n: n, o: o, hash: hash, now: now, d: d, res: plan.Resource}
	if d.RetryAt != nil {
		t := dbTime(*d.RetryAt)
		p.d.RetryAt = &t
	}
	if plan.Evidence != nil {
		p.ev = plan.Evidence
		b, err := json.Marshal(p.ev.Candidates)
		if err != nil {
			return nil, false, err
		}
		p.cands, p.bump = string(b), 1
	}
	p.audit = plannedEvent(plan.Event, now, actor, op.Tenant, op.ID)
	return p, true, nil
}

// writeOutcomeFast writes p (outcomePlan) guarded by the snapshot's
// versions (errGuard when they no longer match): through limbo_fast_batch
// on PostgreSQL, a short transaction of the same statements on SQLite. It
// returns the evidence id.
func (s *Store) writeOutcomeFast(ctx context.Context, p *fastOutcome) (int64, error) {
	op := p.op
	a := outcomeArgs(op, p.sn.detailVersion, p.n, op.Attempts[p.ai].Generation, p.o, p.d, p.res, p.hash, p.bump, p.now)
	if p.ev != nil {
		a[pSource], a[pAuthoritative], a[pCandidates] = string(p.ev.Source), p.ev.Authoritative, p.cands
		a[pVerdict], a[pNote], a[pObservedAt] = string(p.ev.Verdict), p.ev.Note, p.now
	}
	r, err := s.fast(ctx, &a, p.audit)
	if err == nil && r.Ops != 1 {
		err = errGuard
	}
	return r.EvidenceID, err
}

// afterOutcomeFast is p written: the snapshot moved on, and the answer.
func (s *Store) afterOutcomeFast(p *fastOutcome, evID int64) *OutcomeResult {
	op, o, d, now := p.op, p.o, p.d, p.now
	next := copyOperation(op)
	next.State, next.StateReason, next.CostSpent, next.NextAttemptAt = d.State, d.Reason, op.CostSpent+o.Cost, d.RetryAt
	next.Version, next.UpdatedAt = op.Version+1, now
	if p.res != nil {
		r := *p.res
		next.Resource = &r
	}
	a := &next.Attempts[p.ai]
	a.FinishedAt, a.Result, a.Phase, a.HTTPStatus, a.ProviderCode = &now, o.Result, o.Phase, o.HTTPStatus, o.ProviderCode
	a.ProviderReqID, a.RetryAfter, a.Cost, a.Next, a.NextReason = o.ProviderRequestID, o.RetryAfter, o.Cost, d.Next, d.Reason
	a.RetryAt, a.OutcomeHash = d.RetryAt, p.hash
	if p.ev != nil {
		p.ev.ID = evID
		next.Evidence = append(next.Evidence, *p.ev)
	}
	s.snaps.put(&snapshot{op: next, firstAttemptAt: p.sn.firstAttemptAt, detailVersion: p.sn.detailVersion + int64(p.bump)})
	return &OutcomeResult{Operation: copyOperation(next), Next: d.Next, RetryAt: d.RetryAt, Reason: d.Reason}
}

func rowsAffected(res sql.Result) int64 {
	n, err := res.RowsAffected()
	if err != nil {
		return -1
	}
	return n
}
