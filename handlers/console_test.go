package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// consoleServer starts a server with the console on a fresh database and
// one user per role (password "correct horse battery"); with, if given,
// sets more of the handlers up.
func consoleServer(t testing.TB, e store.Engine, with ...func(*handlers.Handlers)) (*httptest.Server, *store.Store) {
	t.Helper()
	return consoleServerWith(t, e, consoleSetup{with: with})
}

// consoleSetup is what a console test may change about the server.
type consoleSetup struct {
	clock   *storetest.Clock // nil: the real clock
	cfg     *review.Config   // nil: no destinations configured
	proxies []string         // trusted proxies (CIDR)
	with    []func(*handlers.Handlers)
}

func consoleServerWith(t testing.TB, e store.Engine, cs consoleSetup) (*httptest.Server, *store.Store) {
	t.Helper()
	opt := store.Options{Config: cs.cfg}
	if cs.clock != nil {
		opt.Clock = cs.clock.Now
	}
	st := storetest.Open(t, e, opt)
	h := handlers.New(st, nil)
	h.Console = handlers.NewConsole(make([]byte, 64), make([]byte, 32), false, store.SessionPolicy{})
	proxies, err := review.ParseTrustedProxies(cs.proxies)
	if err != nil {
		t.Fatal(err)
	}
	h.TrustedProxies = proxies
	for _, f := range cs.with {
		f(h)
	}
	srv := httptest.NewServer(handlers.NewServer(h))
	t.Cleanup(srv.Close)
	for _, r := range review.AllRoles() {
		if _, err := st.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: string(r) + "@example.com", Password: "correct horse battery",
			Role: r, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, st
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t    testing.TB
	c    *http.Client
	base string
	csrf string
}

func newBrowser(t testing.TB, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// casePageIn is case caseID's page as the user email reads it in lang
// ("en", "it"), its text unescaped and its spaces folded so that a sentence
// wrapped in the markup can be looked for whole. A page that is not 200
// ends the test.
func casePageIn(t testing.TB, st *store.Store, b *browser, email, lang, caseID string) string {
	t.Helper()
	u, err := st.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetLanguage(context.Background(), u.Principal(), lang); err != nil {
		t.Fatal(err)
	}
	code, body := b.get("/cases/" + caseID)
	if code != 200 {
		t.Fatalf("%s: case page %d", lang, code)
	}
	return strings.Join(strings.Fields(html.UnescapeString(body)), " ")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindStringSubmatch(string(body)); m != nil {
		b.csrf = m[1]
	}
	return resp.StatusCode, string(body)
}

func (b *browser) post(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	return b.postWith(path, form, nil)
}

// postWith posts an urlencoded form with extra request headers.
func (b *browser) postWith(path string, form url.Values, hdr http.Header) (int, string, http.Header) {
	b.t.Helper()
	return b.send(path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()), hdr)
}

// postMultipart posts form as multipart/form-data.
func (b *browser) postMultipart(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, vs := range form {
		for _, v := range vs {
			if err := w.WriteField(k, v); err != nil {
				b.t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.t.Fatal(err)
	}
	return b.send(path, w.FormDataContentType(), &buf, nil)
}

func (b *browser) send(path, contentType string, body io.Reader, hdr http.Header) (int, string, http.Header) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), resp.Header
}

var (
	caseVersionField = regexp.MustCompile(`name="version" value="([0-9]+)"`)
	opVersionField   = regexp.MustCompile(`name="op_version" value="([0-9]+)"`)
)

// setFormVersions copies the versions a case page's decision form carries
// into form (none when the page offers no form).
func setFormVersions(form url.Values, page string) {
	if m := caseVersionField.FindStringSubmatch(page); m != nil {
		form.Set("version", m[1])
	}
	if m := opVersionField.FindStringSubmatch(page); m != nil {
		form.Set("op_version", m[1])
	}
}

// decide posts a decision on a case as its page's form would: with the
// CSRF token and the versions the page shows (read from it first).
func (b *browser) decide(caseID string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	_, page := b.get("/cases/" + caseID)
	setFormVersions(form, page)
	form.Set("csrf", b.csrf)
	return b.post("/cases/"+caseID+"/decision", form)
}

func (b *browser) login(email string) {
	b.t.Helper()
	b.get("/login")
	code, body, hdr := b.post("/login", url.Values{"email": {email}, "password": {"correct horse battery"}, "csrf": {b.csrf}, "next": {"/"}})
	if code != http.StatusSeeOther || hdr.Get("Location") != "/" {
		b.t.Fatalf("login as %s: %d %s", email, code, body)
	}
	b.get("/")
}

// reported registers r, starts its first attempt and reports o for it,
// returning the operation as registered.
func reported(t *testing.T, st *store.Store, r review.Registration, o review.Outcome) *review.Operation {
	t.Helper()
	ctx := context.Background()
	op, _, err := st.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: r.Tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordOutcome(ctx, r.Tenant, op.ID, g.N, o, "test"); err != nil {
		t.Fatal(err)
	}
	return op
}

// needsReview makes an operation whose result is for another version, so
// a case opens.
func needsReview(t *testing.T, st *store.Store, source string) string {
	t.Helper()
	return needsReviewOn(t, st, "acme", "files", source)
}

// needsReviewOn is needsReview for tenant, on destination dest, the
// operation with flags.
func needsReviewOn(t *testing.T, st *store.Store, tenant, dest, source string, flags ...review.Flag) string {
	t.Helper()
	op := reported(t, st, review.Registration{Tenant: tenant, SourceRef: source, LogicalVersion: "7", Action: "render",
		Destination: dest, Risk: review.RiskCompensableWrite, Flags: flags, Payload: []byte(`{"note":"<script>alert(1)</script>\"><img src=x onerror=alert(2)>"}`), Actor: "test"},
		review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Resource: &review.ResourceRef{Ref: "file-" + source, Kind: "file", Version: "6"}})
	cs, err := st.CasesForOperation(context.Background(), op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases: %v %+v", err, cs)
	}
	return cs[0].ID
}

