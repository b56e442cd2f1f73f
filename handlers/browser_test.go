package handlers_test

// Browser tests: the console driven through chromedp by Debian's Chromium,
// against a real server (httptest) on a real database, on every engine.
//
// Chromium is found at LIMBO_CHROMIUM, else /usr/bin/chromium. Without it
// the tests skip with a message, unless LIMBO_REQUIRE_BROWSER=1 (CI), where
// a missing browser is a failure. Screenshots (PNG) are written under
// LIMBO_ARTIFACTS, default the test's temporary directory; a failing step
// also leaves a screenshot there. axe-core (testdata/axe, from npm) checks
// accessibility in the page.
//
// Every page a test opens is also checked for the strict CSP holding: htmx
// loaded from /static, and no Content-Security-Policy complaint or uncaught
// exception in the console.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// browserTimeout bounds one browser scenario, browser start included. A
// scenario takes 10–20 s on an idle two-core machine, up to 50 s when the
// rest of the test suite loads it.
const browserTimeout = 90 * time.Second

const browserPassword = "correct horse battery" // consoleServer's users

// chromiumPath finds the browser, or skips (fails under LIMBO_REQUIRE_BROWSER=1).
func chromiumPath(t *testing.T) string {
	t.Helper()
	exe := os.Getenv("LIMBO_CHROMIUM")
	if exe == "" {
		exe = "/usr/bin/chromium"
	}
	if fi, err := os.Stat(exe); err != nil || fi.IsDir() {
		msg := fmt.Sprintf("browser tests need Chromium at %s (set LIMBO_CHROMIUM, or apt-get install chromium)", exe)
		if os.Getenv("LIMBO_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s, and LIMBO_REQUIRE_BROWSER=1 makes it required: %v", msg, err)
		}
		t.Skip(msg + "; skipped (LIMBO_REQUIRE_BROWSER=1 makes this a failure)")
	}
	return exe
}

// browserSlots bounds how many browsers run at once: the scenarios run in
// parallel (per test and engine), and a Chromium starved of CPU makes every
// step slow enough to miss its budget.
var browserSlots = make(chan struct{}, max(2, runtime.NumCPU()/2))

// startChromium starts a headless Chromium for one test, with a fresh
// profile, once a slot is free; it and everything in it end after
// browserTimeout.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	return startChromiumFor(t, browserTimeout)
}

// startChromiumFor is startChromium with a budget of its own, for a
// scenario that walks many pages (every page × language × scheme).
func startChromiumFor(t *testing.T, budget time.Duration) context.Context {
	t.Helper()
	exe := chromiumPath(t)
	profile := t.TempDir() // removed after the browser has exited (cleanups run last-in first-out)
	browserSlots <- struct{}{}
	t.Cleanup(func() { <-browserSlots })
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	start := time.Now()
	t.Cleanup(func() {
		t.Logf("browser scenario: %s of its %s budget", time.Since(start).Round(time.Millisecond), budget)
		bcancel()
		acancel()
		cancel()
	})
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", exe, err)
	}
	return bctx
}

// browserTab is one person at the console: a tab in a browser context of its own
// (its own cookies), with its console messages collected.
type browserTab struct {
	t    *testing.T
	ctx  context.Context
	base string
	who  string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func openBrowserTab(t *testing.T, browser context.Context, base, who string) *browserTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab for %s: %v", who, err)
	}
	b := &browserTab{t: t, ctx: ctx, base: base, who: who}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// fatalf stops the test, leaving a screenshot of the page as it was.
func (b *browserTab) fatalf(format string, args ...any) {
	b.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if b.ctx.Err() == nil {
		if png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)); err == nil {
			msg += "\n  screenshot: " + writeArtefact(b.t, b.who+"-failure", png)
		}
		if loc, err := chromedp.Run(b.ctx, chromedp.Location()); err == nil {
			msg += "\n  page: " + loc
		}
	} else {
		msg += fmt.Sprintf("\n  (the browser budget ran out: %v)", b.ctx.Err())
	}
	b.t.Fatalf("%s: %s", b.who, msg)
}

// do runs steps that change nothing to wait for.
func (b *browserTab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fatalf("%s: %v", what, err)
	}
}

