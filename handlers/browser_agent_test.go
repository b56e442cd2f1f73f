package handlers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/examples/agent/release"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBrowserAgentApproval (issue 15): the example agent's irreversible
// notification waits for approval; approved in the console by two
// reviewers, the resumed run sends it once; refused, or left until the
// request expires, it never runs — against the sandbox's truth.
func TestBrowserAgentApproval(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		sb := sandbox.New(sandbox.Options{Seed: 1})
		sbSrv := httptest.NewServer(sb.Handler())
		t.Cleanup(func() { sbSrv.Close(); sb.Close() })
		cfg, err := release.Config(sbSrv.URL)
		if err != nil {
			t.Fatal(err)
		}
		clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk, cfg: cfg})
		ctx := context.Background()
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "reviewer2@example.com", Password: browserPassword,
			Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		tok, err := st.CreateToken(ctx, review.Operator("cli:ops"), "acme", "release agent")
		if err != nil {
			t.Fatal(err)
		}
		a := &release.Agent{Limbo: client.New(srv.URL, tok), Sandbox: sbSrv.URL, HTTP: &http.Client{Timeout: 2 * time.Second}}
		emails := func() int {
			n := 0
			for _, ef := range sb.Truth() {
				if ef.Kind == sandbox.KindEmail {
					n++
				}
			}
			return n
		}
		// notifyCase runs (or resumes) a run until it waits on the
		// notification, and returns the notification's case.
		notifyCase := func(runID string) string {
			t.Helper()
			rep, err := a.Run(ctx, runID, "v1.2")
			if err != nil || !strings.Contains(rep.Waiting, "notify_team is awaiting_approval") {
				t.Fatalf("%s: %v\n%s want it waiting for the notification's approval", runID, err, rep)
			}
			ops, _, err := st.ListOperations(ctx, "acme", store.OperationFilter{SourceRef: runID, State: review.AwaitingApproval}, "", 10)
			if err != nil || len(ops) != 1 || ops[0].Action != "notify_team" {
				t.Fatalf("%s awaiting approval: %+v, %v", runID, ops, err)
			}
			cs, err := st.CasesForOperation(ctx, ops[0].ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases: %+v, %v", cs, err)
			}
			return cs[0].ID
		}
		approved, refused, lapsed := notifyCase("run-approved"), notifyCase("run-refused"), notifyCase("run-lapsed")
		if n := emails(); n != 0 {
			t.Fatalf("%d emails before any approval", n)
		}

		browser := startChromium(t)
		decide := func(b *browserTab, caseID, action, reason string) {
			b.t.Helper()
			b.open("/cases/" + caseID)
			decideIn(b, action, reason)
		}
		r1 := openBrowserTab(t, browser, srv.URL, "reviewer1")
		r1.login("reviewer@example.com")
		r1.open("/cases/" + approved)
		r1.waitText(".approval", "2 different reviewers approve it")
		r1.waitText("pre.canonical", `"subject":"Release notes v1.2 are out"`)
		r1.screenshotWidths("agent-approval-case")
		decideIn(r1, review.DecideApprove, "the notes are published; tell the team")
		r1.waitText("#decision .decided", "Approve by reviewer@example.com")

		r2 := openBrowserTab(t, browser, srv.URL, "reviewer2")
		r2.login("reviewer2@example.com")
		decide(r2, approved, review.DecideApprove, "checked the notes: send it")
		r2.waitText("#decision", "(applied)")
		decide(r2, refused, review.DecideRefuse, "not this release: do not announce")
		r2.waitText("#decision", "Refuse by reviewer2@example.com")
		r2.noConsoleErrors()

		rep, err := a.Run(ctx, "run-approved", "v1.2")
		if err != nil || !rep.Done {
			t.Fatalf("the approved run: %v\n%s want it done", err, rep)
		}
		if n := emails(); n != 1 {
			t.Fatalf("%d emails after the approved run, want 1", n)
		}
		rep, err = a.Run(ctx, "run-refused", "v1.2")
		if err != nil || rep.Done || !strings.Contains(rep.Waiting, "notify_team is failed") {
			t.Fatalf("the refused run: %v\n%s want the notification failed, never sent", err, rep)
		}
		clk.Advance(cfg.Destination(release.ToolsDestination).Actions["notify_team"].ApprovalTimeout + time.Minute)
		if _, err := st.ExpireDeadlines(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err = a.Run(ctx, "run-lapsed", "v1.2")
		if err != nil || rep.Done || !strings.Contains(rep.Waiting, "notify_team is failed") {
			t.Fatalf("the lapsed run: %v\n%s want the notification failed, never sent", err, rep)
		}
		r2.login("reviewer2@example.com") // eight hours on, the session has ended
		r2.open("/cases/" + lapsed)
		r2.waitText("section.summary", "Resolved: Expired by system:deadline-sweeper")
		// The approved run again: nothing more runs.
		if rep, err := a.Run(ctx, "run-approved", "v1.2"); err != nil || !rep.Done {
			t.Fatalf("the approved run again: %v\n%s", err, rep)
		}
		if n := emails(); n != 1 {
			t.Errorf("the sandbox holds %d emails, want exactly the approved one", n)
		}
	})
}

// decideIn submits the decision form of the case page b has open.
func decideIn(b *browserTab, action, reason string) {
	b.t.Helper()
	b.do("deciding "+action,
		chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="`+action+`"]`)),
		chromedp.SendKeys(chromedp.ID("reason"), reason),
		chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
}
