package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// Operations that depend on another (review/dependency.go): the dependency
// is written with the operation, read with its details, checked by every
// attempt request, and a dependent whose dependency can never be met is
// ended by the sweep even when nobody asks for its attempt.

const (
	/* Store.Register: a dependency names an operation of the same tenant. */
	selectDependencyExists = `SELECT id FROM operations WHERE tenant = ? AND id = ?`
	/* Store.Register */
	insertDependency = `
INSERT INTO operation_dependencies (operation_id, tenant, after_id, after_state, after_version, created_at)
VALUES (?, ?, ?, ?, ?, ?)`
	/* Store.loadDetails: the dependency with its operation's state and resource. */
	selectDependencies = `
SELECT d.operation_id, d.after_id, d.after_state, d.after_version, o.state, o.resource_ref, o.resource_kind, o.resource_version
FROM operation_dependencies d JOIN operations o ON o.id = d.after_id
WHERE d.operation_id IN (?)`
	/* Store.dependencyGate, Store.registerTakenTx: what the operation waits
	   for (the dependency's own row is read apart, under the gate). */
	selectDependency = `
SELECT operation_id, after_id, after_state, after_version FROM operation_dependencies WHERE operation_id = ?`
	/* Store.SweepDependencies: dependents waiting on a dependency that can no
	   longer be met (failed, compensated, confirmed for another version),
	   awaiting approval too unless their approval case already says so. */
	selectBrokenDependents = `
SELECT d.operation_id, d.tenant FROM operation_dependencies d
JOIN operations o ON o.id = d.operation_id
JOIN operations a ON a.id = d.after_id
WHERE (o.state IN ('pending', 'retry_wait')
       OR (o.state = 'awaiting_approval' AND NOT EXISTS (
           SELECT 1 FROM cases c WHERE c.operation_id = o.id AND c.status = 'open' AND c.reasons LIKE '%dependency_failed%')))
  AND (a.state IN ('failed', 'compensated')
       OR (a.state = 'confirmed' AND d.after_version <> '' AND COALESCE(a.resource_version, '') <> d.after_version))
LIMIT ?`
)

const dependencySweeper = "system:dependency-sweeper"

type dependencyRow struct {
	OperationID     string         `db:"operation_id"`
	AfterID         string         `db:"after_id"`
	AfterState      string         `db:"after_state"`
	AfterVersion    string         `db:"after_version"`
	State           string         `db:"state"`
	ResourceRef     sql.NullString `db:"resource_ref"`
	ResourceKind    sql.NullString `db:"resource_kind"`
	ResourceVersion sql.NullString `db:"resource_version"`
}

func (r dependencyRow) dependency() *review.Dependency {
	d := &review.Dependency{OperationID: r.AfterID, State: review.State(r.AfterState), ResourceVersion: r.AfterVersion,
		DependencyState: review.State(r.State)}
	if r.State == string(review.Confirmed) && r.ResourceRef.Valid {
		d.Resource = &review.ResourceRef{Ref: r.ResourceRef.String, Kind: r.ResourceKind.String, Version: r.ResourceVersion.String}
	}
	return d
}

// writeDependency records op's dependency in tx, once it is known to name
// an operation of op's tenant (another tenant's is as unknown as a missing
// one, so nothing leaks).
func (s *Store) writeDependency(ctx context.Context, tx *sqlx.Tx, row *opRow, after *review.Dependency) error {
	var id string
	err := s.get(ctx, tx, &id, selectDependencyExists, row.Tenant, after.OperationID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: field \"after.operation_id\": no operation %s of this tenant", review.ErrInvalid, after.OperationID)
	}
	if err != nil {
		return fmt.Errorf("dependency: %w", err)
	}
	if _, err := s.exec(ctx, tx, insertDependency, row.ID, row.Tenant, after.OperationID, string(after.State),
		after.ResourceVersion, row.CreatedAt); err != nil {
		return fmt.Errorf("dependency: %w", err)
	}
	return nil
}

