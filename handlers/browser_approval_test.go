package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBrowserApproval (issue 14, part 1): an irreversible send whose
// policy requires approval waits; the reviewer who created the token that
// registered it may not approve it; two other reviewers approve in the
// console; the integrator's client.WaitDecision returns, and the attempt
// is granted and runs once. A refused send and one whose request lapsed
// never run.
func TestBrowserApproval(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		cfg := &review.Config{Destinations: map[string]review.Destination{
			"mail": {Lease: 30 * time.Second, Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true, ApprovalTimeout: 4 * time.Hour}}},
		}}
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk, cfg: cfg})
		ctx := context.Background()
		for _, who := range []string{"reviewer2@example.com", "reviewer3@example.com"} {
			if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: who, Password: browserPassword, Role: review.RoleReviewer,
				Scope: review.Scope{All: true}}); err != nil {
				t.Fatal(err)
			}
		}
		// reviewer@example.com set up the integration: they asked for
		// what its token registers.
		tok, err := st.CreateToken(ctx, review.Operator("reviewer@example.com"), "acme", "mailer")
		if err != nil {
			t.Fatal(err)
		}
		var sent atomic.Int32 // what reached the mail provider
		provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sent.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"msg-1"}`))
		}))
		t.Cleanup(provider.Close)
		integrator := client.New(srv.URL, tok)
		// run is the integration: register, wait for the people, send if approved.
		run := func(ref string) (opID string, done <-chan error) {
			op, _, err := integrator.Register(ctx, client.Registration{SourceRef: ref, LogicalVersion: "1", Action: "send_email",
				Destination: "mail", Risk: client.RiskIrreversible, Flags: []client.Flag{client.FlagIrreversible},
				Payload: json.RawMessage(`{"subject":"Contract ` + ref + `","to":"legal@example.com"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if op.State != client.AwaitingApproval {
				t.Fatalf("%s registered %s, want awaiting_approval", ref, op.State)
			}
			ch := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				d, err := integrator.WaitDecision(wctx, op.ID)
				if err != nil {
					ch <- err
					return
				}
				if d.Action != review.DecideApprove {
					ch <- errors.New("decided " + d.Action)
					return
				}
				_, err = integrator.Do(wctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
					req, err := client.NewAttemptRequest(ctx, g, http.MethodPost, provider.URL, []byte(`{}`))
					if err != nil {
						return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
					}
					_, o := client.SendAttempt(http.DefaultClient, req)
					return o
				})
				ch <- err
			}()
			return op.ID, ch
		}
		caseOf := func(opID string) string {
			cs, err := st.CasesForOperation(ctx, opID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases of %s: %+v, %v", opID, cs, err)
			}
			return cs[0].ID
		}
		decide := func(b *browserTab, action, reason string) {
			b.t.Helper()
			b.do("deciding "+action,
				chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="`+action+`"]`)),
				chromedp.SendKeys(chromedp.ID("reason"), reason),
				chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		}

		approvedID, approved := run("c-583")
		refusedID, refused := run("c-584")
		lapsedID, lapsed := run("c-585")
		browser := startChromium(t)

		r1 := openBrowserTab(t, browser, srv.URL, "reviewer1")
		r1.login("reviewer@example.com")
		r1.open("/?reason=approval_required")
		if got := r1.queueCases(); len(got) != 3 {
			r1.fatalf("the approval_required filter lists %v, want the three requests", got)
		}
		r1.open("/cases/" + caseOf(approvedID))
		r1.waitText(".approval", "2 different reviewers approve it")
		r1.waitText(".approval", "none yet of 2")
		r1.waitText(".approval", "Requested by")
		r1.waitText("pre.canonical", `{"subject":"Contract c-583","to":"legal@example.com"}`)
		r1.screenshotWidths("approval-case")
		r1.axe("approval case")
		decide(r1, review.DecideApprove, "I set this up myself")
		r1.waitText("#decision .error[role=alert]", "created the API token")

		r2 := openBrowserTab(t, browser, srv.URL, "reviewer2")
		r2.login("reviewer2@example.com")
		r2.open("/cases/" + caseOf(approvedID))
		decide(r2, review.DecideApprove, "the contract is signed; send it")
		r2.waitText("#decision .decided", "Approve by reviewer2@example.com")
		r2.open("/cases/" + caseOf(approvedID))
		r2.waitText(".approval", "1 of 2, by reviewer2@example.com — one more, different reviewer must approve")
		select {
		case err := <-approved:
			r2.fatalf("the integration went on after one approval of two: %v", err)
		default:
		}

		r3 := openBrowserTab(t, browser, srv.URL, "reviewer3")
		r3.login("reviewer3@example.com")
		r3.open("/cases/" + caseOf(approvedID))
		decide(r3, review.DecideApprove, "checked the recipient: send it")
		r3.waitText("#decision", "(applied)")
		r3.open("/cases/" + caseOf(approvedID))
		r3.waitText("section.summary", "Resolved: Approve by reviewer3@example.com")
		if err := <-approved; err != nil {
			r3.fatalf("the approved send: %v", err)
		}
		if op, err := st.OperationByID(ctx, approvedID, nil); err != nil || op.State != review.Confirmed || len(op.Attempts) != 1 {
			r3.fatalf("the approved send: %+v, %v; want confirmed after one attempt", op, err)
		}

		r3.open("/cases/" + caseOf(refusedID))
		decide(r3, review.DecideRefuse, "wrong recipient: do not send")
		r3.waitText("#decision", "Refuse by reviewer3@example.com")
		if err := <-refused; err == nil || err.Error() != "decided refuse" {
			r3.fatalf("the refused send: %v, want the refusal", err)
		}

		clk.Advance(4 * time.Hour)
		if _, err := st.ExpireDeadlines(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-lapsed; !errors.Is(err, client.ErrNoDecision) {
			r3.fatalf("the lapsed send: %v, want ErrNoDecision", err)
		}
		r3.login("reviewer3@example.com") // four hours on, the session has ended
		r3.open("/cases/" + caseOf(lapsedID))
		r3.waitText("section.summary", "Resolved: Expired by system:deadline-sweeper")
		r3.waitText("section.summary", "no approval was given before the request expired")
		r3.noConsoleErrors()
		if n := sent.Load(); n != 1 {
			t.Errorf("the provider received %d sends, want exactly the approved one", n)
		}
		for _, id := range []string{refusedID, lapsedID} {
			if op, err := st.OperationByID(ctx, id, nil); err != nil || op.State != review.Failed || len(op.Attempts) != 0 {
				t.Errorf("%s: %+v, %v; want failed, never attempted", id, op, err)
			}
		}
	})
}
