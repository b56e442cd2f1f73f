package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// consoleRoutes is every console route with the permission it needs
// ("" = any signed-in user). TestConsoleAccessMatrix checks each against
// every role; a route missing here fails TestConsoleRoutesListed.
var consoleRoutes = []struct {
	method, path string
	perm         review.Permission
}{
	{"GET", "/", review.PermRead},
	{"GET", "/cases/{case}", review.PermRead},
	{"GET", "/operations/{op}", review.PermRead},
	{"GET", "/operations", review.PermRead},
	{"POST", "/cases/{case}/claim", review.PermClaim},
	{"POST", "/cases/{case}/release", review.PermClaim},
	{"POST", "/cases/{case}/takeover", review.PermClaim},
	{"POST", "/cases/{case}/reveal", review.PermClaim},
	{"POST", "/cases/{case}/check", review.PermClaim},
	{"POST", "/cases/{case}/decision", review.PermDecide},
	{"POST", "/bulk", review.PermDecide},
	{"GET", "/dashboard", review.PermRead},
	{"GET", "/audit", review.PermReadAudit},
	{"GET", "/audit.csv", review.PermReadAudit},
	{"GET", "/audit/verify", review.PermReadAudit},
	{"GET", "/admin", review.PermAdmin},
	{"GET", "/admin/users", review.PermAdmin},
	{"POST", "/admin/users", review.PermAdmin},
	{"POST", "/admin/users/{user}", review.PermAdmin},
	{"POST", "/admin/users/{user}/password", review.PermAdmin},
	{"GET", "/admin/tokens", review.PermAdmin},
	{"POST", "/admin/tokens", review.PermAdmin},
	{"POST", "/admin/tokens/{token}/revoke", review.PermAdmin},
	{"GET", "/admin/destinations", review.PermAdmin},
	{"GET", "/admin/actions", review.PermAdmin},
	{"GET", "/admin/webhooks", review.PermAdmin},
	{"POST", "/admin/webhooks", review.PermAdmin},
	{"GET", "/admin/webhooks/{hook}", review.PermAdmin},
	{"POST", "/admin/webhooks/{hook}/disable", review.PermAdmin},
	{"POST", "/admin/webhooks/{hook}/enable", review.PermAdmin},
	{"POST", "/admin/webhooks/{hook}/redeliver", review.PermAdmin},
	{"POST", "/preferences/language", ""},
	{"POST", "/session/still-here", ""},
	{"POST", "/logout", ""},
	// A plain GET of the event stream (no Accept: text/event-stream, as
	// this test's client sends) is answered 406 at once, never streamed.
	{"GET", "/events", review.PermRead},
	{"GET", "/cases/{case}/live", review.PermRead},
}