// loadDependencies fills After of the ops that have a dependency.
func (s *Store) loadDependencies(ctx context.Context, q sqlx.QueryerContext, ids []string, byID map[string]*review.Operation) error {
	qs, args, err := sqlx.In(selectDependencies, ids)
	if err != nil {
		return err
	}
	var rows []dependencyRow
	if err := sqlx.SelectContext(ctx, q, &rows, s.rebind(qs), args...); err != nil {
		return fmt.Errorf("store.loadDetails: dependencies: %w", err)
	}
	for _, r := range rows {
		byID[r.OperationID].After = r.dependency()
	}
	return nil
}

// dependencyOf reads what an operation waits for (nil: nothing), without
// the dependency's state.
func (s *Store) dependencyOf(ctx context.Context, tx *sqlx.Tx, opID string) (*review.Dependency, error) {
	var dr dependencyRow
	err := s.get(ctx, tx, &dr, selectDependency, opID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dependency: %w", err)
	}
	return dr.dependency(), nil
}

// dependencyGate judges row's dependency, in tx, for its next attempt: an
// answer (done) that refuses it — a wait while the dependency is not
// confirmed, or, once it can never be met, the operation moved to failed
// or review (its policy's escalate_on) — or, when it may run, the
// dependency with what it was confirmed with (nil without one).
func (s *Store) dependencyGate(ctx context.Context, tx *sqlx.Tx, row *opRow, op *review.Operation, actor string) (ans attemptAnswer, done bool, after *review.Dependency, err error) {
	if after, err = s.dependencyOf(ctx, tx, row.ID); err != nil || after == nil {
		return attemptAnswer{}, false, nil, err
	}
	var depRow opRow
	if err := s.get(ctx, tx, &depRow, selectOperation, row.Tenant, after.OperationID); err != nil {
		return attemptAnswer{}, false, nil, fmt.Errorf("dependency %s: %w", after.OperationID, err)
	}
	dep := depRow.operation()
	// Named as the row it is judged by was read.
	after.DependencyState = dep.State
	if dep.State == review.Confirmed {
		after.Resource = dep.Resource
	}
	op.After = after
	switch ready, why := review.DependencyReady(*after, dep); ready {
	case review.DependencyMet:
		return attemptAnswer{}, false, after, nil
	case review.DependencyPending:
		return attemptAnswer{refused: &review.DependencyWaitError{Operation: op, Dependency: dep, Reason: why}}, true, nil, nil
	default:
		if err := s.breakDependent(ctx, tx, row, why, actor); err != nil {
			return attemptAnswer{}, false, nil, err
		}
		op.State, op.StateReason = review.State(row.State), row.StateReason
		return attemptAnswer{refused: &review.NotAttemptableError{Operation: op}}, true, nil, nil
	}
}

// breakDependent ends row, whose dependency can never be met: failed, or
// in review with a dependency_failed case when its action's policy
// escalates it.
func (s *Store) breakDependent(ctx context.Context, tx *sqlx.Tx, row *opRow, why, actor string) error {
	ac, _ := s.cfg.Policy(row.Destination, row.Action)
	to := review.BrokenDependencyState(ac)
	detail := map[string]any{}
	if to == review.NeedsReview {
		detail["escalation"] = []review.Reason{review.ReasonDependencyFailed}
	}
	return s.transition(ctx, tx, row, to, why, actor, "operation.dependency_failed", detail)
}

