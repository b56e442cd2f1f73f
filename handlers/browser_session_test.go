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
