package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// OutcomeResult is what an outcome report led to.
type OutcomeResult struct {
	Operation *review.Operation
	Next      review.Next
	RetryAt   *time.Time
	Reason    string
	// Unchanged: the same report was already applied; nothing was written.
	Unchanged bool
}

// OutcomeHash identifies an outcome report, so that the same report sent
// twice is recognised and a different one is refused.
func OutcomeHash(o review.Outcome) string {
	b, _ := json.Marshal(o)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

const (
	/* Store.applyOutcome: the structured output, with the attempt's close. */
	insertAttemptOutput = `INSERT INTO attempt_outputs (operation_id, n, output, invalid, recorded_at) VALUES (?, ?, ?, ?, ?)`
	/* Store.AttemptOutputs: the caller has read the operation in its scope. */
	selectAttemptOutputs = `SELECT n, output, invalid, recorded_at, purged_at FROM attempt_outputs WHERE operation_id = ? ORDER BY n`
	/* Store.AttemptOutput: scoped by the operation's tenant. */
	selectAttemptOutput = `
SELECT a.n, a.output, a.invalid, a.recorded_at, a.purged_at FROM attempt_outputs a JOIN operations o ON o.id = a.operation_id
WHERE a.operation_id = ? AND o.tenant = ? AND a.n = ?`
	/* Store.bumpDetails: evidence and jobs change what the API answers
	   without moving the version; see migration 0013. */
	updateOpDetailVersion = `UPDATE operations SET detail_version = detail_version + 1 WHERE id = ?`
	/* Store.keepLateReport: what an attempt closed without a report cost,
	   reported late (the attempt's cost was 0). */
	addLateCost    = `UPDATE operations SET cost_spent = cost_spent + ? WHERE id = ?`
	setAttemptCost = `UPDATE attempts SET cost = ? WHERE operation_id = ? AND n = ?`
	/* Store.insertEvidence: bumpDetails, saying whether the payload was purged. */
	updateOpDetailVersionPurged = `UPDATE operations SET detail_version = detail_version + 1 WHERE id = ? RETURNING payload_purged_at IS NOT NULL`
	/* Store.upsertJob */
	upsertJob = `
INSERT INTO jobs (operation_id, ref, status, input_version, output_ref, attempt_n, found, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (operation_id, ref) DO UPDATE SET status = excluded.status,
    input_version = CASE WHEN excluded.input_version = '' THEN jobs.input_version ELSE excluded.input_version END,
    output_ref = CASE WHEN excluded.output_ref = '' THEN jobs.output_ref ELSE excluded.output_ref END,
    updated_at = excluded.updated_at`
)

// RecordOutcome applies an integrator's report for attempt n. The same
// report again answers unchanged. A report that comes late — a different
// one for a closed attempt, one for an attempt the sweeper closed, or one
// for an attempt the operation has moved on from — is a
// *review.OutcomeConflictError, and is kept as evidence (keepLateReport).
func (s *Store) RecordOutcome(ctx context.Context, tenant, opID string, n int, o review.Outcome, actor string) (*OutcomeResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Output != nil {
		canon, err := review.Canonicalize(o.Output)
		if err != nil {
			return nil, fmt.Errorf("%w: output: %v", review.ErrInvalid, err)
		}
		o.Output = canon
	}
	hash := OutcomeHash(o)
	// An outcome with an output takes the ordinary path, which keeps it.
	if o.Output == nil {
		if res, ok, err := s.recordOutcomeFast(ctx, tenant, opID, n, o, hash, actor); ok || err != nil {
			if err != nil && !errors.Is(err, review.ErrInvalidTransition) {
				return nil, fmt.Errorf("store.RecordOutcome: %w", err)
			}
			if err == nil {
				s.fastHits.Add(1)
			}
			return res, err
		}
	}
	s.fastMisses.Add(1)
	s.snaps.drop(opID) // GetOperation below takes a new one
	ans, err := inTx(ctx, s, func(tx *sqlx.Tx) (outcomeAnswer, error) {
		row, err := s.lockOperation(ctx, tx, tenant, opID)
		if err != nil {
			return outcomeAnswer{}, err
		}
		att, err := s.selectAttempt(ctx, tx, opID, n)
		if err != nil {
			return outcomeAnswer{}, err
		}
		var why, told string
		// A report for an attempt that had none (closed by the sweeper,
		// or superseded) says what the attempt cost for the first time:
		// counted, against the cost budget too. One for an attempt that
		// has an outcome was counted with it.
		unreported := false
		switch {
		case att.FinishedAt != nil && att.OutcomeHash == hash:
			return outcomeAnswer{res: &OutcomeResult{Next: att.Next, RetryAt: att.RetryAt, Reason: att.NextReason, Unchanged: true}}, nil
		case att.FinishedAt != nil && att.Result == review.ResultUnknown:
			why, unreported = review.WhyLateAfterClosed, true
			told = fmt.Sprintf("attempt %d was closed before this report (%s)", n, att.NextReason)
		case att.FinishedAt != nil:
			why = fmt.Sprintf(review.WhyLateAfterOutcome, att.Result)
			told = fmt.Sprintf("attempt %d already has a different outcome (%s)", n, att.Result)
		case row.State != string(review.InFlight) || att.Generation != row.Version:
			// Open, but the operation moved on since it was granted: the
			// report is no longer the operation's outcome (fencing).
			why, unreported = review.WhyLateAfterMovedOn, true
			told = fmt.Sprintf("attempt %d was superseded: the operation moved on (%s) before this report", n, row.State)
			if err := s.closeAttempt(ctx, tx, row, n, review.WhySuperseded, actor); err != nil {
				return outcomeAnswer{}, err
			}
		default:
			res, err := s.applyOutcome(ctx, tx, row, att, o, hash, actor)
			return outcomeAnswer{res: res}, err
		}
		cost := 0.0
		if unreported && att.Cost == 0 { // a second late report was counted by the first
			cost = review.PricedCost(o, s.cfg.Destination(row.Destination))
		}
		if err := s.keepLateReport(ctx, tx, row, n, o, why, cost, actor); err != nil {
			return outcomeAnswer{}, err
		}
		return outcomeAnswer{refused: &review.OutcomeConflictError{Operation: row.operation(),
			Reason: fmt.Sprintf("%s; the operation is %s. The report is kept as evidence", told, row.State)}}, nil
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrConflict) || errors.Is(err, review.ErrInvalidTransition) {
			return nil, err
		}
		return nil, fmt.Errorf("store.RecordOutcome: %w", err)
	}
	if ans.refused != nil {
		return nil, ans.refused
	}
	res := ans.res
	if res.Operation, err = s.GetOperation(ctx, tenant, opID, ""); err != nil {
		return nil, err
	}
	return res, nil
}

// outcomeAnswer is the ordinary path's answer to a report: the result, or
// why it was refused (a *review.OutcomeConflictError). A refusal is not an
// error of the transaction: the late report it keeps as evidence commits.
type outcomeAnswer struct {
	res     *OutcomeResult
	refused error
}

// applyOutcome closes an open attempt with o and persists the plan
// review.PlanOutcome makes of it, read from the operation's whole record:
// attempt, operation, resource, evidence, job, audit event and case — all
// in tx.
func (s *Store) applyOutcome(ctx context.Context, tx *sqlx.Tx, row *opRow, att *review.Attempt, o review.Outcome, hash, actor string) (*OutcomeResult, error) {
	now := s.now()
	if row.State != string(review.InFlight) || att.Generation != row.Version {
		// The operation moved on since this attempt was granted: fenced off.
		return nil, review.ErrConflict
	}
	op, err := s.loadDetails(ctx, tx, row.operation())
	if err != nil {
		return nil, err
	}
	first := now
	if row.FirstAttemptAt.Valid {
		first = row.FirstAttemptAt.Time
	}
	p := review.PlanOutcome(review.DecideInput{Op: op, N: att.N, FirstAttemptAt: first, Outcome: o,
		Destination: s.cfg.Destination(op.Destination), Now: now, Rand: s})
	d := p.Decision
	if err := review.CheckTransition(op.State, d.State); err != nil {
		return nil, err
	}
	o.Cost = p.Cost // with its tokens priced
	// Detail version 0: the ordinary path bumps it with the evidence.
	a := outcomeArgs(op, row.DetailVersion, att.N, att.Generation, o, d, p.Resource, hash, 0, now)
	k, err := s.write(ctx, tx, finishAttempt, &a)
	if err != nil {
		return nil, fmt.Errorf("finish attempt: %w", err)
	}
	if k != 1 {
		return nil, review.ErrConflict
	}
	if k, err = s.write(ctx, tx, updateOpOutcome, &a); err != nil {
		return nil, fmt.Errorf("update operation: %w", err)
	}
	if k != 1 {
		return nil, review.ErrConflict
	}
	if p.Evidence != nil {
		if err := s.insertEvidence(ctx, tx, op.ID, *p.Evidence); err != nil {
			return nil, err
		}
	}
	if o.Output != nil {
		if _, err := s.exec(ctx, tx, insertAttemptOutput, op.ID, att.N, string(o.Output), o.OutputInvalid, now); err != nil {
			return nil, fmt.Errorf("keep output: %w", err)
		}
	}
	if p.Job != nil {
		if err := s.upsertJob(ctx, tx, op.ID, *p.Job, att.N, now); err != nil {
			return nil, err
		}
	}
	if err := s.appendEvent(ctx, tx, plannedEvent(p.Event, now, actor, op.Tenant, op.ID)); err != nil {
		return nil, err
	}
	if p.OpensCase() {
		if _, err := s.openCase(ctx, tx, op.ID, op.Tenant, d.Escalation, actor); err != nil {
			return nil, err
		}
	}
	if review.IsCompensation(op.Action) {
		if err := s.settleParent(ctx, tx, op.Tenant, op.ID, d.State); err != nil {
			return nil, err
		}
	}
	return &OutcomeResult{Next: d.Next, RetryAt: d.RetryAt, Reason: d.Reason}, nil
}

// keepLateReport keeps an outcome for attempt n that came after the
// attempt was closed (why says how) as evidence, the way the report says
// it (review.LateEvidence), audited; the operation is not moved by it,
// except by escalateLateSuccess. Deciding what all the evidence then
// means is the assessment's work. cost, what an attempt closed without a
// report cost, is added to the attempt and to the operation's cost spent
// (its next attempt is refused once that reaches the cost budget).
func (s *Store) keepLateReport(ctx context.Context, tx *sqlx.Tx, row *opRow, n int, o review.Outcome, why string, cost float64, actor string) error {
	ev := review.LateEvidence(row.operation(), n, o, why)
	ev.ObservedAt = s.now()
	if err := s.insertEvidence(ctx, tx, row.ID, ev); err != nil {
		return err
	}
	detail := map[string]any{"source": ev.Source, "authoritative": ev.Authoritative,
		"verdict": ev.Verdict, "note": ev.Note, "n": n, "result": o.Result}
	if cost > 0 {
		if _, err := s.exec(ctx, tx, addLateCost, cost, row.ID); err != nil {
			return fmt.Errorf("late cost: %w", err)
		}
		if _, err := s.exec(ctx, tx, setAttemptCost, cost, row.ID, n); err != nil {
			return fmt.Errorf("late cost: %w", err)
		}
		row.CostSpent += cost
		detail["cost"], detail["cost_spent"] = cost, row.CostSpent
	}
	if o.Result == review.ResultSuccess {
		job, err := s.keepLateJob(ctx, tx, row, n, o)
		if err != nil {
			return err
		}
		if job != nil {
			detail["job"] = job.Ref
		}
	}
	if err := s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Tenant: row.Tenant, OperationID: row.ID,
		Action: "evidence.recorded", Detail: detailJSON(detail)}); err != nil {
		return err
	}
	if o.Result != review.ResultSuccess {
		return nil
	}
	if review.State(row.State).Terminal() {
		// A success for an earlier attempt of a settled operation may
		// name a resource nobody answers for: a duplicate beside the
		// confirmed one, or an effect of a failed or compensated
		// operation (review.ExtraEffects), as evidence submitted for it
		// would.
		op, err := s.loadDetails(ctx, tx, row.operation())
		if err != nil {
			return err
		}
		if found, err := s.extraEvidence(ctx, tx, row, op, actor, map[string]any{"n": n, "late": true}, ev); err != nil || found {
			return err
		}
		if review.UnnamedEffect(op, ev) {
			// The effect happened, says the destination, and nothing
			// says which: kept as evidence alone, nobody would look.
			return s.extraEffect(ctx, tx, row, op, actor, "evidence.extra_effect", map[string]any{"n": n, "late": true,
				"extra": []review.Candidate{}, "reason": review.RationaleUnnamedEffect})
		}
	}
	moved, err := s.escalateLateSuccess(ctx, tx, row, n, actor)
	if err == nil && !moved {
		// Otherwise all the evidence, this report included, says where
		// the operation goes (a late success proves the effect:
		// confirmed, unless other evidence contradicts it).
		moved, err = s.weighMove(ctx, tx, row, actor, map[string]any{"n": n, "late": true})
	}
	if err == nil && !moved && row.State == string(review.NeedsReview) {
		// A person decides, on a case that recommends from all the
		// evidence: it now has the report, and maybe a job to wait on,
		// which the reconciler then polls (pollJobWaitedOn).
		err = s.reassessOpenCase(ctx, tx, row.ID, row.Tenant, actor)
	}
	return err
}

