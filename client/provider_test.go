package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// providerConfig is a model provider behind the openai preset, priced so
// that a thousand prompt and a hundred completion tokens cost 0.026.
const providerConfig = `
destinations:
  model:
    preset: openai
    lease: 30s
    pricing:
      sandbox-small: {prompt_per_mtok: 20, completion_per_mtok: 60}
    actions:
      plan:
        risk: generate
        max_attempts: 4
        cost_budget: 0.05
        escalate_on: [budget_exhausted]
`

// completion is a send that asks the sandbox model for one chat completion
// and reports the answer's usage, as an agent would.
func completion(url string, structured bool, hc *http.Client) func(ctx context.Context, g *client.Grant) client.Outcome {
	return func(ctx context.Context, g *client.Grant) client.Outcome {
		body := `{"model":"sandbox-small","messages":[{"role":"user","content":"plan the release"}]`
		if structured {
			body += `,"response_format":{"type":"json_schema"}`
		}
		req, err := client.NewAttemptRequest(ctx, g, http.MethodPost, url+"/v1/chat/completions", []byte(body+"}"))
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
		}
		resp, o := client.SendAttempt(hc, req)
		if resp == nil {
			return o
		}
		defer resp.Body.Close()
		if o.Result == client.ResultSuccess {
			var b json.RawMessage
			if json.NewDecoder(resp.Body).Decode(&b) == nil {
				o.Usage = client.UsageFromBody(b)
			}
		}
		return o
	}
}

// TestProviderBoundary drives each row of the openai preset's
// classification against the sandbox model, through the API and client.Do.
func TestProviderBoundary(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(providerConfig))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		st := storetest.Open(t, engine, store.Options{Config: cfg})
		srv := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
		t.Cleanup(srv.Close)
		tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "test")
		if err != nil {
			t.Fatal(err)
		}
		lc := client.New(srv.URL, tok)
		sb := sandbox.New(sandbox.Options{Seed: 1})
		t.Cleanup(sb.Close)
		model := httptest.NewServer(sb.Handler())
		t.Cleanup(model.Close)
		hc := &http.Client{Timeout: 2 * time.Second}

		rows := []struct {
			faults    []string
			state     client.State
			calls     int    // completions the model generated
			attempts  int    // attempts Limbo granted
			reason    string // in the final state's reason
			costAbove float64
		}{
			{[]string{"quota"}, client.Failed, 0, 1, "insufficient_quota: quota exhausted", 0},
			{[]string{"billing"}, client.Failed, 0, 1, "billing_hard_limit_reached: quota exhausted", 0},
			{[]string{"rate_limit"}, client.Confirmed, 1, 2, "", 1e-6},
			{[]string{"request_timeout"}, client.Confirmed, 1, 2, "", 1e-6},
			{[]string{"conflict"}, client.Confirmed, 1, 2, "", 1e-6},
			{[]string{"server_error"}, client.Confirmed, 1, 2, "", 1e-6},
			{[]string{"should_not_retry"}, client.Failed, 0, 1, "x-should-retry: false", 0},
			// The generation happened and its answer was lost: a timeout
			// after send, retried for a generate operation.
			{[]string{"timeout_after_accept"}, client.Confirmed, 2, 2, "", 1e-6},
		}
		for i, row := range rows {
			t.Run(strings.Join(row.faults, "+"), func(t *testing.T) {
				before := sb.ModelCalls()
				if err := sb.QueueModelFaults(row.faults...); err != nil {
					t.Fatal(err)
				}
				op, _, err := lc.Register(context.Background(), client.Registration{SourceRef: fmt.Sprintf("run-%d", i),
					LogicalVersion: "1", Action: "plan", Destination: "model", Payload: json.RawMessage(`{"goal":"release"}`)})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if _, err := lc.Do(ctx, op.ID, client.AttemptOptions{Model: "sandbox-small"}, completion(model.URL, false, hc)); err != nil {
					t.Fatalf("Do: %v", err)
				}
				got, err := st.GetOperation(context.Background(), "acme", op.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				if client.State(got.State) != row.state || len(got.Attempts) != row.attempts || !strings.Contains(got.StateReason, row.reason) {
					t.Errorf("%s after %d attempts (%s); want %s after %d, reason containing %q",
						got.State, len(got.Attempts), got.StateReason, row.state, row.attempts, row.reason)
				}
				if n := sb.ModelCalls() - before; n != row.calls {
					t.Errorf("the model generated %d completions, want %d", n, row.calls)
				}
				if row.costAbove > 0 && got.CostSpent <= row.costAbove {
					t.Errorf("cost spent %g, want the priced tokens (> %g)", got.CostSpent, row.costAbove)
				}
			})
		}

		t.Run("retry-after-ms is honoured", func(t *testing.T) {
			if err := sb.QueueModelFaults("rate_limit"); err != nil {
				t.Fatal(err)
			}
			op, _, err := lc.Register(context.Background(), client.Registration{SourceRef: "ms", LogicalVersion: "1",
				Action: "plan", Destination: "model", Payload: json.RawMessage(`{"goal":"release"}`)})
			if err != nil {
				t.Fatal(err)
			}
			g, err := lc.StartAttempt(context.Background(), op.ID, client.AttemptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if g.KeyHeader != "" {
				t.Errorf("grant names key header %q for a provider that does not honour keys", g.KeyHeader)
			}
			res, err := lc.ReportOutcome(context.Background(), op.ID, g.N, completion(model.URL, false, hc)(context.Background(), g))
			if err != nil {
				t.Fatal(err)
			}
			// retry-after-ms: 200 beats Retry-After: 1 and the backoff's
			// 500 ms base: the retry is due within a second.
			if res.Next != client.NextRetryAt || res.RetryAt == nil || time.Until(*res.RetryAt) > time.Second {
				t.Errorf("after a 429 with retry-after-ms 200: %s at %v", res.Next, res.RetryAt)
			}
		})
	})
}

