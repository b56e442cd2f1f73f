package bench

// The floors of `limbo bench`: the attempt cycle's three calls (register →
// attempt → outcome success) written straight to the database, with no
// HTTP, no JSON bodies and no validation, on the store's own pool (same
// driver, same durability settings). They write exactly the rows the API
// writes per cycle — one operation inserted and updated twice, one attempt
// inserted and closed, one evidence row, three audit events hashed in Go as
// the store hashes them — and bench_test.go checks that against the API,
// table by table. The tenant exists beforehand, as it does for the API
// (its token names it).
//
//   - plain: each call is one transaction of plain parameterised
//     statements, as an ordinary hand-written client would send them. It
//     skips the API's reads (token lookup, FOR UPDATE reads, the answer's
//     operation with its details) because it knows what it wrote; the state
//     changes stay guarded in SQL by state and version.
//   - min: each call is a single statement, one round trip (PostgreSQL: a
//     writable CTE, prepared once per connection, so lib/pq sends no
//     separate Parse; audit sequence numbers are reserved in blocks so the
//     hash, which covers seq, can be computed in Go before the insert). On
//     SQLite, in process, there are no round trips to save: min is plain.
//
// This file is the one place outside store/ with SQL, on purpose: the
// floors are the yardstick the store is measured against, so their
// statements must stay readable side by side with the store's.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

