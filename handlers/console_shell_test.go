package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// flaggedCase opens a case on a financial operation, which support may
// not decide (its role lacks decide_flagged); the payload's card is
// redacted where the config says so.
func flaggedCase(t *testing.T, st *store.Store, source string) string {
	t.Helper()
	_, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "1", Action: "charge",
		Destination: "payments", Risk: review.RiskCompensableWrite, Flags: []review.Flag{review.FlagFinancial},
		Payload: []byte(`{"amount_cents":100,"card":"4242424242424242"}`), Actor: "test"}, source+"-a", source+"-b")
	return caseID
}

// TestConsoleQueueDecidable: support opens the queue on the cases its role
// can decide (the financial case is left out), says so, and links to all
// open cases, which show it; a bulk decision carries the choice. A
// reviewer's decidable cases are all of them; a manager, who decides
// nothing, sees every open case and no such choice.
func TestConsoleQueueDecidable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		plain := needsReview(t, st, "doc-1")
		flagged := flaggedCase(t, st, "inv-1")

		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		_, body := sup.get("/")
		if !strings.Contains(body, plain) || strings.Contains(body, flagged) {
			t.Fatalf("support's queue: want %s and not the financial %s", plain, flagged)
		}
		for _, want := range []string{`<option value="1" selected>`, `href="/?decidable=0"`, "Showing the cases your role can decide.",
			`<input type="hidden" name="decidable" value="1">`} {
			if !strings.Contains(body, want) {
				t.Errorf("support's queue: %q missing", want)
			}
		}
		_, body = sup.get("/?decidable=0")
		if !strings.Contains(body, plain) || !strings.Contains(body, flagged) || !strings.Contains(body, `href="/?decidable=1"`) ||
			!strings.Contains(body, `<option value="0" selected>`) || strings.Contains(body, `name="decidable" value="1">`) {
			t.Fatalf("support's queue with all open cases: want %s and %s, the choice kept, and the link back", plain, flagged)
		}
		// The toggle keeps the other filters.
		if _, body := sup.get("/?tenant=acme"); !strings.Contains(body, `href="/?decidable=0&amp;tenant=acme"`) {
			t.Errorf("the toggle drops the tenant filter")
		}
		// The bulk dry run counts what the queue shows: support's
		// decidable cases, not the financial one.
		code, body, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "action": {review.DecideFail}, "reason": {"test"}, "decidable": {"1"}})
		if code != 200 || strings.Contains(body, flagged) || !strings.Contains(body, plain) {
			t.Errorf("bulk dry run on decidable cases: %d, want %s listed and not %s", code, plain, flagged)
		}
		if _, body := sup.get("/?decidable=1&tenant=nobody"); !strings.Contains(body, "No open case matches these filters.") ||
			!strings.Contains(body, `<a href="/">`) {
			t.Errorf("an empty filtered queue must say so and offer to clear the filters")
		}

		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		if _, body := rev.get("/"); !strings.Contains(body, plain) || !strings.Contains(body, flagged) {
			t.Fatalf("a reviewer decides both cases: the queue must show %s and %s", plain, flagged)
		}

		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		for _, p := range []string{"/", "/?decidable=1"} {
			_, body = mgr.get(p)
			if !strings.Contains(body, plain) || !strings.Contains(body, flagged) {
				t.Fatalf("a manager's queue %s shows every open case: want %s and %s", p, plain, flagged)
			}
			if strings.Contains(body, `name="decidable"`) || strings.Contains(body, `action="/bulk"`) || strings.Contains(body, "queue-scope") {
				t.Fatalf("a manager decides nothing: no decidable choice, no bulk form")
			}
		}
	})
}

var mainNav = regexp.MustCompile(`(?s)<nav aria-label="Main">(.*?)</nav>`)

