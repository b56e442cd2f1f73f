package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// nextCases are sign-in `next` values and where the sign-in must send the
// user: the value itself when it is a path on this site, else "/".
var nextCases = []struct{ next, want string }{
	// Paths on this site.
	{"/", "/"},
	{"/x", "/x"},
	{"/cases/c_1?tab=a#b", "/cases/c_1?tab=a#b"},
	{"/?reason=version_mismatch&q=a%20b", "/?reason=version_mismatch&q=a%20b"},
	{"/audit?actor=%2F%2Fx", "/audit?actor=%2F%2Fx"}, // decoded, still a path here
	{"/a%2Fb", "/a%2Fb"},
	{"/?q=100%25", "/?q=100%25"},
	{"/x//y", "/x//y"},
	{"/@evil.example", "/@evil.example"},
	{"/login?next=//evil.example", "/login?next=//evil.example"},
	// Other hosts, as browsers read them.
	{"", "/"},
	{"x", "/"},
	{"//x", "/"},
	{"//evil.example/path", "/"},
	{"///x", "/"},
	{"/\\x", "/"},
	{"/\\/x", "/"},
	{"\\/x", "/"},
	{"/x\\y", "/"}, // a backslash anywhere
	{"/\t/x", "/"}, // browsers drop tab, CR and LF: "//x"
	{"/\n/x", "/"},
	{"/\r/x", "/"},
	{" /x", "/"},
	{"/x y", "/"},
	{"/x\x00", "/"},
	{"/x\x7f", "/"},
	{"/x\u0085", "/"}, // C1
	{"/é", "/"},       // not ASCII: browsers send it percent-encoded
	{"https://x", "/"},
	{"http://evil.example/", "/"},
	{"HTTPS://evil.example", "/"},
	{"javascript:alert(1)", "/"},
	{"JavaScript:alert(1)", "/"},
	{"data:text/html,<script>alert(1)</script>", "/"},
	{"mailto:x@example.com", "/"},
	{"?next=/x", "/"},
	{"#/x", "/"},
	// Percent-encoded forms a normaliser would turn into the above.
	{"/%2F/x", "/"},
	{"/%2f/x", "/"},
	{"/%2F%2Fx", "/"},
	{"/%5Cx", "/"},
	{"/%5c/x", "/"},
	{"/%09/x", "/"},
	{"/%0d%0a/x", "/"},
	{"/x?q=%00", "/"},
	{"/%252F/x", "/"}, // twice
	{"/%25252F/x", "/"},
	{"/%2F/x?q=%zz", "/"}, // a bad escape further on hides nothing
	{"/x%", "/"},          // not a URL
}

func TestSafeNext(t *testing.T) {
	for _, tt := range nextCases {
		if got := handlers.SafeNext(tt.next); got != tt.want {
			t.Errorf("safeNext(%q) = %q, want %q", tt.next, got, tt.want)
		}
	}
}

// TestConsoleLoginNext signs in with each next: the Location is the path
// when it stays on this site, "/" otherwise; the form carries the same.
// On the old safeNext, "/\\x", "/\t/x", "/%2F/x" and others went through.
// One engine: the redirect is the handler's, and each case costs a bcrypt
// sign-in; sign-in itself is tested on both.
func TestConsoleLoginNext(t *testing.T) {
	t.Parallel()
	srv, _ := consoleServer(t, store.SQLite)
	b := newBrowser(t, srv.URL)
	for _, tt := range nextCases {
		_, page := b.get("/login?next=" + url.QueryEscape(tt.next))
		if field := `name="next" value="` + html.EscapeString(tt.want) + `"`; !strings.Contains(page, field) {
			t.Errorf("GET /login?next=%q: the form does not carry %s", tt.next, field)
		}
		code, body, hdr := b.post("/login", url.Values{"email": {"support@example.com"}, "password": {"correct horse battery"},
			"csrf": {b.csrf}, "next": {tt.next}})
		if code != http.StatusSeeOther || hdr.Get("Location") != tt.want {
			t.Errorf("sign-in with next %q: %d to %q, want 303 to %q: %.200s", tt.next, code, hdr.Get("Location"), tt.want, body)
		}
	}
}

