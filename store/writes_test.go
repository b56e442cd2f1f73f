package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestEventHashFormulasAgree: an audit event's hash is finished in SQL on
// PostgreSQL (limbo_event_hash, in the statement that draws its seq) and in
// Go everywhere else (writing on SQLite, verifying the chain on both). The
// two must agree byte for byte, whatever the event holds.
func TestEventHashFormulasAgree(t *testing.T) {
	t.Parallel()
	if !slices.Contains(storetest.Engines(t), store.Postgres) {
		t.Skip("limbo_event_hash is PostgreSQL's")
	}
	s := storetest.Open(t, store.Postgres, store.Options{})
	for _, e := range []store.AuditEvent{
		{Seq: 1, At: time.Date(2026, 12, 4, 15, 0, 0, 123456000, time.UTC), Actor: "token:ci", Tenant: "acme",
			OperationID: "op_1", Action: "operation.registered", ToState: "pending", Detail: "{}"},
		{Seq: 9_007_199_254_740_993, At: time.Unix(0, 0).UTC(), Actor: "user:rené", Tenant: "società",
			Action: "decision.recorded", FromState: "ambiguous", ToState: "confirmed",
			Detail: `{"note":"già verificato ✓ — \"citato\"\\n"}`},
	} {
		want := store.EventHash(&e)
		got, err := store.EventHashInSQL(context.Background(), s, e.Seq, store.ContentHash(&e))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("seq %d: limbo_event_hash %s, Go %s", e.Seq, got, want)
		}
	}
}

// TestFastPathBrokenInvariantWritesNothing: a fast outcome is guarded by
// the operation's snapshot. If the operation still matches it yet its
// attempt is closed, a row changed behind the store's back: an error on
// both engines (a plain RAISE in limbo_fast_batch on PostgreSQL), and
// nothing of the report is written.
func TestFastPathBrokenInvariantWritesNothing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "broken", review.RiskIdempotentWrite, "files")
		b.start(t, op)
		exec(t, b.s, `UPDATE attempts SET finished_at = ? WHERE operation_id = ?`, t0, op.ID)
		_, err := b.s.RecordOutcome(b.ctx, op.Tenant, op.ID, 1, success("file-1"), "test")
		if err == nil || !strings.Contains(err.Error(), "broken invariant") {
			t.Fatalf("RecordOutcome on an operation whose attempt closed behind the store: %v, want a broken invariant", err)
		}
		wantState(t, b.get(t, op), review.InFlight)
		if n := len(b.history(t, op.ID)); n != 2 {
			t.Errorf("%d audit events, want 2 (registered, attempt started): the report wrote some", n)
		}
		if n := countRows(t, b.s, `SELECT count(*) FROM evidence WHERE operation_id = ?`, op.ID); n != 0 {
			t.Errorf("%d evidence rows, want none", n)
		}
	})
}