// keepLateJob records the job a late success o for attempt n names, when
// the operation does not know it yet, as attempt n's, and returns it (nil:
// no new job). The destination holds it for the operation: its end,
// reported as any job's (PutJob), is then taken — followed, or put before
// the person a case asks — not refused as a job never reported.
func (s *Store) keepLateJob(ctx context.Context, tx *sqlx.Tx, row *opRow, n int, o review.Outcome) (*review.Job, error) {
	if o.Job == nil {
		return nil, nil
	}
	var refs []string // the refs alone, as putJobTx reads them: not the whole record
	if err := tx.SelectContext(ctx, &refs, s.rebind(selectJobRefs), row.ID); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	j := review.OutcomeJob(row.operation(), o)
	if slices.Contains(refs, j.Ref) {
		return nil, nil
	}
	j.Attempt = n
	return j, s.upsertJob(ctx, tx, row.ID, *j, n, s.now())
}

// escalateLateSuccess sends the operation to review when a success
// reported late for attempt n means the retry the ledger allowed may
// repeat the effect (review.LateSuccessNeedsReview). An attempt in flight
// is closed as unknown: its report, when it comes, is kept like any late
// one. The assessment of all the evidence may call this too.
func (s *Store) escalateLateSuccess(ctx context.Context, tx *sqlx.Tx, row *opRow, n int, actor string) (moved bool, err error) {
	op := row.operation()
	var first time.Time
	if row.FirstAttemptAt.Valid {
		first = row.FirstAttemptAt.Time
	}
	if !review.LateSuccessNeedsReview(op, n, review.EffectiveRisk(op.Risk, s.cfg.Destination(op.Destination), first, s.now())) {
		return false, nil
	}
	why := fmt.Sprintf(review.WhyLateSuccessRetryDue, n)
	if op.AttemptCount > n {
		why = fmt.Sprintf(review.WhyLateSuccessAnotherAttempt, n, op.AttemptCount, op.State)
	}
	if op.State == review.InFlight {
		if err := s.closeAttempt(ctx, tx, row, op.AttemptCount, fmt.Sprintf(review.WhyClosedForLateSuccess, n), actor); err != nil {
			return false, err
		}
	}
	return true, s.transition(ctx, tx, row, review.NeedsReview, why, actor, "operation.escalated",
		map[string]any{"n": n, "escalation": []review.Reason{review.ReasonSourcesDisagree}})
}