// open loads path and checks it answered 200 and the page is sound.
func (b *browserTab) open(path string) {
	b.t.Helper()
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(b.base+path))
	if err != nil {
		b.fatalf("opening %s: %v", path, err)
	}
	if resp.Status != 200 {
		b.fatalf("opening %s: HTTP %d", path, resp.Status)
	}
	b.pageSound()
}

// follow runs a step that navigates (a click on a link or submit button, a
// key) and waits for the new page, which must answer 200.
func (b *browserTab) follow(what string, step chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, step)
	if err != nil {
		b.fatalf("%s: %v", what, err)
	}
	if resp == nil || resp.Status != 200 {
		b.fatalf("%s: the page answered %v", what, resp)
	}
	b.waitFor(`document.readyState === "complete"`, what+": the page loads")
	b.pageSound()
}

// evalJS evaluates a JavaScript expression in the page into T.
func evalJS[T any](b *browserTab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitTimeout bounds one wait, well inside browserTimeout so that a failure
// still has the time to leave a screenshot.
const waitTimeout = 15 * time.Second

// waitFor polls a JavaScript condition (from Go: the page's CSP forbids the
// eval a page-side poll would need) until it holds, or fails.
func (b *browserTab) waitFor(cond, what string) {
	b.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last error
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+cond+")"))
		if err == nil && ok {
			return
		}
		last = err
		if b.ctx.Err() != nil || time.Now().After(deadline) {
			if last == nil {
				last = errors.New("still false")
			}
			b.fatalf("waiting %s for %s (%s): %v", waitTimeout, what, cond, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// text is the rendered text of the first element matching a CSS selector
// ("" when there is none).
func (b *browserTab) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText`, jsString(sel)))
}

// waitText waits until the element matching sel shows want.
func (b *browserTab) waitText(sel, want string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText.includes(%s)`, jsString(sel), jsString(want)),
		fmt.Sprintf("%q in %s", want, sel))
}

// login signs in through the form, as a person would, and lands on the queue.
func (b *browserTab) login(email string) {
	b.t.Helper()
	b.open("/login")
	b.signInHere(email)
	if loc := evalJS[string](b, `location.pathname`); loc != "/" {
		b.fatalf("after signing in as %s: at %s, want the queue (/); the page says %q", email, loc, b.text("main"))
	}
	b.waitText("h1", "Review queue")
}

// signInHere fills in and sends the sign-in form the tab is on (the one a
// request after the session ended led to), and waits for the page it
// leads to: wherever the sign-in sends the user back.
func (b *browserTab) signInHere(email string) {
	b.t.Helper()
	b.do("filling the sign-in form as "+email,
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), browserPassword))
	b.follow("signing in", chromedp.Click(chromedp.CSS(`section.login button[type="submit"]`)))
	b.waitFor(`document.readyState === "complete"`, "the page after signing in")
}

// pageSound checks what every console page must hold: htmx loaded from
// /static under the strict CSP, with eval off, and nothing refused by the
// CSP or thrown so far.
func (b *browserTab) pageSound() {
	b.t.Helper()
	b.waitFor(`typeof window.htmx === "object" && htmx.version === "2.0.11" && htmx.config.allowEval === false`,
		"htmx 2.0.11 loaded and configured (allowEval false)")
	b.noConsoleErrors()
}

// cspOrException tells a console message that means the page broke: a
// script, style or request the CSP refused, or an uncaught exception.
func cspOrException(m chromedp.ConsoleMessage) bool {
	return m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy")
}

func (b *browserTab) consoleMessages() []chromedp.ConsoleMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.console)
}

func (b *browserTab) noConsoleErrors() {
	b.t.Helper()
	var bad []string
	for _, m := range b.consoleMessages() {
		if cspOrException(m) {
			bad = append(bad, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
		}
	}
	if len(bad) > 0 {
		b.fatalf("the console has CSP refusals or exceptions:\n  %s", strings.Join(bad, "\n  "))
	}
}

// screenshot saves the whole page as a PNG test artefact.
func (b *browserTab) screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // quality 100: PNG, not JPEG
	if err != nil {
		b.fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		b.fatalf("screenshot %s is not a PNG", name)
	}
	path := writeArtefact(b.t, name, png)
	b.t.Logf("screenshot: %s", path)
	return path
}