// TestConsoleLoginCSRFNotFromQuery: the login form's double-submit token
// counts from the body or the X-CSRF-Token header, never from the query
// string; credentials too come from the body only. (On the old code the
// token in the query was accepted.)
func TestConsoleLoginCSRFNotFromQuery(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		b := newBrowser(t, srv.URL)
		creds := url.Values{"email": {"support@example.com"}, "password": {"correct horse battery"}}
		b.get("/login")
		if code, _, _ := b.post("/login?csrf="+url.QueryEscape(b.csrf), creds); code != http.StatusForbidden {
			t.Errorf("login CSRF token in the query only: %d, want 403", code)
		}
		b.get("/login")
		q := "?email=support%40example.com&password=correct+horse+battery"
		if code, _, _ := b.post("/login"+q, url.Values{"csrf": {b.csrf}}); code != http.StatusUnauthorized {
			t.Errorf("credentials in the query: %d, want 401", code)
		}
		b.get("/login")
		if code, _, hdr := b.postWith("/login", creds, http.Header{"X-Csrf-Token": {b.csrf}}); code != http.StatusSeeOther {
			t.Errorf("login CSRF token in the header: %d %v, want 303", code, hdr)
		}
		b.get("/login")
		form := url.Values{"email": creds["email"], "password": creds["password"], "csrf": {b.csrf}}
		if code, _, _ := b.postMultipart("/login", form); code != http.StatusSeeOther {
			t.Errorf("login as multipart: %d, want 303", code)
		}
	})
}

// signIn posts the login form as if from client address addr (sent in
// X-Forwarded-For; believed only from a trusted proxy).
func signIn(b *browser, addr, email, password string) (int, string, http.Header) {
	b.t.Helper()
	b.get("/login")
	var hdr http.Header
	if addr != "" {
		hdr = http.Header{"X-Forwarded-For": {addr}, "X-Real-Ip": {addr}}
	}
	return b.postWith("/login", url.Values{"email": {email}, "password": {password}, "csrf": {b.csrf}, "next": {"/"}}, hdr)
}

// TestConsoleLoginThrottle: over HTTP, behind a trusted proxy naming ten
// attacking addresses, each is answered 429 with Retry-After (its own
// pair's delay after its third failure: the account's failures elsewhere
// do not lengthen it, store.throttleWait) and words saying when, while the
// owner signs in from a clean address. (On the old code the owner got 429.)
func TestConsoleLoginThrottle(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(t0)
		srv, _ := consoleServerWith(t, e, consoleSetup{clock: clk, proxies: []string{"127.0.0.1/32", "::1/128"}})
		const owner = "reviewer@example.com"
		b := newBrowser(t, srv.URL)
		for i := 1; i <= 10; i++ {
			addr := fmt.Sprintf("203.0.113.%d", i)
			for try := 1; ; try++ {
				code, body, hdr := signIn(b, addr, owner, "guess guess guess")
				if code == http.StatusUnauthorized && try <= 3 {
					continue
				}
				if code != http.StatusTooManyRequests || try != 4 {
					t.Fatalf("attacker %s, try %d: %d, want 429 at the fourth", addr, try, code)
				}
				if ra := hdr.Get("Retry-After"); ra != "1" {
					t.Fatalf("attacker %s: Retry-After %q, want 1 (its own third failure's delay)", addr, ra)
				}
				if !strings.Contains(body, "Too many failed sign-ins. Try again in ") || !strings.Contains(body, `name="password"`) {
					t.Fatalf("attacker %s: the 429 page does not say when to try again: %.300s", addr, body)
				}
				break
			}
		}
		if code, _, hdr := signIn(b, "198.51.100.7", owner, "correct horse battery"); code != http.StatusSeeOther || hdr.Get("Location") != "/" {
			t.Fatalf("the owner from a clean address: %d, want 303 to /", code)
		}
		if code, _, hdr := signIn(newBrowser(t, srv.URL), "203.0.113.4", owner, "correct horse battery"); code != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" {
			t.Fatalf("the right password from an attacking address: %d (Retry-After %q), want 429 (1)", code, hdr.Get("Retry-After"))
		}
	})
}

