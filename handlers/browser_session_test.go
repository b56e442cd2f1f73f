package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBrowserTypingKeepsTheSessionAlive: a reviewer who takes 40 minutes
// over a reason — longer than the 30-minute idle limit, with only the
// page's own polls reaching the server meanwhile — is still signed in when
// they press Decide: typing sends the page's "still here", which counts as
// use. The server's clock is moved, not waited for.
func TestBrowserTypingKeepsTheSessionAlive(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk})
		caseID := needsReview(t, st, "typing-1")
		browser := startChromium(t)
		rev := openBrowserTab(t, browser, srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		rev.open("/cases/" + caseID)
		clk.Advance(20 * time.Minute) // reading the case
		rev.do("choosing fail and starting the reason",
			chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="fail"]`)),
			chromedp.SendKeys(chromedp.ID("reason"), "the provider's support confirmed"))
		rev.waitFor(`document.documentElement.getAttribute("data-still-here") === "1"`, "the page's still-here answered")
		clk.Advance(20 * time.Minute) // still writing: 40 minutes since the page was opened
		rev.do("finishing the reason and deciding",
			chromedp.SendKeys(chromedp.ID("reason"), " that nothing was created"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision .decided", "reviewer@example.com")
		if p := evalJS[string](rev, `location.pathname`); p != "/cases/"+caseID {
			rev.fatalf("after deciding: at %s, want the case", p)
		}
		c, err := st.GetCase(context.Background(), caseID, review.Scope{All: true}.List())
		if err != nil {
			t.Fatal(err)
		}
		if c.Status == store.CaseOpen {
			rev.fatalf("the case is still open after Decide: the decision was not taken")
		}
	})
}

// TestBrowserDecisionKeptAcrossSignIn: a decision pressed after the
// session ended is not executed; after signing in again the reviewer is
// back on the case with the choice and the reason they wrote filled in,
// and a note saying why, and still nothing is decided until they press
// Decide again. The case changed while they were away, so that press is
// refused as stale (the versions the form was written against came back
// with it), what they wrote staying in the form; the next one decides.
// Another user signing in in that tab never sees it.
func TestBrowserDecisionKeptAcrossSignIn(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk})
		caseID := needsReview(t, st, "kept-1")
		other := needsReview(t, st, "kept-2")
		all := review.Scope{All: true}.List()
		stillOpen := func(b *browserTab, when string) {
			t.Helper()
			c, err := st.GetCase(ctx, caseID, all)
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != store.CaseOpen {
				b.fatalf("%s: the case is %s, want open (nothing decided without a press)", when, c.Status)
			}
		}
		const reason = "the provider's support confirmed that nothing was created"
		browser := startChromium(t)
		rev := openBrowserTab(t, browser, srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		rev.open("/cases/" + caseID)
		written := evalJS[string](rev, `document.querySelector('form.decision input[name="version"]').value`)
		rev.do("choosing fail and writing the reason",
			chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="fail"]`)),
			chromedp.SendKeys(chromedp.ID("reason"), reason))
		clk.Advance(31 * time.Minute) // away from the keyboard: the session idles out
		rev.do("pressing Decide", chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitFor(`location.pathname === "/login"`, "the sign-in form")
		stillOpen(rev, "after pressing Decide signed out")
		// Meanwhile someone claims the case and lets it go: it moved on.
		if _, err := st.ClaimCase(ctx, caseID, review.Operator("ops"), all); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReleaseCase(ctx, caseID, review.Operator("ops"), all); err != nil {
			t.Fatal(err)
		}
		rev.signInHere("reviewer@example.com")
		if p := evalJS[string](rev, `location.pathname`); p != "/cases/"+caseID {
			rev.fatalf("after signing in: at %s, want the case", p)
		}
		rev.waitText("#decision [data-draft-note]", "Your session had ended, so this decision was not sent.")
		if got := evalJS[string](rev, `document.getElementById("reason").value`); got != reason {
			rev.fatalf("the reason after signing in: %q, want %q", got, reason)
		}
		if !evalJS[bool](rev, `document.querySelector('form.decision input[name="action"][value="fail"]').checked`) {
			rev.fatalf("the choice (fail) is not checked after signing in")
		}
		if got := evalJS[string](rev, `document.querySelector('form.decision input[name="version"]').value`); got != written {
			rev.fatalf("the form's case version after signing in: %s, want %s (the one the reason was written against)", got, written)
		}
		stillOpen(rev, "after signing in, before pressing")
		rev.do("pressing Decide", chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision .error", "claimed, released or re-assessed since")
		stillOpen(rev, "after a stale press")
		if got := evalJS[string](rev, `document.getElementById("reason").value`); got != reason {
			rev.fatalf("the reason after the stale refusal: %q, want %q", got, reason)
		}
		rev.do("pressing Decide again", chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision .decided", "reviewer@example.com")
		if c, err := st.GetCase(ctx, caseID, all); err != nil || c.Status == store.CaseOpen {
			rev.fatalf("after Decide: %+v, %v; want the case decided", c, err)
		}

		// The same on another case, but another user signs in in that tab:
		// they never see the first one's reason.
		rev.open("/cases/" + other)
		rev.do("writing a reason on another case",
			chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="fail"]`)),
			chromedp.SendKeys(chromedp.ID("reason"), "my own words"))
		clk.Advance(31 * time.Minute)
		rev.do("pressing Decide", chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitFor(`location.pathname === "/login"`, "the sign-in form")
		rev.signInHere("manager@example.com")
		if got := evalJS[string](rev, `(document.getElementById("reason") || {value: ""}).value`); got != "" {
			rev.fatalf("another user found the first one's reason: %q", got)
		}
		if n := evalJS[int](rev, `document.querySelectorAll("[data-draft-note]").length`); n != 0 {
			rev.fatalf("another user sees a note about the first one's decision")
		}
	})
}

// TestBrowserBulkFormKeptAcrossSignIn: a form sent without htmx (the bulk
// decision under the queue) after the session idled out is not lost:
// signed in again, the reviewer is back on the queue with the action and
// the reason filled in again, the form open, and a note; nothing is sent
// until they send it. Before, the page came back empty. Another user
// signing in in that tab never sees what was written.
func TestBrowserBulkFormKeptAcrossSignIn(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk})
		needsReview(t, st, "bulk-kept-1")
		const reason = "the provider confirmed none of these was created"
		browser := startChromium(t)
		rev := openBrowserTab(t, browser, srv.URL, "reviewer")
		fillAndExpire := func(b *browserTab, words string) {
			t.Helper()
			b.open("/?tenant=acme")
			b.do("filling the bulk decision",
				chromedp.Click(chromedp.CSS(`details.bulk summary`)),
				chromedp.SetValue(chromedp.CSS(`#bulk-action`), "fail"),
				chromedp.SendKeys(chromedp.ID("bulk-reason"), words))
			clk.Advance(31 * time.Minute) // the session idles out
			b.do("sending it", chromedp.Click(chromedp.CSS(`details.bulk button[type="submit"]`)))
			b.waitFor(`location.pathname === "/login"`, "the sign-in form")
		}
		rev.login("reviewer@example.com")
		fillAndExpire(rev, reason)
		rev.signInHere("reviewer@example.com")
		if p := evalJS[string](rev, `location.pathname + location.search`); p != "/?tenant=acme" {
			rev.fatalf("after signing in: at %s, want the queue the form was on", p)
		}
		rev.waitText("details.bulk [data-form-restored]", "Your session had ended, so this form was not sent.")
		if got := evalJS[string](rev, `document.getElementById("bulk-reason").value`); got != reason {
			rev.fatalf("the reason after signing in: %q, want %q", got, reason)
		}
		if got := evalJS[string](rev, `document.getElementById("bulk-action").value`); got != "fail" {
			rev.fatalf("the action after signing in: %q, want fail", got)
		}
		if !evalJS[bool](rev, `document.querySelector("details.bulk").open`) {
			rev.fatalf("the bulk form is folded away after signing in")
		}
		if got := evalJS[string](rev, `location.pathname`); got != "/" {
			rev.fatalf("something was sent without a press: at %s", got)
		}
		rev.follow("sending it again", chromedp.Click(chromedp.CSS(`details.bulk button[type="submit"]`)))
		rev.waitText("main h1", "Bulk decision")
		if n := evalJS[int](rev, `document.querySelectorAll("[data-form-restored]").length`); n != 0 {
			rev.fatalf("the note is shown again once the form was answered")
		}

		// Another user signing in in that tab never sees it.
		fillAndExpire(rev, "my own words")
		rev.signInHere("manager@example.com")
		if got := evalJS[string](rev, `(document.getElementById("bulk-reason") || {value: ""}).value`); got != "" {
			rev.fatalf("another user found the first one's reason: %q", got)
		}
		if n := evalJS[int](rev, `document.querySelectorAll("[data-form-restored]").length`); n != 0 {
			rev.fatalf("another user sees a note about the first one's form")
		}
	})
}
