package bench

// The floors of `limbo bench`: the attempt cycle's three calls (register →
// attempt → outcome success) written straight to the database, with no
// HTTP, no JSON bodies, no validation and no decisions — the client knows
// what each call writes — on the store's own pool (same driver, same
// durability settings). They write with the store's own statements and
// plans (store.FloorWrite, store/writes.go): one operation inserted and
// updated twice, one attempt inserted and closed, one evidence row, three
// audit events; bench_test.go checks that against the API, table by table.
// The tenant exists beforehand, as it does for the API (its token names
// it).
//
//   - plain: each call is one transaction of the plan's statements, one
//     round trip each, as an ordinary hand-written client would send them.
//     It skips the API's reads (token lookup, FOR UPDATE reads, the
//     answer's operation with its details) because it knows what it
//     wrote; the state changes stay guarded in SQL by state and version.
//   - min: each call is one round trip (PostgreSQL: limbo_fast_batch with
//     that call alone, prepared once per connection), so what the API adds
//     to it is the HTTP, the decisions and the group commit's waiting. On
//     SQLite, in process, there are no round trips to save: min is plain.

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// floorKind names a floor.
type floorKind string

const (
	floorPlain floorKind = "plain"
	floorMin   floorKind = "min"
)

// floor runs the attempt cycle straight against the database.
type floor struct {
	st     *store.Store
	kind   floorKind
	tenant string
	actor  string
}

// newFloor makes a floor on st.
func newFloor(_ context.Context, st *store.Store, kind floorKind, tenant, actor string) (*floor, error) {
	return &floor{st: st, kind: kind, tenant: tenant, actor: actor}, nil
}

// Close releases nothing: the store holds the prepared statements.
func (f *floor) Close() {}

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
	reason := "registered"
	return f.write(ctx, "register", map[string]any{"op_id": op.id, "tenant": f.tenant, "at": now, "key": op.key,
		"source_ref": op.sourceRef, "logical_version": floorVersion, "action": floorAction, "destination": floorDestination,
		"risk": string(floorRisk), "flags": "", "payload": op.payload, "payload_hash": op.payloadHash, "state": "pending",
		"state_reason": reason, "deadline": now.Add(review.DefaultDeadline), "max_attempts": review.DefaultMaxAttempts},
		&store.AuditEvent{At: now, Actor: f.actor, Tenant: f.tenant, OperationID: op.id, Action: "operation.registered", ToState: "pending",
			Detail: mustJSON(map[string]any{"key": op.key, "payload_hash": op.payloadHash, "risk": floorRisk, "reason": reason})})
}

func (f *floor) attempt(ctx context.Context, op *floorOp) error {
	now := floorNow()
	lease := now.Add(review.DefaultLease)
	return f.write(ctx, "attempt", map[string]any{"op_id": op.id, "tenant": f.tenant, "at": now,
		"state_reason": "attempt 1 granted", "guard_state": "pending", "version": 1, "detail_version": 0, "n": 1, "generation": 2,
		"destination": floorDestination, "credential": "", "model": "", "lease_expires_at": lease},
		&store.AuditEvent{At: now, Actor: f.actor, Tenant: f.tenant, OperationID: op.id, Action: "attempt.started",
			FromState: "pending", ToState: "in_flight",
			Detail: mustJSON(map[string]any{"n": 1, "credential": "", "model": "", "lease_expires_at": lease})})
}

func (f *floor) outcome(ctx context.Context, op *floorOp) error {
	now := floorNow()
	resRef, resKind := "file:"+op.sourceRef, "file"
	o := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
		Resource: &review.ResourceRef{Ref: resRef, Kind: resKind, Version: floorVersion}}
	cands := mustJSON([]review.Candidate{{Ref: resRef, Kind: resKind, Version: floorVersion, OperationID: op.id}})
	return f.write(ctx, "outcome", map[string]any{"op_id": op.id, "tenant": f.tenant, "at": now,
		"state": "confirmed", "state_reason": floorOutcomeReason, "version": 2, "detail_version": 0, "n": 1, "generation": 2,
		"cost": 0.0, "resource_ref": resRef, "resource_kind": resKind, "resource_version": floorVersion, "detail_bump": 1,
		"result": string(o.Result), "phase": string(o.Phase), "http_status": 201, "provider_code": "", "provider_request_id": "",
		"retry_after": "", "next": string(review.NextDone), "outcome_hash": store.OutcomeHash(o),
		"source": "response", "authoritative": true, "candidates": cands, "verdict": "confirms",
		"note": "attempt 1: " + floorOutcomeReason, "observed_at": now},
		&store.AuditEvent{At: now, Actor: f.actor, Tenant: f.tenant, OperationID: op.id, Action: "attempt.outcome",
			FromState: "in_flight", ToState: "confirmed",
			Detail: mustJSON(map[string]any{"n": 1, "result": o.Result, "phase": o.Phase, "next": review.NextDone,
				"reason": floorOutcomeReason, "http_status": 201})})
}

// write sends one call: one round trip on floor min (PostgreSQL), a
// transaction of the plan's statements otherwise.
func (f *floor) write(ctx context.Context, kind string, values map[string]any, ev *store.AuditEvent) error {
	return f.st.FloorWrite(ctx, kind, values, ev, f.kind == floorMin)
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