// TestConsoleLoginDeviceCookie: over HTTP, from one address (an office
// behind one NAT: every request here comes from 127.0.0.1), a colleague
// failing five times on the owner's account is refused 429, the right
// password included; the owner's browser, which signed in there before,
// holds a device cookie and signs in all the same. The cookie is for the
// sign-in form alone: HttpOnly, SameSite=Strict, path /login, living as
// long as the store honours it. Before, the owner got 429 for 15 minutes.
func TestConsoleLoginDeviceCookie(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(t0)
		srv, _ := consoleServerWith(t, e, consoleSetup{clock: clk})
		const owner = "reviewer@example.com"
		mine := newBrowser(t, srv.URL)
		code, _, hdr := signIn(mine, "", owner, "correct horse battery")
		if code != http.StatusSeeOther {
			t.Fatalf("the owner's first sign-in: %d", code)
		}
		var device *http.Cookie
		for _, ck := range (&http.Response{Header: hdr}).Cookies() {
			if ck.Name == "limbo_device" {
				device = ck
			}
		}
		if device == nil || device.Value == "" || !device.HttpOnly || device.SameSite != http.SameSiteStrictMode || device.Path != "/login" ||
			device.MaxAge != int(store.DeviceTokenLife/time.Second) {
			t.Fatalf("the device cookie: %+v; want HttpOnly, SameSite=Strict, path /login, max-age %d", device, int(store.DeviceTokenLife/time.Second))
		}
		mine.get("/")
		if code, _, _ := mine.post("/logout", url.Values{"csrf": {mine.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("signing out: %d", code)
		}

		colleague := newBrowser(t, srv.URL)
		for _, wait := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
			clk.Advance(wait)
			if code, _, _ := signIn(colleague, "", owner, "guess guess guess"); code != http.StatusUnauthorized {
				t.Fatalf("a guess: %d, want 401", code)
			}
		}
		if code, _, _ := signIn(colleague, "", owner, "correct horse battery"); code != http.StatusTooManyRequests {
			t.Fatalf("the right password from the colleague's browser: %d, want 429", code)
		}
		if code, body, hdr := signIn(mine, "", owner, "correct horse battery"); code != http.StatusSeeOther || hdr.Get("Location") != "/" {
			t.Fatalf("the owner's browser, holding its device cookie: %d, want 303 to /: %.300s", code, body)
		}
	})
}

// TestConsoleLoginEmailNoAccountCanHave: an email longer than any
// account's (which passes the form's rule, 1,000 characters) is answered
// 400 with the form again and words saying why, in both languages and on
// both engines, with nothing counted; it was a failed guess, 401. (A NUL
// byte or invalid UTF-8 never reaches the store: checkForm.)
func TestConsoleLoginEmailNoAccountCanHave(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		email := strings.Repeat("😀", 700) + "@example.com"
		for lang, want := range map[string]string{"en": "No account can have that email address.", "it": "Nessun account può avere questo indirizzo email."} {
			b := newBrowser(t, srv.URL)
			b.get("/login")
			form := url.Values{"email": {email}, "password": {"correct horse battery"}, "csrf": {b.csrf}, "next": {"/operations"}}
			code, body, _ := b.postWith("/login", form, http.Header{"Accept-Language": {lang}})
			if code != http.StatusBadRequest || !strings.Contains(body, want) || !strings.Contains(body, `name="password"`) ||
				!strings.Contains(body, `name="next" value="/operations"`) || strings.Contains(body, "correct horse battery") {
				t.Errorf("%s: %d, want 400 with the form again and %q: %.600s", lang, code, want, body)
			}
		}
	})
}

// loginAddrs lists the audit trail's login events as "action addr".
func loginAddrs(t *testing.T, st *store.Store) []string {
	t.Helper()
	evs, err := st.AuditEvents(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if !strings.HasPrefix(ev.Action, "login.") {
			continue
		}
		var d struct{ Addr string }
		if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Action+" "+d.Addr)
	}
	return out
}

