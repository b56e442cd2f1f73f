package handlers_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/web"
)

// internalWords are what review's sentinels and Go's formatting put in an
// error for a program: a person must never read them on a page.
var internalWords = regexp.MustCompile(`invalid input:|conflict:|field &#34;|field "|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// TestConsoleCaseRefusalsInTheReadersLanguage: on the case page, a claim
// refused because another user holds the case, a take-over without a
// reason and a decision without one are told in the reader's language,
// without the sentinels' words, the time written as the console writes
// times, and the take-over in its own words (not a decision's).
func TestConsoleCaseRefusalsInTheReadersLanguage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lang                        string
		claimed, takeOver, noReason string
	}{
		{"it", "il caso è preso in carico da support@example.com fino al %s",
			"Per subentrare serve un motivo: scrivi in poche parole perché prendi il caso a chi lo ha in carico.",
			"motivo: ogni decisione richiede un motivo, in poche parole"},
		{"en", "case is claimed by support@example.com until %s",
			"A take-over needs a reason: say in a few words why you take the case from its holder.",
			"reason: every decision needs a reason, in a few words"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			t.Parallel()
			srv, st := consoleServer(t, store.SQLite)
			ctx := web.WithLang(context.Background(), c.lang)
			caseID := needsReview(t, st, "doc-refusals-"+c.lang)
			sup := newBrowser(t, srv.URL)
			sup.login("support@example.com")
			if code, _, _ := sup.post("/cases/"+caseID+"/claim", url.Values{"csrf": {sup.csrf}}); code != http.StatusSeeOther {
				t.Fatalf("claim: %d", code)
			}
			cs, err := st.GetCase(context.Background(), caseID, nil)
			if err != nil || cs.ClaimUntil == nil {
				t.Fatalf("case after the claim: %v %+v", err, cs)
			}

			rev := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
			rev.login("reviewer@example.com")
			rev.get("/cases/" + caseID)
			code, body, _ := rev.post("/cases/"+caseID+"/claim", url.Values{"csrf": {rev.csrf}})
			want := html.EscapeString(fmt.Sprintf(c.claimed, web.FormatTime(ctx, *cs.ClaimUntil)))
			if code != http.StatusConflict || !strings.Contains(body, want) || internalWords.MatchString(alerts(body)) {
				t.Errorf("claiming a case another holds: %d, want 409 saying %q, without internal words (%q):\n%s", code, want,
					internalWords.FindString(alerts(body)), alerts(body))
			}

			code, body, _ = rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {"  "}})
			if want := html.EscapeString(c.takeOver); code != http.StatusUnprocessableEntity || !strings.Contains(body, want) || internalWords.MatchString(alerts(body)) {
				t.Errorf("a take-over without a reason: %d, want 422 saying %q, without internal words (%q):\n%s", code, want,
					internalWords.FindString(alerts(body)), alerts(body))
			}

			if code, _, _ = rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {"support is off today"}}); code != http.StatusSeeOther {
				t.Fatalf("take-over: %d", code)
			}
			code, body, _ = rev.decide(caseID, url.Values{"action": {"fail"}, "reason": {" "}})
			if want := html.EscapeString(c.noReason); code != http.StatusUnprocessableEntity || !strings.Contains(body, want) || internalWords.MatchString(alerts(body)) {
				t.Errorf("a decision without a reason: %d, want 422 saying %q, without internal words (%q):\n%s", code, want,
					internalWords.FindString(alerts(body)), alerts(body))
			}
		})
	}
}

// TestConsoleTakeOverLongReason: a take-over reason as long as the field
// and the store allow (2,000 characters) is accepted and recorded whole,
// not refused by the form check as an over-long identifier.
func TestConsoleTakeOverLongReason(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	caseID := needsReview(t, st, "doc-long-takeover")
	sup := newBrowser(t, srv.URL)
	sup.login("support@example.com")
	if code, _, _ := sup.post("/cases/"+caseID+"/claim", url.Values{"csrf": {sup.csrf}}); code != http.StatusSeeOther {
		t.Fatalf("claim: %d", code)
	}
	rev := newBrowser(t, srv.URL)
	rev.login("reviewer@example.com")
	rev.get("/cases/" + caseID)
	for _, n := range []int{1488, review.MaxReasonLen} {
		reason := strings.Repeat("the holder is away; ", n/20) + strings.Repeat("x", n%20)
		if len([]rune(reason)) != n {
			t.Fatalf("reason of %d characters, want %d", len([]rune(reason)), n)
		}
		if code, body, _ := rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {reason}}); code != http.StatusSeeOther {
			t.Fatalf("a take-over reason of %d characters: %d, want 303:\n%s", n, code, alerts(body))
		}
		cs, _ := st.GetCase(context.Background(), caseID, nil)
		hist, _ := st.OperationHistory(context.Background(), cs.OperationID)
		var recorded bool
		for _, ev := range hist {
			recorded = recorded || strings.HasPrefix(ev.Action, "case.") && strings.Contains(string(ev.Detail), strings.TrimSpace(reason))
		}
		if !recorded {
			t.Errorf("the %d-character take-over reason is not in the audit trail", n)
		}
	}
	if code, _, _ := rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {strings.Repeat("y", review.MaxReasonLen+1)}}); code != http.StatusBadRequest {
		t.Errorf("a take-over reason over %d characters: %d, want 400", review.MaxReasonLen, code)
	}
}

// TestConsoleSignInRefusalsInItalian: a wrong password and a throttled
// sign-in are told in Italian to an Italian browser, the wait in the
// right unit and number (1 secondo, 2 secondi, 15 minuti), as in English.
func TestConsoleSignInRefusalsInItalian(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lang, wrong string
		wait        func(sec int) string
	}{
		{"it", "Email o password errate.", func(sec int) string {
			n, one, many := sec, "secondo", "secondi"
			if n > 60 {
				n, one, many = (n+59)/60, "minuto", "minuti"
			}
			if n == 1 {
				return "Troppi accessi non riusciti. Riprova tra 1 " + one + "."
			}
			return "Troppi accessi non riusciti. Riprova tra " + strconv.Itoa(n) + " " + many + "."
		}},
		{"en", "Wrong email or password.", func(sec int) string {
			n, unit := sec, "second"
			if n > 60 {
				n, unit = (n+59)/60, "minute"
			}
			if n != 1 {
				unit += "s"
			}
			return fmt.Sprintf("Too many failed sign-ins. Try again in %d %s.", n, unit)
		}},
	} {
		t.Run(c.lang, func(t *testing.T) {
			t.Parallel()
			clk := storetest.NewClock(t0)
			srv, _ := consoleServerWith(t, store.SQLite, consoleSetup{clock: clk, proxies: []string{"127.0.0.1/32", "::1/128"}})
			b := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
			const owner = "reviewer@example.com"
			code, body, _ := signIn(b, "203.0.113.1", owner, "guess guess guess")
			if code != http.StatusUnauthorized || !strings.Contains(body, html.EscapeString(c.wrong)) {
				t.Fatalf("a wrong password: %d, want 401 saying %q:\n%s", code, c.wrong, alerts(body))
			}
			// One address guessing: 1 s after its third failure, 2 s after
			// its fourth, about 15 minutes after its fifth. Each wait is
			// waited out, so the next guess counts.
			units := map[bool]bool{} // more than a minute: seen
			for try := 1; !units[true]; try++ {
				if try > 10 {
					t.Fatalf("no wait of minutes after %d tries", try)
				}
				code, body, hdr := signIn(b, "203.0.113.2", owner, "guess guess guess")
				if code == http.StatusUnauthorized {
					continue
				}
				ra, err := strconv.Atoi(hdr.Get("Retry-After"))
				if code != http.StatusTooManyRequests || err != nil {
					t.Fatalf("try %d: %d (Retry-After %q), want 429", try, code, hdr.Get("Retry-After"))
				}
				if want := html.EscapeString(c.wait(ra)); !strings.Contains(body, want) {
					t.Errorf("Retry-After %d: want %q on the page:\n%s", ra, want, alerts(body))
				}
				units[ra > 60] = true
				clk.Advance(time.Duration(ra) * time.Second)
			}
			if !units[false] || !units[true] {
				t.Errorf("the waits seen cover seconds %v and minutes %v; want both", units[false], units[true])
			}
		})
	}
}

// TestConsoleOperationsBadCursor: a page link of the operations browser
// whose cursor is stale or edited says so in the reader's language, as the
// audit page does, without the store's words.
func TestConsoleOperationsBadCursor(t *testing.T) {
	t.Parallel()
	srv, _ := consoleServer(t, store.SQLite)
	for _, c := range []struct{ lang, want string }{
		{"it", "Il link a quella pagina non è valido."},
		{"en", "That page link is broken."},
	} {
		b := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
		b.login("reviewer@example.com")
		code, body := b.get("/operations?after=x")
		if want := html.EscapeString(c.want); code != http.StatusBadRequest || !strings.Contains(body, want) || internalWords.MatchString(alerts(body)) ||
			strings.Contains(alerts(body), "cursor") {
			t.Errorf("%s: /operations?after=x: %d, want 400 saying %q, without the store's words:\n%s", c.lang, code, want, alerts(body))
		}
	}
}

// TestConsoleAdminUserRowRefused: a refused change to a user's row shows
// the row again as the admin typed it (role, tenants, disabled), the other
// rows as stored, and the message names the user, in either language.
func TestConsoleAdminUserRowRefused(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	ctx := context.Background()
	sup, err := st.UserByEmail(ctx, "support@example.com")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := st.UserByEmail(ctx, "manager@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lang, tenants, role, want string
	}{
		{"en", " , ", "manager", "User support@example.com was not changed: tenants: give a comma-separated list, or * for all"},
		{"it", " , ", "manager", "L'utente support@example.com non è stato modificato: tenant: indica un elenco separato da virgole, oppure * per tutti"},
		{"en", "acme", "nobody", "User support@example.com was not changed: role: must be reviewer, support, manager or admin"},
	} {
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
		adm.login("admin@example.com")
		adm.get("/admin/users")
		code, body, _ := adm.post("/admin/users/"+sup.ID, url.Values{"csrf": {adm.csrf}, "role": {c.role}, "tenants": {c.tenants}, "disabled": {"1"}})
		if want := html.EscapeString(c.want); code != http.StatusUnprocessableEntity || !strings.Contains(body, want) {
			t.Errorf("%s, tenants %q role %q: %d, want 422 saying %q:\n%s", c.lang, c.tenants, c.role, code, want, alerts(body))
		}
		row := userRow(body, sup.ID)
		if !strings.Contains(row, `name="tenants" value="`+html.EscapeString(c.tenants)+`"`) || !strings.Contains(row, `name="disabled" value="1" checked`) {
			t.Errorf("%s: the refused row lost what was typed (tenants %q, disabled):\n%s", c.lang, c.tenants, row)
		}
		if c.role == "manager" && !regexp.MustCompile(`<option value="manager" selected`).MatchString(row) {
			t.Errorf("%s: the refused row lost the role typed (%s):\n%s", c.lang, c.role, row)
		}
		if other := userRow(body, mgr.ID); !strings.Contains(other, `name="tenants" value="*"`) || strings.Contains(other, "checked") ||
			!strings.Contains(other, `<option value="manager" selected`) {
			t.Errorf("%s: another user's row does not show what is stored:\n%s", c.lang, other)
		}
		if u, _ := st.UserByID(ctx, sup.ID); u.Role != review.RoleSupport || u.TenantsText != "*" || u.DisabledAt != nil {
			t.Fatalf("a refused change changed the user: %+v", u)
		}
	}
}

// userRow is the change form of user id on the users page.
func userRow(page, id string) string {
	i := strings.Index(page, `action="/admin/users/`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</form>")
	if j < 0 {
		return page[i:]
	}
	return page[i : i+j]
}