const (
	/* floor plain, register */
	floorInsertOperation = `
INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
    payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
    attempt_count, version, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, 'pending', ?, ?, ?, NULL, 0, 0, 1, ?, ?)
ON CONFLICT (tenant, key) DO NOTHING`
	/* floor plain, attempt */
	floorInsertAttempt = `
INSERT INTO attempts (operation_id, n, generation, destination, credential, model, started_at, lease_expires_at)
VALUES (?, 1, 2, ?, '', '', ?, ?)`
	/* floor plain, attempt: guarded by state and version, as the store guards it. */
	floorOpInFlight = `
UPDATE operations SET state = 'in_flight', state_reason = ?, attempt_count = 1, next_attempt_at = NULL,
    first_attempt_at = COALESCE(first_attempt_at, ?), version = version + 1, updated_at = ?,
    probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1
WHERE id = ? AND state = 'pending' AND version = 1`
	/* floor plain, outcome: fenced by generation. */
	floorFinishAttempt = `
UPDATE attempts SET finished_at = ?, result = 'success', phase = 'after_send', http_status = 201, provider_code = '',
    provider_request_id = '', retry_after = '', cost = 0, next = 'done', next_reason = ?, retry_at = NULL, outcome_hash = ?
WHERE operation_id = ? AND n = 1 AND generation = 2 AND finished_at IS NULL`
	/* floor plain, outcome: guarded by state and version. */
	floorOpConfirmed = `
UPDATE operations SET state = 'confirmed', state_reason = ?, cost_spent = cost_spent + 0, next_attempt_at = NULL,
    resource_ref = ?, resource_kind = ?, resource_version = ?, probe_round = 0, next_probe_at = NULL,
    probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1,
    version = version + 1, updated_at = ?
WHERE id = ? AND state = 'in_flight' AND version = 2`
	/* floor plain, outcome: the response is the evidence of the confirmation. */
	floorInsertEvidence = `
INSERT INTO evidence (operation_id, source, authoritative, candidates, verdict, note, observed_at)
VALUES (?, 'response', TRUE, ?, 'confirms', ?, ?)`

	/* floor plain, every call (SQLite): one writer, so max+1 is gap-free, as in the store. */
	floorNextSeqSQLite = `SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events`
	/* floor plain, every call (PostgreSQL) */
	floorNextSeqPostgres = `SELECT nextval('audit_events_seq')`
	/* floor min (PostgreSQL): a block of sequence numbers, one round trip per floorSeqBlock events. */
	floorSeqBlockPostgres = `SELECT nextval('audit_events_seq') FROM generate_series(1, $1)`
	/* floor plain, every call (SQLite) */
	floorInsertEventSQLite = `
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	/* floor plain, every call (PostgreSQL): txid for the sealer, as in the store. */
	floorInsertEventPostgres = `
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
VALUES ($1, pg_current_xact_id()::text::bigint, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
)

// The floor min statements (PostgreSQL only): one statement, one round trip,
// per call. Each chains its writes on the guarded UPDATE (or the INSERT)
// through RETURNING, so a failed guard writes nothing; the caller checks
// that the last INSERT wrote one row.
const (
	/* floor min, register: $1 tenant, $2 now, $3 id, $4 key, $5 source_ref, $6 logical_version, $7 action,
	   $8 destination, $9 risk, $10 payload, $11 payload_hash, $12 reason, $13 deadline, $14 max_attempts,
	   $15 seq, $16 actor, $17 detail, $18 hash */
	floorMinRegister = `
WITH o AS (
    INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
        payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
        attempt_count, version, created_at, updated_at)
    VALUES ($3, $1, $4, $5, $6, $7, $8, $9, '', $10, $11, 'pending', $12, $13, $14, NULL, 0, 0, 1, $2, $2)
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING id
)
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
SELECT $15::bigint, pg_current_xact_id()::text::bigint, $2::timestamp, $16, $1, o.id, 'operation.registered', '', 'pending', $17, $18
FROM o`
	/* floor min, attempt: $1 id, $2 now, $3 reason, $4 destination, $5 lease_expires_at, $6 seq, $7 actor,
	   $8 tenant, $9 detail, $10 hash */
	floorMinAttempt = `
WITH u AS (
    UPDATE operations SET state = 'in_flight', state_reason = $3, attempt_count = 1, next_attempt_at = NULL,
        first_attempt_at = COALESCE(first_attempt_at, $2), version = version + 1, updated_at = $2,
        probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1
    WHERE id = $1 AND state = 'pending' AND version = 1
    RETURNING id
), a AS (
    INSERT INTO attempts (operation_id, n, generation, destination, credential, model, started_at, lease_expires_at)
    SELECT u.id, 1, 2, $4, '', '', $2::timestamp, $5::timestamp FROM u
)
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
SELECT $6::bigint, pg_current_xact_id()::text::bigint, $2::timestamp, $7, $8, u.id, 'attempt.started', 'pending', 'in_flight', $9, $10
FROM u`
	/* floor min, outcome: $1 id, $2 now, $3 reason, $4 outcome_hash, $5 resource ref, $6 kind, $7 version,
	   $8 candidates, $9 note, $10 seq, $11 actor, $12 tenant, $13 detail, $14 hash */
	floorMinOutcome = `
WITH u AS (
    UPDATE operations SET state = 'confirmed', state_reason = $3, cost_spent = cost_spent + 0, next_attempt_at = NULL,
        resource_ref = $5, resource_kind = $6, resource_version = $7, probe_round = 0, next_probe_at = NULL,
        probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1,
        version = version + 1, updated_at = $2
    WHERE id = $1 AND state = 'in_flight' AND version = 2
    RETURNING id
), a AS (
    UPDATE attempts SET finished_at = $2, result = 'success', phase = 'after_send', http_status = 201, provider_code = '',
        provider_request_id = '', retry_after = '', cost = 0, next = 'done', next_reason = $3, retry_at = NULL, outcome_hash = $4
    WHERE operation_id IN (SELECT id FROM u) AND n = 1 AND generation = 2 AND finished_at IS NULL
), e AS (
    INSERT INTO evidence (operation_id, source, authoritative, candidates, verdict, note, observed_at)
    SELECT u.id, 'response', TRUE, $8, 'confirms', $9, $2::timestamp FROM u
)
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
SELECT $10::bigint, pg_current_xact_id()::text::bigint, $2::timestamp, $11, $12, u.id, 'attempt.outcome', 'in_flight', 'confirmed', $13, $14
FROM u`
)

// floorSeqBlock is how many audit sequence numbers floor min reserves per
// round trip: amortised, under one hundredth of a round trip per call.
const floorSeqBlock = 300

// errFloorGuard: a floor's guarded write found the row in another state.
var errFloorGuard = errors.New("bench floor: guarded write matched no row")

// floorKind names a floor.
type floorKind string

const (
	floorPlain floorKind = "plain"
	floorMin   floorKind = "min"
)

// floor runs the attempt cycle straight against the database.
type floor struct {
	db     *sqlx.DB
	engine store.Engine
	kind   floorKind
	tenant string
	actor  string

	// writeMu serialises write transactions on SQLite, as the store does:
	// one writer, queued in Go rather than spinning on the busy timeout.
	writeMu sync.Mutex

	// seqs is floor min's reserved block of audit sequence numbers.
	seqMu sync.Mutex
	seqs  []int64

	stmtReg, stmtAtt, stmtOut *sql.Stmt
}

// newFloor prepares a floor on st's pool. Close it to release its prepared
// statements.
func newFloor(ctx context.Context, st *store.Store, kind floorKind, tenant, actor string) (*floor, error) {
	f := &floor{db: st.DB(), engine: st.Engine(), kind: kind, tenant: tenant, actor: actor}
	if kind == floorMin && f.engine == store.Postgres {
		var err error
		for _, p := range []struct {
			s **sql.Stmt
			q string
		}{{&f.stmtReg, floorMinRegister}, {&f.stmtAtt, floorMinAttempt}, {&f.stmtOut, floorMinOutcome}} {
			if *p.s, err = f.db.PrepareContext(ctx, p.q); err != nil {
				f.Close()
				return nil, fmt.Errorf("bench floor: prepare: %w", err)
			}
		}
	}
	return f, nil
}

// Close releases the prepared statements.
func (f *floor) Close() {
	for _, s := range []*sql.Stmt{f.stmtReg, f.stmtAtt, f.stmtOut} {
		if s != nil {
			s.Close()
		}
	}
}

// floorOp is what the floor's client knows about its operation.
type floorOp struct {
	id, key, sourceRef, payload, payloadHash string
}

const (
	floorAction      = "transform"
	floorDestination = "files"
	floorVersion     = "v1"
	floorRisk        = review.RiskCompensableWrite
	// floorOutcomeReason is what review.Decide says about a success.
	floorOutcomeReason = "destination answered success"
)

// cycle runs register → attempt → outcome for operation i, timing each call.
func (f *floor) cycle(ctx context.Context, i int64, rec func(time.Duration)) error {
	ref := fmt.Sprintf("floor-%s/%d", f.kind, i)
	payload := fmt.Sprintf(`{"document":%d,"format":"pdf"}`, i)
	op := &floorOp{id: floorID("op_"), key: review.DeriveKey(f.tenant, ref, floorAction, floorVersion), sourceRef: ref,
		payload: payload, payloadHash: review.PayloadHash([]byte(payload))}
	for _, call := range []func(context.Context, *floorOp) error{f.register, f.attempt, f.outcome} {
		t0 := time.Now()
		if err := call(ctx, op); err != nil {
			return fmt.Errorf("bench floor %s: %s: %w", f.kind, op.id, err)
		}
		rec(time.Since(t0))
	}
	return nil
}

func (f *floor) register(ctx context.Context, op *floorOp) error {
	now := floorNow()
	deadline := now.Add(review.DefaultDeadline)
	reason := "registered"
	ev := floorEvent{At: now, Actor: f.actor, Tenant: f.tenant, OperationID: op.id, Action: "operation.registered", ToState: "pending",
		Detail: mustJSON(map[string]any{"key": op.key, "payload_hash": op.payloadHash, "risk": floorRisk, "reason": reason})}
	if f.stmtReg != nil {
		ev.Seq = f.nextSeq(ctx)
		if ev.Seq == 0 {
			return errors.New("no audit sequence number")
		}
		return oneRow(f.stmtReg.ExecContext(ctx, f.tenant, now, op.id, op.key, op.sourceRef, floorVersion, floorAction,
			floorDestination, string(floorRisk), op.payload, op.payloadHash, reason, deadline, review.DefaultMaxAttempts,
			ev.Seq, ev.Actor, ev.Detail, ev.hash()))
	}
	return f.tx(ctx, func(tx *sql.Tx) error {
		if err := oneRow(tx.ExecContext(ctx, f.rebind(floorInsertOperation), op.id, f.tenant, op.key, op.sourceRef, floorVersion,
			floorAction, floorDestination, string(floorRisk), op.payload, op.payloadHash, reason, deadline,
			review.DefaultMaxAttempts, now, now)); err != nil {
			return err
		}
		return f.appendEvent(ctx, tx, &ev)
	})
}

func (f *floor) attempt(ctx context.Context, op *floorOp) error {
	now := floorNow()
	lease := now.Add(review.DefaultLease)
	reason := "attempt 1 granted"
	ev := floorEvent{At: now, Actor: f.actor, Tenant: f.tenant, OperationID: op.id, Action: "attempt.started",
		FromState: "pending", ToState: "in_flight",
		Detail: mustJSON(map[string]any{"n": 1, "credential": "", "model": "", "lease_expires_at": lease})}
	if f.stmtAtt != nil {
		ev.Seq = f.nextSeq(ctx)
		if ev.Seq == 0 {
			return errors.New("no audit sequence number")
		}
		return oneRow(f.stmtAtt.ExecContext(ctx, op.id, now, reason, floorDestination, lease, ev.Seq, ev.Actor, f.tenant, ev.Detail, ev.hash()))
	}
	return f.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, f.rebind(floorInsertAttempt), op.id, floorDestination, now, lease); err != nil {
			return err
		}
		if err := oneRow(tx.ExecContext(ctx, f.rebind(floorOpInFlight), reason, now, now, op.id)); err != nil {
			return err
		}
		return f.appendEvent(ctx, tx, &ev)
	})
}