// TestTokenBudget: every generation's tokens are priced into the
// operation's cost; retries stop at the cost budget and the policy's
// escalate_on sends the operation to a person with budget_exhausted.
func TestTokenBudget(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(providerConfig))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		clk := storetest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
		st := storetest.Open(t, engine, store.Options{Config: cfg, Clock: clk.Now})
		ctx := context.Background()
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "costly", LogicalVersion: "1",
			Action: "plan", Destination: "model", Payload: json.RawMessage(`{"goal":"release"}`)})
		if err != nil {
			t.Fatal(err)
		}
		// Each attempt: a 500 after a generation that still reports its
		// usage, 1000 prompt + 100 completion tokens = 0.026. The budget
		// (0.05) ends at the second, two attempts before max_attempts.
		usage := &review.Usage{Model: "sandbox-small", PromptTokens: 1000, CompletionTokens: 100}
		var res *store.OutcomeResult
		for n := 1; n <= 4; n++ {
			g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
			if err != nil {
				t.Fatalf("attempt %d: %v", n, err)
			}
			res, err = st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultError,
				Phase: review.PhaseAfterSend, HTTPStatus: 500, Usage: usage}, "test")
			if err != nil {
				t.Fatal(err)
			}
			if res.Next != review.NextRetryAt {
				break
			}
			clk.Advance(time.Minute)
		}
		if len(res.Operation.Attempts) != 2 || res.Operation.State != review.NeedsReview || !strings.Contains(res.Reason, "cost budget exhausted") {
			t.Fatalf("%s after %d attempts (%s); want the second to stop at the budget and go to review",
				res.Operation.State, len(res.Operation.Attempts), res.Reason)
		}
		if got := res.Operation.CostSpent; got < 0.0519 || got > 0.0521 {
			t.Errorf("cost spent %g, want 2 × 0.026", got)
		}
		if c := res.Operation.Attempts[0].Cost; c < 0.0259 || c > 0.0261 {
			t.Errorf("attempt 1 cost %g, want its tokens priced (0.026)", c)
		}
		cases, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cases) != 1 || !strings.Contains(strings.Join(reasonNames(cases[0].Reasons), ","), "budget_exhausted") {
			t.Fatalf("cases = %+v, %v; want one budget_exhausted case", cases, err)
		}
	})
}

func reasonNames(rs []review.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func TestOutcomeFromHTTPProviderHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "3")
	rec.Header().Set("Retry-After-Ms", "1250")
	rec.Header().Set("X-Should-Retry", "false")
	rec.WriteHeader(429)
	rec.WriteString(`{"error":{"type":"requests","code":"rate_limit_exceeded"}}`)
	o := client.OutcomeFromHTTP(rec.Result(), nil, true)
	if o.RetryAfter != "1.25" || o.ShouldRetry == nil || *o.ShouldRetry || o.ProviderCode != "rate_limit_exceeded" {
		t.Errorf("outcome = %+v (should_retry %v), want retry_after 1.25 from retry-after-ms, should_retry false", o, o.ShouldRetry)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	u := client.UsageFromBody([]byte(`{"model":"gpt-x","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`))
	if u == nil || u.Model != "gpt-x" || u.PromptTokens != 12 || u.CompletionTokens != 5 {
		t.Errorf("usage = %+v", u)
	}
	if client.UsageFromBody([]byte(`{"choices":[]}`)) != nil {
		t.Error("usage read from a body without one")
	}
}
