package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// adminScopes are the admin scopes the matrix signs in with, and
// targetScopes the scopes of what they act on.
var (
	adminScopes  = []string{"*", "ta", "tb", "ta,tb"}
	targetScopes = []string{"ta", "tb", "ta,tb", "*"}
)

// adminWorld is one console with users, tokens, webhook endpoints and
// cases in tenants ta and tb, and admins of every scope in adminScopes.
type adminWorld struct {
	t      *testing.T
	srv    string
	st     *store.Store
	admins map[string]*browser    // by scope
	ids    map[string]*store.User // admins by scope
	cases  map[string]string      // an open case by tenant
	op     review.Principal
}

func newAdminWorld(t *testing.T, e store.Engine) *adminWorld {
	srvURL, st := consoleServer(t, e)
	w := &adminWorld{t: t, srv: srvURL.URL, st: st, admins: map[string]*browser{}, ids: map[string]*store.User{}, cases: map[string]string{}, op: review.Operator("test")}
	for _, sc := range adminScopes {
		email := "adm-" + strings.ReplaceAll(scopeName(sc), ",", "-") + "@example.com"
		w.ids[sc] = w.user(email, review.RoleAdmin, sc)
		b := newBrowser(t, srvURL.URL)
		b.login(email)
		w.admins[sc] = b
	}
	return w
}

func scopeName(sc string) string {
	if sc == "*" {
		return "all"
	}
	return sc
}

func (w *adminWorld) user(email string, role review.Role, scope string) *store.User {
	w.t.Helper()
	sc, err := review.ParseScope(scope)
	if err != nil {
		w.t.Fatal(err)
	}
	u, err := w.st.AddUser(context.Background(), w.op, store.NewUser{Email: email, Password: "correct horse battery", Role: role, Scope: sc})
	if err != nil {
		w.t.Fatal(err)
	}
	return u
}

func covers(admin, target string) bool {
	a, _ := review.ParseScope(admin)
	t, _ := review.ParseScope(target)
	return a.Covers(t)
}

// adminProbe acts once as the admin of scope admin on something of scope
// target and tells whether the act was allowed (from the answer and what
// the database then holds); want is what SPEC "Roles" and issue 11 say.
type adminProbe struct {
	method, path string
	// targets are the target scopes the probe is run against: resources
	// of one tenant (tokens, endpoints, cases) only take ta and tb.
	targets []string
	run     func(w *adminWorld, admin, target string) (allowed bool)
	want    func(admin, target string) bool
}

var tenantTargets = []string{"ta", "tb"}

