// Package release is the example agent: it publishes a release's notes
// with a model's help, every step through Limbo's ledger —
//
//	plan   (plan_release, generate)       a structured output, regenerated when it breaks its schema
//	read   (get_release, read)            repeated on every run
//	write  (write_notes, compensable)     reconciled by Limbo when its answer is lost
//	notify (notify_team, irreversible)    waits for a reviewer's approval
//
// The model (the sandbox's OpenAI-shaped POST /v1/chat/completions)
// proposes the tool calls; the conversation is rebuilt from the ledger on
// every Run (each model turn is a generate operation whose output Limbo
// keeps, each tool call an operation whose state Limbo holds), so a crashed
// agent resumes where the ledger says, never where its memory says.
// limbo.yaml in this directory holds the policies.
package release

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/client/agent"
	"github.com/limbo-dev/limbo/review"
)

// ExampleConfig is examples/agent/release/limbo.yaml.
//
//go:embed limbo.yaml
var ExampleConfig []byte

// exampleBase is the sandbox address limbo.yaml names.
const exampleBase = "http://127.0.0.1:8090"

// Config is the example's configuration with the sandbox at base instead
// of 127.0.0.1:8090: its "sandbox" destination's actions and its "model"
// destination, parsed as a --config file is.
func Config(base string) (*review.Config, error) {
	host := strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	text := strings.ReplaceAll(string(ExampleConfig), exampleBase, base)
	text = strings.ReplaceAll(text, `allow_internal: ["127.0.0.1"]`, fmt.Sprintf("allow_internal: [%q]", host))
	return review.ParseConfig([]byte(text))
}

// Destinations of the example's actions.
const (
	ToolsDestination = "sandbox"
	ModelDestination = "model"
)

// Agent runs release-notes runs.
type Agent struct {
	Limbo *client.Client
	// Sandbox is the sandbox's address: the tools' destination and the model.
	Sandbox string
	// Model is the model name sent (and priced).
	Model string
	HTTP  *http.Client
	Log   *slog.Logger
	// WaitApproval is how long a run waits for the notification's
	// approval before returning (0: it returns awaiting_approval at once;
	// the next Run of the same id carries on).
	WaitApproval time.Duration
	// AfterEffect, when set, is called after each tool's request was
	// answered and before its outcome is reported: the fault runs kill
	// the agent there.
	AfterEffect func(tool string)
	// MaxTurns bounds a run's model turns (default 12).
	MaxTurns int
}

// Step is one thing a run did or found in the ledger.
type Step struct {
	Kind   string // plan, turn, call
	Name   string
	State  client.State
	Ran    bool
	Detail string
}

// Report is what a run came to.
type Report struct {
	RunID string
	Steps []Step
	// Done: the model answered and every call it proposed is confirmed.
	Done bool
	// Waiting names what the run waits for (an approval, a
	// reconciliation, a person), when it stopped early.
	Waiting string
}

func (r *Report) add(s Step) { r.Steps = append(r.Steps, s) }

// Tool schemas. Each property's first example is what the sandbox model
// proposes.
var (
	releaseSchema = json.RawMessage(`{"type":"object","required":["version"],"additionalProperties":false,
		"properties":{"version":{"type":"string","pattern":"^v[0-9]+(\\.[0-9]+)*$","examples":["v1.2"]}}}`)
	notesSchema = json.RawMessage(`{"type":"object","required":["name","content"],"additionalProperties":false,
		"properties":{"name":{"type":"string","minLength":1,"maxLength":200,"examples":["release-notes-v1.2.md"]},
		"content":{"type":"string","maxLength":20000,"examples":["Release v1.2: faster uploads, expiring share links, PDF fixes."]}}}`)
	notifySchema = json.RawMessage(`{"type":"object","required":["to","subject"],"additionalProperties":false,
		"properties":{"to":{"type":"string","format":"email","examples":["team@example.com"]},
		"subject":{"type":"string","minLength":1,"maxLength":200,"examples":["Release notes v1.2 are out"]}}}`)
	planSchema = json.RawMessage(`{"type":"object","required":["steps"],"additionalProperties":false,
		"properties":{"steps":{"type":"array","minItems":1,"items":{"enum":["get_release","write_notes","notify_team","respond"]}}}}`)
	turnSchema = json.RawMessage(`{"type":"object","required":["role"],"properties":{"role":{"const":"assistant"},
		"content":{"type":"string"},"tool_calls":{"type":"array","items":{"type":"object","required":["id","function"],
		"properties":{"id":{"type":"string"},"function":{"type":"object","required":["name","arguments"],
		"properties":{"name":{"type":"string"},"arguments":{"type":"string"}}}}}}}}`)
)