// screenshotWidths takes a screenshot of the page at a phone's width
// (390 px) and a desktop's (1,400 px), then restores the tab's size.
func (b *browserTab) screenshotWidths(name string) {
	b.t.Helper()
	for _, w := range []int64{390, 1400} {
		b.do(fmt.Sprintf("sizing the page to %d px", w), chromedp.EmulateViewport(w, 900))
		b.screenshot(fmt.Sprintf("%s-%dpx", name, w))
	}
	b.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// writeArtefact writes a test artefact under LIMBO_ARTIFACTS (default the
// test's temporary directory) and returns its path.
func writeArtefact(t *testing.T, name string, data []byte) string {
	dir := os.Getenv("LIMBO_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("artefacts: %v", err)
		return ""
	}
	path := filepath.Join(dir, unsafeName.ReplaceAllString(t.Name()+"-"+name, "_")+".png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Errorf("artefacts: %v", err)
	}
	return path
}

// axeViolation is what the tests keep of an axe-core violation.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

var axeSource = sync.OnceValues(func() ([]byte, error) { return os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js")) })

// axeRun runs axe-core in the page and returns its violations.
func (b *browserTab) axeRun(page string) []axeViolation {
	b.t.Helper()
	src, err := axeSource()
	if err != nil {
		b.t.Fatalf("axe-core: %v", err)
	}
	if !evalJS[bool](b, `typeof window.axe === "object"`) {
		// Runtime.evaluate is the debugger's, so the page's CSP does not
		// stop the injection; axe itself needs no eval.
		b.do("injecting axe-core", chromedp.Evaluate[chromedp.Void](string(src)))
	}
	vs, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]axeViolation](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
			nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))})))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatalf("axe on the %s page: %v", page, err)
	}
	return vs
}

// axe fails on any serious or critical axe-core violation in the page,
// listing them.
func (b *browserTab) axe(page string) {
	b.t.Helper()
	vs := b.axeRun(page)
	var bad []string
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, fmt.Sprintf("%s (%s): %s\n      %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n      ")))
		} else {
			b.t.Logf("axe on the %s page, %s (%s, tolerated): %s", page, v.ID, v.Impact, v.Help)
		}
	}
	if len(bad) > 0 {
		b.fatalf("axe: %d serious or critical violations on the %s page:\n  %s", len(bad), page, strings.Join(bad, "\n  "))
	}
}

// queueCases lists the case ids the queue table shows.
func (b *browserTab) queueCases() []string {
	b.t.Helper()
	return evalJS[[]string](b, `Array.from(document.querySelectorAll("table.queue tbody tr.row td:nth-child(2) a"), a => a.textContent.trim())`)
}

func jsString(s string) string {
	j, _ := json.Marshal(s)
	return string(j)
}

// duplicatesCase makes an operation whose first attempt timed out after
// sending and whose destination then shows two resources naming it, so it
// waits for review (multiple_candidates, plus the flags' own reasons).
func duplicatesCase(t *testing.T, st *store.Store, r review.Registration, refs ...string) (opID, caseID string) {
	t.Helper()
	ctx := context.Background()
	// A timeout after the send: the operation is ambiguous.
	op := reported(t, st, r, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend})
	ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}
	for _, ref := range refs {
		ev.Candidates = append(ev.Candidates, review.Candidate{Ref: ref, Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID})
	}
	got, err := st.AddEvidence(ctx, r.Tenant, op.ID, ev, "integrator")
	if err != nil || got.State != review.NeedsReview {
		t.Fatalf("evidence of duplicates: %v, %+v; want needs_review", err, got)
	}
	cs, err := st.CasesForOperation(ctx, op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases: %v %+v", err, cs)
	}
	return op.ID, cs[0].ID
}

