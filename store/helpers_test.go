package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// t0 is where every test clock starts.
var t0 = time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)

// Two tenants: most tests work in tenantA; tenantB proves the scoping.
const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
)

// fixedRand makes backoff jitter deterministic: Backoff(n) is
// float64(r) × min(60 s, 500 ms·2^n).
type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

// bundle is what most tests need: a fresh migrated store and its fake clock.
type bundle struct {
	ctx context.Context
	s   *store.Store
	clk *storetest.Clock
}

// setup opens a fresh database on engine with cfg, a clock at t0 and a
// backoff jitter of 0.5 (the first retry waits 500 ms).
func setup(t *testing.T, e store.Engine, cfg *review.Config) *bundle {
	t.Helper()
	clk := storetest.NewClock(t0)
	s := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now, Rand: fixedRand(0.5)})
	return &bundle{ctx: context.Background(), s: s, clk: clk}
}

// searchable is a bundle whose destination dest has a search probe, and
// its config. The probe is never sent: the tests hand in its answers
// (settleClaim, checkedWith), or ask a check of cfg's destination.
func searchable(t *testing.T, e store.Engine, dest string) (*bundle, *review.Config) {
	t.Helper()
	probe := &review.Probe{URL: "http://127.0.0.1:9/never-sent"}
	cfg := &review.Config{Destinations: map[string]review.Destination{dest: {Probes: review.Probes{Search: probe}}}}
	return setup(t, e, cfg), cfg
}

// canonical returns raw as RFC 8785 bytes, the only form Register accepts.
func canonical(t testing.TB, raw string) json.RawMessage {
	t.Helper()
	b, err := review.Canonicalize([]byte(raw))
	if err != nil {
		t.Fatalf("canonicalize %s: %v", raw, err)
	}
	return b
}

// intention is a registration for tenantA, version v1, action "transform".
func intention(sourceRef string, risk review.Risk, destination string) review.Registration {
	return review.Registration{
		Tenant: tenantA, SourceRef: sourceRef, LogicalVersion: "v1", Action: "transform",
		Destination: destination, Risk: risk, Actor: "test",
		Payload: json.RawMessage(`{"source":"` + sourceRef + `"}`),
	}
}

// register records r, which must be new.
func (b *bundle) register(t testing.TB, r review.Registration) *review.Operation {
	t.Helper()
	op, created, err := b.s.Register(b.ctx, r)
	if err != nil {
		t.Fatalf("Register(%s): %v", r.SourceRef, err)
	}
	if !created {
		t.Fatalf("Register(%s): created = false, want a new operation", r.SourceRef)
	}
	return op
}

// newOp registers a fresh operation for tenantA.
func (b *bundle) newOp(t testing.TB, sourceRef string, risk review.Risk, destination string) *review.Operation {
	t.Helper()
	return b.register(t, intention(sourceRef, risk, destination))
}

// tryStart asks for an attempt on op.
func (b *bundle) tryStart(op *review.Operation, credential, model string) (*store.Grant, error) {
	return b.s.StartAttempt(b.ctx, store.AttemptRequest{Tenant: op.Tenant, OperationID: op.ID,
		Credential: credential, Model: model, Actor: "test"})
}

// start asks for an attempt on op, which must be granted.
func (b *bundle) start(t testing.TB, op *review.Operation) *store.Grant {
	t.Helper()
	g, err := b.tryStart(op, "", "")
	if err != nil {
		t.Fatalf("StartAttempt(%s): %v", op.SourceRef, err)
	}
	return g
}

// report records outcome o for attempt n of op, which must be accepted.
func (b *bundle) report(t testing.TB, op *review.Operation, n int, o review.Outcome) *store.OutcomeResult {
	t.Helper()
	res, err := b.s.RecordOutcome(b.ctx, op.Tenant, op.ID, n, o, "test")
	if err != nil {
		t.Fatalf("RecordOutcome(%s, %d, %+v): %v", op.SourceRef, n, o, err)
	}
	return res
}