// TestConsoleNavigation: the navigation offers only what the role may
// open (Audit with read_audit, Administration for admins), marks the page
// it is on, and every page has the keyboard help and the language menu
// coming back to the page.
func TestConsoleNavigation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		for _, c := range []struct {
			role         review.Role
			audit, admin bool
		}{{review.RoleSupport, false, false}, {review.RoleReviewer, true, false}, {review.RoleManager, true, false}, {review.RoleAdmin, true, true}} {
			b := newBrowser(t, srv.URL)
			b.login(string(c.role) + "@example.com")
			for _, p := range []struct{ path, current string }{{"/dashboard", "/dashboard"}, {"/operations?state=confirmed", "/operations"}, {"/", "/"}} {
				_, body := b.get(p.path)
				m := mainNav.FindStringSubmatch(body)
				if m == nil {
					t.Fatalf("%s: no navigation on %s", c.role, p.path)
				}
				nav := m[1]
				if got := strings.Contains(nav, `href="/audit"`); got != c.audit {
					t.Errorf("%s: audit link %v, want %v", c.role, got, c.audit)
				}
				if got := strings.Contains(nav, `href="/admin/users"`); got != c.admin {
					t.Errorf("%s: admin link %v, want %v", c.role, got, c.admin)
				}
				if !strings.Contains(nav, `<a href="`+p.current+`" aria-current="page">`) || strings.Count(nav, "aria-current") != 1 {
					t.Errorf("%s on %s: %s is not the one link marked current: %s", c.role, p.path, p.current, nav)
				}
				for _, want := range []string{`rel="icon" href="/static/favicon.svg"`, `action="/preferences/language"`,
					`name="next" value="` + strings.ReplaceAll(p.path, "&", "&amp;") + `"`, `<dialog id="shortcuts"`, `class="shortcuts-open"`} {
					if !strings.Contains(body, want) {
						t.Errorf("%s on %s: %q missing", c.role, p.path, want)
					}
				}
			}
		}
		if code, _ := newBrowser(t, srv.URL).get("/static/favicon.svg"); code != 200 {
			t.Errorf("favicon: %d", code)
		}
	})
}

// TestConsoleLanguage: Accept-Language chooses Italian for queue, audit
// and dashboard; a saved preference wins over the browser's language and
// holds across pages; "" goes back to the browser's.
func TestConsoleLanguage(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "doc-1")
		words := map[string]string{"/": "Coda di revisione", "/audit": "Cronologia di audit", "/dashboard": "Casi aperti nel tempo"}
		it := newBrowser(t, srv.URL).withHeader("Accept-Language", "it-IT,it;q=0.9,en;q=0.5")
		it.login("reviewer@example.com")
		for path, word := range words {
			if code, body := it.get(path); code != 200 || !strings.Contains(body, `<html lang="it">`) || !strings.Contains(body, word) {
				t.Errorf("%s in Italian by Accept-Language: %d, want lang it and %q", path, code, word)
			}
		}
		en := newBrowser(t, srv.URL).withHeader("Accept-Language", "en-US,en;q=0.9")
		en.login("reviewer@example.com")
		for path, word := range words {
			if _, body := en.get(path); !strings.Contains(body, `<html lang="en">`) || strings.Contains(body, word) {
				t.Errorf("%s for an English browser: not in English", path)
			}
		}
		code, _, hdr := en.post("/preferences/language", url.Values{"csrf": {en.csrf}, "language": {"it"}, "next": {"/audit?actor=x"}})
		if code != http.StatusSeeOther || hdr.Get("Location") != "/audit?actor=x" {
			t.Fatalf("saving Italian: %d to %q, want 303 back to the page", code, hdr.Get("Location"))
		}
		for path, word := range words {
			if _, body := en.get(path); !strings.Contains(body, `<html lang="it">`) || !strings.Contains(body, word) ||
				!strings.Contains(body, `<option value="it" lang="it" selected>`) {
				t.Errorf("%s: the saved Italian must win over an English browser", path)
			}
		}
		en.post("/preferences/language", url.Values{"csrf": {en.csrf}, "language": {""}, "next": {"/"}})
		if _, body := en.get("/"); !strings.Contains(body, `<html lang="en">`) || !strings.Contains(body, `<option value="" selected>`) {
			t.Errorf("back to the browser's language: the page is not in English")
		}
	})
}

