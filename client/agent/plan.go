package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/review"
)

// Planner is a planning step: a model call (a generate operation) whose
// structured output must satisfy Schema before anything runs from it —
// the structured-output gate.
type Planner struct {
	// Name is the action at Destination (its policy's risk: generate).
	Name        string
	Destination string
	// Schema is the JSON Schema the structured output must satisfy.
	Schema json.RawMessage
	// Generate performs one generation: the model call with the grant
	// (client.NewAttemptRequest), classified (client.SendAttempt), with the
	// answer's usage (client.UsageFromBody). It returns the outcome and the
	// structured output the answer carried (nil: none). It must not retry.
	Generate func(ctx context.Context, a Attempt) (client.Outcome, json.RawMessage)
}

type planner struct {
	Planner
	schema *jsonschema.Schema
}

// AddPlanner gives the controller a planning step.
func (ctl *Controller) AddPlanner(p Planner) error {
	if p.Name == "" || p.Destination == "" || p.Generate == nil {
		return fmt.Errorf("agent: planner %q needs a name, a destination and Generate", p.Name)
	}
	if _, dup := ctl.planners[p.Name]; dup {
		return fmt.Errorf("agent: planner %q defined twice", p.Name)
	}
	s, err := compile("plan-"+p.Name, p.Schema)
	if err != nil {
		return err
	}
	ctl.planners[p.Name] = &planner{Planner: p, schema: s}
	return nil
}

// PlanResult is what a planning step came to.
type PlanResult struct {
	OperationID string
	State       client.State
	Reason      string
	// Output is the accepted structured output (nil unless confirmed
	// with one).
	Output json.RawMessage
	// Generated reports whether this Plan called the model; false when the
	// ledger already held the accepted output (after a crash, say).
	Generated bool
	// Refused counts the generations whose output the schema refused.
	Refused int
}

// Done reports whether the plan's output was accepted: the operation is
// confirmed and the ledger holds an output the schema accepts (Reason says
// why not, when it is confirmed without one).
func (p *PlanResult) Done() bool { return p.State == client.Confirmed && p.Output != nil }

// Plan runs planning step name for this run with input (what the plan is
// for: the same input in the same run is the same plan). Each generation
// is an attempt of one generate operation; its structured output is kept
// with the attempt and validated against the planner's schema before the
// outcome is reported. A refused output is reported as such (output_invalid)
// and the ledger grants the next generation as a new attempt, within the
// action's budgets (attempts, cost, deadline); an accepted one confirms the
// operation. A plan the ledger already holds is read back from it, never
// generated again. A refused plan proves nothing about tools: each tool
// call is its own operation.
func (r *Run) Plan(ctx context.Context, name string, input json.RawMessage) (*PlanResult, error) {
	p, ok := r.ctl.planners[name]
	if !ok {
		return nil, fmt.Errorf("agent: unknown planner %q", name)
	}
	canon, err := review.Canonicalize(input)
	if err != nil {
		return nil, fmt.Errorf("agent: plan input: %w", err)
	}
	op, _, err := r.ctl.c.Register(ctx, client.Registration{
		SourceRef:      r.ID,
		LogicalVersion: "plan-" + review.PayloadHash(canon)[:16],
		Action:         p.Name,
		Destination:    p.Destination,
		Risk:           client.RiskGenerate,
		Payload:        canon,
		Key:            review.ToolCallKey(r.ID, "plan:"+p.Name, canon),
	})
	if err != nil {
		return nil, err
	}
	res := &PlanResult{OperationID: op.ID}
	switch op.State {
	case client.Pending, client.RetryWait:
		var accepted json.RawMessage
		done, err := r.ctl.c.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
			res.Generated = true
			o, out := p.Generate(ctx, Attempt{Grant: g, Operation: op, Args: canon})
			if o.Result != client.ResultSuccess {
				return o
			}
			o.Output, o.OutputInvalid = p.gate(out)
			if o.OutputInvalid != "" {
				res.Refused++
			} else {
				accepted = o.Output
			}
			return o
		})
		var pr *client.Problem
		if errors.As(err, &pr) && pr.Status == http.StatusConflict {
			break // another process moved it first: the ledger answers below
		}
		if err != nil {
			return nil, err
		}
		op = done.Operation
		if op.State == client.Confirmed && accepted != nil {
			res.State, res.Reason, res.Output = op.State, op.StateReason, accepted
			return res, nil
		}
	}
	if op, err = r.ctl.c.Get(ctx, op.ID); err != nil {
		return nil, err
	}
	res.State, res.Reason = op.State, op.StateReason
	if op.State == client.Confirmed {
		out, why, err := r.ctl.accepted(ctx, p, op)
		if err != nil {
			return nil, fmt.Errorf("agent: reading plan %s from the ledger: %w", op.ID, err)
		}
		res.Output = out
		if why != "" {
			res.Reason += "; " + why
		}
	}
	return res, nil
}

// accepted is the structured output the ledger holds as op's result: the
// confirming attempt's, the last one, when the gate accepted it, and does
// still. A plan confirmed otherwise (a reviewer confirming one whose
// generations were all refused, say) has none: nil, and why, for nothing
// may run from an output the schema refused.
func (ctl *Controller) accepted(ctx context.Context, p *planner, op *client.Operation) (json.RawMessage, string, error) {
	if len(op.Attempts) == 0 {
		return nil, "no generation is in the ledger: no structured output to run from", nil
	}
	out, err := ctl.c.AttemptOutput(ctx, op.ID, op.Attempts[len(op.Attempts)-1].N)
	switch {
	case client.IsProblem(err, client.ProblemNotFound):
		return nil, "the last generation kept no structured output: none to run from", nil
	case client.IsProblem(err, client.ProblemPurged):
		return nil, "the last generation's structured output was purged by the payload retention: none to run from", nil
	case err != nil:
		return nil, "", err
	case out.Invalid != "":
		return nil, "the last generation's structured output was refused (" + out.Invalid + "): nothing runs from it", nil
	}
	canon, why := p.gate(out.Output)
	if why != "" {
		return nil, "the structured output in the ledger breaks the schema (" + why + "): nothing runs from it", nil
	}
	return canon, "", nil
}

// gate checks one generation's structured output: the output to keep
// (always JSON) and why the schema refused it ("" when accepted).
func (p *planner) gate(out json.RawMessage) (json.RawMessage, string) {
	if out == nil {
		return json.RawMessage("null"), "the answer carried no structured output"
	}
	if len(out) > client.MaxOutputLen {
		return json.RawMessage("null"), fmt.Sprintf("the structured output is %d bytes, more than the %d kept", len(out), client.MaxOutputLen)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return json.RawMessage("null"), review.FitText(review.FreeText, 2000, "the structured output is not JSON: "+err.Error())
	}
	canon, err := review.Canonicalize(out)
	if err != nil {
		return json.RawMessage("null"), review.FitText(review.FreeText, 2000, "the structured output is not JSON Limbo keeps: "+err.Error())
	}
	if err := p.schema.Validate(inst); err != nil {
		return canon, review.FitText(review.FreeText, 2000, schemaMessage(err))
	}
	return canon, ""
}

// schemaMessage is a validation error without the line the library opens
// it with ("jsonschema validation failed with 'mem://…#'", the schema's
// internal location): what a reviewer reads is what broke, one cause after
// another.
func schemaMessage(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) > 1 && strings.HasPrefix(lines[0], "jsonschema validation failed with ") {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "- ")
	}
	return strings.Join(lines, "; ")
}
