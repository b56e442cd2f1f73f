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

// AddEvidence records what an integrator observed about an operation's
// effect, then weighs the operation's whole record again (weigh): the
// state follows from all the evidence, not from the newest piece.
func (s *Store) AddEvidence(ctx context.Context, tenant, opID string, ev review.Evidence, actor string) (*review.Operation, error) {
	if !ev.Source.Valid() {
		return nil, fmt.Errorf("%w: field \"source\": must be one of response, status_lookup, metadata_search, webhook", review.ErrInvalid)
	}
	if ev.Source == review.SourceReviewer {
		return nil, fmt.Errorf("%w: field \"source\": reviewer evidence comes from decisions, not the API", review.ErrInvalid)
	}
	for i, c := range ev.Candidates {
		if c.Ref == "" {
			return nil, fmt.Errorf("%w: field \"candidates[%d].ref\": required", review.ErrInvalid, i)
		}
	}
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		ev := ev // each try starts from the evidence as submitted
		row, err := s.lockOperation(ctx, tx, tenant, opID)
		if err != nil {
			return err
		}
		op := row.operation()
		ev.ObservedAt = s.now()
		ev.Verdict = review.EvidenceVerdict(op, ev)
		ev.Note = review.WhySubmittedThroughAPI
		if err := s.insertEvidence(ctx, tx, op.ID, ev); err != nil {
			return err
		}
		detail := map[string]any{"source": ev.Source, "authoritative": ev.Authoritative, "verdict": ev.Verdict, "candidates": len(ev.Candidates)}
		if op.State.Terminal() {
			// Weigh leaves a settled operation where it is; an effect
			// nobody answers for (a duplicate beside the confirmed one, or
			// any of a failed or compensated operation) is for a person,
			// by any path.
			if op, err = s.loadDetails(ctx, tx, op); err != nil {
				return err
			}
			if found, err := s.extraEvidence(ctx, tx, row, op, actor, detail, ev); err != nil || found {
				return err
			}
		}
		return s.weigh(ctx, tx, row, actor, detail)
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrConflict) {
			return nil, err
		}
		return nil, fmt.Errorf("store.AddEvidence: %w", err)
	}
	return s.GetOperation(ctx, tenant, opID, "")
}

// weigh re-reads the locked operation's whole record inside tx — the
// evidence just written included — and applies review.Weigh: it moves the
// operation (audited as evidence.settled, a case opened when it goes to
// review), or records that the evidence settled nothing (evidence.recorded).
// Every path that lands evidence about an effect calls it.
func (s *Store) weigh(ctx context.Context, tx *sqlx.Tx, row *opRow, actor string, detail map[string]any) error {
	moved, err := s.weighMove(ctx, tx, row, actor, detail)
	if err != nil || moved {
		return err
	}
	if row.State == string(review.NeedsReview) {
		// A person decides, on a case that recommends from the evidence:
		// it now has more.
		if err := s.reassessOpenCase(ctx, tx, row.ID, row.Tenant, actor); err != nil {
			return err
		}
	}
	return s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Tenant: row.Tenant, OperationID: row.ID,
		Action: "evidence.recorded", Detail: detailJSON(detail)})
}

// weighMove is weigh without the "recorded" event, for callers that audit
// the evidence themselves: it reports whether the operation moved.
func (s *Store) weighMove(ctx context.Context, tx *sqlx.Tx, row *opRow, actor string, detail map[string]any) (bool, error) {
	op, err := s.loadDetails(ctx, tx, row.operation())
	if err != nil {
		return false, err
	}
	w := review.Weigh(op, s.cfg.Destination(op.Destination), s.now())
	if w.State == "" {
		return false, nil
	}
	if len(w.Reasons) > 0 {
		detail["escalation"] = w.Reasons
	}
	if w.Resource != nil {
		if err := s.setResource(ctx, tx, op.ID, *w.Resource); err != nil {
			return false, err
		}
	}
	if w.Job != nil {
		// Found for the attempts so far: the latest's.
		if err := s.upsertJob(ctx, tx, op.ID, *w.Job, row.AttemptCount, s.now()); err != nil {
			return false, err
		}
	}
	if err := s.transition(ctx, tx, row, w.State, w.Reason, actor, "evidence.settled", detail); err != nil {
		return false, err
	}
	if w.Watch {
		if err := s.startWatch(ctx, tx, op.ID, s.cfg.Destination(op.Destination)); err != nil {
			return false, err
		}
	}
	if w.State == review.RetryWait {
		return true, s.setNextAttempt(ctx, tx, op.ID)
	}
	return true, nil
}

