package handlers_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleAdminRefusalsAllItalian: what an Italian-speaking admin
// types wrong on the users, tokens and webhooks forms is refused in
// Italian, without the "detail in English" lead-in: a tenant left empty or
// holding ',' or '*', a "*" inside a list of tenants, a description or a
// name too long for the form's check. Before, each read "Non accettato
// (dettaglio in inglese): tenant: required" and the like.
func TestConsoleAdminRefusalsAllItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		for _, c := range []struct {
			path string
			form url.Values
			code int
			want string
		}{
			{"/admin/tokens", url.Values{"tenant": {" "}, "name": {"ci"}}, http.StatusUnprocessableEntity, "tenant: obbligatorio"},
			{"/admin/tokens", url.Values{"tenant": {"acme,globex"}, "name": {"ci"}}, http.StatusUnprocessableEntity, "tenant: non deve contenere ',' o '*'"},
			{"/admin/tokens", url.Values{"tenant": {"acme"}, "name": {"   "}}, http.StatusUnprocessableEntity, "nome: obbligatorio"},
			{"/admin/webhooks", url.Values{"tenant": {""}, "url": {"https://hooks.example.com/x"}}, http.StatusUnprocessableEntity, "tenant: obbligatorio"},
			{"/admin/users", url.Values{"email": {"new@example.com"}, "role": {"support"}, "tenants": {"acme,*"}}, http.StatusUnprocessableEntity,
				`tenant: "*" non è un nome di tenant: * va da solo, e vale per tutti i tenant`},
			{"/admin/webhooks", url.Values{"tenant": {"acme"}, "url": {"https://hooks.example.com/x"}, "description": {strings.Repeat("d", 501)}},
				http.StatusBadRequest, "description: al massimo 500 caratteri, ricevuti 501"},
			{"/admin/tokens", url.Values{"tenant": {"acme"}, "name": {strings.Repeat("n", 1001)}}, http.StatusBadRequest, "name: al massimo 1000 caratteri, ricevuti 1001"},
		} {
			c.form.Set("csrf", adm.csrf)
			code, body, _ := adm.post(c.path, c.form)
			body = html.UnescapeString(body)
			if code != c.code || !strings.Contains(body, c.want) || strings.Contains(body, "dettaglio in inglese") {
				t.Errorf("POST %s %v: %d, want %d saying %q in Italian:\n%s", c.path, c.form, code, c.code, c.want, html.UnescapeString(alerts(body)))
			}
		}
	})
}

// TestConsoleUserUnknownTenant: a user added or changed with a tenant no
// tenant has yet (a typo: "acmee" beside acme) is saved, and the page says
// in the reader's language that they see nothing there, naming the tenant
// and the user; a known tenant saves without it (a change redirects as
// before). Before, the typo was taken silently and the user found an empty
// queue. limbo user add warns the same way (TestUserAddUnknownTenant).
func TestConsoleUserUnknownTenant(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.CreateToken(ctx, review.Operator("test"), "acme", "ci"); err != nil {
			t.Fatal(err)
		}
		adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		adm.login("admin@example.com")
		adm.get("/admin/users")
		const warn = "Nessun tenant si chiama ancora acmee: new@example.com non vi vede nulla"
		code, body, _ := adm.post("/admin/users", url.Values{"csrf": {adm.csrf}, "email": {"new@example.com"}, "role": {"support"}, "tenants": {"acmee"}})
		if code != http.StatusOK || !strings.Contains(html.UnescapeString(body), warn) {
			t.Fatalf("add with a mistyped tenant: %d, want 200 saying %q", code, warn)
		}
		u, err := st.UserByEmail(ctx, "new@example.com")
		if err != nil || u.TenantsText != "acmee" {
			t.Fatalf("the user was not added as typed: %+v %v", u, err)
		}
		form := hiddenFields(userRow(body, u.ID))
		form.Set("role", "support")
		form.Set("tenants", "acme,acmee")
		code, body, _ = adm.post("/admin/users/"+u.ID, form)
		if code != http.StatusOK || !strings.Contains(html.UnescapeString(body), warn) {
			t.Errorf("change to a mistyped tenant: %d, want 200 saying %q", code, warn)
		}
		form = hiddenFields(userRow(body, u.ID))
		form.Set("role", "support")
		form.Set("tenants", "acme")
		if code, body, _ := adm.post("/admin/users/"+u.ID, form); code != http.StatusSeeOther {
			t.Errorf("change to a known tenant: %d, want 303\n%s", code, alerts(body))
		}
		_, body, _ = adm.post("/admin/users", url.Values{"csrf": {adm.csrf}, "email": {"ok@example.com"}, "role": {"support"}, "tenants": {"acme"}})
		if strings.Contains(body, "Nessun tenant") {
			t.Error("a known tenant was warned about")
		}
	})
}