/* Store.closeAttempt */
const closeOpenAttempt = `
UPDATE attempts SET finished_at = ?, result = 'unknown', phase = 'unknown', next = 'review', next_reason = ?
WHERE operation_id = ? AND n = ? AND (finished_at IS NULL) IS TRUE`

// closeAttempt closes attempt n of row, if still open, with outcome
// unknown, audited: the operation no longer waits for it, and the sweeper
// must not either.
func (s *Store) closeAttempt(ctx context.Context, tx *sqlx.Tx, row *opRow, n int, why, actor string) error {
	res, err := s.exec(ctx, tx, closeOpenAttempt, s.now(), why, row.ID, n)
	if err != nil {
		return fmt.Errorf("close attempt: %w", err)
	}
	if rowsAffected(res) == 0 {
		return nil
	}
	return s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Tenant: row.Tenant, OperationID: row.ID,
		Action: "attempt.closed", Detail: detailJSON(map[string]any{"n": n, "result": review.ResultUnknown, "reason": why})})
}

func (s *Store) insertEvidence(ctx context.Context, tx *sqlx.Tx, opID string, ev review.Evidence) error {
	var purged bool
	if err := s.get(ctx, tx, &purged, updateOpDetailVersionPurged, opID); err != nil {
		return fmt.Errorf("detail version: %w", err)
	}
	if ev.Candidates == nil || purged {
		// Past retention an operation's evidence keeps no candidates
		// (PurgePayloads): evidence that lands later keeps none either.
		ev.Candidates = []review.Candidate{}
	}
	cands, err := json.Marshal(ev.Candidates)
	if err != nil {
		return err
	}
	a := evidenceArgs(opID, &ev, string(cands))
	if _, err := s.write(ctx, tx, insertEvidence, &a); err != nil {
		return fmt.Errorf("insert evidence: %w", err)
	}
	return nil
}