// TestBrowserSupportFlow: support signs in, filters the queue, opens a case
// with the keyboard, claims it, confirms a candidate and sees it leave the
// queue; a manager then finds the decision in the audit history. Along the
// way: screenshots of the queue and the case page, and axe-core on the
// login, queue, case, audit and dashboard pages.
func TestBrowserSupportFlow(t *testing.T) {
	t.Parallel()
	chromiumPath(t) // skip before making databases
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		caseID := needsReview(t, st, "doc-1") // version_mismatch: file-doc-1 holds version 6, not 7
		cs, err := st.GetCase(ctx, caseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, decoy := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "folder-9", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-9"}`), Actor: "test"}, "fld-1", "fld-2")
		browser := startChromium(t)

		sup := openBrowserTab(t, browser, srv.URL, "support")
		sup.open("/login")
		sup.axe("login")
		sup.login("support@example.com")
		if got := sup.queueCases(); !slices.Contains(got, caseID) || !slices.Contains(got, decoy) {
			sup.fatalf("the queue shows %v, want both %s and %s", got, caseID, decoy)
		}

		// Filter through the form.
		sup.do("choosing a reason", chromedp.SetValue(chromedp.CSS(`form.filters select[name="reason"]`), "version_mismatch"))
		sup.follow("filtering", chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		if q := evalJS[string](sup, `location.search`); !strings.Contains(q, "reason=version_mismatch") {
			sup.fatalf("the filter went to %q", q)
		}
		if got := sup.queueCases(); !slices.Equal(got, []string{caseID}) {
			sup.fatalf("filtered by version_mismatch, the queue shows %v, want only %s", got, caseID)
		}
		sup.screenshot("queue")
		sup.axe("queue")

		// j selects the first row, Enter opens it.
		sup.do("pressing j", chromedp.KeyEvent("j"))
		sup.waitFor(`document.querySelector("table.queue tr.row.current") !== null && document.activeElement.closest("tr.row.current") !== null`,
			"j to select and focus the first row")
		sup.follow("pressing Enter", chromedp.KeyEvent(kb.Enter))
		if p := evalJS[string](sup, `location.pathname`); p != "/cases/"+caseID {
			sup.fatalf("Enter opened %s, want /cases/%s", p, caseID)
		}
		sup.waitText("h1", "Case "+caseID)
		sup.waitText(`section.summary .badge[title="version_mismatch"]`, "Version differs")
		sup.screenshot("case")
		sup.axe("case")

		// Claim (htmx swaps the page body in place).
		sup.do("claiming", chromedp.Click(chromedp.CSS(`#decision form[action$="/claim"] button`)))
		sup.waitText("#decision", "You hold this case")

		// Confirm the candidate, with a reason.
		sup.do("filling the decision",
			chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="confirm"]`)),
			chromedp.SetValue(chromedp.ID("confirm_ref"), "file-doc-1"),
			chromedp.SendKeys(chromedp.ID("reason"), "the v6 file is what the customer wanted"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		sup.waitText("#decision .decided", "Confirm by support@example.com")
		if evalJS[bool](sup, `document.querySelector("form.decision") !== null`) {
			sup.fatalf("the decision form is still offered after the case was decided")
		}
		sup.noConsoleErrors()
		op, err := st.OperationByID(ctx, cs.OperationID, nil)
		if err != nil || op.State != review.Confirmed || op.Resource == nil || op.Resource.Ref != "file-doc-1" {
			sup.fatalf("after confirming: %v, %+v; want confirmed with resource file-doc-1", err, op)
		}

		// The case has left the queue; the other one is still there.
		sup.open("/")
		if got := sup.queueCases(); slices.Contains(got, caseID) || !slices.Contains(got, decoy) {
			sup.fatalf("after the decision the queue shows %v: want %s gone and %s still there", got, caseID, decoy)
		}
		sup.noConsoleErrors()

		// A manager finds the decision in the audit history.
		mgr := openBrowserTab(t, browser, srv.URL, "manager")
		mgr.login("manager@example.com")
		mgr.open("/audit")
		// The field offers every action, by its label (AuditActions).
		if n := evalJS[int](mgr, `document.querySelector('form.filters input[name="action"]').list.options.length`); n < 50 {
			mgr.fatalf("the action field offers %d actions, want every one", n)
		}
		mgr.do("searching the audit", chromedp.SendKeys(chromedp.CSS(`form.filters input[name="action"]`), "decision"))
		mgr.follow("searching the audit", chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		// Each row's raw action (data-action) beside its text, which names it in words.
		rows := evalJS[[]string](mgr, `Array.from(document.querySelectorAll("main table tbody tr"), r => r.querySelector("[data-action]").dataset.action + "\t" + r.innerText)`)
		found := false
		for _, r := range rows {
			if !strings.Contains(r, "decision.") {
				mgr.fatalf("searching for action \"decision\" lists %q", r)
			}
			found = found || strings.Contains(r, "decision.confirm") && strings.Contains(r, "support@example.com") && strings.Contains(r, cs.OperationID)
		}
		if !found {
			mgr.fatalf("no decision.confirm by support@example.com on %s in the audit history: %q", cs.OperationID, rows)
		}
		mgr.axe("audit")
		mgr.open("/dashboard")
		mgr.waitFor(`document.querySelector("svg.chart") !== null`, "the dashboard's charts")
		mgr.axe("dashboard")
		// On a phone the charts are shrunk to half: their words stay
		// readable (the ambiguity per destination is text beside its bars,
		// the line chart's labels are drawn larger there).
		mgr.do("sizing the dashboard to a phone", chromedp.EmulateViewport(390, 900))
		if h := evalJS[float64](mgr, `Math.min(...Array.from(document.querySelectorAll("svg.chart text, ul.rates li span"), e => e.getBoundingClientRect().height))`); h < 10 {
			mgr.fatalf("a dashboard label is %.1f px high on a phone, want at least 10", h)
		}
		if n := evalJS[int](mgr, `document.querySelectorAll("ul.rates li").length`); n == 0 {
			mgr.fatalf("the dashboard shows no destination's ambiguity")
		}
		mgr.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
		mgr.noConsoleErrors()

		// The axe check above can see a violation: an unlabelled field is one.
		mgr.do("adding an unlabelled field", chromedp.Evaluate[chromedp.Void](`document.querySelector("main").append(document.createElement("input"))`))
		if vs := mgr.axeRun("dashboard with an unlabelled field"); !slices.ContainsFunc(vs, func(v axeViolation) bool { return v.ID == "label" && v.Impact == "critical" }) {
			mgr.fatalf("axe did not report an unlabelled field as a critical label violation: %+v", vs)
		}

		// The CSP check above can see a refusal: an inline script added to
		// the page is refused, and the console says so.
		mgr.do("adding an inline script", chromedp.Evaluate[chromedp.Void](
			`(() => { const s = document.createElement("script"); s.textContent = "window.__inline = 1"; document.body.append(s) })()`))
		deadline := time.Now().Add(waitTimeout)
		for {
			msgs := mgr.consoleMessages()
			if i := slices.IndexFunc(msgs, cspOrException); i >= 0 {
				t.Logf("the console reports the refused inline script: %s", msgs[i])
				break
			}
			if time.Now().After(deadline) {
				mgr.fatalf("an inline script raised no CSP message in the console; the CSP check would miss one")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if evalJS[bool](mgr, `window.__inline !== undefined`) {
			mgr.fatalf("an inline script ran: the CSP does not hold")
		}
	})
}

// TestBrowserFourEyes: a retry of a financial operation needs two
// different reviewers. The first approval keeps the case open, the same
// reviewer approving again is refused with a message, and a second
// reviewer's approval resolves it.
func TestBrowserFourEyes(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "reviewer2@example.com", Password: browserPassword, Role: review.RoleReviewer,
			Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		opID, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "invoice-42", LogicalVersion: "3", Action: "charge",
			Destination: "payments", Risk: review.RiskCompensableWrite, Flags: []review.Flag{review.FlagFinancial},
			Payload: []byte(`{"amount_cents":4200,"currency":"EUR"}`), Actor: "test"}, "chg-1", "chg-2")
		browser := startChromium(t)

		approve := func(b *browserTab, reason string) {
			b.t.Helper()
			b.do("approving a retry",
				chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="approve_retry"]`)),
				chromedp.SendKeys(chromedp.ID("reason"), reason),
				chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		}

		r1 := openBrowserTab(t, browser, srv.URL, "reviewer1")
		r1.login("reviewer@example.com")
		r1.open("/cases/" + caseID)
		r1.waitText(`section.summary .badge[title="financial"]`, "Moves money")
		approve(r1, "the charge never reached the provider")
		r1.waitText("#decision .decided", "Approve a retry by reviewer@example.com")
		r1.waitText("#decision .decided", "first approval")
		if !evalJS[bool](r1, `document.querySelector("form.decision") !== null`) {
			r1.fatalf("after the first approval the case must stay open for a second reviewer")
		}

		// The same reviewer again: refused, and told why.
		approve(r1, "approving my own approval")
		r1.waitText("#decision .error[role=alert]", "already gave an approval")
		if c, err := st.GetCase(ctx, caseID, nil); err != nil || c.Status != store.CaseOpen {
			r1.fatalf("after a self-approval: %v, %+v; want the case still open", err, c)
		}
		r1.noConsoleErrors()

		// A second reviewer, in a browser context of their own.
		r2 := openBrowserTab(t, browser, srv.URL, "reviewer2")
		r2.login("reviewer2@example.com")
		r2.open("/cases/" + caseID)
		r2.waitText("#decision .decided", "first approval")
		approve(r2, "second pair of eyes: retry with the same key")
		r2.waitText("#decision", "Approve a retry by reviewer2@example.com")
		r2.waitText("#decision", "(applied)")
		r2.open("/cases/" + caseID)
		r2.waitText("section.summary", "Resolved: Approve a retry by reviewer2@example.com")
		r2.noConsoleErrors()
		if op, err := st.OperationByID(ctx, opID, nil); err != nil || op.State != review.RetryWait {
			r2.fatalf("after the second approval: %v, %+v; want retry_wait", err, op)
		}
	})
}