var alertLine = regexp.MustCompile(`<p class="(?:error|flash)" role="alert">[^<]*</p>`)

// alerts are a page's error lines, for a failure's message.
func alerts(page string) string { return strings.Join(alertLine.FindAllString(page, -1), "\n") }

// TestConsolePageCursorsOutOfRange: a page link whose cursor's time is
// outside years 0001–9999 is a broken link, a 400 in the reader's language,
// on both engines and on the queue as on the operations browser. Before, one
// far in the past answered 500 on PostgreSQL and a page on SQLite, and one in
// year 10000 an empty page on SQLite and rows on PostgreSQL.
func TestConsolePageCursorsOutOfRange(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "cursor-1")
		b := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		b.login("reviewer@example.com")
		for _, path := range []string{
			"/?after=0.-210866803200000001.x", "/?after=0.253402300800000000.x", "/?after=0.x.x",
			"/operations?after=-210866803200000001.x", "/operations?after=253402300800000000.op_x",
		} {
			code, body := b.get(path)
			if want := html.EscapeString("Il link a quella pagina non è valido."); code != http.StatusBadRequest || !strings.Contains(body, want) {
				t.Errorf("%s: %d, want 400 saying %q:\n%s", path, code, want, alerts(body))
			}
		}
	})
}

// TestConsoleRefusalsTranslatedOnce: a refusal a handler says itself is a
// catalog key, put in the reader's language once, when it is rendered.
// Support deciding a financial case, and a link followed to the live
// stream, in Italian: each is said in Italian. Before, the handler
// translated the sentence and the error page looked the Italian up
// again, a text no catalog has (TestMain's count of untranslated texts
// failed the package).
func TestConsoleRefusalsTranslatedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		flagged := flaggedCase(t, st, "inv-once")
		sup := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		sup.login("support@example.com")
		code, body, _ := sup.decide(flagged, url.Values{"action": {"fail"}, "reason": {"not for support"}})
		if want := "Il tuo ruolo non può compiere questa azione su questo caso."; code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("support decides a financial case: %d, want 403 saying %q:\n%s", code, want, alerts(body))
		}
		// The page's heading names the refusal in words, the status beside
		// it (it was the bare number).
		code, body = sup.get("/audit")
		if want := `<h1>Non consentito <span class="muted">(403)</span></h1>`; code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("support opens the audit trail: %d, want 403 headed %q:\n%s", code, want, body)
		}
		code, body = sup.get("/events")
		if want := html.EscapeString("Questo indirizzo"); code != http.StatusNotAcceptable || !strings.Contains(body, want) ||
			!strings.Contains(body, "<h1>Non possibile ") {
			t.Errorf("/events followed as a link: %d, want 406 in Italian:\n%s", code, alerts(body))
		}
	})
}