// evidenceArgs are insertEvidence's parameters for ev, its candidates
// marshalled as cands.
func evidenceArgs(opID string, ev *review.Evidence, cands string) args {
	var a args
	a[pOpID], a[pSource], a[pAuthoritative], a[pCandidates] = opID, string(ev.Source), ev.Authoritative, cands
	a[pVerdict], a[pNote], a[pObservedAt] = string(ev.Verdict), ev.Note, dbTime(ev.ObservedAt)
	return a
}

// outcomeArgs are finishAttempt's and updateOpOutcome's parameters for
// report o on attempt n (of generation) of op, decided as d; bump is added
// to the operation's detail version.
func outcomeArgs(op *review.Operation, detailVersion int64, n int, generation int64, o review.Outcome, d review.Decision,
	res *review.ResourceRef, hash string, bump int, now time.Time) args {
	var a args
	a[pKind], a[pOpID], a[pTenant], a[pAt] = "outcome", op.ID, op.Tenant, now
	a[pState], a[pStateReason], a[pVersion], a[pDetailVersion] = string(d.State), d.Reason, op.Version, detailVersion
	a[pN], a[pGeneration], a[pNext], a[pOutcomeHash], a[pDetailBump] = n, generation, string(d.Next), hash, bump
	a[pResult], a[pPhase], a[pHTTPStatus], a[pProviderCode] = string(o.Result), string(o.Phase), o.HTTPStatus, o.ProviderCode
	a[pProviderRequestID], a[pRetryAfter], a[pCost] = o.ProviderRequestID, o.RetryAfter, o.Cost
	if d.RetryAt != nil {
		a[pRetryAt] = dbTime(*d.RetryAt)
	}
	if res != nil {
		a[pResourceRef], a[pResourceKind], a[pResourceVersion] = res.Ref, res.Kind, res.Version
	}
	return a
}