const (
	/* Store.setResource */
	updateOpResource = `UPDATE operations SET resource_ref = ?, resource_kind = ?, resource_version = ? WHERE id = ?`
	/* Store.setNextAttempt: a proven absence may retry at once. */
	updateOpNextAttempt = `UPDATE operations SET next_attempt_at = ? WHERE id = ?`
	/* Store.PutJob */
	selectJob = `SELECT operation_id, ref, status, input_version, output_ref, attempt_n, found, created_at, updated_at FROM jobs WHERE operation_id = ? AND ref = ?`
	/* Store.putJobTx, Store.keepLateJob: the operation's jobs, oldest first (the order
	   loadDetails lists them in, whose last the reconciler polls). */
	selectJobRefs = `SELECT ref FROM jobs WHERE operation_id = ? ORDER BY attempt_n, created_at, ref`
)

func (s *Store) setResource(ctx context.Context, tx *sqlx.Tx, opID string, r review.ResourceRef) error {
	if _, err := tx.ExecContext(ctx, s.rebind(updateOpResource), r.Ref, r.Kind, r.Version, opID); err != nil {
		return fmt.Errorf("set resource: %w", err)
	}
	return nil
}

func (s *Store) setNextAttempt(ctx context.Context, tx *sqlx.Tx, opID string) error {
	if _, err := tx.ExecContext(ctx, s.rebind(updateOpNextAttempt), s.now(), opID); err != nil {
		return fmt.Errorf("set next attempt: %w", err)
	}
	return nil
}

// PutJob updates one of the operation's transformation jobs. When the
// current job of an accepted operation finishes, the operation follows:
// succeeded for the operation's logical version → confirmed; for another
// version → review; failed or canceled → failed. A finished job cannot
// change status again.
//
// Jobs belong to their operation: a job is the operation's when the
// destination named it — in an attempt's outcome, or to the reconciler —
// and its current job is the newest of those (the one the reconciler
// polls). An update for a ref the operation never reported is refused
// (review.ErrConflict) with nothing changed, rather than kept as an
// evidence-only job: a job row would become the newest one, which the
// reconciler would then poll, so an unrelated ref could steer the
// operation; and the caller learns at once that the ref is wrong. An
// earlier job's update is recorded but settles nothing.
func (s *Store) PutJob(ctx context.Context, tenant, opID string, j review.Job, actor string) (*review.Operation, error) {
	if !j.Status.Valid() {
		return nil, fmt.Errorf("%w: field \"status\": must be queued, running, succeeded, failed or canceled", review.ErrInvalid)
	}
	if j.Ref == "" {
		return nil, fmt.Errorf("%w: field \"ref\": required", review.ErrInvalid)
	}
	if err := review.CheckText("ref", review.Identifier, review.MaxFieldLen, j.Ref); err != nil {
		return nil, err
	}
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		return s.putJobTx(ctx, tx, tenant, opID, j, actor)
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrConflict) || errors.Is(err, review.ErrInvalid) {
			return nil, err
		}
		return nil, fmt.Errorf("store.PutJob: %w", err)
	}
	return s.GetOperation(ctx, tenant, opID, "")
}

// putJobTx is PutJob inside an open transaction.
func (s *Store) putJobTx(ctx context.Context, tx *sqlx.Tx, tenant, opID string, j review.Job, actor string) error {
	return s.putJobAt(ctx, tx, tenant, opID, j, actor, s.now())
}

