package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/client/agent"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

const planConfig = `
destinations:
  model:
    preset: openai
    lease: 30s
    actions:
      plan_release:
        risk: generate
        max_attempts: 3
`

var planSchema = json.RawMessage(`{"type":"object","required":["steps"],"properties":{"steps":{"type":"array","items":{"type":"string"},"minItems":1}}}`)

// generate asks the sandbox model for a structured output and returns its
// content as the output.
func generate(modelURL string) func(context.Context, agent.Attempt) (client.Outcome, json.RawMessage) {
	hc := &http.Client{Timeout: 2 * time.Second}
	return func(ctx context.Context, a agent.Attempt) (client.Outcome, json.RawMessage) {
		body := `{"model":"sandbox-small","messages":[{"role":"user","content":"plan"}],"response_format":{"type":"json_schema"},` +
			`"tools":[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"write"}}]}`
		req, err := client.NewAttemptRequest(ctx, a.Grant, http.MethodPost, modelURL+"/v1/chat/completions", []byte(body))
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}, nil
		}
		resp, o := client.SendAttempt(hc, req)
		if resp == nil {
			return o, nil
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		o.Usage = client.UsageFromBody(raw)
		var v struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if o.Result != client.ResultSuccess || json.Unmarshal(raw, &v) != nil || len(v.Choices) == 0 {
			return o, nil
		}
		return o, json.RawMessage(v.Choices[0].Message.Content)
	}
}

// planWorld is the sandbox model, Limbo's API over a fresh database with
// cfg, and a controller with the plan_release planner.
func planWorld(t *testing.T, e store.Engine, cfg *review.Config) (*sandbox.Sandbox, *store.Store, *client.Client, *agent.Controller) {
	t.Helper()
	sb := sandbox.New(sandbox.Options{Seed: 1})
	model := httptest.NewServer(sb.Handler())
	t.Cleanup(func() { model.Close(); sb.Close() })
	st := storetest.Open(t, e, store.Options{Config: cfg})
	api := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
	t.Cleanup(api.Close)
	tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "agent")
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(api.URL, tok)
	ctl, err := agent.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.AddPlanner(agent.Planner{Name: "plan_release", Destination: "model", Schema: planSchema, Generate: generate(model.URL)}); err != nil {
		t.Fatal(err)
	}
	return sb, st, c, ctl
}

// TestPlanGate: a structured output that breaks the planner's schema is
// kept, refused and generated again as a new attempt; the accepted plan is
// read back from the ledger by a later Run without calling the model; a
// model that keeps answering badly runs out of attempts and nothing is
// accepted.
func TestPlanGate(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(planConfig))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		sb, _, c, ctl := planWorld(t, e, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		if err := sb.QueueModelFaults("malformed_output"); err != nil {
			t.Fatal(err)
		}
		run, err := ctl.Run(ctx, "run-plan")
		if err != nil {
			t.Fatal(err)
		}
		p, err := run.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v1.2"}`))
		if err != nil {
			t.Fatal(err)
		}
		if !p.Done() || !p.Generated || p.Refused != 1 || string(p.Output) != `{"steps":["read","write"]}` {
			t.Fatalf("plan = %+v (%s), want the second generation accepted after one refused", p, p.Output)
		}
		if n := sb.ModelCalls(); n != 2 {
			t.Errorf("the model generated %d times, want 2", n)
		}
		refused, err := c.AttemptOutput(ctx, p.OperationID, 1)
		if err != nil || !strings.HasPrefix(refused.Invalid, "at '/steps'") || string(refused.Output) != `{"steps":"all of them"}` {
			t.Errorf("attempt 1's output = %+v, %v; want the refused plan kept with why", refused, err)
		}

		// After a crash: the plan comes from the ledger, not the model.
		again, err := ctl.Run(ctx, "run-plan")
		if err != nil {
			t.Fatal(err)
		}
		p2, err := again.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v1.2"}`))
		if err != nil || p2.Generated || !p2.Done() || string(p2.Output) != string(p.Output) || sb.ModelCalls() != 2 {
			t.Fatalf("the resumed plan = %+v, %v (model calls %d); want the ledger's, not a new generation", p2, err, sb.ModelCalls())
		}

		// A model that never answers well: out of attempts, nothing accepted.
		if err := sb.QueueModelFaults("malformed_output", "malformed_output", "malformed_output"); err != nil {
			t.Fatal(err)
		}
		bad, err := run.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v2.0"}`))
		if err != nil {
			t.Fatal(err)
		}
		if bad.Done() || bad.Output != nil || bad.Refused != 3 || bad.State != client.Failed {
			t.Errorf("plan = %+v, want failed after 3 refused generations and no output", bad)
		}
	})
}