func (s *Store) bumpDetails(ctx context.Context, tx *sqlx.Tx, opID string) error {
	if _, err := s.exec(ctx, tx, updateOpDetailVersion, opID); err != nil {
		return fmt.Errorf("detail version: %w", err)
	}
	return nil
}

// upsertJob records job j of operation opID, or its new status. A new job
// belongs to attempt n (review.Job.Attempt), and was found or named as j
// says (review.Job.Found); a known one keeps both.
func (s *Store) upsertJob(ctx context.Context, tx *sqlx.Tx, opID string, j review.Job, n int, now time.Time) error {
	if err := s.bumpDetails(ctx, tx, opID); err != nil {
		return err
	}
	found := 0
	if j.Found {
		found = 1
	}
	if _, err := s.exec(ctx, tx, upsertJob, opID, j.Ref, string(j.Status), j.InputVersion,
		j.OutputRef, n, found, now, now); err != nil {
		return fmt.Errorf("upsert job: %w", err)
	}
	return nil
}

const (
	/* Store.SweepLeases */
	selectExpiredAttempts = `
SELECT a.operation_id, o.tenant, a.n FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.finished_at IS NULL AND a.lease_expires_at <= ? ORDER BY a.lease_expires_at LIMIT ?`
)

// SweepLeases closes attempts whose lease expired without an outcome: each
// gets outcome unknown, and its operation goes where an unknown outcome
// leads for its risk class. It returns how many it closed; an attempt
// that cannot be closed is skipped (*SkippedRows) and the rest are.
func (s *Store) SweepLeases(ctx context.Context) (int, error) {
	type lapsed = struct {
		OperationID string `db:"operation_id"`
		Tenant      string `db:"tenant"`
		N           int    `db:"n"`
	}
	var expired []lapsed
	if err := s.db.SelectContext(ctx, &expired, s.rebind(selectExpiredAttempts), s.now(), 500); err != nil {
		return 0, fmt.Errorf("store.SweepLeases: %w", err)
	}
	id := func(e lapsed) string { return fmt.Sprintf("%s/%d", e.OperationID, e.N) }
	conflict := func(err error) bool { return errors.Is(err, review.ErrConflict) }
	return eachRow(ctx, "store.SweepLeases", nil, expired, id, conflict, func(e lapsed) (bool, error) {
		return inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
			row, err := s.lockOperation(ctx, tx, e.Tenant, e.OperationID)
			if err != nil {
				return false, err
			}
			att, err := s.selectAttempt(ctx, tx, e.OperationID, e.N)
			if err != nil {
				return false, err
			}
			if att.FinishedAt != nil || att.LeaseExpiresAt.After(s.now()) {
				return false, nil // reported meanwhile
			}
			o := review.LeaseExpired()
			if _, err := s.applyOutcome(ctx, tx, row, att, o, OutcomeHash(o), "system:lease-sweeper"); err != nil {
				return false, err
			}
			return true, nil
		})
	})
}