// TestConsoleOneCaseInItalian: one open case is said in the singular, in
// the queue's count and in a bulk decision's dry run. Before, Italian
// read "1 aperti", "Casi aperti che corrispondono a questo filtro: 1.",
// "Applica a 1 casi" and "Applicata a 1 casi" (and English "Apply to 1
// cases", "Applied to 1 cases").
func TestConsoleOneCaseInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "only-one")
		sup := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		sup.login("support@example.com")
		_, body := sup.get("/")
		if !strings.Contains(body, "<strong>1 aperto</strong>") || strings.Contains(body, "1 aperti") {
			t.Errorf("queue with one case: want “1 aperto”:\n%s", body[strings.Index(body, `class="counts"`):][:200])
		}
		// The column of who holds each case is headed by a noun, not the
		// claim button's verb ("Prendi in carico").
		if want := `<th scope="col">Presa in carico</th>`; !strings.Contains(body, want) || strings.Contains(body, `<th scope="col">Prendi in carico</th>`) {
			t.Errorf("queue's claim column: want the header %s", want)
		}
		code, body, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "action": {"fail"}, "reason": {"nothing to do here"}})
		preview := body
		for _, want := range []string{"Un caso aperto corrisponde a questo filtro.", "Applica a 1 caso<"} {
			if code != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("bulk dry run on one case: %d, want %q:\n%s", code, want, alerts(body))
			}
		}
		en := newBrowser(t, srv.URL).withHeader("Accept-Language", "en")
		en.login("reviewer@example.com")
		if _, body, _ := en.post("/bulk", url.Values{"csrf": {en.csrf}, "action": {"fail"}, "reason": {"nothing to do here"}}); !strings.Contains(body, "Apply to 1 case<") {
			t.Errorf("bulk dry run on one case in English: want “Apply to 1 case”")
		}
		code, body, _ = sup.post("/bulk", bulkConfirmForm(t, preview))
		if want := "Applicata a 1 caso; 0 saltati."; code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("bulk decision on one case: %d, want %q:\n%s", code, want, alerts(body))
		}
	})
}

