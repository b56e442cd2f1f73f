package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/client/agent"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// world is Limbo's API over a fresh database, the sandbox as the tools'
// destination, and the tools' policies: create_folder keyed by its name,
// send_email irreversible and approved by people first.
type world struct {
	ctx   context.Context
	sb    *sandbox.Sandbox
	sbURL string
	cfg   *review.Config
	st    *store.Store
	clk   *storetest.Clock
	c     *client.Client
	api   string // Limbo's address
	tok   string // the tenant's token
	// sends counts the requests each tool function sent.
	sends map[string]*atomic.Int64
}

func newWorld(t *testing.T, e store.Engine) *world {
	t.Helper()
	sb := sandbox.New(sandbox.Options{Seed: 1})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() { srv.Close(); sb.Close() })
	cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Destinations[sandbox.DestinationName]
	d.Actions = map[string]review.ActionConfig{
		"create_folder": {KeyFields: []string{"name"}, Risk: review.RiskCompensableWrite},
		"send_email":    {Risk: review.RiskIrreversible, RequiresApproval: true},
	}
	cfg.Destinations[sandbox.DestinationName] = d
	clk := storetest.NewClock(t0)
	st := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now})
	api := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
	t.Cleanup(api.Close)
	tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "agent")
	if err != nil {
		t.Fatal(err)
	}
	return &world{ctx: context.Background(), sb: sb, sbURL: srv.URL, cfg: cfg, st: st, clk: clk, c: client.New(api.URL, tok), api: api.URL, tok: tok,
		sends: map[string]*atomic.Int64{"create_folder": {}, "send_email": {}, "get_resource": {}}}
}

// post is a tool function: one request to the sandbox carrying the
// attempt's key and the operation in its metadata, as Limbo's probes look
// for it.
func (w *world) post(path string, fields func(args map[string]any) map[string]any, crash func()) func(context.Context, agent.Attempt) (client.Outcome, json.RawMessage) {
	return func(ctx context.Context, a agent.Attempt) (client.Outcome, json.RawMessage) {
		w.sends[a.Operation.Action].Add(1)
		var args map[string]any
		_ = json.Unmarshal(a.Args, &args)
		body := fields(args)
		body["metadata"] = map[string]any{"operation_id": a.Operation.ID, "logical_version": a.Operation.LogicalVersion}
		raw, _ := json.Marshal(body)
		req, err := client.NewAttemptRequest(ctx, a.Grant, http.MethodPost, w.sbURL+path, raw)
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}, nil
		}
		resp, o := client.SendAttempt(http.DefaultClient, req)
		var out json.RawMessage
		if resp != nil {
			out, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			var created struct {
				Ref string `json:"ref"`
			}
			if o.Result == client.ResultSuccess && json.Unmarshal(out, &created) == nil && created.Ref != "" {
				o.Resource = &client.ResourceRef{Ref: created.Ref}
			}
		}
		if crash != nil {
			crash() // the process dies here: the effect happened, its outcome is never reported
		}
		return o, out
	}
}

