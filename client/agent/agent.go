// Package agent is the tool-call controller for AI agents: what an agent
// loop calls instead of running a model's proposed tool call itself.
//
//	ctl, _ := agent.New(c, sendEmail, bookSlot)
//	run, _ := ctl.Run(ctx, "run-42") // the run's history, from the ledger
//	res, err := run.Call(ctx, "send_email", argsFromModel)
//
// For every proposed call the controller validates the arguments against
// the tool's JSON Schema (nothing invalid reaches the tool), derives the
// idempotency key from the run, the tool and the key fields of the
// canonical arguments (review.ToolCallKey: a model that proposes the same
// call again — reordered, or differing only in fields the action's key
// recipe leaves out — gets the same operation), registers it, and runs the
// tool only when the ledger says it may: a call that already ran returns
// its recorded result without running; one whose outcome is unknown
// returns that state instead of running; one that needs approval waits for
// it or returns awaiting_approval. The ledger is the authority, never the
// conversation: after a crash, Run with the same id rebuilds the history
// from Limbo. Each call is its own operation, so a multi-step flow is
// retried step by step, never as one opaque unit.
package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/review"
)

// Tool is one tool an agent may call: the action it is at its destination,
// the JSON Schema of its arguments, and the function that performs one
// attempt of it.
type Tool struct {
	// Name is the action's name (and the tool's name for the model).
	Name        string
	Destination string
	// Schema is the JSON Schema the arguments must satisfy.
	Schema json.RawMessage
	// Risk is the tool's risk when its action has no policy (the policy's
	// wins, and Limbo refuses a lower one). A read is repeated on every
	// Run — it changes nothing and its output is not kept — and answered
	// from memory within one.
	Risk client.Risk
	// Send performs one attempt: it sends the request with a.Grant.Key as
	// the idempotency key (client.NewAttemptRequest) and classifies what
	// happened (client.SendAttempt). It must not retry on its own. The
	// output it returns (may be nil) is handed back to the caller of the
	// Call that ran it; the ledger keeps the outcome and the resource.
	Send func(ctx context.Context, a Attempt) (client.Outcome, json.RawMessage)
}

// Attempt is one granted attempt of a tool call.
type Attempt struct {
	Grant *client.Grant
	// Operation is the call's operation as registered: its id and logical
	// version are what the request's metadata names, so that
	// reconciliation can find the effect when the answer is lost.
	Operation *client.Operation
	// Args are the call's arguments, canonical (RFC 8785).
	Args json.RawMessage
}

// Result is what a call came to, as the ledger records it.
type Result struct {
	Tool        string
	OperationID string
	State       client.State
	Reason      string
	// Resource is the confirmed effect (nil unless confirmed).
	Resource *client.ResourceRef
	// Ran reports whether this Call sent the tool's request; false when the
	// ledger already held the call (it ran before, or its outcome is
	// unknown, or it waits for a person).
	Ran bool
	// Output is what Send returned, when this Call ran it.
	Output json.RawMessage
}

// Done reports whether the call's effect is confirmed.
func (r *Result) Done() bool { return r.State == client.Confirmed }

// ArgumentsError is a call refused before anything ran: its arguments do
// not satisfy the tool's schema (or are not JSON).
type ArgumentsError struct {
	Tool string
	Err  error
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("agent: arguments for %s refused: %v", e.Tool, e.Err)
}

func (e *ArgumentsError) Unwrap() error { return e.Err }

// ErrUnknownTool: the model proposed a tool the controller does not have.
var ErrUnknownTool = errors.New("agent: unknown tool")

// Controller runs tool calls through the ledger.
type Controller struct {
	c        *client.Client
	tools    map[string]*tool
	planners map[string]*planner
	// WaitApproval is how long a Call waits for a person to approve a
	// call that needs it (0: return awaiting_approval at once).
	WaitApproval time.Duration
	// WaitInFlight is how long a Call waits for an attempt another process
	// holds (a crashed one's lease runs out) before returning in_flight.
	WaitInFlight time.Duration
	// Poll is how often a waiting Call looks again (0 or less: the
	// default, 200 ms).
	Poll time.Duration
}

type tool struct {
	Tool
	schema *jsonschema.Schema
}

// New returns a controller for tools, their schemas compiled. A schema may
// not refer to anything outside itself: nothing is fetched.
func New(c *client.Client, tools ...Tool) (*Controller, error) {
	ctl := &Controller{c: c, tools: map[string]*tool{}, planners: map[string]*planner{}, Poll: defaultPoll}
	for _, t := range tools {
		if t.Name == "" || t.Destination == "" || t.Send == nil {
			return nil, fmt.Errorf("agent: tool %q needs a name, a destination and Send", t.Name)
		}
		if _, dup := ctl.tools[t.Name]; dup {
			return nil, fmt.Errorf("agent: tool %q defined twice", t.Name)
		}
		s, err := compile(t.Name, t.Schema)
		if err != nil {
			return nil, err
		}
		ctl.tools[t.Name] = &tool{Tool: t, schema: s}
	}
	return ctl, nil
}