// TestConsoleApproveLabelTrue: on an approval case that needs two
// reviewers, the approve choice says what it will do for whoever reads
// it. Before, the reviewer who had given the first approval, and the one
// who asked for the operation, read "approva: l'azione può partire (→ in
// attesa)", though the store refuses an approval from either.
func TestConsoleApproveLabelTrue(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		cfg := &review.Config{Destinations: map[string]review.Destination{
			"mail": {Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true, ApprovalTimeout: 4 * time.Hour, Approvals: 2}}},
		}}
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		ctx := context.Background()
		for _, who := range []string{"second@example.com", "asker@example.com"} {
			if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: who, Password: "correct horse battery",
				Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
				t.Fatal(err)
			}
		}
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "mail-1", LogicalVersion: "1", Action: "send_email",
			Destination: "mail", Risk: review.RiskIrreversible, Payload: []byte(`{"to":"a@example.com"}`), RequestedBy: "asker@example.com", Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		const mayRun = "Approva: l&#39;azione può partire (→ in attesa)"
		first := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		first.login("reviewer@example.com")
		if code, body, _ := first.decide(cs[0].ID, url.Values{"action": {"approve"}, "reason": {"the payload is right"}}); code != http.StatusSeeOther {
			t.Fatalf("first approval: %d\n%s", code, alerts(body))
		}
		_, body := first.get("/cases/" + cs[0].ID)
		if want := "Approva (hai già dato un&#39;approvazione: la prossima deve venire da un altro revisore)"; !strings.Contains(body, want) || strings.Contains(body, mayRun) {
			t.Errorf("the first approver's form: want %q, not %q", want, mayRun)
		}
		asker := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		asker.login("asker@example.com")
		_, body = asker.get("/cases/" + cs[0].ID)
		if want := "Approva (non spetta a te: hai chiesto tu questa operazione, quindi deve approvarla un altro revisore)"; !strings.Contains(body, want) || strings.Contains(body, mayRun) {
			t.Errorf("the asker's form: want %q, not %q", want, mayRun)
		}
		second := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		second.login("second@example.com")
		if _, body = second.get("/cases/" + cs[0].ID); !strings.Contains(body, mayRun) {
			t.Errorf("the second reviewer's form: want %q", mayRun)
		}
	})
}

