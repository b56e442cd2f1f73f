package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// The operation page shows each attempt's structured output: refused (with
// why) or accepted.
func TestConsoleStructuredOutputs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "run-1", LogicalVersion: "plan-1", Action: "plan",
			Destination: "llm", Risk: review.RiskGenerate, Payload: json.RawMessage(`{"release":"v1.2"}`)})
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 200, Output: json.RawMessage(`{"steps":"<all of them>"}`), OutputInvalid: "at '/steps': got string, want array"}, "test"); err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		code, body := b.get("/operations/" + op.ID)
		if code != 200 {
			t.Fatalf("operation page: %d", code)
		}
		for _, want := range []string{"Structured outputs", "Attempt 1: refused", "at &#39;/steps&#39;: got string, want array", "&#34;&lt;all of them&gt;&#34;"} {
			if !strings.Contains(body, want) {
				t.Errorf("operation page lacks %q", want)
			}
		}
	})
}