// TestConsoleTenantsHint: the new user's tenants are labelled with what
// this admin may grant: "*" for every tenant only to an all-tenants admin;
// a tenant-scoped admin is told the tenants it holds, without a "*" it
// would be refused. Before, both read "Tenants (a,b or *; you may grant
// acme)" — offering * to an admin who may not grant it — and an
// all-tenants admin read "you may grant *".
func TestConsoleTenantsHint(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	if _, err := st.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: "acme-admin@example.com", Password: "correct horse battery",
		Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{"acme", "beta"}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ who, lang, want, not string }{
		{"admin@example.com", "it", "Tenant (a,b, oppure * per tutti i tenant)", "puoi concedere"},
		{"acme-admin@example.com", "it", "Tenant (a,b; puoi concedere acme,beta)", "*"},
		{"acme-admin@example.com", "en", "Tenants (a,b; you may grant acme,beta)", "*"},
	} {
		b := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
		b.login(c.who)
		_, body := b.get("/admin/users")
		i := strings.Index(body, `<label for="new-tenants">`)
		if i < 0 {
			t.Fatalf("%s: no tenants label", c.who)
		}
		label := html.UnescapeString(body[i+len(`<label for="new-tenants">`) : i+strings.Index(body[i:], "</label>")])
		if label != c.want || strings.Contains(label, c.not) {
			t.Errorf("%s (%s): label %q, want %q", c.who, c.lang, label, c.want)
		}
	}
}

// TestConsoleOwnUserRow: an admin's own row on the users page says why it
// offers no change — nobody changes their own grant — instead of "changed
// by an all-tenants admin", which an all-tenants admin read about itself;
// another admin's row a scoped admin may not change still says that.
func TestConsoleOwnUserRow(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	if _, err := st.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: "acme-admin@example.com", Password: "correct horse battery",
		Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{"acme"}}}); err != nil {
		t.Fatal(err)
	}
	const own, other = "sei tu: il tuo ruolo, i tuoi tenant e il tuo stato li modifica un altro amministratore", "lo modifica un amministratore di tutti i tenant"
	rowOf := func(page, email string) string {
		i := strings.Index(page, `<td data-label="Email">`+email+"</td>")
		if i < 0 {
			t.Fatalf("no row for %s", email)
		}
		return html.UnescapeString(page[i : i+strings.Index(page[i:], "</tr>")])
	}
	for _, who := range []string{"admin@example.com", "acme-admin@example.com"} {
		b := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		b.login(who)
		_, body := b.get("/admin/users")
		if row := rowOf(body, who); !strings.Contains(row, own) || strings.Contains(row, other) {
			t.Errorf("%s's own row: want %q:\n%s", who, own, row)
		}
	}
	// Another admin's row, to an all-tenants admin: editable, as before.
	b := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
	b.login("admin@example.com")
	_, body := b.get("/admin/users")
	if row := rowOf(body, "acme-admin@example.com"); strings.Contains(row, own) || !strings.Contains(row, `name="role"`) {
		t.Errorf("another admin's row, to an all-tenants admin: want it editable:\n%s", row)
	}
}

// TestConsoleLongFieldsTheFormAllows: what a form's input allows is not
// refused by the form check. The tenants inputs allow 2,000 characters and
// an endpoint's URL is stored up to 2,048 bytes, but the check held every
// field without a rule of its own to 1,000: a longer list of tenants, or a
// long signed URL, answered a 400 page and what was typed was lost.
func TestConsoleLongFieldsTheFormAllows(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		var tenants []string
		for i := range 200 {
			tenants = append(tenants, fmt.Sprintf("tenant-%03d", i))
		}
		list := strings.Join(tenants, ",") // 2,199 characters: too many
		list = list[:strings.LastIndex(list[:2000], ",")]
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		adm.get("/admin/users")
		code, body, _ := adm.post("/admin/users", url.Values{"csrf": {adm.csrf}, "email": {"many@example.com"}, "role": {"support"}, "tenants": {list}})
		if code >= 400 {
			t.Fatalf("add with %d characters of tenants: %d\n%s", len(list), code, alerts(body))
		}
		if u, err := st.UserByEmail(ctx, "many@example.com"); err != nil || u.TenantsText != list {
			t.Fatalf("user = %+v, %v; want the tenants as typed", u, err)
		}
		adm.get("/admin/webhooks")
		long := "https://hooks.example/" + strings.Repeat("a", 1500)
		code, body, _ = adm.post("/admin/webhooks", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {long}, "description": {"long"}})
		if code >= 400 {
			t.Fatalf("add an endpoint with a %d-byte URL: %d\n%s", len(long), code, alerts(body))
		}
		eps, err := st.ListWebhookEndpoints(ctx, nil)
		if err != nil || len(eps) != 1 || eps[0].URL != long {
			t.Fatalf("endpoints = %+v, %v; want the long URL", eps, err)
		}
	})
}