// TestConsoleQueuePageTwoStaysLive: the queue's live region, on its second
// page, refreshes that page. Before, it polled the queue without its
// cursor, so five seconds after "Next page" the first page's cases came
// back in its place, the address still saying page two.
func TestConsoleQueuePageTwoStaysLive(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		for i := 0; i < 51; i++ { // one more than a page
			needsReview(t, st, fmt.Sprintf("doc-%02d", i))
		}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		_, first := sup.get("/")
		next := regexp.MustCompile(`href="(/\?[^"]*after=[^"]+)" rel="next"`).FindStringSubmatch(first)
		if next == nil {
			t.Fatalf("the first page links to no next page")
		}
		_, second := sup.get(html.UnescapeString(next[1]))
		poll := regexp.MustCompile(`<div id="queue" hx-get="([^"]*)"`).FindStringSubmatch(second)
		if poll == nil {
			t.Fatalf("page two has no live region")
		}
		req, err := http.NewRequest(http.MethodGet, srv.URL+html.UnescapeString(poll[1]), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("HX-Request", "true")
		resp, err := sup.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf strings.Builder
		if _, err := io.Copy(&buf, resp.Body); err != nil {
			t.Fatal(err)
		}
		rows := regexp.MustCompile(`href="/cases/(case_[0-9A-Z]+)"`)
		ids := func(page string) []string {
			var out []string
			for _, m := range rows.FindAllStringSubmatch(page, -1) {
				if !slices.Contains(out, m[1]) {
					out = append(out, m[1])
				}
			}
			return out
		}
		if got, want := ids(buf.String()), ids(second); !slices.Equal(got, want) || len(want) != 1 {
			t.Errorf("page two polled from %s lists %d cases %v, want page two's %v", poll[1], len(got), got[:min(len(got), 3)], want)
		}
	})
}

// TestConsoleKeepAndUndoSameResource: keeping one duplicate and undoing
// "the other" with the same resource chosen in both lists (or none to
// undo) is refused in the reader's language, the form kept. Before, the
// Italian page said "Non accettato (dettaglio in inglese): undo_ref:
// keep_and_undo undoes another resource than the one it keeps".
func TestConsoleKeepAndUndoSameResource(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		_, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "folder-9", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-9"}`), Actor: "test"}, "fld-1", "fld-2")
		rev := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		rev.login("reviewer@example.com")
		for _, undo := range []string{"fld-1", ""} {
			code, body, _ := rev.decide(caseID, url.Values{"action": {"keep_and_undo"}, "confirm_ref": {"fld-1"}, "undo_ref": {undo},
				"compensation": {"delete the folder"}, "reason": {"two folders, one too many"}})
			want := "risorsa da annullare: tieni-e-compensa annulla una risorsa diversa da quella che tiene"
			if code != http.StatusUnprocessableEntity || !strings.Contains(body, want) || strings.Contains(body, "dettaglio in inglese") ||
				!strings.Contains(body, "two folders, one too many</textarea>") {
				t.Errorf("keep fld-1, undo %q: %d, want 422 saying %q with the reason kept:\n%s", undo, code, want, alerts(body))
			}
		}
	})
}