// putJobAt is putJobTx for a job's state as the destination answered it
// at now: a check's job answer is recorded at the instant of its looks
// (RecordCheck).
func (s *Store) putJobAt(ctx context.Context, tx *sqlx.Tx, tenant, opID string, j review.Job, actor string, now time.Time) error {
	row, err := s.lockOperation(ctx, tx, tenant, opID)
	if err != nil {
		return err
	}
	var refs []string
	if err := tx.SelectContext(ctx, &refs, s.rebind(selectJobRefs), opID); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if !slices.Contains(refs, j.Ref) {
		known := "it has none"
		if len(refs) > 0 {
			known = "its jobs: " + strings.Join(refs, ", ")
		}
		return fmt.Errorf("%w: job %s was never reported for operation %s (%s); a job is the operation's when the attempt's outcome names it",
			review.ErrConflict, j.Ref, opID, known)
	}
	current := refs[len(refs)-1] == j.Ref
	var old review.Job
	err = tx.GetContext(ctx, &old, s.rebind(selectJob), opID, j.Ref)
	switch {
	case err != nil:
		return err
	case old.Status.Done() && old.Status != j.Status:
		return fmt.Errorf("%w: job %s already ended %s", review.ErrConflict, j.Ref, old.Status)
	case old.Status == j.Status && (j.OutputRef == "" || j.OutputRef == old.OutputRef) && (j.InputVersion == "" || j.InputVersion == old.InputVersion):
		return nil // the same report again
	case old.Status.Done():
		// Ended as reported, but with another output or input version: a
		// finished job cannot change, and the operation may have settled
		// on what was reported first.
		return fmt.Errorf("%w: job %s already ended %s with output %q for input version %q", review.ErrConflict, j.Ref, old.Status, old.OutputRef, old.InputVersion)
	}
	j.Attempt, j.Found = old.Attempt, old.Found // a known job: its attempt stays
	if err := s.upsertJob(ctx, tx, opID, j, j.Attempt, now); err != nil {
		return err
	}
	detail := map[string]any{"job": j.Ref, "status": j.Status}
	if err := s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: tenant, OperationID: opID,
		Action: "job.updated", Detail: detailJSON(detail)}); err != nil {
		return err
	}
	if !j.Status.Done() {
		return nil
	}
	version := row.Version
	// Only the current job's end settles the operation; once it is
	// settled, any job's output may be an effect nobody answers for.
	// An earlier attempt's job that succeeded made an effect whatever the
	// operation follows now: that is evidence too; and in review, any
	// job's end is for the person deciding.
	if current || review.State(row.State).Terminal() || row.State == string(review.NeedsReview) || j.Status == review.JobSucceeded {
		if err := s.settleJob(ctx, tx, row, j, refs[len(refs)-1], old.InputVersion, actor, detail, now); err != nil {
			return err
		}
	}
	if review.State(row.State).Terminal() {
		// Settled: a case about an effect nobody answers for (a late
		// job's) says what the job's end leaves of it — nothing, when the
		// job it was about made nothing and no other effect is left.
		var c Case
		switch err := tx.GetContext(ctx, &c, s.rebind(selectOpenCase), opID); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("open case: %w", err)
		}
		op, err := s.loadDetails(ctx, tx, row.operation())
		if err != nil {
			return err
		}
		if c.RecommendedRef == j.Ref && (j.Status == review.JobFailed || j.Status == review.JobCanceled) && len(review.ExtraEffectsOf(op)) == 0 {
			return s.resolveBySystem(ctx, tx, c.ID, review.ResolvedJobEnded, actor)
		}
		return s.reassessOpenCase(ctx, tx, opID, tenant, actor)
	}
	if row.State == string(review.NeedsReview) && row.Version == version {
		// Still in review, unmoved: its case recommended waiting on a job
		// not known to have ended (review.JobToWaitOn), and now says what
		// to do; the job's polls stop unless it still waits on one
		// (pollJobWaitedOn).
		return s.reassessOpenCase(ctx, tx, opID, tenant, actor)
	}
	return nil
}

