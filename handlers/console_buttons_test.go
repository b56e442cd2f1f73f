package handlers_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

var (
	// A form's target (method before action, as every template writes
	// it) and htmx's.
	postForm = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
	hxPost   = regexp.MustCompile(`hx-post="([^"]+)"`)
	pageLink = regexp.MustCompile(`href="(/[^"]*)"`)
	// The decision form's choices.
	decisionForm   = regexp.MustCompile(`(?s)<form method="post" action="/cases/[^"/]+/decision".*?</form>`)
	decisionChoice = regexp.MustCompile(`name="action" value="([^"]+)"`)
)

// consoleRoute finds the consoleRoutes entry of method and path.
func consoleRoute(method, target string) (review.Permission, bool) {
	path, _, _ := strings.Cut(strings.ReplaceAll(target, "&amp;", "&"), "?")
	for _, r := range consoleRoutes {
		if r.method != method {
			continue
		}
		pattern := "^" + regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(regexp.QuoteMeta(r.path), `[^/]+`) + "$"
		if regexp.MustCompile(pattern).MatchString(path) {
			return r.perm, true
		}
	}
	return "", false
}

// TestConsoleNoButtonARoleCannotUse: on every page a role can open — the
// queue both ways, the operations browser, the dashboard, the audit and
// administration pages it may read, each case page (a plain case, a
// financial one with a redacted payload, an approval request, one held by
// another reviewer) and each operation page — every form and htmx post
// goes to a route the role holds the permission for, every link to a
// console page it may open, and the decision form offers only actions the
// role may take on that operation. The route permissions are those of
// consoleRoutes, which TestConsoleAccessMatrix proves the server enforces.
func TestConsoleNoButtonARoleCannotUse(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		cfg := &review.Config{RedactFields: []string{"card"}, Destinations: map[string]review.Destination{
			"mail": {Lease: 30 * time.Second, Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true, ApprovalTimeout: 4 * time.Hour}}},
		}}
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		needsReview(t, st, "doc-1")
		flaggedCase(t, st, "inv-1")
		if _, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "mail-1", LogicalVersion: "1", Action: "send_email",
			Destination: "mail", Risk: review.RiskIrreversible, Flags: []review.Flag{review.FlagIrreversible},
			Payload: []byte(`{"to":"legal@example.com"}`), Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		held := needsReview(t, st, "doc-2")
		if _, err := st.ClaimCase(ctx, held, review.Principal{Name: "reviewer@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		page, err := st.Queue(ctx, store.QueueFilter{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Cases) != 4 {
			t.Fatalf("%d open cases, want 4 (plain, financial, approval, held)", len(page.Cases))
		}

		for _, role := range review.AllRoles() {
			b := newBrowser(t, srv.URL)
			b.login(string(role) + "@example.com")
			pages := []string{"/", "/?decidable=0", "/?decidable=1", "/operations", "/dashboard", "/audit", "/admin/users", "/admin/tokens",
				"/admin/destinations", "/admin/actions", "/admin/webhooks"}
			ops := map[string]string{} // page → its case's operation
			for _, c := range page.Cases {
				pages = append(pages, "/cases/"+c.ID, "/operations/"+c.OperationID)
				ops["/cases/"+c.ID] = c.OperationID
			}
			for _, p := range pages {
				if perm, _ := consoleRoute("GET", p); perm != "" && !role.Can(perm) {
					continue // a page the role cannot open (the access matrix proves the 403)
				}
				code, body := b.get(p)
				if code != 200 {
					t.Fatalf("%s: GET %s: %d", role, p, code)
				}
				for _, re := range []*regexp.Regexp{postForm, hxPost} {
					for _, m := range re.FindAllStringSubmatch(body, -1) {
						perm, ok := consoleRoute("POST", m[1])
						if !ok {
							t.Errorf("%s on %s: a form posts to %s, which is no console route", role, p, m[1])
						} else if perm != "" && !role.Can(perm) {
							t.Errorf("%s on %s: a form posts to %s, which needs %s", role, p, m[1], perm)
						}
					}
				}
				for _, m := range pageLink.FindAllStringSubmatch(body, -1) {
					if perm, ok := consoleRoute("GET", m[1]); ok && perm != "" && !role.Can(perm) {
						t.Errorf("%s on %s: a link to %s, which needs %s", role, p, m[1], perm)
					}
				}
				if opID, ok := ops[p]; ok {
					op, err := st.GetOperation(ctx, "acme", opID, "")
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range decisionChoice.FindAllStringSubmatch(decisionForm.FindString(body), -1) {
						if !role.CanDecide(op, m[1]) {
							t.Errorf("%s on %s: the decision form offers %s, which the role may not take on it", role, p, m[1])
						}
					}
				}
			}
		}
	})
}