var adminProbes = []adminProbe{
	{"GET", "/admin", tenantTargets, func(w *adminWorld, admin, _ string) bool {
		code, _ := w.admins[admin].get("/admin")
		return code == http.StatusSeeOther
	}, func(string, string) bool { return true }},
	{"GET", "/admin/users", targetScopes, func(w *adminWorld, admin, target string) bool {
		u := w.user("listed-"+w.tag(admin, target)+"@example.com", review.RoleReviewer, target)
		_, body := w.admins[admin].get("/admin/users")
		return strings.Contains(body, u.Email)
	}, covers},
	{"POST", "/admin/users", targetScopes, func(w *adminWorld, admin, target string) bool {
		b := w.admins[admin]
		email := "new-" + w.tag(admin, target) + "@example.com"
		code, _, _ := b.post("/admin/users", url.Values{"csrf": {b.csrf}, "email": {email}, "role": {"reviewer"}, "tenants": {target}})
		_, err := w.st.UserByEmail(context.Background(), email)
		if (code == http.StatusOK) != (err == nil) {
			w.t.Errorf("adding %s as %s admin: %d, stored: %v", email, admin, code, err == nil)
		}
		return err == nil
	}, covers},
	{"POST", "/admin/users/{user}", targetScopes, func(w *adminWorld, admin, target string) bool {
		u := w.user("change-"+w.tag(admin, target)+"@example.com", review.RoleReviewer, target)
		b := w.admins[admin]
		code, _, _ := b.post("/admin/users/"+u.ID, url.Values{"csrf": {b.csrf}, "role": {"support"}, "tenants": {target}, "disabled": {"1"}})
		got, _ := w.st.UserByID(context.Background(), u.ID)
		changed := got.DisabledAt != nil || got.Role != review.RoleReviewer
		if changed != (code == http.StatusSeeOther) || (!changed && code != http.StatusNotFound) {
			w.t.Errorf("changing %s (%s) as %s admin: %d, changed %v; want 303 or 404", u.Email, target, admin, code, changed)
		}
		return changed
	}, covers},
	{"POST", "/admin/users/{user}/password", targetScopes, func(w *adminWorld, admin, target string) bool {
		u := w.user("reset-"+w.tag(admin, target)+"@example.com", review.RoleReviewer, target)
		b := w.admins[admin]
		before, _ := w.st.UserByID(context.Background(), u.ID)
		code, _, _ := b.post("/admin/users/"+u.ID+"/password", url.Values{"csrf": {b.csrf}, "confirm": {"1"}})
		got, _ := w.st.UserByID(context.Background(), u.ID)
		reset := got.PasswordHash != before.PasswordHash
		if reset != (code == http.StatusOK) || (!reset && code != http.StatusNotFound) {
			w.t.Errorf("resetting %s (%s) as %s admin: %d, reset %v; want 200 or 404", u.Email, target, admin, code, reset)
		}
		return reset
	}, covers},
	{"GET", "/admin/tokens", tenantTargets, func(w *adminWorld, admin, target string) bool {
		name := "listed-" + w.tag(admin, target)
		if _, err := w.st.CreateToken(context.Background(), w.op, target, name); err != nil {
			w.t.Fatal(err)
		}
		_, body := w.admins[admin].get("/admin/tokens")
		return strings.Contains(body, name)
	}, covers},
	{"POST", "/admin/tokens", tenantTargets, func(w *adminWorld, admin, target string) bool {
		b := w.admins[admin]
		name := "made-" + w.tag(admin, target)
		code, _, _ := b.post("/admin/tokens", url.Values{"csrf": {b.csrf}, "tenant": {target}, "name": {name}})
		made := w.tokenNamed(name) != nil
		if made != (code == http.StatusOK) {
			w.t.Errorf("making a %s token as %s admin: %d, made %v", target, admin, code, made)
		}
		return made
	}, covers},
	{"POST", "/admin/tokens/{token}/revoke", tenantTargets, func(w *adminWorld, admin, target string) bool {
		name := "revoke-" + w.tag(admin, target)
		if _, err := w.st.CreateToken(context.Background(), w.op, target, name); err != nil {
			w.t.Fatal(err)
		}
		b := w.admins[admin]
		code, _, _ := b.post("/admin/tokens/"+w.tokenNamed(name).ID+"/revoke", url.Values{"csrf": {b.csrf}, "confirm": {"1"}})
		revoked := w.tokenNamed(name).RevokedAt != nil
		if revoked != (code == http.StatusSeeOther) || (!revoked && code != http.StatusNotFound) {
			w.t.Errorf("revoking a %s token as %s admin: %d, revoked %v", target, admin, code, revoked)
		}
		return revoked
	}, covers},
	{"GET", "/admin/destinations", tenantTargets, func(w *adminWorld, admin, _ string) bool {
		code, _ := w.admins[admin].get("/admin/destinations")
		return code == http.StatusOK
	}, func(string, string) bool { return true }}, // not tenant data: the configuration file, secrets hidden
	{"GET", "/admin/destinations", tenantTargets, func(w *adminWorld, admin, target string) bool {
		// The retry budgets are tenant data: each tenant's attempts at its
		// destination (the case's operation made one, at dest-<tenant>).
		_, body := w.admins[admin].get("/admin/destinations")
		return strings.Contains(body, `<td data-label="Destination"><div>dest-`+target+`</div></td><td data-label="Tenant"><div>`+target+"</div></td>")
	}, covers},
	{"GET", "/admin/actions", tenantTargets, func(w *adminWorld, admin, _ string) bool {
		code, _ := w.admins[admin].get("/admin/actions")
		return code == http.StatusOK
	}, func(string, string) bool { return true }}, // not tenant data: the configuration file's action policies
	{"GET", "/admin/webhooks", tenantTargets, func(w *adminWorld, admin, target string) bool {
		ep := w.endpoint(target, "listed-"+w.tag(admin, target))
		_, body := w.admins[admin].get("/admin/webhooks")
		return strings.Contains(body, ep.Description)
	}, covers},
	{"POST", "/admin/webhooks", tenantTargets, func(w *adminWorld, admin, target string) bool {
		b := w.admins[admin]
		desc := "made-" + w.tag(admin, target)
		code, _, _ := b.post("/admin/webhooks", url.Values{"csrf": {b.csrf}, "tenant": {target}, "url": {"https://93.184.215.14/hook/" + url.PathEscape(desc)}, "description": {desc}})
		made := w.endpointDescribed(desc) != nil
		if made != (code == http.StatusOK) {
			w.t.Errorf("adding a %s endpoint as %s admin: %d, made %v", target, admin, code, made)
		}
		return made
	}, covers},
	{"GET", "/admin/webhooks/{hook}", tenantTargets, func(w *adminWorld, admin, target string) bool {
		ep := w.endpoint(target, "shown-"+w.tag(admin, target))
		code, _ := w.admins[admin].get("/admin/webhooks/" + ep.ID)
		if code != http.StatusOK && code != http.StatusNotFound {
			w.t.Errorf("deliveries of a %s endpoint as %s admin: %d, want 200 or 404", target, admin, code)
		}
		return code == http.StatusOK
	}, covers},
	{"POST", "/admin/webhooks/{hook}/disable", tenantTargets, func(w *adminWorld, admin, target string) bool {
		ep := w.endpoint(target, "disable-"+w.tag(admin, target))
		b := w.admins[admin]
		code, _, _ := b.post("/admin/webhooks/"+ep.ID+"/disable", url.Values{"csrf": {b.csrf}})
		got := w.endpointDescribed(ep.Description)
		if (got.DisabledAt != nil) != (code == http.StatusSeeOther) || (got.DisabledAt == nil && code != http.StatusNotFound) {
			w.t.Errorf("disabling a %s endpoint as %s admin: %d, disabled %v", target, admin, code, got.DisabledAt != nil)
		}
		return got.DisabledAt != nil
	}, covers},
	{"POST", "/admin/webhooks/{hook}/enable", tenantTargets, func(w *adminWorld, admin, target string) bool {
		ep := w.endpoint(target, "enable-"+w.tag(admin, target))
		if err := w.st.DisableWebhookEndpoint(context.Background(), review.Operator("test"), ep.ID); err != nil {
			w.t.Fatal(err)
		}
		b := w.admins[admin]
		code, _, _ := b.post("/admin/webhooks/"+ep.ID+"/enable", url.Values{"csrf": {b.csrf}})
		got := w.endpointDescribed(ep.Description)
		if (got.DisabledAt == nil) != (code == http.StatusSeeOther) || (got.DisabledAt != nil && code != http.StatusNotFound) {
			w.t.Errorf("enabling a %s endpoint as %s admin: %d, enabled %v", target, admin, code, got.DisabledAt == nil)
		}
		return got.DisabledAt == nil
	}, covers},
	{"POST", "/admin/webhooks/{hook}/redeliver", tenantTargets, func(w *adminWorld, admin, target string) bool {
		ep := w.endpoint(target, "redeliver-"+w.tag(admin, target))
		b := w.admins[admin]
		code, _, _ := b.post("/admin/webhooks/"+ep.ID+"/redeliver", url.Values{"csrf": {b.csrf}})
		if code != http.StatusSeeOther && code != http.StatusNotFound {
			w.t.Errorf("redelivering to a %s endpoint as %s admin: %d, want 303 or 404", target, admin, code)
		}
		return code == http.StatusSeeOther
	}, covers},
	// What admins read beyond the admin pages, bounded by the same scope.
	{"GET", "/", tenantTargets, func(w *adminWorld, admin, target string) bool {
		_, body := w.admins[admin].get("/")
		return strings.Contains(body, w.caseIn(target))
	}, covers},
	{"GET", "/cases/{case}", tenantTargets, func(w *adminWorld, admin, target string) bool {
		code, _ := w.admins[admin].get("/cases/" + w.caseIn(target))
		return code == http.StatusOK
	}, covers},
	{"GET", "/operations/{op}", tenantTargets, func(w *adminWorld, admin, target string) bool {
		c, _ := w.st.GetCase(context.Background(), w.caseIn(target), nil)
		code, _ := w.admins[admin].get("/operations/" + c.OperationID)
		return code == http.StatusOK
	}, covers},
	{"GET", "/audit", tenantTargets, func(w *adminWorld, admin, target string) bool {
		c, _ := w.st.GetCase(context.Background(), w.caseIn(target), nil)
		_, body := w.admins[admin].get("/audit?operation=" + c.OperationID)
		return strings.Contains(body, `title="operation.registered"`)
	}, covers},
	{"GET", "/audit.csv", tenantTargets, func(w *adminWorld, admin, target string) bool {
		c, _ := w.st.GetCase(context.Background(), w.caseIn(target), nil)
		_, body := w.admins[admin].get("/audit.csv?operation=" + c.OperationID)
		return strings.Contains(body, c.OperationID)
	}, covers},
	{"GET", "/dashboard", tenantTargets, func(w *adminWorld, admin, target string) bool {
		_, body := w.admins[admin].get("/dashboard")
		return strings.Contains(body, "dest-"+target)
	}, covers},
}