// TestConsoleClientAddress: the address that throttling counts and the
// audit records is the connection's peer unless the peer is a trusted
// proxy; then it is X-Forwarded-For's nearest untrusted address.
func TestConsoleClientAddress(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		const owner, wrong, right = "reviewer@example.com", "guess guess guess", "correct horse battery"
		// Spoofed headers move nothing: every try counts against the peer,
		// so after three failures the fourth "address" is delayed too.
		for _, proxies := range [][]string{nil, {"10.0.0.0/8"}} {
			t.Run(fmt.Sprintf("trusting %v", proxies), func(t *testing.T) {
				srv, st := consoleServerWith(t, e, consoleSetup{clock: storetest.NewClock(t0), proxies: proxies})
				b := newBrowser(t, srv.URL)
				for i := 1; i <= 3; i++ {
					if code, _, _ := signIn(b, fmt.Sprintf("203.0.113.%d", i), owner, wrong); code != http.StatusUnauthorized {
						t.Fatalf("failure %d: %d", i, code)
					}
				}
				if code, _, _ := signIn(b, "203.0.113.4", owner, right); code != http.StatusTooManyRequests {
					t.Fatalf("a spoofed X-Forwarded-For escaped the throttle: %d, want 429", code)
				}
				want := []string{"login.failed 127.0.0.1", "login.failed 127.0.0.1", "login.failed 127.0.0.1", "login.throttled 127.0.0.1"}
				if got := loginAddrs(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("audit addresses %v, want %v", got, want)
				}
			})
		}
		// Behind a trusted proxy (the test's own 127.0.0.1), the client named
		// in X-Forwarded-For is the address.
		t.Run("trusting 127.0.0.1/32", func(t *testing.T) {
			srv, st := consoleServerWith(t, e, consoleSetup{clock: storetest.NewClock(t0), proxies: []string{"127.0.0.1/32"}})
			b := newBrowser(t, srv.URL)
			for i := 1; i <= 3; i++ {
				if code, _, _ := signIn(b, "203.0.113.1", owner, wrong); code != http.StatusUnauthorized {
					t.Fatalf("failure %d: %d", i, code)
				}
			}
			if code, _, _ := signIn(b, "203.0.113.1", owner, right); code != http.StatusTooManyRequests {
				t.Fatalf("the failing client: %d, want 429", code)
			}
			if code, _, _ := signIn(b, "203.0.113.2", owner, wrong); code != http.StatusUnauthorized {
				t.Fatalf("another client: %d, want 401", code)
			}
			// A chain: the client is the nearest address the proxies do not own.
			if code, _, _ := signIn(b, "198.51.100.9, 203.0.113.3", owner, right); code != http.StatusSeeOther {
				t.Fatalf("a clean client: %d, want 303", code)
			}
			if code, _, _ := signIn(b, "", owner, right); code != http.StatusSeeOther {
				t.Fatalf("the proxy itself: %d, want 303", code)
			}
			want := []string{"login.failed 203.0.113.1", "login.failed 203.0.113.1", "login.failed 203.0.113.1", "login.throttled 203.0.113.1",
				"login.failed 203.0.113.2", "login.succeeded 203.0.113.3", "login.succeeded 127.0.0.1"}
			if got := loginAddrs(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("audit addresses %v, want %v", got, want)
			}
		})
	})
}

// TestConsoleSignInAgainAfterAForm: a form sent after the session ended
// (idle while a reason was being typed) goes to the sign-in form, and
// signing in leads back to the page the form was on. It led to the form's
// own address, which only takes POST: the reviewer signed in to a 405.
func TestConsoleSignInAgainAfterAForm(t *testing.T) {
	t.Parallel()
	clk := storetest.NewClock(time.Now().UTC())
	srv, st := consoleServerWith(t, store.SQLite, consoleSetup{clock: clk})
	caseID := needsReview(t, st, "idle-1")
	b := newBrowser(t, srv.URL)
	b.login("reviewer@example.com")
	page := "/cases/" + caseID
	if code, _ := b.get(page); code != http.StatusOK {
		t.Fatalf("GET %s: %d", page, code)
	}
	clk.Advance(31 * time.Minute) // idle past the session's 30 minutes
	for _, tt := range []struct{ path, referer, want string }{
		{page + "/decision", srv.URL + page + "?tab=evidence", page + "?tab=evidence"},
		{"/logout", srv.URL + "/operations", "/operations"},
		{page + "/claim", "", "/"},                            // no Referer: the queue
		{page + "/claim", "https://evil.example" + page, "/"}, // another site's: the queue
	} {
		code, _, hdr := b.postWith(tt.path, url.Values{"csrf": {b.csrf}, "action": {"fail"}, "reason": {"typed for a while"}},
			http.Header{"Referer": {tt.referer}})
		loc, _ := url.Parse(hdr.Get("Location"))
		if code != http.StatusSeeOther || loc == nil || loc.Path != "/login" || loc.Query().Get("next") != tt.want {
			t.Errorf("POST %s (Referer %q) after the session ended: %d to %q, want 303 to /login?next=%s", tt.path, tt.referer, code, hdr.Get("Location"), tt.want)
		}
	}
	// Signing in from there leads to a page, not to a 405.
	_, _, hdr := b.postWith(page+"/decision", url.Values{"csrf": {b.csrf}, "action": {"fail"}, "reason": {"typed"}},
		http.Header{"Referer": {srv.URL + page}})
	b.get(hdr.Get("Location"))
	loc, _ := url.Parse(hdr.Get("Location"))
	code, _, hdr := b.post("/login", url.Values{"email": {"reviewer@example.com"}, "password": {"correct horse battery"}, "csrf": {b.csrf},
		"next": {loc.Query().Get("next")}})
	if code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", code)
	}
	if code, _ := b.get(hdr.Get("Location")); code != http.StatusOK {
		t.Errorf("after signing in again: GET %s %d, want the page the form was on", hdr.Get("Location"), code)
	}
}