/* Store.loadPriorEffect */
const selectPriorOutcomes = `
SELECT n, finished_at, result, phase, http_status, provider_code, retry_after FROM attempts
WHERE operation_id = ? AND n < ? AND finished_at IS NOT NULL`

// loadPriorEffect reports whether an attempt before n ended with its
// effect unknown (review.PriorMayHaveEffect), reading the attempts in tx.
func (s *Store) loadPriorEffect(ctx context.Context, tx *sqlx.Tx, op *review.Operation, n int) (bool, error) {
	var prior []review.Attempt
	if err := s.sel(ctx, tx, &prior, selectPriorOutcomes, op.ID, n); err != nil {
		return false, fmt.Errorf("prior outcomes: %w", err)
	}
	return review.PriorMayHaveEffect(prior, n, s.cfg.Destination(op.Destination), op.Action, s.now()), nil
}

// AttemptOutput is a structured output kept with attempt N. PurgedAt, when
// set, is when the payload retention emptied it (PurgePayloads): Output is
// then nil and Invalid "", and the output was kept until then.
type AttemptOutput struct {
	N          int             `json:"n"`
	Output     json.RawMessage `json:"output"`
	Invalid    string          `json:"invalid,omitempty"`
	RecordedAt time.Time       `json:"recorded_at"`
	PurgedAt   *time.Time      `json:"purged_at,omitempty"`
}

// outputRow is an attempt_outputs row as the drivers scan it (TEXT into a
// string: neither driver scans into json.RawMessage).
type outputRow struct {
	N          int          `db:"n"`
	Output     string       `db:"output"`
	Invalid    string       `db:"invalid"`
	RecordedAt time.Time    `db:"recorded_at"`
	PurgedAt   sql.NullTime `db:"purged_at"`
}

func (r outputRow) output() AttemptOutput {
	out := AttemptOutput{N: r.N, Invalid: r.Invalid, RecordedAt: r.RecordedAt.UTC()}
	if r.PurgedAt.Valid {
		at := r.PurgedAt.Time.UTC()
		out.PurgedAt = &at
		return out
	}
	out.Output = json.RawMessage(r.Output)
	return out
}

// AttemptOutputs reads every structured output kept for operation opID,
// by attempt; the caller has read the operation in its scope.
func (s *Store) AttemptOutputs(ctx context.Context, opID string) ([]AttemptOutput, error) {
	var rows []outputRow
	if err := s.db.SelectContext(ctx, &rows, s.rebind(selectAttemptOutputs), opID); err != nil {
		return nil, fmt.Errorf("store.AttemptOutputs: %w", err)
	}
	out := make([]AttemptOutput, len(rows))
	for i, r := range rows {
		out[i] = r.output()
	}
	return out, nil
}

// AttemptOutput reads the structured output of attempt n of tenant's
// operation opID; review.ErrNotFound when it kept none.
func (s *Store) AttemptOutput(ctx context.Context, tenant, opID string, n int) (*AttemptOutput, error) {
	var r outputRow
	err := s.db.GetContext(ctx, &r, s.rebind(selectAttemptOutput), opID, tenant, n)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.AttemptOutput: %w", err)
	}
	out := r.output()
	return &out, nil
}