// TestBrowserPayloadInert: markup in a payload, a source reference, an
// action and a candidate ref is shown as text, never run: no injected
// element exists and no handler ran (window.__xss stays undefined). The
// strict CSP would stop an inline handler anyway, so the DOM is checked
// too: this proves the escaping, not only the CSP.
func TestBrowserPayloadInert(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		const script = `<script>window.__xss=1</script>`
		const img = `"><img src=x onerror="window.__xss=2">`
		payload, err := review.Canonicalize([]byte(`{"note": "<script>window.__xss=1</script>", "title": "\"><img src=x onerror=\"window.__xss=2\">"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "doc " + img, LogicalVersion: "1",
			Action: "render" + script, Destination: "files", Risk: review.RiskCompensableWrite, Payload: payload, Actor: "test"},
			"fld-a"+img, "fld-b"+script)
		browser := startChromium(t)

		sup := openBrowserTab(t, browser, srv.URL, "support")
		sup.login("support@example.com")
		inert := func(page string) {
			sup.t.Helper()
			if !evalJS[bool](sup, `window.__xss === undefined`) {
				sup.fatalf("the %s page ran injected script: window.__xss = %v", page, evalJS[any](sup, `window.__xss`))
			}
			if n := evalJS[int](sup, `document.querySelectorAll("img, main script, body script:not([src])").length`); n != 0 {
				sup.fatalf("the %s page has %d injected img or script elements", page, n)
			}
		}
		if !slices.Contains(sup.queueCases(), caseID) {
			sup.fatalf("the queue does not show %s", caseID)
		}
		sup.waitText("table.queue", "render"+script)
		inert("queue")

		sup.open("/cases/" + url.PathEscape(caseID))
		for _, want := range []struct{ sel, text string }{
			{"pre.payload", script}, {"pre.payload", strings.ReplaceAll(img, `"`, `\"`)},
			{"section.summary", "doc " + img}, {"section.summary", "render" + script},
			{`section[aria-labelledby="candidates-h"]`, "fld-a" + img}, {`section[aria-labelledby="candidates-h"]`, "fld-b" + script},
		} {
			if got := sup.text(want.sel); !strings.Contains(got, want.text) {
				sup.fatalf("%s should show %q as text; it shows %q", want.sel, want.text, got)
			}
		}
		opts := evalJS[[]string](sup, `Array.from(document.querySelectorAll("#confirm_ref option"), o => o.value)`)
		if !slices.Contains(opts, "fld-a"+img) || !slices.Contains(opts, "fld-b"+script) {
			sup.fatalf("the candidate choices are %q, want the refs verbatim", opts)
		}
		inert("case")
		sup.noConsoleErrors()
	})
}

