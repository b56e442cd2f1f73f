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

// AttemptRequest asks for permission to send one request.
type AttemptRequest struct {
	Tenant      string
	OperationID string
	// Credential and Model, when named, get their own concurrency limits.
	Credential string
	Model      string
	Actor      string
}

// Grant is a granted attempt: send the request with Key before LeaseExpiresAt.
type Grant struct {
	OperationID string `json:"operation_id"`
	N           int    `json:"n"`
	Key         string `json:"key"`
	// KeyHeader is the header Key travels in; "" when the destination
	// does not deduplicate by key (then it is not sent).
	KeyHeader      string    `json:"key_header"`
	Generation     int64     `json:"generation"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// After is the operation's dependency with what it was confirmed
	// with, when it has one: the input this attempt builds on.
	After *review.Dependency `json:"after,omitempty"`
}

// limitWhat names the limit p holds in a refusal.
func limitWhat(p param, name string, d review.Destination, action string, req AttemptRequest) string {
	switch p {
	case pCredentialLimit:
		return "credential " + req.Credential
	case pModelLimit:
		return "model " + req.Model
	case pActionLimit:
		return "action " + action
	}
	if d.ReservePriority > 0 && !d.Actions[action].Priority {
		return fmt.Sprintf("destination %s (%d more kept for priority actions)", name, d.ReservePriority)
	}
	return "destination " + name
}

// limitWait is how long a caller held back by a concurrency limit or the
// retry budget is asked to wait: attempts usually finish within seconds.
const limitWait = time.Second

const (
	/* Store.StartAttempt: the row every counting attempt start locks
	   first (lockDestinationRow), so that limits hold across instances. */
	insertDestinationLock = `INSERT INTO destination_locks (destination) VALUES (?) ON CONFLICT (destination) DO NOTHING`
	/* Store.startAttemptTx (PostgreSQL): what says, before the operation
	   is locked, whether its grant will take its destination's lock. */
	selectAttemptLimits = `SELECT destination, action, attempt_count FROM operations WHERE tenant = ? AND id = ?`
)

// StartAttempt grants attempt n+1 when the state, backoff, budgets,
// concurrency limits and the retry budget allow it. Otherwise it returns a
// *review.NotAttemptableError (the state forbids it) or a *review.WaitError
// (try again later).
func (s *Store) StartAttempt(ctx context.Context, req AttemptRequest) (*Grant, error) {
	if g, ok, err := s.startAttemptFast(ctx, req); ok || err != nil {
		if err != nil {
			return nil, fmt.Errorf("store.StartAttempt: %w", err)
		}
		s.fastHits.Add(1)
		return g, nil
	}
	s.fastMisses.Add(1)
	defer s.snaps.drop(req.OperationID)
	ans, err := inTx(ctx, s, func(tx *sqlx.Tx) (attemptAnswer, error) { return s.startAttemptTx(ctx, tx, req) })
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrConflict) {
			return nil, err
		}
		return nil, fmt.Errorf("store.StartAttempt: %w", err)
	}
	if ans.refused != nil {
		return nil, ans.refused
	}
	return ans.grant, nil
}

// attemptAnswer is the ordinary path's answer to an attempt request: the
// grant, or why not (a *review.NotAttemptableError or *review.WaitError).
// A refusal is not an error of the transaction: what it wrote (an
// operation whose budget ended) commits.
type attemptAnswer struct {
	grant   *Grant
	refused error
}

// startAttemptTx is StartAttempt's ordinary path in its transaction: it
// reads the operation under its lock, then refuses, moves it (a budget
// ended, a key the destination may have forgotten) or grants.
func (s *Store) startAttemptTx(ctx context.Context, tx *sqlx.Tx, req AttemptRequest) (attemptAnswer, error) {
	now := s.now()
	locked, err := s.lockDestinationFirst(ctx, tx, req)
	if err != nil {
		return attemptAnswer{}, err
	}
	row, err := s.lockOperation(ctx, tx, req.Tenant, req.OperationID)
	if err != nil {
		return attemptAnswer{}, err
	}
	op := row.operation()
	n := op.AttemptCount + 1
	dest := s.cfg.Destination(op.Destination)
	g := review.Grantable(op, dest, now)
	if g == review.GrantNotAttemptable {
		return attemptAnswer{refused: &review.NotAttemptableError{Operation: op}}, nil
	}
	if review.IsCompensation(op.Action) && dest.Undo != nil {
		// Limbo's undo call removes a resource whole: not sent, by the
		// worker or an integrator, where others wrote it too.
		if refused, err := s.undoLeftToPerson(ctx, tx, row, op, dest, req.Actor); err != nil || refused != nil {
			return attemptAnswer{refused: refused}, err
		}
	}
	// Before budgets and limits: an operation waiting for another is not
	// using its budget, and one whose dependency broke has no next attempt.
	ans, done, after, err := s.dependencyGate(ctx, tx, row, op, req.Actor)
	if err != nil || done {
		return ans, err
	}
	switch g {
	case review.GrantAttemptsSpent, review.GrantCostSpent, review.GrantDeadlinePassed:
		return s.endBudget(ctx, tx, row, op, g, req.Actor)
	case review.GrantBackoff:
		return attemptAnswer{refused: &review.WaitError{Until: *op.NextAttemptAt,
			Reason: "backoff: the next attempt may start at " + op.NextAttemptAt.Format(time.RFC3339Nano)}}, nil
	case review.GrantIfKeyKept:
		if ans, err := s.keyLapsed(ctx, tx, row, op, dest, now, req.Actor); err != nil || ans.refused != nil {
			return ans, err
		}
	}
	if w, err := s.checkLimits(ctx, tx, op, dest, n, req, locked == op.Destination, now); err != nil || w != nil {
		if err != nil {
			return attemptAnswer{}, err
		}
		return attemptAnswer{refused: w}, nil
	}
	grant, reason, ev := newGrant(op, n, dest, req, now)
	if after != nil {
		// The attempt builds on what the dependency was confirmed with
		// (the PDF a share link publishes): the grant names it, and the
		// audit trail keeps which one.
		grant.After = after
		ev.Detail = detailJSON(map[string]any{"n": grant.N, "credential": req.Credential, "model": req.Model,
			"lease_expires_at": grant.LeaseExpiresAt, "after": after})
	}
	if err := s.writeGrant(ctx, tx, op, row.DetailVersion, grant, reason, ev, req, now); err != nil {
		if errors.Is(err, errGuard) {
			return attemptAnswer{}, review.ErrConflict // cannot happen under the row lock; kept as a check
		}
		return attemptAnswer{}, err
	}
	return attemptAnswer{grant: grant}, nil
}

// lockDestinationFirst takes, on PostgreSQL, the lock of the destination
// whose limits or retry budget the grant req asks for will be counted
// against, before the operation's lock, and names it ("" when none). A
// batch takes them in that order too (lockDestinationRow, then the
// operation's row), and may be writing this very operation: taken the
// other way round, each would wait for the other until PostgreSQL broke
// the deadlock a second later. Read without a lock, the operation may
// have moved on by the time it is locked; checkLimits then takes the
// lock late, which is rare and retried. SQLite's single writer orders
// everything already.
func (s *Store) lockDestinationFirst(ctx context.Context, tx *sqlx.Tx, req AttemptRequest) (string, error) {
	if s.engine != Postgres {
		return "", nil
	}
	var r struct {
		Destination  string `db:"destination"`
		Action       string `db:"action"`
		AttemptCount int    `db:"attempt_count"`
	}
	err := s.get(ctx, tx, &r, selectAttemptLimits, req.Tenant, req.OperationID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil // lockOperation says so
	}
	if err != nil {
		return "", err
	}
	if !limitsApply(s.cfg.Destination(r.Destination), r.Action, r.AttemptCount+1, req) {
		return "", nil
	}
	return r.Destination, s.lockDestination(ctx, tx, r.Destination)
}

// lockDestination locks destination's row in destination_locks until tx
// ends, writing it first on the destination's first counted grant.
func (s *Store) lockDestination(ctx context.Context, tx *sqlx.Tx, destination string) error {
	var a args
	a[pDestination] = destination
	n, err := s.write(ctx, tx, lockDestinationRow, &a)
	if err == nil && n == 0 {
		if _, err = tx.ExecContext(ctx, s.rebind(insertDestinationLock), destination); err == nil {
			_, err = s.write(ctx, tx, lockDestinationRow, &a)
		}
	}
	if err != nil {
		return fmt.Errorf("destination lock: %w", err)
	}
	return nil
}

// endBudget moves op, out of attempts or cost, or past its deadline (g), while no
// effect can be pending, to where review.BudgetEnded says, audited, and
// refuses the attempt: failed, or ambiguous when an earlier attempt whose
// effect is unknown means the budget ending proves nothing.
func (s *Store) endBudget(ctx context.Context, tx *sqlx.Tx, row *opRow, op *review.Operation, g review.Grantability, actor string) (attemptAnswer, error) {
	reason := review.BudgetEndReason(op, g)
	to, action, detail := review.Failed, "operation.failed", map[string]any(nil)
	prior, err := s.loadPriorEffect(ctx, tx, op, op.AttemptCount+1)
	if err != nil {
		return attemptAnswer{}, err
	}
	if review.BudgetEnded(op.Risk, prior) == review.Ambiguous {
		to, action = review.Ambiguous, "operation.ambiguous"
		reason += "; " + review.WhyEarlierMayHaveHadEffect
		detail = map[string]any{"escalation": []review.Reason{review.ReasonBudgetExhausted}}
	}
	if err := s.transition(ctx, tx, row, to, reason, actor, action, detail); err != nil {
		return attemptAnswer{}, err
	}
	op.State, op.StateReason = to, reason
	return attemptAnswer{refused: &review.NotAttemptableError{Operation: op}}, nil
}

// keyLapsed checks a retry review.Grantable grants only if the destination
// still knows its key (review.RetryNeedsReconcile): when the key may be forgotten
// and an earlier attempt may have had its effect, op moves to ambiguous
// and the attempt is refused; otherwise the answer is empty.
func (s *Store) keyLapsed(ctx context.Context, tx *sqlx.Tx, row *opRow, op *review.Operation, dest review.Destination, now time.Time, actor string) (attemptAnswer, error) {
	prior, err := s.loadPriorEffect(ctx, tx, op, op.AttemptCount+1)
	if err != nil {
		return attemptAnswer{}, err
	}
	var first time.Time
	if row.FirstAttemptAt.Valid {
		first = row.FirstAttemptAt.Time
	}
	if !review.RetryNeedsReconcile(op, dest, first, now, prior) {
		return attemptAnswer{}, nil
	}
	reason := review.WhyKeyRetentionLapsed
	if err := s.transition(ctx, tx, row, review.Ambiguous, reason, actor, "operation.ambiguous", nil); err != nil {
		return attemptAnswer{}, err
	}
	op.State, op.StateReason = review.Ambiguous, reason
	return attemptAnswer{refused: &review.NotAttemptableError{Operation: op}}, nil
}

// newGrant is attempt n of op, granted at now: the grant, the operation's
// new state reason and the audit event, the same on the ordinary path and
// the fast one.
func newGrant(op *review.Operation, n int, dest review.Destination, req AttemptRequest, now time.Time) (*Grant, string, *AuditEvent) {
	lease := dest.Lease
	if lease <= 0 {
		lease = review.DefaultLease
	}
	g := &Grant{OperationID: op.ID, N: n, Key: op.Key, KeyHeader: dest.KeyHeader(), Generation: op.Version + 1, LeaseExpiresAt: now.Add(lease)}
	ev := &AuditEvent{At: now, Actor: req.Actor, Tenant: op.Tenant, OperationID: op.ID, Action: "attempt.started",
		FromState: string(op.State), ToState: string(review.InFlight),
		Detail: detailJSON(map[string]any{"n": g.N, "credential": req.Credential, "model": req.Model, "lease_expires_at": g.LeaseExpiresAt})}
	return g, fmt.Sprintf(review.WhyAttemptGranted, n), ev
}

// writeGrant writes grant g in tx (attemptPlan): the operation in flight,
// guarded by its state, version and detailVersion (errGuard when they no
// longer match), then the attempt and the audit event.
func (s *Store) writeGrant(ctx context.Context, tx *sqlx.Tx, op *review.Operation, detailVersion int64, g *Grant, reason string, ev *AuditEvent, req AttemptRequest, now time.Time) error {
	a := grantArgs(op, detailVersion, g, reason, req, now)
	_, err := s.writeCall(ctx, tx, attemptPlan, &a, ev)
	return err
}

// grantArgs are attemptPlan's parameters for grant g.
func grantArgs(op *review.Operation, detailVersion int64, g *Grant, reason string, req AttemptRequest, now time.Time) args {
	var a args
	a[pKind], a[pOpID], a[pTenant], a[pAt], a[pStateReason] = "attempt", op.ID, op.Tenant, now, reason
	a[pGuardState], a[pVersion], a[pDetailVersion] = string(op.State), op.Version, detailVersion
	a[pN], a[pGeneration], a[pDestination], a[pCredential], a[pModel], a[pLeaseExpiresAt] = g.N, g.Generation,
		op.Destination, req.Credential, req.Model, g.LeaseExpiresAt
	return a
}

// limitsApply reports whether attempt n must be counted against the
// destination's concurrency limits or, being a retry, its retry budget.
func limitsApply(d review.Destination, action string, n int, req AttemptRequest) bool {
	var a args
	return setLimits(&a, d, action, req) || n > 1
}

// actionLimit is the action's own concurrency limit (0: none).
func actionLimit(d review.Destination, action string) int {
	if c := d.Actions[action].Concurrency; c != nil {
		return *c
	}
	return 0
}

// setLimits sets a's limit parameters (limitCounts) to the concurrency
// limits a grant for action under d, asked with req, is counted against,
// 0 where none applies, and reports whether any does. Slots reserved for
// priority actions are closed to the rest.
func setLimits(a *args, d review.Destination, action string, req AttemptRequest) bool {
	dest := d.Concurrency
	if dest > 0 && d.ReservePriority > 0 && !d.Actions[action].Priority {
		dest -= d.ReservePriority
	}
	a[pDestLimit], a[pCredentialLimit], a[pModelLimit], a[pActionLimit] = dest, 0, 0, actionLimit(d, action)
	if req.Credential != "" {
		a[pCredentialLimit] = d.PerCredential
	}
	if req.Model != "" {
		a[pModelLimit] = d.PerModel
	}
	return d.Concurrency > 0 || a[pCredentialLimit].(int) > 0 || a[pModelLimit].(int) > 0 || a[pActionLimit].(int) > 0
}

// setRetryBudget sets a's retry budget parameters for attempt n under b at
// now: none (a floor below 0) for a first attempt.
func setRetryBudget(a *args, b review.RetryBudget, n int, now time.Time) {
	a[pRetryFloor], a[pRetryRatio], a[pRetryWindowStart] = -1, 0.0, now
	if n > 1 {
		a[pRetryFloor], a[pRetryRatio], a[pRetryWindowStart] = b.Floor, b.Ratio, now.Add(-b.Window)
	}
}

// checkLimits enforces the destination's concurrency limits and retry
// budget. It first locks the destination's row, unless tx holds it
// already (locked), so two instances cannot both take the last slot (on
// SQLite the single writer already serialises the transaction; the row is
// written there too, for the fast path).
func (s *Store) checkLimits(ctx context.Context, tx *sqlx.Tx, op *review.Operation, d review.Destination, n int, req AttemptRequest, locked bool, now time.Time) (*review.WaitError, error) {
	name := op.Destination
	if !limitsApply(d, op.Action, n, req) {
		return nil, nil
	}
	if !locked {
		if err := s.lockDestination(ctx, tx, name); err != nil {
			return nil, err
		}
	}
	var a args
	a[pDestination], a[pAt], a[pCredential], a[pModel], a[pAction] = name, now, req.Credential, req.Model, op.Action
	wait := func(why string) *review.WaitError {
		return &review.WaitError{Until: now.Add(limitWait), Reason: why}
	}
	setLimits(&a, d, op.Action, req)
	for _, l := range limitCounts {
		limit := a[l.limit].(int)
		if limit <= 0 {
			continue
		}
		var open int
		if err := s.get(ctx, tx, &open, l.count.query, l.count.bind(&a)...); err != nil {
			return nil, fmt.Errorf("count open attempts: %w", err)
		}
		if open >= limit {
			return wait(fmt.Sprintf("concurrency limit: %d of %d attempts in flight for %s", open, limit, limitWhat(l.limit, name, d, op.Action, req))), nil
		}
	}
	if n > 1 {
		b := s.cfg.Budget()
		var c struct {
			Firsts  int64 `db:"firsts"`
			Retries int64 `db:"retries"`
		}
		a[pTenant] = op.Tenant
		setRetryBudget(&a, b, n, now)
		if err := s.get(ctx, tx, &c, retryWindow.query, retryWindow.bind(&a)...); err != nil {
			return nil, fmt.Errorf("count retries: %w", err)
		}
		if c.Retries >= b.Allowed(c.Firsts) {
			return wait(fmt.Sprintf("retry budget: tenant %s made %d retries for %d first attempts to %s in the last %s",
				op.Tenant, c.Retries, c.Firsts, name, b.Window)), nil
		}
	}
	return nil, nil
}

const (
	/* Store.transition: every state change checks the state and version it
	   read, and ends any probe claim: a round probed before the change must
	   not apply after it (fencing). Probing starts afresh in the new
	   state, as after an outcome (updateOpOutcome): due at once, its rounds
	   (the round limit, the backoff) counted from 0. In review,
	   next_probe_at schedules only the polls of a job its case waits on
	   (ClaimJobsInReview), set again when the case opened waits on one
	   (pollJobWaitedOn). */
	updateOpState = `
UPDATE operations SET state = ?, state_reason = ?, version = version + 1, updated_at = ?,
    probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1, probe_round = 0,
    next_probe_at = NULL
WHERE id = ? AND state || '' = ? AND version = ?`
)

// transition moves an operation between states with its audit event, guarded
// by the table in review and by state and version in SQL.
func (s *Store) transition(ctx context.Context, tx *sqlx.Tx, row *opRow, to review.State, reason, actor, action string, detail map[string]any) error {
	from := review.State(row.State)
	if err := review.CheckTransition(from, to); err != nil {
		return err
	}
	now := s.now()
	res, err := s.exec(ctx, tx, updateOpState, string(to), reason, now, row.ID, row.State, row.Version)
	if err != nil {
		return fmt.Errorf("transition: %w", err)
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return review.ErrConflict
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail["reason"] = reason
	row.State, row.StateReason, row.Version = string(to), reason, row.Version+1
	if err := s.appendEvent(ctx, tx, &AuditEvent{
		At: now, Actor: actor, Tenant: row.Tenant, OperationID: row.ID, Action: action,
		FromState: string(from), ToState: string(to), Detail: detailJSON(detail),
	}); err != nil {
		return err
	}
	if to == review.NeedsReview {
		esc, _ := detail["escalation"].([]review.Reason)
		if _, err := s.openCase(ctx, tx, row.ID, row.Tenant, esc, actor); err != nil {
			return err
		}
	}
	if review.IsCompensation(row.Action) {
		return s.settleParent(ctx, tx, row.Tenant, row.ID, to)
	}
	return nil
}

// selectAttempt reads one attempt (locked on PostgreSQL).
func (s *Store) selectAttempt(ctx context.Context, tx *sqlx.Tx, opID string, n int) (*review.Attempt, error) {
	q := `
SELECT operation_id, n, generation, credential, model, started_at, lease_expires_at, finished_at, result,
    phase, http_status, provider_code, provider_request_id, retry_after, cost, next, next_reason, retry_at, outcome_hash
FROM attempts WHERE operation_id = ? AND n = ?`
	if s.engine == Postgres {
		q += " FOR UPDATE"
	}
	var a review.Attempt
	err := s.get(ctx, tx, &a, q, opID, n)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &a, nil
}