func TestConsoleFlow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "doc-1")

		anon := newBrowser(t, srv.URL)
		if code, _ := anon.get("/"); code != http.StatusSeeOther {
			t.Fatalf("anonymous queue: %d, want a redirect to /login", code)
		}
		anon.get("/login")
		if code, body, _ := anon.post("/login", url.Values{"email": {"support@example.com"}, "password": {"nope nope nope"}, "csrf": {anon.csrf}}); code != http.StatusUnauthorized || !strings.Contains(body, "Wrong email or password") {
			t.Fatalf("bad password: %d", code)
		}
		if code, _, _ := anon.post("/login", url.Values{"email": {"support@example.com"}, "password": {"correct horse battery"}}); code != http.StatusForbidden {
			t.Fatalf("login without its CSRF token: %d, want 403", code)
		}

		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		code, body := sup.get("/?reason=version_mismatch")
		if code != 200 || !strings.Contains(body, caseID) {
			t.Fatalf("queue: %d, case %s missing", code, caseID)
		}
		code, body = sup.get("/cases/" + caseID)
		if code != 200 || strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, "&lt;script&gt;") {
			t.Fatalf("case page: %d; the payload must render inert", code)
		}
		// Mutations need the session's CSRF token.
		if code, _, _ := sup.post("/cases/"+caseID+"/claim", url.Values{}); code != http.StatusForbidden {
			t.Fatalf("claim without CSRF: %d, want 403", code)
		}
		if code, _, _ := sup.post("/cases/"+caseID+"/claim", url.Values{"csrf": {"forged"}}); code != http.StatusForbidden {
			t.Fatalf("claim with a wrong CSRF: %d, want 403", code)
		}
		if code, _, _ := sup.post("/cases/"+caseID+"/claim", url.Values{"csrf": {sup.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("claim: %d", code)
		}
		if code, body, _ := sup.decide(caseID, url.Values{"action": {"confirm"}, "reason": {"x"}}); code != http.StatusUnprocessableEntity || !strings.Contains(body, "reason") {
			t.Fatalf("decision without a reason: %d", code)
		}
		if code, _, _ := sup.decide(caseID, url.Values{"action": {"confirm"}, "candidate": {"file-doc-1"},
			"reason": {"the v6 file is what the customer wanted"}}); code != http.StatusSeeOther {
			t.Fatalf("confirm: %d", code)
		}
		if _, body := sup.get("/"); strings.Contains(body, caseID) {
			t.Fatalf("a decided case stays in the queue")
		}
		// A second decision on the same case is refused with who decided.
		if code, body, _ := sup.decide(caseID, url.Values{"action": {"fail"}, "reason": {"second thoughts"}}); code != http.StatusConflict || !strings.Contains(body, "support@example.com") {
			t.Fatalf("second decision: %d", code)
		}

		// A manager may read but not decide.
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		other := needsReview(t, st, "doc-2")
		if code, _ := mgr.get("/cases/" + other); code != 200 {
			t.Fatalf("manager reads a case: %d", code)
		}
		if code, _, _ := mgr.post("/cases/"+other+"/claim", url.Values{"csrf": {mgr.csrf}}); code != http.StatusForbidden {
			t.Fatalf("manager claims: %d, want 403", code)
		}

		// Logout ends the session; the old cookie is dead.
		jarCookies := sup.c.Jar.Cookies(mustURL(srv.URL))
		if code, _, _ := sup.post("/logout", url.Values{"csrf": {sup.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("logout: %d", code)
		}
		replay := newBrowser(t, srv.URL)
		replay.c.Jar.SetCookies(mustURL(srv.URL), jarCookies)
		if code, _ := replay.get("/"); code != http.StatusSeeOther {
			t.Fatalf("replayed cookie after logout: %d, want a redirect to /login", code)
		}
	})
}

func mustURL(s string) *url.URL {
	u, _ := url.Parse(s)
	return u
}

func TestConsoleAudit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "doc-1")
		// An actor name a spreadsheet would run as a formula.
		if _, err := st.CreateToken(context.Background(), review.Operator("=HYPERLINK(\"x\")"), "acme", "=cmd|' /C calc'!A0"); err != nil {
			t.Fatal(err)
		}
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		code, body := mgr.get("/audit?action=case.")
		if code != 200 || !strings.Contains(body, `title="case.opened"`) || strings.Contains(body, `title="attempt.started"`) {
			t.Fatalf("audit search: %d", code)
		}
		code, body = mgr.get("/audit.csv")
		if code != 200 || !strings.Contains(body, "'=HYPERLINK") || strings.Contains(body, "\n=") || strings.Contains(body, ",=") {
			t.Fatalf("CSV export must neutralise formulas: %d\n%s", code, body)
		}
		keyID := store.AuditKeyID(st.AuditPublicKey())
		if code, body := mgr.get("/audit/verify"); code != 200 || !strings.Contains(body, "The chain holds") ||
			!strings.Contains(body, keyID) || !strings.Contains(body, "No anchor directory is configured") {
			t.Fatalf("verify: %d\n%s", code, body)
		}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		if code, _ := sup.get("/audit"); code != http.StatusForbidden {
			t.Fatalf("support reads the audit history: %d, want 403", code)
		}
	})
}