func TestConsoleAccessMatrix(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "acl-1")
		c, _ := st.GetCase(ctx, caseID, nil)
		u, _ := st.UserByEmail(ctx, "support@example.com")
		fill := func(p string) string {
			return strings.NewReplacer("{case}", caseID, "{op}", c.OperationID, "{user}", u.ID, "{token}", "tok_nope", "{hook}", "wh_nope").Replace(p)
		}
		for _, role := range review.AllRoles() {
			b := newBrowser(t, srv.URL)
			b.login(string(role) + "@example.com")
			for _, r := range consoleRoutes {
				if r.path == "/logout" {
					continue
				}
				var code int
				if r.method == "GET" {
					code, _ = b.get(fill(r.path))
				} else {
					// A harmless body: the check under test is the role, and a
					// refused one must be refused before the body is read.
					code, _, _ = b.post(fill(r.path), url.Values{"csrf": {b.csrf}, "action": {"nothing"}, "reason": {"x"}})
				}
				allowed := r.perm == "" || role.Can(r.perm)
				if !allowed && code != http.StatusForbidden {
					t.Errorf("%s %s as %s: %d, want 403", r.method, r.path, role, code)
				}
				if allowed && (code == http.StatusForbidden || code >= 500) {
					t.Errorf("%s %s as %s: %d, want it allowed", r.method, r.path, role, code)
				}
			}
		}
		// Anonymous: every route sends to the login form.
		anon := newBrowser(t, srv.URL)
		for _, r := range consoleRoutes {
			var code int
			if r.method == "GET" {
				code, _ = anon.get(fill(r.path))
			} else {
				code, _, _ = anon.post(fill(r.path), url.Values{})
			}
			if code != http.StatusSeeOther {
				t.Errorf("%s %s anonymous: %d, want 303 to /login", r.method, r.path, code)
			}
		}
		// Another tenant's case and operation answer 404, never 403.
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "other@example.com", Password: "correct horse battery", Role: review.RoleReviewer,
			Scope: review.Scope{Tenants: []string{"other"}}}); err != nil {
			t.Fatal(err)
		}
		o := newBrowser(t, srv.URL)
		o.login("other@example.com")
		// Every route that names a case or an operation, the claim's
		// release and take-over and the payload's reveal too (claimed
		// first by a reviewer of its tenant, so there is a claim to take).
		r := newBrowser(t, srv.URL)
		r.login("reviewer@example.com")
		if code, _, _ := r.post("/cases/"+caseID+"/claim", url.Values{"csrf": {r.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("claim by acme's reviewer: %d", code)
		}
		for _, rt := range consoleRoutes {
			if !strings.Contains(rt.path, "{case}") && !strings.Contains(rt.path, "{op}") {
				continue
			}
			var code int
			if rt.method == "GET" {
				code, _ = o.get(fill(rt.path))
			} else {
				code, _, _ = o.post(fill(rt.path), url.Values{"csrf": {o.csrf}, "action": {"fail"}, "reason": {"not mine"}, "takeover_reason": {"not mine"}})
			}
			if code != http.StatusNotFound {
				t.Errorf("%s %s from another tenant's reviewer: %d, want 404", rt.method, rt.path, code)
			}
		}
		// A bulk decision over the other tenant's queue decides nothing.
		o.post("/bulk", url.Values{"csrf": {o.csrf}, "action": {"fail"}, "reason": {"not mine"}, "tenant": {"acme"}, "confirm": {"1"}})
		if ds, _ := st.CaseDecisions(ctx, caseID); len(ds) != 0 {
			t.Errorf("another tenant's reviewer decided the case in bulk: %+v", ds)
		}
		// Nothing of it in the lists, the dashboard or the audit.
		for _, p := range []string{"/", "/?tenant=acme", "/operations", "/operations?tenant=acme", "/dashboard", "/audit", "/audit.csv"} {
			if _, body := o.get(p); strings.Contains(body, caseID) || strings.Contains(body, c.OperationID) {
				t.Errorf("GET %s from another tenant's reviewer shows acme's case or operation", p)
			}
		}
		// (A search by the operation's id says the id back, and finds nothing.)
		if _, body := o.get("/audit?operation=" + c.OperationID); !strings.Contains(body, `class="empty"`) {
			t.Errorf("another tenant's reviewer finds acme's operation in the audit")
		}
		if _, body := o.get("/audit.csv?operation=" + c.OperationID); strings.Count(strings.TrimSpace(body), "\n") != 0 {
			t.Errorf("another tenant's reviewer exports acme's operation's events: %s", body)
		}
		if got, _ := st.GetCase(ctx, caseID, nil); got.Status != "open" || got.ClaimedBy != "reviewer@example.com" {
			t.Errorf("acme's case after another tenant's calls: %s, claimed by %q", got.Status, got.ClaimedBy)
		}
	})
}