// TestConsoleStaleFormInItalian: a decision from a page opened before the
// case was claimed (in another tab) is refused in Italian, the form kept;
// so is one from before the operation moved on, naming its state as the
// pages label it. Before: "Modificato nel frattempo (dettaglio in
// inglese): the case changed since this page was opened: it was claimed,
// released or re-assessed since (version 1, now 2); …", and "(ora è
// compensating)".
func TestConsoleStaleFormInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		_, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "folder-9", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-9"}`), Actor: "test"}, "fld-1", "fld-2")
		rev := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		rev.login("reviewer@example.com")
		_, opened := rev.get("/cases/" + caseID) // the page, before the claim
		old := url.Values{"action": {"keep_and_undo"}, "confirm_ref": {"fld-1"}, "undo_ref": {"fld-2"}, "compensation": {"delete the folder"},
			"reason": {"two folders, one too many"}}
		setFormVersions(old, opened)
		if code, _, _ := rev.post("/cases/"+caseID+"/claim", url.Values{"csrf": {rev.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("claim: %d", code)
		}
		old.Set("csrf", rev.csrf)
		code, body, _ := rev.post("/cases/"+caseID+"/decision", old)
		want := "il caso è cambiato da quando questa pagina è stata aperta: nel frattempo è stato preso in carico, rilasciato o rivalutato"
		if code != http.StatusConflict || !strings.Contains(body, want) || strings.Contains(body, "dettaglio in inglese") {
			t.Errorf("a form from before the claim: %d, want 409 saying %q:\n%s", code, want, alerts(body))
		}
		// The operation moves on (a decision from a fresh page), then the
		// old page's form again, with the case's version of now.
		if code, body, _ := rev.decide(caseID, url.Values{"action": {"keep_and_undo"}, "confirm_ref": {"fld-1"}, "undo_ref": {"fld-2"},
			"compensation": {"delete the folder"}, "reason": {"two folders, one too many"}}); code != http.StatusSeeOther {
			t.Fatalf("keep and undo: %d\n%s", code, alerts(body))
		}
		_, now := rev.get("/cases/" + caseID)
		stale := url.Values{"action": {"compensation_failed"}, "reason": {"the folder is still there"}, "csrf": {rev.csrf}}
		setFormVersions(stale, now)
		stale.Set("op_version", opVersionField.FindStringSubmatch(opened)[1])
		code, body, _ = rev.post("/cases/"+caseID+"/decision", stale)
		want = html.EscapeString("l'operazione è andata avanti (ora è “In compensazione”)")
		if code != http.StatusConflict || !strings.Contains(body, want) {
			t.Errorf("a form from before the operation moved on: %d, want 409 saying %q:\n%s", code, want, alerts(body))
		}
	})
}

// TestConsoleUndoStartedInItalian: saying how an undo went, from a page
// opened before the undo's attempt started, is refused in Italian, naming
// the undo's state as the pages label it. Before: "Non possibile nello
// stato attuale dell'operazione (dettaglio in inglese): the compensation
// op_… is in_flight: the undo may be happening right now, …".
func TestConsoleUndoStartedInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		opID, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "folder-9", LogicalVersion: "1", Action: "mkdir",
			Destination: "drive", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-9"}`), Actor: "test"}, "fld-1", "fld-2")
		rev := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		rev.login("reviewer@example.com")
		if code, body, _ := rev.decide(caseID, url.Values{"action": {"keep_and_undo"}, "confirm_ref": {"fld-1"}, "undo_ref": {"fld-2"},
			"compensation": {"delete the folder"}, "reason": {"two folders, one too many"}}); code != http.StatusSeeOther {
			t.Fatalf("keep and undo: %d\n%s", code, alerts(body))
		}
		_, opened := rev.get("/cases/" + caseID) // offers to say how the undo went
		comps, err := st.Compensations(ctx, opID)
		if err != nil || len(comps) != 1 {
			t.Fatalf("compensations: %v %+v", err, comps)
		}
		if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: comps[0].OperationID, Actor: "integrator"}); err != nil {
			t.Fatal(err)
		}
		form := url.Values{"action": {"compensation_done"}, "reason": {"the folder is gone"}, "csrf": {rev.csrf}}
		setFormVersions(form, opened)
		code, body, _ := rev.post("/cases/"+caseID+"/decision", form)
		want := html.EscapeString("la compensazione " + comps[0].OperationID + " è “In corso”: l'annullamento potrebbe essere in corso proprio ora")
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, want) || strings.Contains(body, "dettaglio in inglese") {
			t.Errorf("saying how a running undo went: %d, want 422 saying %q:\n%s", code, want, alerts(body))
		}
	})
}