// TestConsoleAuditDateBounds: the audit search's dates answer the same on
// both engines at the ends of the calendar. A "to" of 9999-12-31 is no
// upper bound (the day after it is year 10000, which SQLite compared as
// text: it showed nothing there and everything on PostgreSQL), on the page,
// the CSV export and the verification alike; a date in year 0000 is
// refused, as every time outside years 0001–9999 is.
func TestConsoleAuditDateBounds(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "doc-1")
		mgr := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		mgr.login("manager@example.com")
		_, all := mgr.get("/audit.csv")
		if n := strings.Count(all, "\n"); n < 3 {
			t.Fatalf("the unfiltered export has %d lines", n)
		}
		for _, q := range []string{"to=9999-12-31", "from=0001-01-01&to=9999-12-31"} {
			if code, body := mgr.get("/audit.csv?" + q); code != http.StatusOK || body != all {
				t.Errorf("/audit.csv?%s: %d, %d lines; want every event, %d lines", q, code, strings.Count(body, "\n"), strings.Count(all, "\n"))
			}
			for _, page := range []string{"/audit?", "/audit/verify?"} {
				if code, body := mgr.get(page + q); code != http.StatusOK || !strings.Contains(body, `title="case.opened"`) {
					t.Errorf("%s%s: %d, want the events listed", page, q, code)
				}
			}
		}
		if code, body := mgr.get("/audit.csv?from=9999-12-31"); code != http.StatusOK || strings.Count(body, "\n") != 1 {
			t.Errorf("/audit.csv?from=9999-12-31: %d, want the header alone:\n%s", code, body)
		}
		for _, path := range []string{"/audit?from=0000-12-31", "/audit.csv?to=0000-01-01", "/audit/verify?from=0000-06-01"} {
			if code, body := mgr.get(path); code != http.StatusBadRequest || !strings.Contains(body, "Le date vanno dal 0001-01-01 al 9999-12-31.") {
				t.Errorf("%s: %d, want 400 saying the range:\n%s", path, code, alerts(body))
			}
		}
	})
}