// TestPlanTokenBudget: each refused generation's tokens are priced into the
// planning operation's cost; the cost budget stops the regenerations and
// the policy's escalate_on opens a budget_exhausted case — against the
// sandbox model.
func TestPlanTokenBudget(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(`
destinations:
  model:
    preset: openai
    lease: 30s
    pricing:
      "*": {prompt_per_mtok: 100, completion_per_mtok: 100}
    actions:
      plan_release:
        risk: generate
        max_attempts: 10
        cost_budget: 0.02
        escalate_on: [budget_exhausted]
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		sb, st, _, ctl := planWorld(t, e, cfg)
		faults := make([]string, 10)
		for i := range faults {
			faults[i] = "malformed_output"
		}
		if err := sb.QueueModelFaults(faults...); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		run, err := ctl.Run(ctx, "run-costly")
		if err != nil {
			t.Fatal(err)
		}
		p, err := run.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v3"}`))
		if err != nil {
			t.Fatal(err)
		}
		op, err := st.GetOperation(ctx, "acme", p.OperationID, "")
		if err != nil {
			t.Fatal(err)
		}
		if p.Done() || op.State != review.NeedsReview || !strings.Contains(op.StateReason, "cost budget exhausted") {
			t.Fatalf("plan %s (%s) after %d generations; want needs_review at the cost budget", op.State, op.StateReason, len(op.Attempts))
		}
		if len(op.Attempts) >= 10 || op.CostSpent < 0.02 {
			t.Errorf("%d attempts, %g spent: want the cost budget (0.02), not max_attempts, to stop it", len(op.Attempts), op.CostSpent)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonBudgetExhausted) {
			t.Fatalf("cases = %+v, %v; want one budget_exhausted case", cs, err)
		}
	})
}

// TestPlanConfirmedWithoutAcceptedOutput: a plan whose every generation
// the schema refused goes to a person (escalate_on: budget_exhausted); a
// reviewer who confirms it confirms no output. Plan read the last
// generation's output back from the ledger and handed it out as the
// accepted plan, Done — the output the gate had refused, for the agent to
// run tools from. It is confirmed, not done, with no output, and says why.
func TestPlanConfirmedWithoutAcceptedOutput(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(planConfig + "        escalate_on: [budget_exhausted]\n"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		sb, st, _, ctl := planWorld(t, e, cfg)
		if err := sb.QueueModelFaults("malformed_output", "malformed_output", "malformed_output"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		run, err := ctl.Run(ctx, "run-confirmed")
		if err != nil {
			t.Fatal(err)
		}
		p, err := run.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v4"}`))
		if err != nil {
			t.Fatal(err)
		}
		if p.Done() || p.State != client.NeedsReview || p.Refused != 3 {
			t.Fatalf("plan = %+v, want needs_review after 3 refused generations", p)
		}
		cs, err := st.CasesForOperation(ctx, p.OperationID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %d, %v", len(cs), err)
		}
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideConfirm, Ref: "plan-by-hand",
			Actor: "rita@example.com", Reason: "written by hand"}); err != nil {
			t.Fatal(err)
		}
		again, err := ctl.Run(ctx, "run-confirmed")
		if err != nil {
			t.Fatal(err)
		}
		got, err := again.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v4"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got.Done() || got.Output != nil || got.Generated || got.State != client.Confirmed || !strings.Contains(got.Reason, "nothing runs from it") {
			t.Errorf("plan after a person confirmed it = %+v (%s); want confirmed, not done, no output, saying why", got, got.Output)
		}
		if n := sb.ModelCalls(); n != 3 {
			t.Errorf("the model generated %d times, want 3", n)
		}
	})
}

// TestPlanOutputPurged: a plan whose outputs payload retention has purged
// is read back as confirmed, not done, with no output, and says they were
// purged; reading it back failed on the 410 the API answers for a purged
// output (before that, the API's 404 read as "kept no structured output").
func TestPlanOutputPurged(t *testing.T) {
	cfg, err := review.ParseConfig([]byte("payload_retention: 1h\n" + planConfig))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		sb, st, _, ctl := planWorld(t, e, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		run, err := ctl.Run(ctx, "run-purged")
		if err != nil {
			t.Fatal(err)
		}
		p, err := run.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v5"}`))
		if err != nil || !p.Done() {
			t.Fatalf("plan = %+v, %v; want it accepted", p, err)
		}
		// Past the retention (the purge is told when "now" is).
		if rep, err := st.PurgePayloads(ctx, time.Now().Add(2*time.Hour), false); err != nil || rep.Outputs != 1 {
			t.Fatalf("purge: %+v, %v; want the plan's output purged", rep, err)
		}
		again, err := ctl.Run(ctx, "run-purged")
		if err != nil {
			t.Fatal(err)
		}
		got, err := again.Plan(ctx, "plan_release", json.RawMessage(`{"release":"v5"}`))
		if err != nil {
			t.Fatalf("reading back a plan whose output was purged: %v", err)
		}
		if got.Done() || got.Output != nil || got.Generated || got.State != client.Confirmed || !strings.Contains(got.Reason, "purged by the payload retention") {
			t.Errorf("plan after its output was purged = %+v; want confirmed, not done, no output, saying it was purged", got)
		}
		if n := sb.ModelCalls(); n != 1 {
			t.Errorf("the model generated %d times, want 1", n)
		}
	})
}