// toolSpecs are the tools in the order the model is offered them.
var toolSpecs = []struct {
	name, path string
	schema     json.RawMessage
}{
	{"get_release", "", releaseSchema},
	{"write_notes", "/files", notesSchema},
	{"notify_team", "/emails", notifySchema},
}

// controller builds the tool-call controller for one run; messages is the
// conversation the turns send, which Run fills from the ledger.
func (a *Agent) controller(messages *[]map[string]any) (*agent.Controller, error) {
	var tools []agent.Tool
	for _, t := range toolSpecs {
		tools = append(tools, agent.Tool{Name: t.name, Destination: ToolsDestination, Schema: t.schema, Send: a.sendTool(t.name, t.path)})
	}
	ctl, err := agent.New(a.Limbo, tools...)
	if err != nil {
		return nil, err
	}
	ctl.WaitApproval, ctl.WaitInFlight = a.WaitApproval, 2*time.Second
	if err := ctl.AddPlanner(agent.Planner{Name: "plan_release", Destination: ModelDestination, Schema: planSchema,
		Generate: a.generate(func() []map[string]any {
			return []map[string]any{{"role": "user", "content": "Plan the release notes."}}
		}, true)}); err != nil {
		return nil, err
	}
	if err := ctl.AddPlanner(agent.Planner{Name: "next_step", Destination: ModelDestination, Schema: turnSchema,
		Generate: a.generate(func() []map[string]any { return *messages }, false)}); err != nil {
		return nil, err
	}
	return ctl, nil
}

// Run runs (or resumes) run runID for release version.
func (a *Agent) Run(ctx context.Context, runID, version string) (*Report, error) {
	maxTurns := a.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 12
	}
	rep := &Report{RunID: runID}
	messages := []map[string]any{{"role": "user", "content": "Publish the release notes for " + version + " and tell the team."}}
	ctl, err := a.controller(&messages)
	if err != nil {
		return nil, err
	}
	run, err := ctl.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	plan, err := run.Plan(ctx, "plan_release", json.RawMessage(fmt.Sprintf(`{"release":%q}`, version)))
	if err != nil {
		return nil, err
	}
	rep.add(Step{Kind: "plan", Name: "plan_release", State: plan.State, Ran: plan.Generated,
		Detail: fmt.Sprintf("%s (%d refused)", plan.Output, plan.Refused)})
	if !plan.Done() {
		rep.Waiting = "the plan: " + plan.Reason
		return rep, nil
	}
	for turn := range maxTurns {
		step, err := run.Plan(ctx, "next_step", json.RawMessage(fmt.Sprintf(`{"release":%q,"turn":%d}`, version, turn)))
		if err != nil {
			return nil, err
		}
		rep.add(Step{Kind: "turn", Name: fmt.Sprintf("next_step %d", turn), State: step.State, Ran: step.Generated, Detail: string(step.Output)})
		if !step.Done() {
			rep.Waiting = "the model: " + step.Reason
			return rep, nil
		}
		var msg struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(step.Output, &msg); err != nil {
			return nil, fmt.Errorf("release: turn %d: %w", turn, err)
		}
		var asked map[string]any
		_ = json.Unmarshal(step.Output, &asked)
		messages = append(messages, asked)
		if len(msg.ToolCalls) == 0 {
			rep.Done = true
			return rep, nil
		}
		for _, call := range msg.ToolCalls {
			content, stop := a.call(ctx, run, rep, call.Function.Name, call.Function.Arguments)
			if err := ctx.Err(); err != nil {
				return rep, err // the run was stopped (or died) mid-call
			}
			messages = append(messages, map[string]any{"role": "tool", "tool_call_id": call.ID, "content": content})
			if stop != "" {
				rep.Waiting = stop
				return rep, nil
			}
		}
	}
	rep.Waiting = fmt.Sprintf("the model did not finish in %d turns", maxTurns)
	return rep, nil
}