// TestConsoleAuditVerifyAnchor: with an anchor directory configured, the
// console's verification checks against it and says so; a checkpoint
// deleted from the database is named by its first seq.
func TestConsoleAuditVerifyAnchor(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		dir := t.TempDir()
		srv, st := consoleServer(t, e, func(h *handlers.Handlers) { h.AuditAnchor = dir })
		needsReview(t, st, "doc-1")
		storetest.Sealed(t, st)
		w, err := anchor.NewWriter(dir, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.CatchUp(context.Background()); err != nil {
			t.Fatal(err)
		}
		cps, err := st.CheckpointsAfter(context.Background(), 0, 1000)
		if err != nil || len(cps) == 0 {
			t.Fatalf("checkpoints: %v %v", cps, err)
		}
		newest := cps[len(cps)-1]
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		code, body := mgr.get("/audit/verify")
		if want := fmt.Sprintf("%d anchored checkpoints checked, the newest %d", len(cps), newest.ID); code != 200 ||
			!strings.Contains(body, "The chain holds") || !strings.Contains(body, dir) || !strings.Contains(body, want) {
			t.Fatalf("verify with an anchor: %d, want %q\n%s", code, want, body)
		}
		if _, err := st.DB().Exec(st.DB().Rebind(`DELETE FROM audit_checkpoints WHERE id = ?`), newest.ID); err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(newest.Seqs, "-")
		first, _, _ = strings.Cut(first, ",")
		code, body = mgr.get("/audit/verify")
		if want := "The chain is broken at seq " + first + ":"; code != 200 || !strings.Contains(body, want) {
			t.Fatalf("verify after deleting checkpoint %d: %d, want %q\n%s", newest.ID, code, want, body)
		}
	})
}

func TestConsoleDashboard(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "doc-1")
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		code, body := mgr.get("/dashboard?window=24h")
		if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, "files") {
			t.Fatalf("dashboard: %d", code)
		}
		if code, _ := mgr.get("/dashboard?window=forever"); code != http.StatusBadRequest {
			t.Fatalf("bad window: %d, want 400", code)
		}
	})
}

func TestConsoleAdmin(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.CreateToken(ctx, review.Operator("test"), "acme", "first"); err != nil { // the tenant exists
			t.Fatal(err)
		}
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		code, body, _ := adm.post("/admin/users", url.Values{"csrf": {adm.csrf}, "email": {"new@example.com"}, "role": {"support"}, "tenants": {"acme"}})
		m := regexp.MustCompile(`Password \(shown once\): <code>([^<]+)</code>`).FindStringSubmatch(body)
		if code != 200 || m == nil {
			t.Fatalf("add user: %d", code)
		}
		if code, body, _ := adm.post("/admin/users", url.Values{"csrf": {adm.csrf}, "email": {"new@example.com"}, "role": {"support"}, "tenants": {"acme"}}); code != http.StatusUnprocessableEntity || !strings.Contains(body, "exists") {
			t.Fatalf("duplicate user: %d", code)
		}
		// The new user signs in; disabling them ends that session at once.
		nu := newBrowser(t, srv.URL)
		nu.get("/login")
		if code, _, _ := nu.post("/login", url.Values{"email": {"new@example.com"}, "password": {m[1]}, "csrf": {nu.csrf}, "next": {"/"}}); code != http.StatusSeeOther {
			t.Fatalf("new user login: %d", code)
		}
		if code, _ := nu.get("/"); code != 200 {
			t.Fatalf("new user queue: %d", code)
		}
		u, err := st.UserByEmail(ctx, "new@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := adm.post("/admin/users/"+u.ID, url.Values{"csrf": {adm.csrf}, "role": {"support"}, "tenants": {"acme"}, "disabled": {"1"}}); code != http.StatusSeeOther {
			t.Fatalf("disable: %d", code)
		}
		if code, _ := nu.get("/"); code != http.StatusSeeOther {
			t.Fatalf("disabled user's session still works: %d", code)
		}
		// Tokens: created and shown once, then revoked.
		code, body, _ = adm.post("/admin/tokens", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "name": {"ci"}})
		tm := regexp.MustCompile(`<code>(limbo_[0-9a-f]{64})</code>`).FindStringSubmatch(body)
		if code != 200 || tm == nil {
			t.Fatalf("create token: %d", code)
		}
		ti, err := st.TenantForToken(ctx, tm[1])
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := adm.post("/admin/tokens/"+ti.ID+"/revoke", url.Values{"csrf": {adm.csrf}, "confirm": {"1"}}); code != http.StatusSeeOther {
			t.Fatalf("revoke: %d", code)
		}
		if _, err := st.TenantForToken(ctx, tm[1]); err == nil {
			t.Fatalf("revoked token still resolves")
		}
		if code, _ := adm.get("/admin/destinations"); code != 200 {
			t.Fatalf("destinations: %d", code)
		}
		// Other roles may not administer.
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		if code, _ := rev.get("/admin/users"); code != http.StatusForbidden {
			t.Fatalf("reviewer on admin: %d, want 403", code)
		}
	})
}

