package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/limbo-dev/limbo/client"
)

// An integration's whole loop by hand: register the operation, ask for an
// attempt, send with the grant's key, report what happened.
func Example() {
	limbo := startLimbo() // a real Limbo on 127.0.0.1 (limbo_example_test.go)
	defer limbo.Close()
	ctx := context.Background()
	c := client.New(limbo.URL, limbo.Token, client.WithUserAgent("billing/1.2"))

	op, created, err := c.Register(ctx, client.Registration{
		SourceRef: "invoice-42", LogicalVersion: "1", Action: "create_folder", Destination: "files",
		Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"name":"invoice-42"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("registered:", op.State, created)

	g, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("attempt", g.N, "key in", g.KeyHeader)
	// … send the request with g.Key in g.KeyHeader; the destination answered 201 …
	res, err := c.ReportOutcome(ctx, op.ID, g.N, client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend,
		HTTPStatus: 201, Resource: &client.ResourceRef{Ref: "folder-7", Kind: "folder"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next:", res.Next, res.Operation.State, res.Operation.Resource.Ref)

	// The same key with another payload is refused.
	_, _, err = c.Register(ctx, client.Registration{
		SourceRef: "invoice-42", LogicalVersion: "1", Action: "create_folder", Destination: "files",
		Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"name":"invoice-43"}`),
	})
	fmt.Println("payload mismatch:", client.IsProblem(err, client.ProblemPayloadMismatch))
	// Output:
	// registered: pending true
	// attempt 1 key in Idempotency-Key
	// next: done confirmed folder-7
	// payload mismatch: true
}

// Do runs the loop for one operation: it asks for attempts, calls send for
// each, reports its outcome, and waits as Limbo says between attempts.
func ExampleClient_Do() {
	limbo := startLimbo()
	defer limbo.Close()
	ctx := context.Background()
	c := client.New(limbo.URL, limbo.Token)

	// The destination: fails once with a 503, then creates the folder.
	calls := 0
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"folder-9"}`)
	}))
	defer dest.Close()

	op, _, err := c.Register(ctx, client.Registration{
		SourceRef: "invoice-43", LogicalVersion: "1", Action: "create_folder", Destination: "files",
		Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"name":"invoice-43"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
		req, err := client.NewAttemptRequest(ctx, g, http.MethodPost, dest.URL+"/folders", op.Payload)
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
		}
		resp, o := client.SendAttempt(dest.Client(), req)
		if resp != nil {
			defer resp.Body.Close()
			var body struct{ ID string }
			if o.Result == client.ResultSuccess && json.NewDecoder(resp.Body).Decode(&body) == nil {
				o.Resource = &client.ResourceRef{Ref: body.ID, Kind: "folder"}
			}
		}
		fmt.Println("attempt", g.N, "answered", o.HTTPStatus)
		return o
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Next, res.Operation.State, res.Operation.Resource.Ref)
	// Output:
	// attempt 1 answered 503
	// attempt 2 answered 201
	// done confirmed folder-9
}

// Reading the decisions feed: every reviewer decision on the tenant's
// operations, in order. The feed's Cursor is where to resume next time.
func ExampleDecisionFeed() {
	limbo := startLimbo()
	defer limbo.Close()
	ctx := context.Background()
	c := client.New(limbo.URL, limbo.Token)

	for _, to := range []string{"ana@example.com", "bo@example.com"} {
		op, _, err := c.Register(ctx, client.Registration{
			SourceRef: "newsletter-" + to, LogicalVersion: "1", Action: "send_email", Destination: "mail",
			Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"to":"` + to + `"}`),
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(to, op.State)
		limbo.approve(op.ID) // a reviewer, in the console
	}

	feed := c.DecisionFeed("") // "" reads from the first decision; pass a saved Cursor to resume
	for d, err := range feed.All(ctx) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Action, d.Status, d.FromState, "→", d.ToState, "by", d.Actor)
	}
	saved := feed.Cursor()

	// Later: nothing new since the saved cursor.
	n := 0
	for _, err := range c.Decisions(ctx, saved) {
		if err != nil {
			fmt.Println(err)
			return
		}
		n++
	}
	fmt.Println("cursor saved:", saved != "", "new since:", n)
	// Output:
	// ana@example.com awaiting_approval
	// bo@example.com awaiting_approval
	// approve applied awaiting_approval → pending by reviewer@example.com
	// approve applied awaiting_approval → pending by reviewer@example.com
	// cursor saved: true new since: 0
}

// The same loop in two calls: the registration asks for its first attempt.
// When none may start yet, the operation is registered all the same and the
// error says why; registering again asks again.
func ExampleClient_RegisterAndAttempt() {
	limbo := startLimbo()
	defer limbo.Close()
	ctx := context.Background()
	c := client.New(limbo.URL, limbo.Token)

	reg := client.Registration{
		SourceRef: "invoice-77", LogicalVersion: "1", Action: "create_folder", Destination: "files",
		Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"name":"invoice-77"}`),
	}
	op, created, g, err := c.RegisterAndAttempt(ctx, reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("registered:", created, "attempt", g.N)

	// Asked again while attempt 1 is in flight: registered, no second attempt.
	_, created, _, err = c.RegisterAndAttempt(ctx, reg)
	fmt.Println("again:", created, client.IsProblem(err, client.ProblemNotAttemptable))

	res, err := c.ReportOutcome(ctx, op.ID, g.N, client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next:", res.Next, res.Operation.State)
	// Output:
	// registered: true attempt 1
	// again: false true
	// next: done confirmed
}