func (f *floor) outcome(ctx context.Context, op *floorOp) error {
	now := floorNow()
	resRef, resKind := "file:"+op.sourceRef, "file"
	o := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
		Resource: &review.ResourceRef{Ref: resRef, Kind: resKind, Version: floorVersion}}
	outcomeHash := store.OutcomeHash(o)
	cands := mustJSON([]review.Candidate{{Ref: resRef, Kind: resKind, Version: floorVersion, OperationID: op.id}})
	note := "attempt 1: " + floorOutcomeReason
	ev := floorEvent{At: now, Actor: f.actor, Tenant: f.tenant, OperationID: op.id, Action: "attempt.outcome",
		FromState: "in_flight", ToState: "confirmed",
		Detail: mustJSON(map[string]any{"n": 1, "result": o.Result, "phase": o.Phase, "next": review.NextDone,
			"reason": floorOutcomeReason, "http_status": 201})}
	if f.stmtOut != nil {
		ev.Seq = f.nextSeq(ctx)
		if ev.Seq == 0 {
			return errors.New("no audit sequence number")
		}
		return oneRow(f.stmtOut.ExecContext(ctx, op.id, now, floorOutcomeReason, outcomeHash, resRef, resKind, floorVersion,
			cands, note, ev.Seq, ev.Actor, f.tenant, ev.Detail, ev.hash()))
	}
	return f.tx(ctx, func(tx *sql.Tx) error {
		if err := oneRow(tx.ExecContext(ctx, f.rebind(floorFinishAttempt), now, floorOutcomeReason, outcomeHash, op.id)); err != nil {
			return err
		}
		if err := oneRow(tx.ExecContext(ctx, f.rebind(floorOpConfirmed), floorOutcomeReason, resRef, resKind, floorVersion, now, op.id)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, f.rebind(floorInsertEvidence), op.id, cands, note, now); err != nil {
			return err
		}
		return f.appendEvent(ctx, tx, &ev)
	})
}