func TestConsoleMismatchAndReveal(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		st := storetest.Open(t, e, store.Options{Config: &review.Config{RedactFields: []string{"card"}}})
		h := handlers.New(st, nil)
		h.Console = handlers.NewConsole(make([]byte, 64), make([]byte, 32), false, store.SessionPolicy{})
		srv := httptest.NewServer(handlers.NewServer(h))
		defer srv.Close()
		ctx := context.Background()
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "support@example.com", Password: "correct horse battery", Role: review.RoleSupport,
			Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		reg := review.Registration{Tenant: "acme", SourceRef: "inv-1", LogicalVersion: "1", Action: "charge", Destination: "pay",
			Risk: review.RiskCompensableWrite, Payload: []byte(`{"amount":100,"card":"4242424242424242"}`), Actor: "test"}
		op, _, err := st.Register(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		reg.Payload = []byte(`{"amount":250,"card":"4242424242424242"}`)
		if _, _, err := st.Register(ctx, reg); err == nil {
			t.Fatal("a different payload under the same key was accepted")
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("payload_mismatch case: %v %+v", err, cs)
		}
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		code, body := b.get("/cases/" + cs[0].ID)
		if code != 200 || !strings.Contains(body, "$.amount") || !strings.Contains(body, "250") || strings.Contains(body, "4242424242424242") {
			t.Fatalf("case page: %d; want the amount diff and the card redacted", code)
		}
		code, body, _ = b.post("/cases/"+cs[0].ID+"/reveal", url.Values{"csrf": {b.csrf}})
		if code != 200 || !strings.Contains(body, "4242424242424242") {
			t.Fatalf("reveal: %d", code)
		}
		hist, _ := st.OperationHistory(ctx, op.ID)
		if last := hist[len(hist)-1]; last.Action != "payload.revealed" || last.Actor != "support@example.com" {
			t.Fatalf("reveal not audited: %+v", last)
		}
	})
}

