package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestStructuredOutputGate: a generation whose structured output the
// caller's schema refused is kept with its attempt, is not the operation's
// result (no confirming evidence, a new attempt next), and the accepted
// one confirms it; both are read back per attempt. Both engines give the
// same answer to output that is not JSON Limbo keeps.
func TestStructuredOutputGate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "plan-1", review.RiskGenerate, "llm")
		b.start(t, op)
		refused := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 200,
			Output: json.RawMessage(`{ "steps" : "all of them" }`), OutputInvalid: "at '/steps': got string, want array"}
		res := b.report(t, op, 1, refused)
		if res.Next != review.NextRetryAt || !strings.Contains(res.Reason, "structured output breaks its schema") {
			t.Fatalf("refused output: %s (%s), want a new generation", res.Next, res.Reason)
		}
		if len(res.Operation.Evidence) != 0 {
			t.Errorf("a refused output left evidence %+v", res.Operation.Evidence)
		}
		if again := b.report(t, op, 1, refused); !again.Unchanged {
			t.Error("the same report again was not answered unchanged")
		}
		out, err := b.s.AttemptOutput(b.ctx, op.Tenant, op.ID, 1)
		if err != nil || string(out.Output) != `{"steps":"all of them"}` || out.Invalid != refused.OutputInvalid {
			t.Fatalf("attempt 1 output = %+v, %v; want it canonical, with why it was refused", out, err)
		}
		b.clk.Advance(time.Minute)
		b.start(t, op)
		res = b.report(t, op, 2, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 200,
			Output: json.RawMessage(`{"steps":["read","write"]}`)})
		wantState(t, res.Operation, review.Confirmed)
		if out, err := b.s.AttemptOutput(b.ctx, op.Tenant, op.ID, 2); err != nil || out.Invalid != "" || string(out.Output) != `{"steps":["read","write"]}` {
			t.Errorf("attempt 2 output = %+v, %v", out, err)
		}
		if _, err := b.s.AttemptOutput(b.ctx, "other-tenant", op.ID, 2); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("another tenant reads the output: %v", err)
		}

		// Not JSON Limbo keeps, or an output_invalid with nothing refused:
		// refused with the report on both engines, nothing written.
		bad := b.newOp(t, "plan-bad", review.RiskGenerate, "llm")
		b.start(t, bad)
		for _, o := range []review.Outcome{
			{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Output: json.RawMessage("{\"a\":\"\xff\"}")},
			{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Output: json.RawMessage(`{"a":`)},
			{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, OutputInvalid: "no output"},
			{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 500, Output: json.RawMessage(`{}`)},
		} {
			if _, err := b.s.RecordOutcome(b.ctx, bad.Tenant, bad.ID, 1, o, "test"); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("RecordOutcome(%q, %q) = %v, want invalid", o.Output, o.OutputInvalid, err)
			}
		}
		if got := b.get(t, bad); got.State != review.InFlight {
			t.Errorf("after refused reports the operation is %s, want still in_flight", got.State)
		}

		// A write that succeeded did its effect whatever its output says.
		w := b.newOp(t, "write-1", review.RiskCompensableWrite, "llm")
		b.start(t, w)
		res = b.report(t, w, 1, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
			Resource: &review.ResourceRef{Ref: "r-1"}, Output: json.RawMessage(`{}`), OutputInvalid: "unexpected shape"})
		wantState(t, res.Operation, review.Confirmed)
	})
}
