package handlers_test

import (
	"context"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// adminPages are the admin pages a browser checks.
var adminPages = []string{"/admin/users", "/admin/tokens", "/admin/destinations", "/admin/actions", "/admin/webhooks"}

// TestBrowserAdminPages: every admin page, in English and in Italian, fits
// a 390 px phone and a 1400 px screen without the page scrolling sideways
// (a wide table scrolls inside its .table-wrap), and axe finds nothing
// serious. The data is long on purpose: a long webhook URL, a long token
// name, a configuration with policies.
func TestBrowserAdminPages(t *testing.T) {
	t.Parallel()
	chromiumPath(t) // skip before making databases
	cfg, err := review.ParseConfig([]byte(`
destinations:
  files:
    actions:
      render:
        owner: documents-team
        effects: renders one page of the contract into the shared folder of the customer
        key_fields: [note]
        redact_fields: [note]
        risk: compensable_write
        flags: [financial]
        requires_approval: true
        approvals: 2
        approval_timeout: 48h
      upload: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		ctx := context.Background()
		op := review.Operator("test")
		if _, err := st.CreateToken(ctx, op, "acme-corporation-europe-west", "continuous-integration-release-pipeline-token"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddWebhookEndpoint(ctx, op, store.NewWebhookEndpoint{Tenant: "acme-corporation-europe-west",
			URL: "https://hooks.example.com/limbo/decisions/acme-corporation-europe-west/very/long/path/for/the/receiver", Description: "the operations team's pager"}); err != nil {
			t.Fatal(err)
		}
		// A disabled endpoint with a message given up: its page offers the
		// way out (enable, then deliver again).
		off, err := st.AddWebhookEndpoint(ctx, op, store.NewWebhookEndpoint{Tenant: "acme",
			URL: "https://hooks.example.com/limbo/decisions/acme/another/very/long/path/for/the/receiver/of/decisions"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: needsReviewOn(t, st, "acme", "mail", "hook-1"),
			Action: review.DecideFail, Reason: "wrong version rendered", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		if err := st.DisableWebhookEndpoint(ctx, op, off.ID); err != nil {
			t.Fatal(err)
		}
		pages := append(slices.Clip(adminPages), "/admin/webhooks/"+off.ID)
		browser := startChromium(t)
		adm := openBrowserTab(t, browser, srv.URL, "admin")
		adm.login("admin@example.com")
		u, err := st.UserByEmail(ctx, "admin@example.com")
		if err != nil {
			t.Fatal(err)
		}
		for _, lang := range []string{"en", "it"} {
			if lang == "it" {
				// The saved choice, as the language menu makes it.
				if err := st.SetLanguage(ctx, u.Principal(), "it"); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range pages {
				adm.open(p)
				if got := evalJS[string](adm, `document.documentElement.lang`); got != lang {
					adm.fatalf("%s: html lang %q, want %q", p, got, lang)
				}
				adm.fitsWidth(p+" ("+lang+")", 390)
				adm.fitsWidth(p+" ("+lang+")", 1400)
				adm.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
				adm.axe(p + " (" + lang + ")")
			}
		}
	})
}

// TestBrowserUsersOnAPhone: on a 390 px phone the users page shows each
// user as a card, each field under its column's name, with the row's Save
// and Reset password within the screen. The table scrolled sideways in its
// box: Role, Tenants, Status and the forms lay past the right edge, and
// nothing said to scroll to reach them. In English and Italian, and axe
// finds nothing serious in the cards; at 1,400 px the table stays a table.
// Screenshots at both widths are kept.
func TestBrowserUsersOnAPhone(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	srv, st := consoleServer(t, store.SQLite) // a page's layout: one engine is enough
	ctx := context.Background()
	for _, email := range []string{"anna.bianchi@example.com", "giuseppe.verdi-amministrazione@example.com"} {
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: email, Password: "correct horse battery",
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"acme", "acme-corporation-europe-west"}}}); err != nil {
			t.Fatal(err)
		}
	}
	browser := startChromium(t)
	adm := openBrowserTab(t, browser, srv.URL, "admin")
	adm.login("admin@example.com")
	u, err := st.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"en", "it"} {
		if err := st.SetLanguage(ctx, u.Principal(), lang); err != nil {
			t.Fatal(err)
		}
		adm.open("/admin/users")
		adm.screenshotWidths("users-" + lang)
		for _, w := range []int64{390, 1400} {
			adm.fitsWidth("/admin/users ("+lang+")", w)
			// Every button of the rows (Save, Reset password), whole
			// within the window, with no sideways scrolling.
			outside := evalJS[[]string](adm, `Array.from(document.querySelectorAll("tbody button")).filter(b => {
				const r = b.getBoundingClientRect();
				return r.left < 0 || r.right > window.innerWidth;
			}).map(b => b.textContent.trim() + " right=" + Math.round(b.getBoundingClientRect().right))`)
			buttons := evalJS[int](adm, `document.querySelectorAll("tbody button").length`)
			if len(outside) > 0 || buttons < 2*5 {
				adm.fatalf("/admin/users (%s) at %d px: %d row buttons, these past the screen's edge: %v", lang, w, buttons, outside)
			}
		}
		// Each field of a phone's card names its column, as the table's
		// head does on a screen.
		adm.do("sizing the page to 390 px", chromedp.EmulateViewport(390, 900))
		adm.waitFor(`window.innerWidth === 390`, "the viewport's new width")
		heads := evalJS[[]string](adm, `Array.from(document.querySelectorAll("thead th")).map(th => th.textContent.trim())`)
		labels := evalJS[[]string](adm, `Array.from(document.querySelector("tbody tr").cells).map(td => getComputedStyle(td, "::before").content.replace(/^"|"$/g, ""))`)
		if !slices.Equal(heads, labels) {
			adm.fatalf("/admin/users (%s) at 390 px: a card's fields are labelled %q, want the columns %q", lang, labels, heads)
		}
		adm.axe("/admin/users (" + lang + ", 390 px)")
		adm.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
	}
}