func TestConsoleBulk(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ids := []string{needsReview(t, st, "b-1"), needsReview(t, st, "b-2"), needsReview(t, st, "b-3")}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		form := url.Values{"csrf": {sup.csrf}, "reason_filter": {"version_mismatch"}, "action": {"fail"}, "reason": {"wrong version rendered"}}
		code, body, _ := sup.post("/bulk", form)
		if code != 200 || !strings.Contains(body, "3 open cases match") {
			t.Fatalf("dry run: %d", code)
		}
		for _, id := range ids {
			if c, _ := st.GetCase(context.Background(), id, nil); c.Status != "open" {
				t.Fatalf("the dry run decided %s", id)
			}
		}
		code, body, _ = sup.post("/bulk", bulkConfirmForm(t, body))
		if code != 200 || !strings.Contains(body, "Applied to 3 cases") {
			t.Fatalf("apply: %d", code)
		}
		for _, id := range ids {
			c, _ := st.GetCase(context.Background(), id, nil)
			if c.Status != "resolved" || c.Resolution != "fail" {
				t.Fatalf("case %s after bulk: %+v", id, c)
			}
			hist, _ := st.OperationHistory(context.Background(), c.OperationID)
			n := 0
			for _, ev := range hist {
				if ev.Action == "decision.fail" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("case %s: %d decision events, want 1", id, n)
			}
		}

		// Issue 14, part 5: a bulk compensate names the resource each case
		// recommends to undo, listed in the dry run; a case that names none
		// is skipped, never decided without it.
		var dups []string
		for _, src := range []string{"d-1", "d-2"} {
			_, id := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: src, LogicalVersion: "1", Action: "mkdir",
				Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"` + src + `"}`), Actor: "test"}, src+"-a", src+"-b")
			dups = append(dups, id)
		}
		plain := needsReview(t, st, "b-4") // recommends compensating another version's file
		form = url.Values{"csrf": {sup.csrf}, "action": {"confirm"}, "reason": {"keep what the recommendation keeps"}}
		code, body, _ = sup.post("/bulk", form)
		if code != 200 || !strings.Contains(body, "no single resource is recommended to confirm") {
			t.Fatalf("dry run of a bulk confirm: %d, want the cases with nothing to confirm listed as skipped", code)
		}
		form = url.Values{"csrf": {sup.csrf}, "action": {"compensate"}, "compensation": {"delete the extra folder"}, "reason": {"duplicates from a retry storm"}}
		code, body, _ = sup.post("/bulk", form)
		// What each case recommended undoing: once it is under way, the
		// case recommends waiting for it instead.
		undo := map[string]string{}
		for _, id := range append(dups, plain) {
			c, _ := st.GetCase(context.Background(), id, nil)
			undo[id] = c.RecommendedRef
			if code != 200 || !strings.Contains(body, id) || !strings.Contains(body, "<code>"+c.RecommendedRef+"</code>") {
				t.Fatalf("the dry run does not list case %s with the resource it would undo (%s)", id, c.RecommendedRef)
			}
		}
		if code, body, _ = sup.post("/bulk", bulkConfirmForm(t, body)); code != 200 || !strings.Contains(body, "Applied to 3 cases") {
			t.Fatalf("apply the bulk compensate: %d", code)
		}
		for _, id := range append(dups, plain) {
			ds, _ := st.CaseDecisions(context.Background(), id)
			if len(ds) != 1 || ds[0].Action != review.DecideCompensate || ds[0].ResourceRef == "" || ds[0].ResourceRef != undo[id] {
				t.Errorf("case %s: decisions %+v, want one compensate of %s", id, ds, undo[id])
			}
		}
	})
}

// TestConsoleQueueFlagFilter: the queue's flag filter, which the bulk
// decision reads too, finds the cases with that flag exactly, the same on
// both engines; a flag that is not one is refused (400 on the queue, the
// bulk form again with a 422), deciding nothing. Before, flag=FINANCIAL
// found the financial case on SQLite only (its LIKE is case-blind), and
// flag=\ every unflagged case on PostgreSQL only (its LIKE's escape), so a
// bulk fail with it listed, and then decided, all of them.
func TestConsoleQueueFlagFilter(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		flagged := needsReviewOn(t, st, "acme", "files", "flagged", review.FlagFinancial)
		plain := []string{needsReview(t, st, "plain-1"), needsReview(t, st, "plain-2")}
		sup := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		sup.login("support@example.com")
		code, body := sup.get("/?flag=financial&decidable=0")
		if code != http.StatusOK || !strings.Contains(body, flagged) || strings.Contains(body, plain[0]) {
			t.Errorf("flag=financial: %d, want the financial case only:\n%s", code, alerts(body))
		}
		for _, flag := range []string{"FINANCIAL", `\`, "%", "_", "fin%"} {
			q := url.Values{"flag": {flag}, "decidable": {"0"}}
			code, body := sup.get("/?" + q.Encode())
			if want := html.EscapeString(fmt.Sprintf("%q non è un contrassegno.", flag)); code != http.StatusBadRequest || !strings.Contains(body, want) {
				t.Errorf("flag=%s: %d, want 400 saying %q:\n%s", flag, code, want, alerts(body))
			}
			code, body, _ = sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "flag": {flag}, "action": {"fail"}, "reason": {"not mine"}})
			if want := html.EscapeString(fmt.Sprintf("%q non è un contrassegno.", flag)); code != http.StatusUnprocessableEntity || !strings.Contains(body, want) ||
				strings.Contains(body, `name="confirm"`) {
				t.Errorf("bulk fail with flag=%s: %d, want the form again (422) saying %q:\n%s", flag, code, want, alerts(body))
			}
		}
		// A reason that is not one is refused the same way, in Italian
		// (before, the store's English sentence under "dettaglio in inglese").
		for _, reason := range []string{"nope", "MULTIPLE_CANDIDATES"} {
			want := html.EscapeString(fmt.Sprintf("%q non è un motivo di escalation.", reason))
			code, body := sup.get("/?" + url.Values{"reason": {reason}}.Encode())
			if code != http.StatusBadRequest || !strings.Contains(body, want) || strings.Contains(body, "dettaglio in inglese") {
				t.Errorf("reason=%s: %d, want 400 saying %q:\n%s", reason, code, want, alerts(body))
			}
			code, body, _ = sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "reason_filter": {reason}, "action": {"fail"}, "reason": {"not mine"}})
			if code != http.StatusUnprocessableEntity || !strings.Contains(body, want) || strings.Contains(body, `name="confirm"`) {
				t.Errorf("bulk fail with reason=%s: %d, want the form again (422) saying %q:\n%s", reason, code, want, alerts(body))
			}
		}
		for _, id := range append(plain, flagged) {
			if c, _ := st.GetCase(context.Background(), id, nil); c.Status != "open" {
				t.Errorf("case %s: %s after refused bulk forms", id, c.Status)
			}
		}
	})
}

func TestConsoleWebhookEndpoints(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.CreateToken(ctx, review.Operator("test"), "acme", "t"); err != nil {
			t.Fatal(err)
		}
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		code, body, _ := adm.post("/admin/webhooks", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {"https://hooks.example.com/limbo"}})
		if code != 200 || !regexp.MustCompile(`Signing secret \(shown once\): <code>whsec_`).MatchString(body) {
			t.Fatalf("add endpoint: %d", code)
		}
		if code, body, _ := adm.post("/admin/webhooks", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {"ftp://nope"}}); code != http.StatusUnprocessableEntity {
			t.Fatalf("bad URL: %d %s", code, body)
		}
		es, err := st.ListWebhookEndpoints(ctx, nil)
		if err != nil || len(es) != 1 {
			t.Fatalf("endpoints: %v %+v", err, es)
		}
		if code, body := adm.get("/admin/webhooks/" + es[0].ID); code != 200 || !strings.Contains(body, "Nothing delivered yet") {
			t.Fatalf("history: %d", code)
		}
		if code, _, _ := adm.post("/admin/webhooks/"+es[0].ID+"/disable", url.Values{"csrf": {adm.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("disable: %d", code)
		}
	})
}

// radioActions lists the decision actions a case page's form offers.
func radioActions(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`name="action" value="([a-z_]+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestConsoleDecisionFormFollowsTheSituation (issue 12, hole 3): the case
// form offers only the decisions the case's situation allows. On a
// payload_mismatch case whose operation is in flight, a reviewer (who may
// approve retries) is offered fail alone, labelled as a verdict on the
// refused payload; a forged approve_retry is refused with the reason and
// moves nothing; fail resolves the case and leaves the operation in flight.
func TestConsoleDecisionFormFollowsTheSituation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		reg := review.Registration{Tenant: "acme", SourceRef: "doc-1", LogicalVersion: "7", Action: "render", Destination: "files",
			Risk: review.RiskCompensableWrite, Payload: []byte(`{"pages":1}`), Actor: "test"}
		op, _, err := st.Register(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		reg.Payload = []byte(`{"pages":2}`)
		if _, _, err := st.Register(ctx, reg); err == nil {
			t.Fatal("a different payload under the same key was accepted")
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("payload_mismatch case: %v %+v", err, cs)
		}
		caseID := cs[0].ID

		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		code, body := rev.get("/cases/" + caseID)
		if got := radioActions(body); code != 200 || strings.Join(got, ",") != "fail" {
			t.Fatalf("case page of a payload mismatch on an in-flight operation: %d, offers %v; want fail alone", code, got)
		}
		if !strings.Contains(body, "Fail the refused payload") || !strings.Contains(body, "does not move the operation") {
			t.Errorf("the form does not say that the decision is about the refused payload only")
		}
		if strings.Contains(body, `name="confirm_ref"`) || strings.Contains(body, `name="undo_ref"`) || strings.Contains(body, `name="compensation"`) {
			t.Errorf("the form asks for a candidate or a compensation that no allowed decision takes")
		}
		code, body, _ = rev.decide(caseID, url.Values{"action": {"approve_retry"}, "reason": {"looks safe to me"}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "refused payload will not run") {
			t.Fatalf("forged approve_retry: %d, want 422 saying what is possible", code)
		}
		if got, _ := st.GetOperation(ctx, "acme", op.ID, ""); got.State != review.InFlight {
			t.Fatalf("a refused decision moved the operation to %s", got.State)
		}
		if code, _, _ := rev.decide(caseID, url.Values{"action": {"fail"}, "reason": {"the second payload was a mistake"}}); code != http.StatusSeeOther {
			t.Fatalf("fail on the refused payload: %d", code)
		}
		if got, _ := st.GetOperation(ctx, "acme", op.ID, ""); got.State != review.InFlight {
			t.Errorf("the verdict on the refused payload moved the operation to %s", got.State)
		}
		if c, _ := st.GetCase(ctx, caseID, nil); c.Status != store.CaseResolved {
			t.Errorf("case after the verdict: %+v", c)
		}

		// A case in review offers the reviewer every decision on the operation.
		inReview := needsReview(t, st, "doc-2")
		if _, body := rev.get("/cases/" + inReview); strings.Join(radioActions(body), ",") != "confirm,compensate,approve_retry,fail" {
			t.Errorf("case in review offers %v", radioActions(body))
		}
	})
}

