package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBrowserOperations: the operations browser lists a settled operation
// beside an open one; pasting an operation id jumps to its page; a key
// prefix finds the operation; a source ref typed in another case, or only
// its middle, finds it; the state tabs count and filter; the page passes
// axe and fits a 390 px screen. Beforehand, over HTTP: a reader scoped to
// another tenant sees none of it, and input the filters cannot take is a
// 400 page saying so.
func TestBrowserOperations(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "Run-7F3A/Step-2", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: json.RawMessage(`{"name":"x"}`), Key: "invoice-2030-000017", Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "fld-77", Kind: "folder", Version: "1"}}, "test")
		if err != nil || res.Operation.State != review.Confirmed {
			t.Fatalf("settling: %v %+v", err, res)
		}
		openOp, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "folder-9", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-9"}`), Actor: "test"}, "fld-1", "fld-2")

		// Over HTTP: scope, refusals.
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "elsewhere@example.com", Password: browserPassword,
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"globex"}}}); err != nil {
			t.Fatal(err)
		}
		other := newBrowser(t, srv.URL)
		other.login("elsewhere@example.com")
		if code, body := other.get("/operations"); code != 200 || strings.Contains(body, op.ID) || !strings.Contains(body, "No operations yet") {
			t.Errorf("another tenant's reader: %d, lists acme's operation: %v", code, strings.Contains(body, op.ID))
		}
		if code, body := other.get("/operations?q=" + op.ID); code != 200 || strings.Contains(body, "/operations/"+op.ID) {
			t.Errorf("another tenant's reader searching acme's id: %d", code)
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		for _, q := range []string{"state=bogus", "risk=bogus", "has_case=maybe", "within=soon", "after=nonsense",
			"q=" + url.QueryEscape("a\x00b"), "q=%FF%FE", "tenant=%00"} {
			code, body := rev.get("/operations?" + q)
			if code != http.StatusBadRequest || !strings.Contains(body, `role="alert"`) {
				t.Errorf("/operations?%s: %d, want a 400 page saying why", q, code)
			}
		}
		if code, _ := rev.get("/operations?q=" + op.ID); code != http.StatusSeeOther {
			t.Errorf("an exact id: %d, want 303", code)
		}

		browser := startChromium(t)
		b := openBrowserTab(t, browser, srv.URL, "support")
		b.login("support@example.com")
		rows := func() []string {
			return evalJS[[]string](b, `Array.from(document.querySelectorAll("table.operations tbody td.op-id a"), a => a.textContent.trim())`)
		}
		search := func(q string) {
			b.t.Helper()
			b.open("/operations")
			b.do("typing "+q, chromedp.SendKeys(chromedp.CSS(`form.filters input[name="q"]`), q))
			b.follow("searching "+q, chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		}

		// Settled and open, newest first, the open one linking its case.
		b.open("/operations")
		if got := rows(); !slices.Equal(got, []string{openOp, op.ID}) {
			b.fatalf("the browser lists %v, want %v", got, []string{openOp, op.ID})
		}
		if !evalJS[bool](b, `document.querySelector('table.operations a[href="/cases/`+caseID+`"]') !== null`) {
			b.fatalf("no link to the open case %s", caseID)
		}
		b.waitText("table.operations", "Confirmed")
		b.axe("operations")

		// An id jumps to its operation.
		search(op.ID)
		if p := evalJS[string](b, `location.pathname`); p != "/operations/"+op.ID {
			b.fatalf("searching the id landed on %s", p)
		}
		// A key prefix, a source ref in another case, its middle.
		for _, q := range []string{"invoice-2030", "run-7f3a/STEP-2", "7f3a/st"} {
			search(q)
			if got := rows(); !slices.Equal(got, []string{op.ID}) {
				b.fatalf("searching %q lists %v, want %s", q, got, op.ID)
			}
		}
		search("no-such-thing")
		b.waitText("p.empty", "No operation matches")

		// The state tabs: counts, apart from their labels (they read
		// "Confirmed1" once, to the eye and to a screen reader), and a tab
		// narrows the list.
		b.open("/operations")
		b.waitText(`nav.state-tabs a[href="/operations?state=confirmed"]`, "Confirmed 1")
		b.waitText(`nav.state-tabs a[href="/operations?state=needs_review"]`, "Needs review 1")
		b.waitText(`nav.state-tabs a[aria-current="page"]`, "All 2")
		b.follow("choosing confirmed", chromedp.Click(chromedp.CSS(`nav.state-tabs a[href="/operations?state=confirmed"]`)))
		if got := rows(); !slices.Equal(got, []string{op.ID}) {
			b.fatalf("confirmed lists %v, want only %s", got, op.ID)
		}
		b.waitText(`nav.state-tabs a[aria-current="page"]`, "Confirmed")
		b.axe("operations filtered")

		// A phone's width: nothing wider than the screen.
		b.open("/operations")
		b.screenshotWidths("operations")
		b.fitsWidth("operations", 390)
		b.noConsoleErrors()
	})
}