func (w *world) controller(t *testing.T, crash func()) *agent.Controller {
	t.Helper()
	ctl, err := agent.New(w.c,
		agent.Tool{Name: "create_folder", Destination: sandbox.DestinationName,
			Schema: json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string","minLength":1},"note":{"type":"string"}},"additionalProperties":false}`),
			Send:   w.post("/folders", func(a map[string]any) map[string]any { return map[string]any{"name": a["name"]} }, crash)},
		agent.Tool{Name: "get_resource", Destination: sandbox.DestinationName, Risk: client.RiskRead,
			Schema: json.RawMessage(`{"type":"object","required":["ref"],"properties":{"ref":{"type":"string"}}}`),
			Send: func(ctx context.Context, a agent.Attempt) (client.Outcome, json.RawMessage) {
				w.sends["get_resource"].Add(1)
				var args struct{ Ref string }
				_ = json.Unmarshal(a.Args, &args)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.sbURL+"/resources/"+args.Ref, nil)
				resp, o := client.SendAttempt(http.DefaultClient, req)
				if resp == nil {
					return o, nil
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				return o, out
			}},
		agent.Tool{Name: "send_email", Destination: sandbox.DestinationName,
			Schema: json.RawMessage(`{"type":"object","required":["to","subject"],"properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"}}}`),
			Send:   w.post("/emails", func(a map[string]any) map[string]any { return map[string]any{"to": a["to"], "subject": a["subject"]} }, nil)},
	)
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

// effects counts the sandbox's effects of kind.
func (w *world) effects(kind string) int {
	n := 0
	for _, e := range w.sb.Truth() {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// Arguments that fail the tool's schema never reach the tool, and leave
// nothing in the ledger.
func TestInvalidArgumentsNeverRun(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		run, err := w.controller(t, nil).Run(w.ctx, "run-invalid")
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range []string{`{}`, `{"name":""}`, `{"name":"a","colour":"red"}`, `{"name":7}`, `not json`, `{"name":"a"} trailing`} {
			_, err := run.Call(w.ctx, "create_folder", json.RawMessage(args))
			var ae *agent.ArgumentsError
			if !errors.As(err, &ae) {
				t.Errorf("%s: err = %v, want *ArgumentsError", args, err)
			}
		}
		if _, err := run.Call(w.ctx, "send_email", json.RawMessage(`{"to":"not an address","subject":"hi"}`)); err == nil {
			t.Errorf("an invalid email format was accepted")
		}
		if _, err := run.Call(w.ctx, "drop_database", json.RawMessage(`{}`)); !errors.Is(err, agent.ErrUnknownTool) {
			t.Errorf("unknown tool: %v", err)
		}
		if n := w.sends["create_folder"].Load() + w.sends["send_email"].Load(); n != 0 {
			t.Errorf("the tools ran %d times", n)
		}
		page, err := w.c.ListBy(w.ctx, client.ListFilter{SourceRef: "run-invalid"}, "", 10)
		if err != nil || len(page.Operations) != 0 {
			t.Errorf("the ledger holds %d operations for the run (%v)", len(page.Operations), err)
		}
	})
}

// The model proposes the same call again — identical, reordered, or with a
// field the key recipe leaves out: it runs once, and the repeats are
// answered from the ledger.
func TestRepeatedCallRunsOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		run, err := w.controller(t, nil).Run(w.ctx, "run-repeat")
		if err != nil {
			t.Fatal(err)
		}
		first, err := run.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"reports","note":"for Ada"}`))
		if err != nil || !first.Done() || !first.Ran || first.Resource == nil {
			t.Fatalf("first call: %+v, %v", first, err)
		}
		for _, args := range []string{`{"name":"reports","note":"for Ada"}`, `{"note":"for Ada","name":"reports"}`, `{"name":"reports","note":"reworded by the model"}`, `{"name":"reports"}`} {
			again, err := run.Call(w.ctx, "create_folder", json.RawMessage(args))
			if err != nil {
				t.Fatalf("%s: %v", args, err)
			}
			if again.Ran || again.OperationID != first.OperationID || !again.Done() || again.Resource.Ref != first.Resource.Ref {
				t.Errorf("%s: %s, want the first call's recorded result", args, again)
			}
		}
		other, err := run.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"invoices"}`))
		if err != nil || !other.Ran || other.OperationID == first.OperationID {
			t.Errorf("another name is another call: %+v, %v", other, err)
		}
		if n := w.effects(sandbox.KindFolder); n != 2 {
			t.Errorf("the sandbox holds %d folders, want 2", n)
		}
		// A new Run of the same id (a restarted agent) sees both calls in
		// the ledger and runs neither again.
		again, err := w.controller(t, nil).Run(w.ctx, "run-repeat")
		if err != nil || len(again.History) != 2 {
			t.Fatalf("history after restart: %d calls, %v", len(again.History), err)
		}
		if res, err := again.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"invoices"}`)); err != nil || res.Ran || !res.Done() {
			t.Errorf("after restart: %+v, %v", res, err)
		}
		if n := w.sends["create_folder"].Load(); n != 2 {
			t.Errorf("create_folder sent %d requests, want 2", n)
		}
	})
}

// The agent dies after the tool's effect happened but before its result
// was stored. Resumed, the controller returns the ambiguous state instead
// of running again; once Limbo has reconciled, it reports the effect from
// the ledger. The sandbox holds it exactly once.
func TestCrashAfterEffectResumesFromLedger(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		ctx, die := context.WithCancel(w.ctx)
		run, err := w.controller(t, die).Run(ctx, "run-crash")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Call(ctx, "create_folder", json.RawMessage(`{"name":"contracts"}`)); !errors.Is(err, context.Canceled) {
			t.Fatalf("the dying call: %v", err)
		}
		if n := w.effects(sandbox.KindFolder); n != 1 {
			t.Fatalf("the sandbox holds %d folders after the crash", n)
		}

		// The lease runs out; nobody knows whether the request was sent.
		w.clk.Advance(w.cfg.Destination(sandbox.DestinationName).Lease + time.Second)
		if _, err := w.st.SweepLeases(w.ctx); err != nil {
			t.Fatal(err)
		}
		resumed, err := w.controller(t, nil).Run(w.ctx, "run-crash")
		if err != nil || len(resumed.History) != 1 {
			t.Fatalf("history: %d, %v", len(resumed.History), err)
		}
		res, err := resumed.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"contracts"}`))
		if err != nil || res.Ran || res.State != client.Ambiguous {
			t.Fatalf("resumed before reconciliation: %+v, %v; want ambiguous, not run", res, err)
		}

		rec := reconcile.New(w.st, w.cfg, "reconciler", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if _, err := rec.RunOnce(w.ctx); err != nil {
			t.Fatal(err)
		}
		res, err = resumed.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"contracts"}`))
		if err != nil || res.Ran || !res.Done() || res.Resource == nil {
			t.Fatalf("after reconciliation: %+v, %v; want confirmed from the ledger", res, err)
		}
		if n := w.effects(sandbox.KindFolder); n != 1 {
			t.Errorf("the sandbox holds %d folders, want exactly 1", n)
		}
		if n := w.sends["create_folder"].Load(); n != 1 {
			t.Errorf("create_folder sent %d requests, want 1", n)
		}
	})
}

// An irreversible call waits for approval: it does not run while waiting,
// runs once when approved, and never when refused.
func TestApprovalGatesTheCall(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		run, err := w.controller(t, nil).Run(w.ctx, "run-approval")
		if err != nil {
			t.Fatal(err)
		}
		call := func(to string) *agent.Result {
			t.Helper()
			res, err := run.Call(w.ctx, "send_email", json.RawMessage(`{"to":"`+to+`","subject":"Your invoice"}`))
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		decide := func(opID string, action, who string) {
			t.Helper()
			cs, err := w.st.CasesForOperation(w.ctx, opID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases: %v %d", err, len(cs))
			}
			if _, err := w.st.Decide(w.ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: action, Actor: who, Reason: "checked the recipient"}); err != nil {
				t.Fatal(err)
			}
		}
		res := call("ada@example.com")
		if res.State != client.AwaitingApproval || res.Ran {
			t.Fatalf("before approval: %+v", res)
		}
		decide(res.OperationID, review.DecideApprove, "rita@example.com")
		decide(res.OperationID, review.DecideApprove, "marco@example.com")
		if res = call("ada@example.com"); !res.Ran || !res.Done() {
			t.Fatalf("after approval: %+v", res)
		}
		if res = call("ada@example.com"); res.Ran {
			t.Fatalf("an approved call ran twice")
		}
		refused := call("bob@example.com")
		decide(refused.OperationID, review.DecideRefuse, "rita@example.com")
		if res = call("bob@example.com"); res.Ran || res.State != client.Failed {
			t.Fatalf("after refusal: %+v", res)
		}
		if n := w.effects(sandbox.KindEmail); n != 1 || w.sends["send_email"].Load() != 1 {
			t.Errorf("the sandbox holds %d emails (%d sends), want 1", n, w.sends["send_email"].Load())
		}
	})
}

// A read is repeated by every Run (it changes nothing and the ledger keeps
// no output), and answered from memory within one.
func TestReadRepeatsPerRun(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		run, err := w.controller(t, nil).Run(w.ctx, "run-read")
		if err != nil {
			t.Fatal(err)
		}
		made, err := run.Call(w.ctx, "create_folder", json.RawMessage(`{"name":"read-me"}`))
		if err != nil || !made.Done() {
			t.Fatalf("create: %v %v", made, err)
		}
		args := json.RawMessage(`{"ref":"` + made.Resource.Ref + `"}`)
		first, err := run.Call(w.ctx, "get_resource", args)
		if err != nil || !first.Ran || !first.Done() || !bytes.Contains(first.Output, []byte("read-me")) {
			t.Fatalf("first read: %v %s %v", first, first.Output, err)
		}
		again, err := run.Call(w.ctx, "get_resource", args)
		if err != nil || again.Ran || string(again.Output) != string(first.Output) {
			t.Fatalf("the same read in one Run: %v, %v", again, err)
		}
		later, err := w.controller(t, nil).Run(w.ctx, "run-read")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := later.Call(w.ctx, "get_resource", args); err != nil || !res.Ran || !bytes.Contains(res.Output, []byte("read-me")) {
			t.Fatalf("the read in a new Run: %v, %v", res, err)
		}
		if n := w.sends["get_resource"].Load(); n != 2 {
			t.Errorf("get_resource sent %d requests, want 2", n)
		}
	})
}

// countGets counts the GET requests it carries to Limbo.
type countGets struct{ n *atomic.Int64 }

func (c countGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A Controller whose Poll is 0 waits for an approval polling at the
// default pace: it asked Limbo again at once, over and over, for the
// whole WaitApproval.
func TestWaitPollsAtTheDefaultPace(t *testing.T) {
	t.Parallel()
	w := newWorld(t, store.SQLite)
	var gets atomic.Int64
	c := client.New(w.api, w.tok, client.WithHTTPClient(&http.Client{Transport: countGets{&gets}}))
	ctl, err := agent.New(c, agent.Tool{Name: "send_email", Destination: sandbox.DestinationName,
		Schema: json.RawMessage(`{"type":"object"}`),
		Send: func(context.Context, agent.Attempt) (client.Outcome, json.RawMessage) {
			t.Error("an unapproved call ran")
			return client.Outcome{}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctl.Poll, ctl.WaitApproval = 0, time.Second
	run, err := ctl.Run(w.ctx, "run-poll")
	if err != nil {
		t.Fatal(err)
	}
	before := gets.Load()
	res, err := run.Call(w.ctx, "send_email", json.RawMessage(`{"to":"ada@example.com"}`))
	if err != nil || res.State != client.AwaitingApproval || res.Ran {
		t.Fatalf("call: %v, %v", res, err)
	}
	if n := gets.Load() - before; n > 10 {
		t.Errorf("%d reads of the operation in a 1 s wait, want about 5 (every 200 ms)", n)
	}
}

// TestCallKeepsItsKeyAcrossARecipeChange: a call the ledger holds keeps
// its identity when the action's key recipe changes (a new policy, the
// agent restarted): the same arguments again are the recorded call, not a
// new one. Another recipe derived another key, so a resumed run created
// the folder a second time.
func TestCallKeepsItsKeyAcrossARecipeChange(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newWorld(t, e)
		run, err := w.controller(t, nil).Run(w.ctx, "run-recipe")
		if err != nil {
			t.Fatal(err)
		}
		args := json.RawMessage(`{"name":"reports","note":"for Ada"}`)
		first, err := run.Call(w.ctx, "create_folder", args)
		if err != nil || !first.Ran || !first.Done() {
			t.Fatalf("first call: %+v, %v", first, err)
		}
		// The policy now keys create_folder on its whole arguments.
		d := w.cfg.Destinations[sandbox.DestinationName]
		ac := d.Actions["create_folder"]
		ac.KeyFields = []string{}
		d.Actions["create_folder"] = ac
		again, err := w.controller(t, nil).Run(w.ctx, "run-recipe")
		if err != nil {
			t.Fatal(err)
		}
		op, err := w.c.Get(w.ctx, first.OperationID)
		if err != nil {
			t.Fatal(err)
		}
		if k := again.Key("create_folder", args); k != op.Key {
			t.Errorf("the recorded call's key is now %s, want %s", k, op.Key)
		}
		res, err := again.Call(w.ctx, "create_folder", args)
		if err != nil || res.Ran || res.OperationID != first.OperationID {
			t.Errorf("the same call after the recipe changed: %+v, %v; want %s's recorded result", res, err, first.OperationID)
		}
		if n := w.effects(sandbox.KindFolder); n != 1 {
			t.Errorf("the sandbox holds %d folders, want 1", n)
		}
	})
}