// TestConsoleCompensation (issue 12, hole 7): compensate through the
// console leaves the operation compensating and its case open, offering
// only the word on the undo; compensation_done then settles it.
func TestConsoleCompensation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		caseID := needsReview(t, st, "doc-undo")
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		sup.get("/cases/" + caseID)
		if code, _, _ := sup.decide(caseID, url.Values{"action": {"compensate"}, "candidate": {"file-doc-undo"},
			"compensation": {"deleted file-doc-undo by hand"}, "reason": {"rendered from the wrong version"}}); code != http.StatusSeeOther {
			t.Fatalf("compensate: %d", code)
		}
		c, _ := st.GetCase(ctx, caseID, nil)
		op, _ := st.OperationByID(ctx, c.OperationID, nil)
		if op.State != review.Compensating || c.Status != store.CaseOpen {
			t.Fatalf("after compensate: operation %s, case %s; want compensating and open", op.State, c.Status)
		}
		code, body := sup.get("/cases/" + caseID)
		if got := strings.Join(radioActions(body), ","); code != 200 || got != "compensation_done,compensation_failed" {
			t.Fatalf("compensating case page: %d, offers %s", code, got)
		}
		if !strings.Contains(body, "deleted file-doc-undo by hand") {
			t.Errorf("the page does not say which undo is under way")
		}
		if code, _, _ := sup.decide(caseID, url.Values{"action": {"compensation_done"},
			"reason": {"the file is gone from the destination"}, "version": {fmt.Sprint(c.Version)}}); code != http.StatusSeeOther {
			t.Fatalf("compensation_done: %d", code)
		}
		op, _ = st.OperationByID(ctx, c.OperationID, nil)
		if c, _ := st.GetCase(ctx, caseID, nil); op.State != review.Compensated || c.Status != store.CaseResolved {
			t.Errorf("after compensation_done: operation %s, case %s; want compensated and resolved", op.State, c.Status)
		}
	})
}