// TestConsolePollsDoNotKeepTheSessionAlive: the idle limit (30 minutes)
// counts what the user does, not what an open tab asks by itself — the
// queue's refresh every 5 s, the case page's poll, the live stream
// reconnecting. Each of them counted as use, so a console left open on
// the queue never idled out: only the 12-hour limit ended it.
func TestConsolePollsDoNotKeepTheSessionAlive(t *testing.T) {
	t.Parallel()
	clk := storetest.NewClock(time.Now().UTC())
	srv, st := consoleServerWith(t, store.SQLite, consoleSetup{clock: clk})
	caseID := needsReview(t, st, "poll-1")
	polls := []struct {
		path string
		hdr  http.Header
	}{
		{"/?claimed=", http.Header{"Hx-Request": {"true"}, "Hx-Trigger": {"queue"}, "Hx-Target": {"queue"}}},
		{"/cases/" + caseID + "/live", http.Header{"Accept": {"application/json"}}},
		{"/events", http.Header{"Accept": {"text/event-stream"}}},
	}
	poll := func(b *browser, i int, mustLive bool) {
		t.Helper()
		for _, p := range polls[i : i+1] {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+p.path, nil)
			req.Header = p.hdr.Clone()
			if p.path == "/events" {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				req = req.WithContext(ctx)
			}
			resp, err := b.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if mustLive && resp.StatusCode != http.StatusOK {
				t.Fatalf("poll %s: %d", p.path, resp.StatusCode)
			}
		}
	}
	// One user per poll, each leaving a tab open with that poll alone.
	var idle []*browser
	for _, email := range []string{"reviewer@example.com", "manager@example.com", "admin@example.com"} {
		b := newBrowser(t, srv.URL)
		b.login(email)
		idle = append(idle, b)
	}
	busy := newBrowser(t, srv.URL)
	busy.login("support@example.com")
	for range 4 { // 4 × 10 minutes of polls
		clk.Advance(10 * time.Minute)
		for i, b := range idle {
			poll(b, i, false) // (past 30 minutes it is refused: the session ended)
			poll(busy, i, true)
		}
		if code, _ := busy.get("/"); code != http.StatusOK {
			t.Fatalf("busy GET / at %s: %d", clk, code)
		}
	}
	for i, b := range idle {
		if code, _ := b.get("/"); code != http.StatusSeeOther {
			t.Errorf("after 40 minutes of %s alone: GET / %d, want 303 to the sign-in form (idle)", polls[i].path, code)
		}
	}
	if code, _ := busy.get("/"); code != http.StatusOK {
		t.Errorf("used every 10 minutes: GET / %d, want 200", code)
	}
}

// TestConsoleStillHereKeepsTheSessionAlive: a reviewer typing a reason on
// a case page for 40 minutes asks the server for nothing but the page's
// own polls, which do not count as use; the page's "still here" (sent on
// input, at most once a minute) does. Beside them, a tab that only polls
// still idles out, and its "still here" once the session has ended does
// not bring it back.
func TestConsoleStillHereKeepsTheSessionAlive(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Now().UTC())
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk})
		caseID := needsReview(t, st, "still-here-1")
		poll := func(b *browser) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/cases/"+caseID+"/live", nil)
			req.Header.Set("Accept", "application/json")
			resp, err := b.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		stillHere := func(b *browser) int {
			t.Helper()
			code, _, _ := b.postWith("/session/still-here", url.Values{}, http.Header{"X-Csrf-Token": {b.csrf}})
			return code
		}
		typing := newBrowser(t, srv.URL)
		typing.login("reviewer@example.com")
		typing.get("/cases/" + caseID)
		idle := newBrowser(t, srv.URL)
		idle.login("manager@example.com")
		idle.get("/cases/" + caseID)
		for range 4 { // 4 × 10 minutes on the case page
			clk.Advance(10 * time.Minute)
			poll(typing)
			poll(idle)
			if code := stillHere(typing); code != http.StatusNoContent {
				t.Fatalf("still here at %s: %d, want 204", clk, code)
			}
		}
		if code, _ := typing.get("/cases/" + caseID); code != http.StatusOK {
			t.Errorf("after 40 minutes of typing (a still-here every 10): GET the case %d, want 200", code)
		}
		if code, _ := idle.get("/cases/" + caseID); code != http.StatusSeeOther {
			t.Errorf("after 40 minutes of polls alone: GET the case %d, want 303 to the sign-in form (idle)", code)
		}
		if code := stillHere(idle); code != http.StatusSeeOther {
			t.Errorf("still here after the session ended: %d, want 303 to the sign-in form", code)
		}
		if code, _ := idle.get("/"); code != http.StatusSeeOther {
			t.Errorf("a still-here after the session ended brought it back: GET / %d", code)
		}
	})
}