// TestConsoleSignedOut: signing out lands on the login form, which says
// so, in the browser's language; the plain login page does not.
func TestConsoleSignedOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		code, _, hdr := b.post("/logout", url.Values{"csrf": {b.csrf}})
		if code != http.StatusSeeOther || hdr.Get("Location") != "/login?signed_out=1" {
			t.Fatalf("logout: %d to %q", code, hdr.Get("Location"))
		}
		if code, body := b.get(hdr.Get("Location")); code != 200 || !strings.Contains(body, "You are signed out.") {
			t.Fatalf("the login page after signing out: %d, no notice", code)
		}
		if _, body := b.get("/login"); strings.Contains(body, "You are signed out.") {
			t.Fatalf("the plain login page says the user signed out")
		}
		if _, body := newBrowser(t, srv.URL).withHeader("Accept-Language", "it").get("/login?signed_out=1"); !strings.Contains(body, "Sei uscito dalla console.") {
			t.Fatalf("the notice in Italian is missing")
		}
	})
}

// TestConsoleDashboardWindows: the picker's windows (24 h, 7 and 30 days)
// and older ?window durations are read, shown in words, and the one shown
// is marked; outside 1 minute–90 days is a 400.
func TestConsoleDashboardWindows(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "doc-1")
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		marked := regexp.MustCompile(`href="/dashboard\?window=(\w+)" aria-current="page"`)
		for _, c := range []struct{ q, current, words string }{
			{"", "7d", "(last 7 days)"}, {"?window=24h", "24h", "(last 24 h)"}, {"?window=7d", "7d", "(last 7 days)"},
			{"?window=30d", "30d", "(last 30 days)"}, {"?window=168h", "7d", "(last 7 days)"}, {"?window=90m", "", "(last 1 h 30 min)"},
		} {
			code, body := mgr.get("/dashboard" + c.q)
			if code != 200 || !strings.Contains(body, c.words) || regexp.MustCompile(`\d+h\d+m\d+s`).MatchString(body) {
				t.Errorf("dashboard%s: %d, want %q and no Go duration", c.q, code, c.words)
			}
			m := marked.FindAllStringSubmatch(body, -1)
			if c.current == "" && len(m) != 0 || c.current != "" && (len(m) != 1 || m[0][1] != c.current) {
				t.Errorf("dashboard%s: marked %v, want %q", c.q, m, c.current)
			}
		}
		for _, w := range []string{"0d", "91d", "30s", "2161h", "x"} {
			if code, _ := mgr.get("/dashboard?window=" + w); code != http.StatusBadRequest {
				t.Errorf("window %s: %d, want 400", w, code)
			}
		}
	})
}

// TestConsoleAuditLines: each event names its action in words (the raw
// action in its title), links the operation and the case it is about,
// and folds its JSON detail away; the histories on the case and
// operation pages name events the same way.
func TestConsoleAuditLines(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "doc-1")
		c, err := st.GetCase(t.Context(), caseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		_, body := mgr.get("/audit?action=case.opened")
		for _, want := range []string{`title="case.opened" data-action="case.opened">Case opened</span>`, `href="/operations/` + c.OperationID + `"`,
			`href="/cases/` + caseID + `"`, "<details><summary>Detail</summary>", `<div class="table-wrap">`} {
			if !strings.Contains(body, want) {
				t.Errorf("audit: %q missing", want)
			}
		}
		if _, body := mgr.withHeader("Accept-Language", "it").get("/audit?action=case.opened"); !strings.Contains(body, ">Caso aperto</span>") {
			t.Errorf("audit in Italian: the action is not named in Italian")
		}
		for _, p := range []string{"/cases/" + caseID, "/operations/" + c.OperationID} {
			if _, body := mgr.get(p); !strings.Contains(body, `data-action="operation.registered">Operazione registrata</span>`) {
				t.Errorf("%s: the history does not name its events in words", p)
			}
		}
		if _, body := mgr.get("/audit?actor=nobody-at-all"); !strings.Contains(body, `class="empty"`) || strings.Contains(body, "<table") {
			t.Errorf("an audit search that matches nothing must say so")
		}
	})
}