// TestBrowserExtraEffect (issue 12, ★): the confirm window found a
// duplicate of a confirmed operation — the destination's search lagged
// longer than it said, and the retry made a second folder. The case page
// says the confirmation stands, offers only what fits (compensate the
// extra, then say it is undone), preselects the recommended extra, and
// the reviewer takes the case out of the queue in two decisions; the
// operation stays confirmed throughout.
func TestBrowserExtraEffect(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Now().UTC())
		dest := review.Destination{SearchLag: 2 * time.Second}
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk, cfg: &review.Config{Destinations: map[string]review.Destination{"drive": dest}}})
		ctx := context.Background()
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "folder-7", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-7"}`), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		attempt := func(o review.Outcome) *review.Operation {
			t.Helper()
			g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, o, "test")
			if err != nil {
				t.Fatal(err)
			}
			return res.Operation
		}
		attempt(review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend})
		clk.Advance(3 * time.Second)
		got, err := st.AddEvidence(ctx, "acme", op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{}}, "integrator")
		if err != nil || got.State != review.RetryWait {
			t.Fatalf("an empty search past the lag: %v, %+v; want retry_wait", err, got)
		}
		if got := attempt(review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
			Resource: &review.ResourceRef{Ref: "fld-2", Kind: "folder", Version: "1"}}); got.State != review.Confirmed {
			t.Fatalf("the retry: %s, want confirmed", got.State)
		}
		// The reconciler's look inside the window: the first folder shows.
		clk.Advance(3 * time.Second)
		claims, err := st.ClaimWatches(ctx, 10, time.Minute)
		if err != nil || len(claims) != 1 {
			t.Fatalf("ClaimWatches: %v, %d claims; want the confirmed operation", err, len(claims))
		}
		both := []review.Candidate{{Ref: "fld-1", Kind: "folder", Version: "1", OperationID: op.ID}, {Ref: "fld-2", Kind: "folder", Version: "1", OperationID: op.ID}}
		w := review.Watch(claims[0].Op, dest, []review.ProbeResult{{Kind: review.ProbeSearch, Candidates: both, At: clk.Now()}}, claims[0].Until, clk.Now())
		if err := st.ApplyWatch(ctx, claims[0], w); err != nil {
			t.Fatal(err)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v; want the extra effect's", err, cs)
		}
		caseID := cs[0].ID
		browser := startChromium(t)

		rev := openBrowserTab(t, browser, srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		if !slices.Contains(rev.queueCases(), caseID) {
			rev.fatalf("the queue does not show %s", caseID)
		}
		rev.open("/cases/" + caseID)
		rev.waitText("#decision .situation", "confirmed")
		actions := evalJS[[]string](rev, `Array.from(document.querySelectorAll('form.decision input[name="action"]'), i => i.value)`)
		if !slices.Equal(actions, []string{review.DecideCompensate, review.DecideCompensationDone}) {
			rev.fatalf("the form offers %v, want compensate and compensation_done only", actions)
		}
		if sel := evalJS[string](rev, `document.getElementById("undo_ref").value`); sel != "fld-1" {
			rev.fatalf("the candidate preselected is %q, want the recommended extra fld-1 (fld-2 is confirmed)", sel)
		}
		rev.screenshotWidths("extra-effect")
		rev.axe("extra-effect case")
		rev.do("deciding to compensate",
			chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="compensate"]`)),
			chromedp.SendKeys(chromedp.ID("compensation"), "delete fld-1, the duplicate"),
			chromedp.SendKeys(chromedp.ID("reason"), "two folders for one intention"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision .decided", "Undo by reviewer@example.com")
		if c, err := st.GetCase(ctx, caseID, nil); err != nil || c.Status != store.CaseOpen {
			rev.fatalf("after compensate: %v, %+v; want the case open until the undo is done", err, c)
		}
		rev.open("/cases/" + caseID)
		rev.do("saying the undo is done",
			chromedp.Click(chromedp.CSS(`form.decision input[name="action"][value="compensation_done"]`)),
			chromedp.SendKeys(chromedp.ID("reason"), "fld-1 deleted at the destination"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision", "Undo done by reviewer@example.com")
		rev.noConsoleErrors()
		if c, err := st.GetCase(ctx, caseID, nil); err != nil || c.Status == store.CaseOpen {
			rev.fatalf("after compensation_done: %v, %+v; want the case resolved", err, c)
		}
		if got, err := st.OperationByID(ctx, op.ID, nil); err != nil || got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "fld-2" {
			rev.fatalf("the operation after the undo: %v, %+v; want still confirmed with fld-2", err, got)
		}
		rev.open("/")
		if slices.Contains(rev.queueCases(), caseID) {
			rev.fatalf("the resolved case is still in the queue")
		}
		rev.screenshotWidths("queue-after-extra-effect")
	})
}