// TestConsoleLoginFormExpired: a sign-in form older than its token (an
// hour: a tab left on the sign-in page after the session idled out) is
// answered with the form again — a fresh token, the email kept, words
// saying why — on which signing in works. It was an error page that said
// to reload, with nothing to sign in on.
func TestConsoleLoginFormExpired(t *testing.T) {
	t.Parallel()
	srv, _ := consoleServer(t, store.SQLite)
	for _, lang := range []string{"en", "it"} {
		b := newBrowser(t, srv.URL)
		b.get("/login")
		b.c.Jar, _ = cookiejar.New(nil) // the form's cookie has expired
		form := url.Values{"email": {"support@example.com"}, "password": {"correct horse battery"}, "csrf": {b.csrf}, "next": {"/operations"}}
		code, body, _ := b.postWith("/login", form, http.Header{"Accept-Language": {lang}})
		want := map[string]string{"en": "The sign-in form had expired", "it": "Il modulo di accesso era scaduto"}[lang]
		if code != http.StatusForbidden || !strings.Contains(body, want) || !strings.Contains(body, `value="support@example.com"`) ||
			!strings.Contains(body, `name="next" value="/operations"`) || strings.Contains(body, "correct horse battery") {
			t.Fatalf("%s: an expired sign-in form: %d, want 403 with the form again, the email kept, not the password, and %q: %.600s", lang, code, want, body)
		}
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s: no fresh token in the form", lang)
		}
		form.Set("csrf", m[1])
		if code, _, hdr := b.post("/login", form); code != http.StatusSeeOther || hdr.Get("Location") != "/operations" {
			t.Errorf("%s: signing in on the form given again: %d to %q, want 303 to /operations", lang, code, hdr.Get("Location"))
		}
	}
	// A token that is not the form's is refused as before: nothing checked.
	b := newBrowser(t, srv.URL)
	b.get("/login")
	if code, _, _ := b.post("/login", url.Values{"email": {"support@example.com"}, "password": {"correct horse battery"}, "csrf": {"forged"}}); code != http.StatusForbidden {
		t.Errorf("forged token: %d, want 403", code)
	}
}

// TestConsoleSignInAsAnotherEndsTheFirst: signing in as another user in a
// browser that holds a live session (a shared computer: support signed
// in, then a reviewer) ends the first session server-side. Before, it
// stayed live until its idle limit, and a copy of its cookie went on
// working as that user.
func TestConsoleSignInAsAnotherEndsTheFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		u, _ := url.Parse(srv.URL)
		copied := newBrowser(t, srv.URL)
		copied.c.Jar.SetCookies(u, b.c.Jar.Cookies(u))
		if code, _ := copied.get("/"); code != http.StatusOK {
			t.Fatalf("the copied cookie before: %d, want the queue", code)
		}
		b.login("reviewer@example.com")
		if code, _ := copied.get("/"); code == http.StatusOK {
			t.Errorf("the first user's session is still live after another signed in on the same browser")
		}
		sup, err := st.UserByEmail(context.Background(), "support@example.com")
		if err != nil {
			t.Fatal(err)
		}
		var live int
		if err := st.DB().Get(&live, st.DB().Rebind(`SELECT COUNT(*) FROM sessions WHERE user_id = ? AND ended_at IS NULL`), sup.ID); err != nil || live != 0 {
			t.Errorf("support's live sessions: %d, %v; want 0", live, err)
		}
		if code, _ := b.get("/"); code != http.StatusOK {
			t.Errorf("the reviewer's session: %d", code)
		}
	})
}