func (w *adminWorld) tag(admin, target string) string {
	return strings.NewReplacer(",", "-", "*", "all").Replace(admin + "." + target)
}

func (w *adminWorld) tokenNamed(name string) *store.Token {
	ts, err := w.st.ListTokens(context.Background(), w.op)
	if err != nil {
		w.t.Fatal(err)
	}
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	return nil
}

func (w *adminWorld) endpoint(tenant, desc string) *store.WebhookEndpoint {
	ep, err := w.st.AddWebhookEndpoint(context.Background(), review.Operator("test"), store.NewWebhookEndpoint{Tenant: tenant, URL: "https://93.184.215.14/hook/" + url.PathEscape(desc), Description: desc})
	if err != nil {
		w.t.Fatal(err)
	}
	return ep
}

func (w *adminWorld) endpointDescribed(desc string) *store.WebhookEndpoint {
	es, err := w.st.ListWebhookEndpoints(context.Background(), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	for i := range es {
		if es[i].Description == desc {
			return &es[i]
		}
	}
	return nil
}

// caseIn is the open case of tenant (on destination dest-<tenant>).
func (w *adminWorld) caseIn(tenant string) string {
	return w.cases[tenant]
}

// TestAdminScopeMatrix: every admin route × every admin scope × every
// target scope → exactly the allows the rule gives (0 unexpected allows,
// 0 unexpected refusals), on both engines. A route needing PermAdmin with
// no probe here fails the test.
func TestAdminScopeMatrix(t *testing.T) {
	t.Parallel()
	probed := map[string]bool{}
	for _, p := range adminProbes {
		probed[p.method+" "+p.path] = true
	}
	for _, r := range consoleRoutes {
		if r.perm == review.PermAdmin && !probed[r.method+" "+r.path] {
			t.Errorf("admin route %s %s has no probe in adminProbes", r.method, r.path)
		}
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newAdminWorld(t, e)
		for _, tenant := range tenantTargets {
			w.cases[tenant] = needsReviewOn(t, w.st, tenant, "dest-"+tenant, "scope-"+tenant)
		}
		for _, p := range adminProbes {
			for _, admin := range adminScopes {
				for _, target := range p.targets {
					got, want := p.run(w, admin, target), p.want(admin, target)
					switch {
					case got && !want:
						t.Errorf("UNEXPECTED ALLOW: %s %s as admin of %q on %q", p.method, p.path, admin, target)
					case !got && want:
						t.Errorf("unexpected refusal: %s %s as admin of %q on %q", p.method, p.path, admin, target)
					}
				}
			}
		}
		// No admin widens itself, and a scoped admin makes no admins.
		for _, admin := range adminScopes {
			b, me := w.admins[admin], w.ids[admin]
			code, _, _ := b.post("/admin/users/"+me.ID, url.Values{"csrf": {b.csrf}, "role": {"admin"}, "tenants": {"*"}})
			if got, _ := w.st.UserByID(context.Background(), me.ID); got.TenantsText != me.TenantsText || code != http.StatusForbidden {
				t.Errorf("admin of %q changed its own grant: %d, now %q", admin, code, got.TenantsText)
			}
			email := "made-admin-" + scopeName(strings.ReplaceAll(admin, ",", "-")) + "@example.com"
			code, _, _ = b.post("/admin/users", url.Values{"csrf": {b.csrf}, "email": {email}, "role": {"admin"}, "tenants": {admin}})
			_, err := w.st.UserByEmail(context.Background(), email)
			if made := err == nil; made != (admin == "*") {
				t.Errorf("admin of %q made an admin: %d, made %v", admin, code, made)
			}
		}
	})
}