// compile compiles a tool's schema with no loader: a $ref to a file or a
// URL fails instead of reaching out.
func compile(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q: schema is not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	c.AssertFormat()
	loc := "mem://tools/" + name + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("agent: tool %q: %w", name, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q: schema: %w", name, err)
	}
	return s, nil
}

// Validate checks args against the tool's schema and returns them
// canonical; an *ArgumentsError when they fail.
func (ctl *Controller) Validate(toolName string, args json.RawMessage) (json.RawMessage, error) {
	t, ok := ctl.tools[toolName]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, toolName)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, &ArgumentsError{Tool: toolName, Err: err}
	}
	if err := t.schema.Validate(inst); err != nil {
		return nil, &ArgumentsError{Tool: toolName, Err: err}
	}
	canon, err := review.Canonicalize(args)
	if err != nil {
		return nil, &ArgumentsError{Tool: toolName, Err: err}
	}
	return canon, nil
}

// Run is one agent run: its id, the policies of its tools, and its tool
// history as the ledger holds it.
type Run struct {
	ID  string
	ctl *Controller
	// session tells this Run's reads from an earlier one's (a read is
	// repeated after a crash, not answered from the ledger).
	session string
	// reads holds the output of reads run in this session, by operation.
	mu       sync.Mutex
	reads    map[string]json.RawMessage
	policies map[string]client.PublishedPolicy // by destination + "\x00" + action
	// History is the run's tool calls as the ledger held them when Run
	// was called, oldest first: what the agent reports to the model after
	// a crash instead of what the conversation says.
	History []*client.Operation
}

// Run opens run runID: it reads the action policies open to the tenant and
// the run's tool calls from the ledger (every operation whose source_ref is
// the run id).
func (ctl *Controller) Run(ctx context.Context, runID string) (*Run, error) {
	if strings.TrimSpace(runID) == "" {
		return nil, errors.New("agent: a run needs an id")
	}
	pols, err := ctl.c.Actions(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: reading action policies: %w", err)
	}
	r := &Run{ID: runID, ctl: ctl, session: newSession(), reads: map[string]json.RawMessage{}, policies: map[string]client.PublishedPolicy{}}
	for _, p := range pols {
		r.policies[p.Destination+"\x00"+p.Action] = p
	}
	cursor := ""
	for {
		page, err := ctl.c.ListBy(ctx, client.ListFilter{SourceRef: runID}, cursor, 500)
		if err != nil {
			return nil, fmt.Errorf("agent: reading run %s from the ledger: %w", runID, err)
		}
		r.History = append(r.History, page.Operations...)
		if page.NextCursor == "" {
			return r, nil
		}
		cursor = page.NextCursor
	}
}

// Policy returns the policy of the tool's action, and whether it has one.
func (r *Run) Policy(toolName string) (client.PublishedPolicy, bool) {
	t, ok := r.ctl.tools[toolName]
	if !ok {
		return client.PublishedPolicy{}, false
	}
	p, ok := r.policies[t.Destination+"\x00"+t.Name]
	return p, ok
}

// identity is a call's registration identity in this run: its logical
// version and key, from the run, the tool and the arguments' intention
// under the action's key recipe (all of them when it has none). A read's
// identity also names this Run's session.
func (r *Run) identity(t *tool, canonicalArgs []byte) (version, key string) {
	if !r.isRead(t) {
		// A call the ledger already holds with exactly these arguments
		// keeps its identity: the action's key recipe may have changed
		// since it was registered (a new policy), and another recipe
		// derives another key, under which the call would run again.
		for _, op := range r.History {
			if op.Action == t.Name && op.Destination == t.Destination && bytes.Equal(op.Payload, canonicalArgs) {
				return op.LogicalVersion, op.Key
			}
		}
	}
	p, _ := r.Policy(t.Name)
	intention := review.Intention(canonicalArgs, p.KeyFields)
	run, version := r.ID, "call-"+review.PayloadHash(intention)[:16]
	if r.isRead(t) {
		run, version = r.ID+"\x00"+r.session, "read-"+r.session+"-"+version[len("call-"):]
	}
	return version, review.ToolCallKey(run, t.Name, intention)
}