// get reloads op.
func (b *bundle) get(t testing.TB, op *review.Operation) *review.Operation {
	t.Helper()
	got, err := b.s.GetOperation(b.ctx, op.Tenant, op.ID, "")
	if err != nil {
		t.Fatalf("GetOperation(%s): %v", op.ID, err)
	}
	return got
}

// ambiguous registers a compensable write and leaves it ambiguous: its
// first attempt timed out after the request was sent.
func (b *bundle) ambiguous(t testing.TB, sourceRef string) *review.Operation {
	t.Helper()
	op := b.newOp(t, sourceRef, review.RiskCompensableWrite, "plain")
	b.start(t, op)
	res := b.report(t, op, 1, timeoutAfterSend)
	wantState(t, res.Operation, review.Ambiguous)
	return res.Operation
}

// countRows runs a COUNT(*) query with "?" placeholders.
func countRows(t testing.TB, s *store.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, s.DB().Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// exec runs a statement with "?" placeholders straight on the database.
func exec(t testing.TB, s *store.Store, query string, args ...any) {
	t.Helper()
	if _, err := s.DB().Exec(s.DB().Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// history returns op's audit events.
func (b *bundle) history(t testing.TB, opID string) []store.AuditEvent {
	t.Helper()
	evs, err := b.s.OperationHistory(b.ctx, opID)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// assertSealed seals the whole trail and requires it to verify.
func assertSealed(t testing.TB, s *store.Store) *store.VerifyReport {
	t.Helper()
	rep := storetest.Sealed(t, s)
	if !rep.OK || rep.Unsealed != 0 {
		t.Fatalf("sealed audit trail: %+v, want OK with nothing unsealed", rep)
	}
	return rep
}

func wantState(t testing.TB, op *review.Operation, want review.State) {
	t.Helper()
	if op.State != want {
		t.Fatalf("operation %s is %s (%s), want %s", op.SourceRef, op.State, op.StateReason, want)
	}
}

// errAs requires err to be (or wrap) a T and returns it.
func errAs[T error](t testing.TB, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("error = %v (%T), want %T", err, err, target)
	}
	return target
}

// Outcomes used throughout.
var (
	timeoutAfterSend = review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}
	connBeforeSend   = review.Outcome{Result: review.ResultConnectionError, Phase: review.PhaseBeforeSend}
)

func httpError(status int) review.Outcome {
	return review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: status}
}

func success(ref string) review.Outcome {
	return review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
		Resource: &review.ResourceRef{Ref: ref, Kind: "file", Version: "v1"}}
}

// forgeHash is the audit event hash as an attacker who read the source
// would compute it. Tamper tests use it to make edited rows self-consistent,
// so that only the checkpoints can catch them; sameFormula checks it still
// agrees with the store.
func forgeHash(e store.AuditEvent) string {
	content := struct {
		At          string `json:"at"`
		Actor       string `json:"actor"`
		Tenant      string `json:"tenant"`
		OperationID string `json:"operation_id"`
		Action      string `json:"action"`
		FromState   string `json:"from_state"`
		ToState     string `json:"to_state"`
		Detail      string `json:"detail"`
	}{e.At.UTC().Format(time.RFC3339Nano), e.Actor, e.Tenant, e.OperationID, e.Action, e.FromState, e.ToState, e.Detail}
	b, _ := json.Marshal(content)
	sum := sha256.Sum256(b)
	sum = sha256.Sum256([]byte(fmt.Sprintf("%d:%s", e.Seq, hex.EncodeToString(sum[:]))))
	return hex.EncodeToString(sum[:])
}

// atOnce runs fn(0) … fn(n-1), each in its own goroutine, released
// together, and returns when all have.
func atOnce(n int, fn func(i int)) {
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			fn(i)
		}()
	}
	close(ready)
	wg.Wait()
}

// noDeadlocks fails t if any of stores ran a transaction again after a
// deadlock.
func noDeadlocks(t testing.TB, stores ...*store.Store) {
	t.Helper()
	for _, s := range stores {
		if r := s.TxRetries(); r.Deadlock != 0 {
			t.Errorf("%d transactions run again after a deadlock, want none", r.Deadlock)
		}
	}
}