// call runs one proposed tool call and returns the tool message's content
// (the same whether this Run ran the call or the ledger answered it, so a
// resumed conversation is the one the model saw) and, when the run must
// stop there, what it waits for.
func (a *Agent) call(ctx context.Context, run *agent.Run, rep *Report, name, args string) (content, stop string) {
	res, err := run.Call(ctx, name, json.RawMessage(args))
	var ae *agent.ArgumentsError
	switch {
	case errors.As(err, &ae), errors.Is(err, agent.ErrUnknownTool):
		rep.add(Step{Kind: "call", Name: name, Detail: "refused before running: " + err.Error()})
		b, _ := json.Marshal(map[string]string{"error": "arguments refused: " + err.Error()})
		return string(b), ""
	case err != nil:
		rep.add(Step{Kind: "call", Name: name, Detail: err.Error()})
		return `{"error":"the ledger refused the call"}`, "the ledger: " + err.Error()
	}
	rep.add(Step{Kind: "call", Name: name, State: res.State, Ran: res.Ran, Detail: res.Reason})
	out := map[string]any{"state": res.State}
	if res.Resource != nil {
		out["resource"] = res.Resource.Ref
	}
	if name == "get_release" && res.Output != nil {
		out["release"] = json.RawMessage(res.Output)
	}
	b, _ := json.Marshal(out)
	if res.Done() {
		return string(b), ""
	}
	return string(b), fmt.Sprintf("%s is %s: %s", name, res.State, res.Reason)
}

// sendTool is a tool's one attempt against the sandbox: the grant's key,
// and the operation in the metadata, where Limbo's search probe finds it.
func (a *Agent) sendTool(name, path string) func(ctx context.Context, at agent.Attempt) (client.Outcome, json.RawMessage) {
	return func(ctx context.Context, at agent.Attempt) (client.Outcome, json.RawMessage) {
		var req *http.Request
		var err error
		if path == "" { // get_release
			var v struct{ Version string }
			_ = json.Unmarshal(at.Args, &v)
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, a.Sandbox+"/releases/"+v.Version, nil)
		} else {
			var body map[string]any
			_ = json.Unmarshal(at.Args, &body)
			body["metadata"] = map[string]any{"operation_id": at.Operation.ID, "logical_version": at.Operation.LogicalVersion}
			raw, _ := json.Marshal(body)
			req, err = client.NewAttemptRequest(ctx, at.Grant, http.MethodPost, a.Sandbox+path, raw)
		}
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}, nil
		}
		resp, o := client.SendAttempt(a.http(), req)
		var out json.RawMessage
		if resp != nil {
			out, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			var created struct {
				Ref string `json:"ref"`
			}
			if o.Result == client.ResultSuccess && path != "" && json.Unmarshal(out, &created) == nil && created.Ref != "" {
				o.Resource = &client.ResourceRef{Ref: created.Ref}
			}
		}
		if a.AfterEffect != nil {
			a.AfterEffect(name)
		}
		return o, out
	}
}

// generate is one model turn: a chat completion over the conversation
// messages() returns (structured: asking for a plan), with the tools
// offered, its usage reported for pricing, and the answer's message — or,
// for a plan, its content — as the structured output.
func (a *Agent) generate(messages func() []map[string]any, structured bool) func(ctx context.Context, at agent.Attempt) (client.Outcome, json.RawMessage) {
	return func(ctx context.Context, at agent.Attempt) (client.Outcome, json.RawMessage) {
		var tools []map[string]any
		for _, t := range toolSpecs {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": t.name, "parameters": t.schema}})
		}
		req := map[string]any{"model": a.model(), "messages": messages(), "tools": tools}
		if structured {
			req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "plan", "schema": planSchema}}
		}
		raw, _ := json.Marshal(req)
		hreq, err := client.NewAttemptRequest(ctx, at.Grant, http.MethodPost, a.Sandbox+"/v1/chat/completions", raw)
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}, nil
		}
		resp, o := client.SendAttempt(a.http(), hreq)
		if resp == nil {
			return o, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		o.Usage = client.UsageFromBody(body)
		if o.Result != client.ResultSuccess {
			return o, nil
		}
		var v struct {
			Choices []struct {
				Message json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(body, &v) != nil || len(v.Choices) == 0 {
			return o, nil // no output: the gate refuses it
		}
		if !structured {
			return o, v.Choices[0].Message
		}
		var m struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(v.Choices[0].Message, &m) != nil {
			return o, nil
		}
		return o, json.RawMessage(bytes.TrimSpace([]byte(m.Content)))
	}
}

func (a *Agent) http() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second}
}

func (a *Agent) model() string {
	if a.Model != "" {
		return a.Model
	}
	return "sandbox-small"
}

// String prints a report, a line per step.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s\n", r.RunID)
	for _, s := range r.Steps {
		ran := "from the ledger"
		if s.Ran {
			ran = "ran"
		}
		fmt.Fprintf(&b, "  %-5s %-14s %-18s %-15s %s\n", s.Kind, s.Name, s.State, ran, s.Detail)
	}
	switch {
	case r.Done:
		b.WriteString("  done\n")
	case r.Waiting != "":
		fmt.Fprintf(&b, "  waiting for %s\n", r.Waiting)
	}
	return b.String()
}