// TestAdminFormsKeepWhatWasTyped: a refused admin form comes back with the
// refusal in words and everything the admin typed, and a scoped admin's
// tenant fields start at its own tenant.
func TestAdminFormsKeepWhatWasTyped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		w := newAdminWorld(t, e)
		b := w.admins["tb"]
		code, body, _ := b.post("/admin/webhooks", url.Values{"csrf": {b.csrf}, "tenant": {"tb"}, "url": {"http://10.0.0.5/hook"}, "description": {"ops pager"}})
		for _, want := range []string{`value="http://10.0.0.5/hook"`, `value="ops pager"`, "url: 10.0.0.5 is private (RFC 1918)"} {
			if !strings.Contains(body, want) {
				t.Errorf("refused endpoint (%d): the page lacks %s", code, want)
			}
		}
		code, body, _ = b.post("/admin/users", url.Values{"csrf": {b.csrf}, "email": {"new@example.com"}, "role": {"reviewer"}, "tenants": {"ta"}})
		for _, want := range []string{`value="new@example.com"`, `value="ta"`, `value="reviewer" selected`, "you can grant only tenants you hold (tb)"} {
			if code != http.StatusForbidden || !strings.Contains(body, want) {
				t.Errorf("refused user (%d): the page lacks %s", code, want)
			}
		}
		for _, p := range []string{"/admin/tokens", "/admin/webhooks"} {
			if _, body := b.get(p); !strings.Contains(body, `value="tb"`) {
				t.Errorf("%s: the tenant field does not start at the admin's own tenant", p)
			}
		}
	})
}
