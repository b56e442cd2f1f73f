package handlers_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`)

// hiddenFields are the hidden inputs of a form's HTML, as it posts them.
func hiddenFields(form string) url.Values {
	v := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(form, -1) {
		v.Add(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// TestConsoleAdminUserStaleRow: a user's row posted from a page opened
// before another admin changed that user is refused (409, in the reader's
// language) and the row shows the user as they are now; it does not undo
// the other admin's change. Before, the stale row's unticked "disabled"
// box enabled again a user another admin had just disabled, and its role
// and tenants replaced theirs, silently. A row from a fresh page saves.
func TestConsoleAdminUserStaleRow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "admin2@example.com", Password: "correct horse battery",
			Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateToken(ctx, review.Operator("test"), "acme", "ci"); err != nil { // the tenant exists
			t.Fatal(err)
		}
		sup, err := st.UserByEmail(ctx, "support@example.com")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ lang, want string }{
			{"it", "L'utente support@example.com non è stato modificato: modificato da quando questa pagina è stata aperta (da un altro amministratore, o da questo modulo inviato due volte)"},
			{"en", "User support@example.com was not changed: changed since this page was opened (by another admin, or by this form sent twice)"},
		} {
			a := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
			a.login("admin@example.com")
			_, page := a.get("/admin/users")
			stale := hiddenFields(userRow(page, sup.ID))

			// Meanwhile another admin disables the user and moves them to acme.
			b := newBrowser(t, srv.URL)
			b.login("admin2@example.com")
			_, fresh := b.get("/admin/users")
			form := hiddenFields(userRow(fresh, sup.ID))
			form.Set("role", "support")
			form.Set("tenants", "acme")
			form.Set("disabled", "1")
			form.Set("confirm", "1")
			if code, body, _ := b.post("/admin/users/"+sup.ID, form); code != http.StatusSeeOther {
				t.Fatalf("%s: disable: %d\n%s", c.lang, code, alerts(body))
			}

			// The first admin's page still shows them enabled, on every tenant.
			stale.Set("role", "reviewer")
			stale.Set("tenants", "*")
			code, body, _ := a.post("/admin/users/"+sup.ID, stale)
			if want := html.EscapeString(c.want); code != http.StatusConflict || !strings.Contains(body, want) {
				t.Errorf("%s: stale row: %d, want 409 saying %q:\n%s", c.lang, code, c.want, alerts(body))
			}
			u, _ := st.UserByID(ctx, sup.ID)
			if u.DisabledAt == nil || u.Role != review.RoleSupport || u.TenantsText != "acme" {
				t.Fatalf("%s: the stale row undid the other admin's change: role %s, tenants %s, disabled %v", c.lang, u.Role, u.TenantsText, u.DisabledAt != nil)
			}
			row := userRow(body, sup.ID)
			if !strings.Contains(row, `name="tenants" value="acme"`) || !strings.Contains(row, `name="disabled" value="1" checked`) {
				t.Errorf("%s: the refused row does not show the user as they are now:\n%s", c.lang, row)
			}

			// From the page as it is now, the change saves (and enables them).
			again := hiddenFields(row)
			again.Set("role", "support")
			again.Set("tenants", "*")
			if code, body, _ := a.post("/admin/users/"+sup.ID, again); code != http.StatusSeeOther {
				t.Fatalf("%s: fresh row: %d\n%s", c.lang, code, alerts(body))
			}
			if u, _ := st.UserByID(ctx, sup.ID); u.DisabledAt != nil || u.TenantsText != "*" {
				t.Fatalf("%s: the fresh row did not save: %+v", c.lang, u)
			}
			// The same form sent twice (a reload): the second is stale too.
			if code, _, _ := a.post("/admin/users/"+sup.ID, again); code != http.StatusConflict {
				t.Errorf("%s: the fresh row sent twice: %d, want 409", c.lang, code)
			}
		}
	})
}

// TestConsoleTokenRevokeAsksFirst: the revoke button of a token's row
// does not revoke at once: it shows what revoking that token does (its
// name and tenant, in the reader's language) with a button that does, and
// a way to keep it. Only that confirmation revokes; it is audited once.
// A token revoked meanwhile is left as it is; another's id is 404. Before,
// one click (or a stray one) revoked a tenant's production token for good.
func TestConsoleTokenRevokeAsksFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.CreateToken(ctx, review.Operator("test"), "acme", "billing-prod"); err != nil {
			t.Fatal(err)
		}
		ts, err := st.ListTokens(ctx, review.Operator("test"))
		if err != nil || len(ts) != 1 {
			t.Fatalf("tokens: %v %v", ts, err)
		}
		id := ts[0].ID
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		adm.get("/admin/tokens")
		code, body, _ := adm.post("/admin/tokens/"+id+"/revoke", url.Values{"csrf": {adm.csrf}})
		body = html.UnescapeString(body)
		if code != http.StatusOK || !strings.Contains(body, "Revocare il token billing-prod del tenant acme?") ||
			!strings.Contains(body, `<input type="hidden" name="confirm" value="1">`) || !strings.Contains(body, "Revoca definitivamente") {
			t.Fatalf("revoke without confirming: %d, want the question in Italian with its confirm button:\n%s", code, body)
		}
		if ts, _ := st.ListTokens(ctx, review.Operator("test")); ts[0].RevokedAt != nil {
			t.Fatal("the row's button revoked the token without asking")
		}
		if code, _, _ := adm.post("/admin/tokens/"+id+"/revoke", url.Values{"csrf": {adm.csrf}, "confirm": {"1"}}); code != http.StatusSeeOther {
			t.Fatalf("confirmed revoke: %d", code)
		}
		if ts, _ := st.ListTokens(ctx, review.Operator("test")); ts[0].RevokedAt == nil {
			t.Fatal("the confirmed revoke did not revoke")
		}
		// A second confirmation (a page from before) changes nothing.
		if code, _, _ := adm.post("/admin/tokens/"+id+"/revoke", url.Values{"csrf": {adm.csrf}, "confirm": {"1"}}); code != http.StatusSeeOther {
			t.Fatalf("revoke again: %d", code)
		}
		if code, _, _ := adm.post("/admin/tokens/"+id+"/revoke", url.Values{"csrf": {adm.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("asking to revoke a revoked token: %d, want 303 back to the list", code)
		}
		evs, _, err := st.SearchAudit(ctx, store.AuditFilter{Action: "token.revoked"}, 10)
		if err != nil || len(evs) != 1 {
			t.Fatalf("token.revoked events: %d, %v", len(evs), err)
		}
		if code, _, _ := adm.post("/admin/tokens/tok_nope/revoke", url.Values{"csrf": {adm.csrf}}); code != http.StatusNotFound {
			t.Fatalf("an unknown token: %d, want 404", code)
		}
	})
}

// TestConsoleTokenFormSentTwice: the create-token form sent again (a
// reload of the page that shows the new token, a double click) makes no
// second token: it is refused, 409, in the reader's language, naming the
// token the form made. Before, it made a second live token nobody held
// (its value shown on a page nobody meant to load). Sent at once, twice,
// it makes one. A new drawing of the form makes a new token.
func TestConsoleTokenFormSentTwice(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		_, page := adm.get("/admin/tokens")
		formID := hiddenFields(page).Get("form_id")
		form := url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "name": {"ci"}, "form_id": {formID}}
		if code, body, _ := adm.post("/admin/tokens", form); code != http.StatusOK || !strings.Contains(body, "limbo_") {
			t.Fatalf("create: %d\n%s", code, alerts(body))
		}
		code, body, _ := adm.post("/admin/tokens", form)
		body = html.UnescapeString(body)
		if code != http.StatusConflict || !strings.Contains(body, "Questo modulo è già stato inviato: ha creato il token ci del tenant acme") ||
			strings.Contains(body, "limbo_") {
			t.Errorf("the same form again: %d, want 409 naming the token, in Italian, and no new token\n%s", code, alerts(body))
		}
		// Twice at once: one token.
		_, page = adm.get("/admin/tokens")
		form.Set("form_id", hiddenFields(page).Get("form_id"))
		form.Set("name", "deploy")
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); adm.post("/admin/tokens", form) }()
		}
		wg.Wait()
		ts, err := st.ListTokens(ctx, review.Operator("test"))
		if err != nil || len(ts) != 2 {
			t.Fatalf("tokens = %+v, %v; want ci and deploy, once each", ts, err)
		}
		// A form without an id (limbo token create, an older page) makes
		// one each time, as before.
		form.Del("form_id")
		if code, _, _ := adm.post("/admin/tokens", form); code != http.StatusOK {
			t.Errorf("create without a form id: %d", code)
		}
	})
}

// TestConsoleWebhookAddedTwice: the add form sent again (a reload of the
// page showing the secret, a double click) does not add a second enabled
// endpoint at the same URL for the tenant: it is refused, 422, in the
// reader's language, naming the endpoint there. Before, it added one, and
// every decision then went to the receiver twice, under two event ids and
// signed with a secret it had never seen. Another tenant may use the URL;
// replacing an endpoint is disabling it, then adding; the old one cannot be
// enabled again beside its replacement.
func TestConsoleWebhookAddedTwice(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		adm.get("/admin/webhooks")
		add := url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {"https://hooks.example.com/limbo"}, "description": {"billing"}}
		if code, body, _ := adm.post("/admin/webhooks", add); code != http.StatusOK {
			t.Fatalf("add: %d\n%s", code, alerts(body))
		}
		es, _ := st.ListWebhookEndpoints(ctx, nil)
		if len(es) != 1 {
			t.Fatalf("endpoints after one add: %d", len(es))
		}
		first := es[0].ID
		code, body, _ := adm.post("/admin/webhooks", add)
		want := "url: il tenant acme ha già un endpoint attivo a questo URL (" + first + "); disattivalo prima per sostituirlo"
		if code != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(body), want) {
			t.Errorf("the same add again: %d, want 422 saying %q:\n%s", code, want, html.UnescapeString(alerts(body)))
		}
		if es, _ := st.ListWebhookEndpoints(ctx, nil); len(es) != 1 {
			t.Fatalf("the form sent twice made %d endpoints", len(es))
		}
		other := url.Values{"csrf": {adm.csrf}, "tenant": {"globex"}, "url": add["url"]}
		if code, body, _ := adm.post("/admin/webhooks", other); code != http.StatusOK {
			t.Errorf("the URL for another tenant: %d\n%s", code, alerts(body))
		}
		// Replacing: disable, then add.
		if code, _, _ := adm.post("/admin/webhooks/"+first+"/disable", url.Values{"csrf": {adm.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("disable: %d", code)
		}
		if code, body, _ := adm.post("/admin/webhooks", add); code != http.StatusOK {
			t.Fatalf("add after disabling the old one: %d\n%s", code, alerts(body))
		}
		code, body, _ = adm.post("/admin/webhooks/"+first+"/enable", url.Values{"csrf": {adm.csrf}})
		if code != http.StatusConflict || !strings.Contains(html.UnescapeString(body), "url: il tenant acme ha già un endpoint attivo a questo URL") {
			t.Errorf("enable the replaced endpoint: %d, want 409 saying why:\n%s", code, html.UnescapeString(alerts(body)))
		}
		if ep, _ := st.GetWebhookEndpoint(ctx, first, nil); ep.DisabledAt == nil {
			t.Error("the replaced endpoint was enabled beside its replacement")
		}
	})
}

// TestConsoleUserDisableAsksFirst: a user's row that disables them (the box
// ticked, Save pressed) does not sign them out at once: the page asks,
// naming the user, in the reader's language, with the row as sent and a
// way to keep them enabled. Only the confirmation disables; a row that
// changes only the role saves at once, as does enabling. Before, a box
// ticked on the wrong row signed a reviewer out mid-review.
func TestConsoleUserDisableAsksFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		sup, err := st.UserByEmail(ctx, "support@example.com")
		if err != nil {
			t.Fatal(err)
		}
		supb := newBrowser(t, srv.URL)
		supb.login("support@example.com")
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		_, page := adm.get("/admin/users")
		form := hiddenFields(userRow(page, sup.ID))
		form.Set("role", "support")
		form.Set("tenants", "*")
		form.Set("disabled", "1")
		code, body, _ := adm.post("/admin/users/"+sup.ID, form)
		body = html.UnescapeString(body)
		if code != http.StatusOK || !strings.Contains(body, "Disattivare support@example.com? La sua sessione termina subito") ||
			!strings.Contains(body, `<input type="hidden" name="confirm" value="1">`) || !strings.Contains(body, "Lascialo attivo") {
			t.Fatalf("disable without confirming: %d, want the question in Italian:\n%s", code, alerts(body))
		}
		if u, _ := st.UserByID(ctx, sup.ID); u.DisabledAt != nil {
			t.Fatal("the row disabled the user without asking")
		}
		if code, _ := supb.get("/"); code != http.StatusOK {
			t.Fatalf("asking signed the user out: %d", code)
		}
		// The confirmation carries the row as sent.
		confirm := hiddenFields(body[strings.Index(body, "Disattivare support@example.com?"):])
		if confirm.Get("confirm") != "1" || confirm.Get("disabled") != "1" || confirm.Get("tenants") != "*" || confirm.Get("was_role") != "support" {
			t.Fatalf("the confirmation does not carry the row: %v", confirm)
		}
		if code, body, _ := adm.post("/admin/users/"+sup.ID, confirm); code != http.StatusSeeOther {
			t.Fatalf("confirmed disable: %d\n%s", code, alerts(body))
		}
		if u, _ := st.UserByID(ctx, sup.ID); u.DisabledAt == nil {
			t.Fatal("the confirmed disable did not disable")
		}
		if code, _ := supb.get("/"); code != http.StatusSeeOther {
			t.Fatalf("a disabled user's session still works: %d", code)
		}
		// Enabling again, and a role change, save at once.
		_, page = adm.get("/admin/users")
		form = hiddenFields(userRow(page, sup.ID))
		form.Set("role", "reviewer")
		form.Set("tenants", "*")
		if code, body, _ := adm.post("/admin/users/"+sup.ID, form); code != http.StatusSeeOther {
			t.Fatalf("enable with a new role: %d\n%s", code, alerts(body))
		}
		if u, _ := st.UserByID(ctx, sup.ID); u.DisabledAt != nil || u.Role != review.RoleReviewer {
			t.Fatalf("enable with a new role did not save: %+v", u)
		}
	})
}

// TestConsoleResetPassword: an admin gives a user who lost their password
// a new one from the users page. The row's button asks first, naming the
// user, in the reader's language; only the confirmation resets, shows the
// new password once, signs the user out and is audited. There was no way
// back in for such a user.
func TestConsoleResetPassword(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		u, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "forgot@example.com", Password: "the password forgotten",
			Role: review.RoleReviewer, Scope: review.Scope{All: true}})
		if err != nil {
			t.Fatal(err)
		}
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		_, page := adm.get("/admin/users")
		if !strings.Contains(page, `action="/admin/users/`+u.ID+`/password"`) || !strings.Contains(page, "Reimposta password") {
			t.Fatalf("the user's row offers no password reset")
		}
		code, body, _ := adm.post("/admin/users/"+u.ID+"/password", url.Values{"csrf": {adm.csrf}})
		body = html.UnescapeString(body)
		if code != http.StatusOK || !strings.Contains(body, "Dare a forgot@example.com una nuova password?") || strings.Contains(body, "Nuova password di") {
			t.Fatalf("reset without confirming: %d, want the question in Italian and no new password", code)
		}
		if _, _, err := st.Login(ctx, "forgot@example.com", "the password forgotten", "127.0.0.9", store.SessionPolicy{}); err != nil {
			t.Fatalf("asking reset the password: %v", err)
		}
		code, body, _ = adm.post("/admin/users/"+u.ID+"/password", url.Values{"csrf": {adm.csrf}, "confirm": {"1"}})
		m := regexp.MustCompile(`Nuova password di forgot@example.com \(mostrata una volta sola\): <code>([^<]+)</code>`).FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			t.Fatalf("confirmed reset: %d, want the new password shown once\n%s", code, alerts(body))
		}
		if _, _, err := st.Login(ctx, "forgot@example.com", m[1], "127.0.0.9", store.SessionPolicy{}); err != nil {
			t.Errorf("the new password: %v", err)
		}
		if _, _, err := st.Login(ctx, "forgot@example.com", "the password forgotten", "127.0.0.10", store.SessionPolicy{}); err == nil {
			t.Error("the old password still signs in")
		}
		_, audit := adm.get("/audit?action=user.password_reset")
		if !strings.Contains(audit, "Password reimpostata") {
			t.Errorf("the audit page does not list the reset in Italian")
		}
	})
}
