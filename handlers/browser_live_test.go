package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// liveInstance is one Limbo console: its store, handlers and server.
type liveInstance struct {
	st  *store.Store
	h   *handlers.Handlers
	srv *httptest.Server
}

// liveInstances starts n console servers over one fresh database, each
// with its own store (pool, listener) and handlers, as n `limbo serve`
// processes sharing a database would be; the console's users are added
// once. Sessions live in the database, so a cookie works on any of them.
func liveInstances(t *testing.T, e store.Engine, n int) []*liveInstance {
	t.Helper()
	ctx := context.Background()
	u := storetest.URL(t, e)
	var out []*liveInstance
	for i := range n {
		st, err := store.Open(ctx, u, store.Options{AuditKey: storetest.AuditKey, MaxConns: storetest.MaxConns, Resolve: storetest.Resolver(nil)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if i == 0 {
			if err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			for _, r := range review.AllRoles() {
				if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: string(r) + "@example.com", Password: browserPassword,
					Role: r, Scope: review.Scope{All: true}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		h := handlers.New(st, nil)
		h.Console = handlers.NewConsole(make([]byte, 64), make([]byte, 32), false, store.SessionPolicy{})
		srv := httptest.NewServer(handlers.NewServer(h))
		t.Cleanup(srv.Close)
		out = append(out, &liveInstance{st: st, h: h, srv: srv})
	}
	return out
}

// waitWithin polls a JavaScript condition until it holds, failing once d
// has passed: the assertion is that it holds within d.
func (b *browserTab) waitWithin(d time.Duration, cond, what string) time.Duration {
	b.t.Helper()
	start := time.Now()
	var last error
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+cond+")"))
		if err == nil && ok {
			return time.Since(start)
		}
		last = err
		if b.ctx.Err() != nil || time.Since(start) > d {
			if last == nil {
				last = errors.New("still false")
			}
			b.fatalf("%s did not happen within %s (%s): %v", what, d, cond, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// The case page's banner says the case was decided elsewhere, and every
// control of its decision forms is disabled.
const (
	decidedBanner = `(document.querySelector("#live-case") || {innerText: ""}).innerText.includes("decided elsewhere")`
	formsDisabled = `document.querySelectorAll("#decision form").length > 0 &&
		Array.from(document.querySelectorAll("#decision form button, #decision form textarea, #decision form input:not([type=hidden])")).every(c => c.disabled)`
	streamOpen = `document.documentElement.dataset.live === "open"`
)

// TestBrowserLiveAcrossInstances: a reviewer has a case page open on
// instance A; another reviewer decides the case through instance B; within
// 2 s A's page says so (role=alert) and its decision form is disabled.
// Likewise a queue open on A shows, within 2 s, a case opened through B.
// On PostgreSQL A and B are two servers, each with its own store and
// LISTEN connection, on one database; on SQLite (one process) they are one
// instance, its in-process broadcaster. Then, on SQLite, the fallback:
// with the event stream refused (503) the case page polls and shows the
// banner all the same.
func TestBrowserLiveAcrossInstances(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		n := 2
		if e == store.SQLite {
			n = 1
		}
		inst := liveInstances(t, e, n)
		a, b := inst[0], inst[len(inst)-1]
		caseID := needsReview(t, a.st, "live-doc-1")
		browser := startChromium(t)

		rev := openBrowserTab(t, browser, a.srv.URL, "reviewer on A")
		rev.login("reviewer@example.com")
		rev.open("/cases/" + caseID)
		rev.waitText("h1", caseID)
		rev.waitFor(streamOpen, "the event stream open")
		rev.waitFor(`document.querySelector("form.decision") !== null`, "the decision form offered")

		// Another reviewer decides through B, as its form would.
		sup := newBrowser(t, b.srv.URL)
		sup.login("support@example.com")
		if code, body, _ := sup.decide(caseID, url.Values{"action": {"fail"}, "reason": {"decided on the other instance"}}); code != http.StatusSeeOther {
			t.Fatalf("deciding through B: %d %.300s", code, body)
		}
		took := rev.waitWithin(2*time.Second, decidedBanner+" && "+formsDisabled, "the 'decided elsewhere' banner and the disabled form on A")
		t.Logf("%s: banner and disabled form %s after the decision committed", e, took.Round(time.Millisecond))
		if role := evalJS[string](rev, `document.querySelector("#live-case").getAttribute("role")`); role != "alert" {
			rev.fatalf("the banner's role is %q, want alert", role)
		}
		rev.noConsoleErrors()
		rev.screenshot("decided-elsewhere")
		rev.axe("case decided elsewhere")

		// The queue on A shows a case opened through B.
		rev.open("/")
		rev.waitFor(streamOpen, "the event stream open on the queue")
		if got := rev.queueCases(); slices.Contains(got, caseID) {
			rev.fatalf("the decided case is still in the queue: %v", got)
		}
		newID := needsReview(t, b.st, "live-doc-2")
		took = rev.waitWithin(2*time.Second, fmt.Sprintf(`Array.from(document.querySelectorAll("table.queue tbody tr.row td:nth-child(2) a"), a => a.textContent.trim()).includes(%s)`, jsString(newID)),
			"the case opened through B in A's queue")
		t.Logf("%s: new case in the queue %s after it was opened", e, took.Round(time.Millisecond))
		rev.noConsoleErrors()

		if e != store.SQLite {
			return
		}
		// The fallback: no stream (refused, as when the listener is down),
		// the case page polls /cases/:id/live.
		a.h.EndStreams()
		other := needsReview(t, a.st, "live-doc-3")
		rev.open("/cases/" + other)
		rev.waitFor(`document.documentElement.dataset.live === "polling"`, "the page polling, the stream refused")
		if code, body, _ := sup.decide(other, url.Values{"action": {"fail"}, "reason": {"decided while the page polls"}}); code != http.StatusSeeOther {
			t.Fatalf("deciding: %d %.300s", code, body)
		}
		took = rev.waitWithin(8*time.Second, decidedBanner+" && "+formsDisabled, "the banner by polling")
		t.Logf("polling fallback: banner %s after the decision", took.Round(time.Millisecond))
		rev.noConsoleErrors()
	})
}