// TestRefusalStatesInItalian: the domain sentences that name an operation's
// state name it in Italian as the pages label it, not by its code; English
// keeps the code its sentence is written around.
func TestRefusalStatesInItalian(t *testing.T) {
	it := web.WithLang(context.Background(), "it")
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: an undo of fld-2 is already under way (compensation op_1 is %s): wait for its outcome, or settle it on its case, before undoing it again",
			review.ErrInvalidTransition, review.InFlight), "(la compensazione op_1 è “In corso”)"},
		{fmt.Errorf("%w: the compensation op_1 is %s: the undo may be happening right now, and its outcome settles this case (or sends it back to review); wait for it rather than saying how it went",
			review.ErrInvalidTransition, review.Ambiguous), "la compensazione op_1 è “Esito ambiguo”"},
		{fmt.Errorf("%w: the operation moved on since (it is %s now); reload the case and decide again", review.ErrStale, review.Confirmed), "(ora è “Confermata”)"},
		{fmt.Errorf("%w: the destination cannot be asked about this operation from here: it is %s, and only an operation in review or settled, whose destination has a status lookup or a search, is asked",
			review.ErrConflict, review.Compensating), "è nello stato “In compensazione”"},
	} {
		if got := handlers.ErrorMessage(it, c.err); !strings.Contains(got, c.want) {
			t.Errorf("%v\n in Italian: %q\n want it to hold %q", c.err, got, c.want)
		}
		if got := handlers.ErrorMessage(context.Background(), c.err); strings.Contains(got, "“") {
			t.Errorf("%v\n in English: %q, want the state's code", c.err, got)
		}
	}
}

// TestConsoleBulkSkipInItalian: a bulk decision applying each case's
// recommendation says, in Italian, why a case recommending "check again"
// is skipped, naming the recommendation as the queue does. Before: "la sua
// raccomandazione (reconcile_again) non è ancora una decisione".
func TestConsoleBulkSkipInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		// An operation whose answer was lost and whose lookups all failed:
		// its case recommends looking again.
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "lost-1", LogicalVersion: "1", Action: "upload",
			Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{"a":1}`), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
			t.Fatal(err)
		}
		claims, err := st.ClaimAmbiguous(ctx, "test", 10, time.Minute)
		if err != nil || len(claims) != 1 {
			t.Fatalf("claims %+v, %v", claims, err)
		}
		claims[0].Round = review.MaxProbeRounds - 1
		settled := review.Settle(review.SettleInput{Op: claims[0].Op, Destination: st.Config().Destination("files"), LastWrite: claims[0].LastWrite,
			Results: []review.ProbeResult{{Kind: review.ProbeSearch, Err: "503"}}, Round: claims[0].Round, Now: st.Now()})
		if err := st.ApplySettlement(ctx, claims[0], settled); err != nil {
			t.Fatal(err)
		}
		if cs, err := st.CasesForOperation(ctx, op.ID); err != nil || len(cs) != 1 || cs[0].RecommendedAction != review.RecommendReconcileAgain {
			t.Fatalf("cases %+v, %v; want one recommending reconcile_again", cs, err)
		}
		sup := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		sup.login("support@example.com")
		code, body, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "action": {review.BulkRecommended}, "reason": {"as recommended"}})
		want := "la sua raccomandazione (“Interroga di nuovo”) non è ancora una decisione"
		if code != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "reconcile_again)") {
			t.Errorf("bulk dry run on a case recommending to look again: %d, want %q:\n%s", code, want, alerts(body))
		}
	})
}