// isRead: the tool's action is a read, by its policy or, without one, by
// the tool's own word.
func (r *Run) isRead(t *tool) bool {
	if p, ok := r.Policy(t.Name); ok && p.Risk != "" {
		return p.Risk == client.RiskRead
	}
	return t.Risk == client.RiskRead
}

// Key is the idempotency key of a call of toolName with canonical args in
// this run ("" for an unknown tool).
func (r *Run) Key(toolName string, canonicalArgs []byte) string {
	t, ok := r.ctl.tools[toolName]
	if !ok {
		return ""
	}
	_, key := r.identity(t, canonicalArgs)
	return key
}

// newSession is a random id for one Run.
func newSession() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Call runs one proposed tool call through the ledger and returns what it
// came to. Errors: *ArgumentsError and ErrUnknownTool before anything is
// recorded; a *client.Problem from Limbo (a tenant the action is not open
// to, a key taken by another intention); ctx's error.
func (r *Run) Call(ctx context.Context, toolName string, args json.RawMessage) (*Result, error) {
	canon, err := r.ctl.Validate(toolName, args)
	if err != nil {
		return nil, err
	}
	t := r.ctl.tools[toolName]
	version, key := r.identity(t, canon)
	op, _, err := r.ctl.c.Register(ctx, client.Registration{
		SourceRef:      r.ID,
		LogicalVersion: version,
		Action:         t.Name,
		Destination:    t.Destination,
		Risk:           t.Risk,
		Payload:        canon,
		Key:            key,
	})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	out, ok := r.reads[op.ID]
	r.mu.Unlock()
	if ok && op.State == client.Confirmed {
		res := result(t, op, false, nil)
		res.Output = out
		return res, nil
	}
	for {
		switch op.State {
		case client.Pending, client.RetryWait:
			return r.send(ctx, t, op, canon)
		case client.AwaitingApproval:
			if op, err = r.ctl.waitWhile(ctx, op, r.ctl.WaitApproval); err != nil || op.State == client.AwaitingApproval {
				return result(t, op, false, nil), err
			}
		case client.InFlight:
			if op, err = r.ctl.waitWhile(ctx, op, r.ctl.WaitInFlight); err != nil || op.State == client.InFlight {
				return result(t, op, false, nil), err
			}
		default:
			// confirmed, accepted, ambiguous, in review, failed,
			// compensating, compensated: the ledger answers; nothing runs.
			return result(t, op, false, nil), nil
		}
	}
}

// send runs the call's attempts under the ledger's policy (client.Do).
func (r *Run) send(ctx context.Context, t *tool, op *client.Operation, canon json.RawMessage) (*Result, error) {
	var out json.RawMessage
	ran := false
	res, err := r.ctl.c.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
		ran = true
		o, output := t.Send(ctx, Attempt{Grant: g, Operation: op, Args: canon})
		out = output
		return o
	})
	var pr *client.Problem
	if errors.As(err, &pr) && pr.Status == http.StatusConflict {
		// Someone else moved it first (another process, a reviewer):
		// the ledger's state answers.
		now, gerr := r.ctl.c.Get(ctx, op.ID)
		if gerr != nil {
			return nil, gerr
		}
		return result(t, now, ran, out), nil
	}
	if err != nil {
		return nil, err
	}
	if ran && r.isRead(t) && res.Operation.State == client.Confirmed {
		r.mu.Lock()
		r.reads[op.ID] = out
		r.mu.Unlock()
	}
	return result(t, res.Operation, ran, out), nil
}

// defaultPoll is Controller.Poll unless set.
const defaultPoll = 200 * time.Millisecond

// waitWhile polls op until its state changes, for at most d.
func (ctl *Controller) waitWhile(ctx context.Context, op *client.Operation, d time.Duration) (*client.Operation, error) {
	if d <= 0 {
		return op, nil
	}
	poll := ctl.Poll
	if poll <= 0 {
		poll = defaultPoll
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return op, ctx.Err()
		case <-t.C:
		}
		now, err := ctl.c.Get(ctx, op.ID)
		if err != nil {
			return op, err
		}
		if now.State != op.State {
			return now, nil
		}
	}
	return op, nil
}

func result(t *tool, op *client.Operation, ran bool, out json.RawMessage) *Result {
	res := &Result{Tool: t.Name, OperationID: op.ID, State: op.State, Reason: op.StateReason, Ran: ran}
	if op.State == client.Confirmed {
		res.Resource = op.Resource
	}
	if ran {
		res.Output = out
	}
	return res
}

// String describes the result for logs: tool, operation, state and
// whether this call ran it.
func (r *Result) String() string {
	s := fmt.Sprintf("%s %s %s ran=%v", r.Tool, r.OperationID, r.State, r.Ran)
	if r.Resource != nil {
		s += " resource=" + r.Resource.Ref
	}
	return s
}