// TestConsoleUndoCaseOffersNoUndo: the case of a compensation in review
// offers what can be said of an undo — confirm or fail (it happened or
// not), approve_retry (send it again) — and not compensate, which undid
// the undo by sending it again; the parent, waiting on it, offers no word
// of its own until the compensation's case is decided.
func TestConsoleUndoCaseOffersNoUndo(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		caseID := needsReview(t, st, "doc-undo-undo")
		c, _ := st.GetCase(ctx, caseID, nil)
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: caseID, Action: review.DecideCompensate, Ref: "file-doc-undo-undo",
			Compensation: "delete it", Actor: "reviewer@example.com", Reason: "wrong version"}); err != nil {
			t.Fatal(err)
		}
		cs, err := st.Compensations(ctx, c.OperationID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("compensations %+v, %v", cs, err)
		}
		child := cs[0].OperationID
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: child, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", child, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
			t.Fatal(err)
		}
		claims, err := st.ClaimAmbiguous(ctx, "test", 10, time.Minute)
		if err != nil || len(claims) != 1 {
			t.Fatalf("claims %+v, %v", claims, err)
		}
		claims[0].Round = review.MaxProbeRounds - 1
		s := review.Settle(review.SettleInput{Op: claims[0].Op, Destination: st.Config().Destination("files"), LastWrite: claims[0].LastWrite,
			Results: []review.ProbeResult{{Kind: review.ProbeStatus, Ref: "file-doc-undo-undo", Err: "503"}}, Round: claims[0].Round, Now: st.Now()})
		if err := st.ApplySettlement(ctx, claims[0], s); err != nil {
			t.Fatal(err)
		}
		kc, err := st.CasesForOperation(ctx, child)
		if err != nil || len(kc) != 1 {
			t.Fatalf("the compensation's cases %+v, %v", kc, err)
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		if code, body := rev.get("/cases/" + kc[0].ID); code != 200 || strings.Join(radioActions(body), ",") != "confirm,approve_retry,fail" {
			t.Errorf("the undo's case: %d, offers %v; want confirm, approve_retry, fail", code, radioActions(body))
		}
		code, body := rev.get("/cases/" + caseID)
		if code != 200 || len(radioActions(body)) != 0 {
			t.Errorf("the parent's case while its undo is in review: %d, offers %v; want nothing", code, radioActions(body))
		}
		// It says where the word on the undo goes, not that the reviewer's
		// role cannot decide (it can, on the compensation's case).
		if !strings.Contains(body, "is in review: say on its own case whether it happened") || strings.Contains(body, "Your role cannot decide this case") {
			t.Errorf("the parent's case page does not send the reviewer to the undo's case")
		}
		// No lookup answered, so no evidence names the resource; the
		// undo's form still offers it to confirm the undo happened.
		_, page := rev.get("/cases/" + kc[0].ID)
		if !strings.Contains(page, `<option value="file-doc-undo-undo"`) {
			t.Fatalf("the undo's case does not offer the resource it undoes to confirm")
		}
		if code, _, _ := rev.decide(kc[0].ID, url.Values{"action": {"confirm"}, "confirm_ref": {"file-doc-undo-undo"},
			"reason": {"gone from the provider's console"}}); code != http.StatusSeeOther {
			t.Fatalf("confirm the undo: %d", code)
		}
		if op, _ := st.OperationByID(ctx, c.OperationID, nil); op.State != review.Compensated {
			t.Errorf("the parent once its undo is confirmed: %s, want compensated", op.State)
		}
	})
}