// tx runs fn in one transaction (serialised on SQLite, as the store's are).
func (f *floor) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if f.engine == store.SQLite {
		f.writeMu.Lock()
		defer f.writeMu.Unlock()
	}
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// appendEvent takes the next sequence number and inserts the event with
// its hash, as store.appendEvent does.
func (f *floor) appendEvent(ctx context.Context, tx *sql.Tx, ev *floorEvent) error {
	next, insert := floorNextSeqSQLite, floorInsertEventSQLite
	if f.engine == store.Postgres {
		next, insert = floorNextSeqPostgres, floorInsertEventPostgres
	}
	if err := tx.QueryRowContext(ctx, next).Scan(&ev.Seq); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, insert, ev.Seq, ev.At, ev.Actor, ev.Tenant, ev.OperationID, ev.Action,
		ev.FromState, ev.ToState, ev.Detail, ev.hash())
	return err
}

// nextSeq hands out a reserved audit sequence number, reserving a new
// block when the last is used up; 0 when the reservation failed.
func (f *floor) nextSeq(ctx context.Context) int64 {
	f.seqMu.Lock()
	defer f.seqMu.Unlock()
	if len(f.seqs) == 0 {
		rows, err := f.db.QueryContext(ctx, floorSeqBlockPostgres, floorSeqBlock)
		if err != nil {
			return 0
		}
		defer rows.Close()
		for rows.Next() {
			var s int64
			if rows.Scan(&s) == nil {
				f.seqs = append(f.seqs, s)
			}
		}
		if rows.Err() != nil || len(f.seqs) == 0 {
			return 0
		}
	}
	s := f.seqs[0]
	f.seqs = f.seqs[1:]
	return s
}

func (f *floor) rebind(q string) string {
	if f.engine == store.Postgres {
		return sqlx.Rebind(sqlx.DOLLAR, q)
	}
	return q
}

// oneRow turns an Exec that did not write exactly one row into errFloorGuard.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errFloorGuard
	}
	return nil
}

// floorEvent is an audit event as the floors write it. Its hash is the
// store's: SHA-256 over the JSON of the same fields in the same order
// (store.EventHash), so `limbo audit verify` holds over a
// database the floors wrote to.
type floorEvent struct {
	Seq                                                    int64
	At                                                     time.Time
	Actor, Tenant, OperationID, Action, FromState, ToState string
	Detail                                                 string
}

func (e *floorEvent) hash() string {
	return store.EventHash(&store.AuditEvent{Seq: e.Seq, At: e.At, Actor: e.Actor, Tenant: e.Tenant, OperationID: e.OperationID,
		Action: e.Action, FromState: e.FromState, ToState: e.ToState, Detail: e.Detail})
}

// floorNow is the time in the form the store writes: UTC, microseconds.
func floorNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and slices of plain values are marshalled here
	}
	return string(b)
}

// floorID is a prefixed, roughly time-ordered id like the store's.
func floorID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err)
	}
	return prefix + floorIDEncoding.EncodeToString(b[:])
}

var floorIDEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)