func TestConsoleCSRFEveryMutation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "csrf-1")
		// Every mutating route, /logout last (it ends the session).
		var posts []string
		for _, r := range consoleRoutes {
			if r.method == "POST" && r.path != "/logout" {
				posts = append(posts, strings.NewReplacer("{case}", caseID, "{user}", "usr_x", "{token}", "tok_x", "{hook}", "wh_x").Replace(r.path))
			}
		}
		posts = append(posts, "/logout")
		csrfRefusal := func(code int, body string) bool {
			return code == http.StatusForbidden && strings.Contains(body, "CSRF token missing or wrong")
		}
		for _, role := range review.AllRoles() {
			b := newBrowser(t, srv.URL)
			b.login(string(role) + "@example.com")
			for _, p := range posts {
				for _, tok := range []string{"", "forged-token"} {
					form := url.Values{"action": {"fail"}, "reason": {"csrf test"}}
					if tok != "" {
						form.Set("csrf", tok)
					}
					if code, _, _ := b.post(p, form); code != http.StatusForbidden {
						t.Errorf("POST %s as %s with CSRF %q: %d, want 403", p, role, tok, code)
					}
				}
				// The right token, but only in the query string: refused. (A
				// token there leaks through logs and Referer; the old
				// requireCSRF read it with c.FormValue, which reads the query.)
				form := url.Values{"action": {"fail"}, "reason": {"csrf test"}}
				if code, body, _ := b.post(p+"?csrf="+url.QueryEscape(b.csrf), form); !csrfRefusal(code, body) {
					t.Errorf("POST %s as %s with the CSRF token in the query only: %d, want the CSRF 403", p, role, code)
				}
			}
			// The right token in the body (urlencoded or multipart) or in the
			// X-CSRF-Token header passes the CSRF check (the role check may
			// still refuse), each in its own session since /logout ends it.
			for _, how := range []string{"body", "multipart", "header"} {
				b := newBrowser(t, srv.URL)
				b.login(string(role) + "@example.com")
				for _, p := range posts {
					form := url.Values{"action": {"fail"}, "reason": {"csrf test"}}
					var code int
					var body string
					var hdr http.Header
					switch how {
					case "body":
						form.Set("csrf", b.csrf)
						code, body, hdr = b.post(p, form)
					case "multipart":
						form.Set("csrf", b.csrf)
						code, body, hdr = b.postMultipart(p, form)
					case "header":
						code, body, hdr = b.postWith(p, form, http.Header{"X-Csrf-Token": {b.csrf}})
					}
					// (A redirect to the login form would mean the session was
					// lost and nothing was checked — except after /logout,
					// whose answer is the login form saying so.)
					lost := strings.HasPrefix(hdr.Get("Location"), "/login?") && !(p == "/logout" && hdr.Get("Location") == "/login?signed_out=1")
					if csrfRefusal(code, body) || code >= 500 || lost {
						t.Errorf("POST %s as %s with the CSRF token in the %s: %d, want it past the CSRF check: %.200s", p, role, how, code, body)
					}
				}
				if code, _ := b.get("/"); code != http.StatusSeeOther {
					t.Errorf("as %s, the %s-token /logout did not end the session: GET / %d", role, how, code)
				}
			}
		}
		// Logout without a token must not end the session either.
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		if code, _, _ := b.post("/logout", url.Values{"csrf": {"forged"}}); code != http.StatusForbidden {
			t.Fatalf("logout with a forged token: %d", code)
		}
		if code, _ := b.get("/"); code != 200 {
			t.Fatalf("still signed in: %d", code)
		}
	})
}

func TestConsoleConcurrentDecisions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		var bs []*browser
		for i := 0; i < 8; i++ {
			email := "rev" + string(rune('a'+i)) + "@example.com"
			if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: email, Password: "correct horse battery", Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
				t.Fatal(err)
			}
			b := newBrowser(t, srv.URL)
			b.login(email)
			bs = append(bs, b)
		}
		caseID := needsReview(t, st, "race-1")
		codes := make([]int, len(bs))
		var wg sync.WaitGroup
		for i, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _, _ = b.decide(caseID, url.Values{"action": {"fail"}, "reason": {"race " + string(rune('a'+i))}})
			}()
		}
		wg.Wait()
		won := 0
		for _, c := range codes {
			switch c {
			case http.StatusSeeOther:
				won++
			case http.StatusConflict:
			default:
				t.Errorf("a racing decision answered %d", c)
			}
		}
		ds, _ := st.CaseDecisions(ctx, caseID)
		if won != 1 || len(ds) != 1 {
			t.Fatalf("%d winners, %d decisions stored; want exactly one", won, len(ds))
		}
	})
}

// TestConsoleRoutesListed keeps consoleRoutes complete: a console route
// added to routes.go without a row there fails here.
func TestConsoleRoutesListed(t *testing.T) {
	h := handlers.New(nil, nil)
	e := handlers.NewServer(h)
	listed := map[string]bool{}
	for _, r := range consoleRoutes {
		p := r.path
		for _, ph := range []string{"{case}", "{op}", "{user}", "{token}", "{hook}"} {
			p = strings.ReplaceAll(p, ph, ":id")
		}
		listed[r.method+" "+p] = true
	}
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/api/") || strings.HasPrefix(r.Path, "/static") || r.Path == "/login" ||
			r.Path == "/healthz" || r.Path == "/readyz" || r.Path == "/metrics" || r.Method == "echo_route_any" || strings.HasSuffix(r.Name, "NotFoundHandler") {
			continue
		}
		if !listed[r.Method+" "+r.Path] {
			t.Errorf("console route %s %s is not in consoleRoutes (access matrix)", r.Method, r.Path)
		}
	}
}