// settleJob settles the operation row on the end of its job j (its
// newest one, followed; any once it is settled; or the success of an
// earlier one), reported for oldVersion when j names no input version: by
// the job's own word while the operation follows it (accepted), otherwise
// as evidence — weighed with everything else, put before the person
// deciding in review, or read for an effect nobody answers for once
// settled.
func (s *Store) settleJob(ctx context.Context, tx *sqlx.Tx, row *opRow, j review.Job, followed, oldVersion, actor string, detail map[string]any, now time.Time) error {
	opID := row.ID
	version := j.InputVersion
	if version == "" {
		version = oldVersion
	}
	ref := j.OutputRef
	if ref == "" {
		ref = j.Ref
	}
	ev := review.Evidence{Source: review.SourceStatusLookup, Authoritative: true, Verdict: review.VerdictConfirms, ObservedAt: now,
		Candidates: []review.Candidate{{Ref: ref, Kind: "job_output", Version: version, OperationID: opID}},
		Note:       fmt.Sprintf(review.WhyJobSucceeded, j.Ref)}
	if row.State != string(review.Accepted) || j.Ref != followed {
		// Nobody was following the job (the attempt's outcome was lost
		// after the destination named it, a deadline passed, a person
		// decided, the operation follows a later attempt's job, or a
		// retry is in flight — whose outcome weighs it, PlanOutcome):
		// its success is evidence of the effect; its failure proves
		// nothing about other attempts.
		state := review.State(row.State)
		if state == review.NeedsReview && j.Status != review.JobSucceeded {
			// In review, no job left to make the effect is the
			// destination's word that none was made, as it would have
			// failed the operation had it been followed: the case weighs
			// it (a retry is safe, or failing) rather than asking for
			// another search. putJobTx assesses it again.
			op, err := s.loadDetails(ctx, tx, row.operation())
			if err != nil || !review.NoJobLeft(op) {
				return err
			}
			return s.insertEvidence(ctx, tx, opID, jobEndedEvidence(op, j, now))
		}
		if j.Status != review.JobSucceeded {
			return nil
		}
		if err := s.insertEvidence(ctx, tx, opID, ev); err != nil {
			return err
		}
		switch {
		case state == review.NeedsReview, state == review.Compensating:
			// A person decides: putJobTx assesses the case again. Being
			// undone, the undo's outcome settles the operation, and then
			// this output, if nobody answers for it, is put to a person
			// (settleParent).
			return nil
		case state == review.Accepted:
			// An earlier attempt's job made the effect while the
			// operation follows a later one, which may make a second.
			detail["escalation"] = []review.Reason{review.ReasonNoDedupEvidence}
			return s.toReviewBesideJob(ctx, tx, row, fmt.Sprintf(review.WhyEarlierJobSucceeded, j.Ref, followed), actor, detail)
		case state.Terminal():
			// Settled: an output besides the effect confirmed, or of an
			// operation its integrator was told did not happen, is an
			// effect nobody answers for, as by any other path.
			op, err := s.loadDetails(ctx, tx, row.operation())
			if err != nil {
				return err
			}
			_, err = s.extraEvidence(ctx, tx, row, op, actor, detail, ev)
			return err
		}
		// Weighed with everything else (issue 12, hole 1).
		_, err := s.weighMove(ctx, tx, row, actor, detail)
		return err
	}
	later := !review.JobEndSettles(j, row.AttemptCount)
	switch {
	case j.Status != review.JobSucceeded && later:
		return s.transition(ctx, tx, row, review.Ambiguous, fmt.Sprintf(review.WhyJobEndedAfterRetry, j.Ref, j.Status, row.AttemptCount),
			actor, "job.settled", detail)
	case j.Status != review.JobSucceeded:
		op, err := s.loadDetails(ctx, tx, row.operation())
		if err != nil {
			return err
		}
		if !review.JobFailureSettles(op, j, s.cfg.Destination(op.Destination), now) {
			return s.transition(ctx, tx, row, review.Ambiguous, fmt.Sprintf(review.WhyFoundJobEnded, j.Ref, j.Status, row.AttemptCount),
				actor, "job.settled", detail)
		}
		if live, ok := review.LiveJobBeside(op, j.Ref); ok {
			// An earlier attempt's job may yet make the effect: nothing
			// is failed on this one's word (review.LiveJobBeside).
			detail["escalation"] = []review.Reason{review.ReasonNoDedupEvidence}
			return s.toReviewBesideJob(ctx, tx, row, fmt.Sprintf(review.WhyJobEndedBesideLive, j.Ref, j.Status, live.Ref), actor, detail)
		}
		return s.transition(ctx, tx, row, review.Failed, fmt.Sprintf(review.WhyJobEnded, j.Ref, j.Status), actor, "job.settled", detail)
	case version != "" && version != row.LogicalVersion:
		detail["escalation"] = []review.Reason{review.ReasonVersionMismatch}
		return s.transition(ctx, tx, row, review.NeedsReview,
			fmt.Sprintf(review.WhyJobOtherVersion, j.Ref, version, row.LogicalVersion), actor, "job.settled", detail)
	}
	if err := s.insertEvidence(ctx, tx, opID, ev); err != nil {
		return err
	}
	if later {
		detail["escalation"] = []review.Reason{review.ReasonNoDedupEvidence}
		return s.transition(ctx, tx, row, review.NeedsReview, fmt.Sprintf(review.WhyJobSucceededAfterRetry, j.Ref, row.AttemptCount),
			actor, "job.settled", detail)
	}
	if err := s.setResource(ctx, tx, opID, review.ResourceRef{Ref: ref, Kind: "job_output", Version: version}); err != nil {
		return err
	}
	return s.transition(ctx, tx, row, review.Confirmed, fmt.Sprintf(review.WhyJobSucceeded, j.Ref), actor, "job.settled", detail)
}

// jobEndedEvidence is the end without output of j, with no job of op left
// to make the effect (review.NoJobLeft): the destination's word that none
// was made.
func jobEndedEvidence(op *review.Operation, j review.Job, now time.Time) review.Evidence {
	note := fmt.Sprintf(review.WhyJobEnded, j.Ref, j.Status)
	if len(op.Jobs) > 1 {
		note = fmt.Sprintf(review.WhyNoJobLeft, j.Ref, j.Status, len(op.Jobs))
	}
	return review.Evidence{Source: review.SourceStatusLookup, Authoritative: true, Verdict: review.VerdictRefutes,
		ObservedAt: now, Candidates: []review.Candidate{}, Note: note}
}

// toReviewBesideJob sends row, accepted, to a person while one of its jobs
// may still make the effect: the case waits on it (review.JobToWaitOn),
// and the reconciler polls it (pollJobWaitedOn, ClaimJobsInReview).
func (s *Store) toReviewBesideJob(ctx context.Context, tx *sqlx.Tx, row *opRow, reason, actor string, detail map[string]any) error {
	return s.transition(ctx, tx, row, review.NeedsReview, reason, actor, "job.settled", detail)
}