// breakAwaitingDependent judges the dependency of row, awaiting approval:
// once it can never be met, nobody should be asked to approve what can
// never run as registered. The operation fails with the dependency's
// reason and its approval case is resolved (dependency_failed); when its
// policy escalates dependency_failed, a person decides, so the approval
// case gains that reason instead and stays with the approvers (an
// approval then sends it to review, a refusal fails it).
func (s *Store) breakAwaitingDependent(ctx context.Context, tx *sqlx.Tx, row *opRow) (bool, error) {
	after, err := s.dependencyOf(ctx, tx, row.ID)
	if err != nil || after == nil {
		return false, err
	}
	var depRow opRow
	if err := s.get(ctx, tx, &depRow, selectOperation, row.Tenant, after.OperationID); err != nil {
		return false, fmt.Errorf("dependency %s: %w", after.OperationID, err)
	}
	ready, why := review.DependencyReady(*after, depRow.operation())
	if ready != review.DependencyBroken {
		return false, nil
	}
	ac, _ := s.cfg.Policy(row.Destination, row.Action)
	if review.BrokenDependencyState(ac) == review.NeedsReview {
		_, err := s.openCase(ctx, tx, row.ID, row.Tenant, []review.Reason{review.ReasonDependencyFailed}, dependencySweeper)
		return false, err
	}
	var open Case
	err = tx.GetContext(ctx, &open, s.rebind(selectOpenCase), row.ID)
	hasCase := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("approval case: %w", err)
	}
	if err := s.transition(ctx, tx, row, review.Failed, why, dependencySweeper, "operation.dependency_failed", nil); err != nil {
		return false, err
	}
	if !hasCase {
		return true, nil
	}
	return true, s.resolveBySystem(ctx, tx, open.ID, string(review.ReasonDependencyFailed), dependencySweeper)
}

// SweepDependencies ends the dependents of operations that can no longer
// be what they wait for, whether or not anyone asks for their attempt, and
// returns how many it ended. A dependent that cannot be ended is skipped
// (*SkippedRows) and the rest are.
func (s *Store) SweepDependencies(ctx context.Context) (int, error) {
	type dependent = struct {
		ID     string `db:"operation_id"`
		Tenant string `db:"tenant"`
	}
	var due []dependent
	if err := s.db.SelectContext(ctx, &due, s.rebind(selectBrokenDependents), 500); err != nil {
		return 0, fmt.Errorf("store.SweepDependencies: %w", err)
	}
	return eachRow(ctx, "store.SweepDependencies", nil, due, func(d dependent) string { return d.ID }, movedOn, func(d dependent) (bool, error) {
		defer s.snaps.drop(d.ID) // after the transaction ends
		return inTx(ctx, s, func(tx *sqlx.Tx) (bool, error) {
			row, err := s.lockOperation(ctx, tx, d.Tenant, d.ID)
			if err != nil {
				return false, err
			}
			if row.State == string(review.AwaitingApproval) {
				return s.breakAwaitingDependent(ctx, tx, row)
			}
			if !review.State(row.State).Attemptable() {
				return false, nil // moved on meanwhile
			}
			if _, _, _, err := s.dependencyGate(ctx, tx, row, row.operation(), dependencySweeper); err != nil {
				return false, err
			}
			// The gate moved it unless the dependency is met or pending.
			return !review.State(row.State).Attemptable(), nil
		})
	})
}

/* Store.Dependents: the operations registered to wait for one (after). */
const selectDependents = `
SELECT o.id, o.action, o.state, o.attempt_count, d.after_version
FROM operation_dependencies d JOIN operations o ON o.id = d.operation_id
WHERE d.after_id = ? AND ` + scopeCond + `
ORDER BY d.created_at, o.id LIMIT ?`

// MaxDependentsShown bounds the dependents an operation's pages list.
const MaxDependentsShown = 50

// Dependent is an operation registered to wait for another (after): what
// an operation's pages show of the operations that wait for it, or ran
// on what it made, so that a reviewer about to fail or undo it knows what
// follows from that.
type Dependent struct {
	ID           string       `db:"id"`
	Action       string       `db:"action"`
	State        review.State `db:"state"`
	AttemptCount int          `db:"attempt_count"`
	// AfterVersion is the version it asked the dependency's resource to
	// have ("": any).
	AfterVersion string `db:"after_version"`
}

// Dependents returns the operations that wait for operation id, in the
// order they were registered, of the tenants in scope (nil: all), at most
// limit of them.
func (s *Store) Dependents(ctx context.Context, scope []string, id string, limit int) ([]Dependent, error) {
	q, args := s.scoped(selectDependents, "d.tenant", scope, id)
	var ds []Dependent
	if err := s.db.SelectContext(ctx, &ds, q, append(args, limit)...); err != nil {
		return nil, fmt.Errorf("store.Dependents: %w", err)
	}
	return ds, nil
}
