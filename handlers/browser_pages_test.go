package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// colourScheme makes the tab's pages see prefers-color-scheme: scheme
// ("light" or "dark").
func colourScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// fitsWidth fails when the page is wider than the viewport at width px.
func (b *browserTab) fitsWidth(page string, width int64) {
	b.t.Helper()
	b.do(fmt.Sprintf("sizing the page to %d px", width), chromedp.EmulateViewport(width, 900))
	b.waitFor(fmt.Sprintf(`window.innerWidth === %d`, width), "the viewport's new width")
	sw, iw := evalJS[int](b, `document.documentElement.scrollWidth`), evalJS[int](b, `window.innerWidth`)
	if sw > iw {
		// The culprits: elements past the right edge not inside a box that scrolls.
		wide := evalJS[string](b, `Array.from(document.querySelectorAll("body *")).filter(e => {
			if (e.getBoundingClientRect().right <= window.innerWidth) { return false; }
			for (let p = e.parentElement; p; p = p.parentElement) {
				const o = getComputedStyle(p).overflowX;
				if (o === "auto" || o === "scroll" || o === "hidden") { return false; }
			}
			return true;
		}).slice(0, 5).map(e => e.tagName + "." + e.className + " right=" + Math.round(e.getBoundingClientRect().right)).join(", ")`)
		b.t.Errorf("%s: the %s page is %d px wide in a %d px window (too wide: %s)", b.who, page, sw, iw, wide)
	}
}

// TestBrowserEveryPage opens every console page a GET route serves (from
// consoleRoutes, so a new page is covered the day it is added), signed in
// as an admin, in English and Italian, light and dark: each answers 200,
// has 0 serious or critical axe-core violations, and is no wider than the
// window at 390 and 1,400 px. Screenshots of the pages people read most
// are kept as artefacts at both widths.
func TestBrowserEveryPage(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "pages-1")
		c, err := st.GetCase(ctx, caseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		admin, err := st.UserByEmail(ctx, "admin@example.com")
		if err != nil {
			t.Fatal(err)
		}
		ep, err := st.AddWebhookEndpoint(ctx, review.Operator("test"), store.NewWebhookEndpoint{Tenant: "acme", URL: "https://93.184.215.14/hook", Description: "pager"})
		if err != nil {
			t.Fatal(err)
		}
		fill := strings.NewReplacer("{case}", caseID, "{op}", c.OperationID, "{user}", admin.ID, "{hook}", ep.ID)
		var pages []string
		for _, r := range consoleRoutes {
			// Not pages: a file download, a redirect, an event stream, the
			// case page's JSON poll.
			if r.method != "GET" || r.path == "/audit.csv" || r.path == "/admin" || r.path == "/events" || strings.HasSuffix(r.path, "/live") {
				continue
			}
			pages = append(pages, fill.Replace(r.path))
		}
		shots := map[string]string{"/": "queue", "/cases/" + caseID: "case", "/operations/" + c.OperationID: "operation", "/audit": "audit", "/dashboard": "dashboard", "/operations": "operations"}

		// Some sixty page views, each checked by axe: a budget of its own.
		browser := startChromiumFor(t, 4*time.Minute)
		b := openBrowserTab(t, browser, srv.URL, "admin")
		b.open("/login")
		b.axe("login")
		b.login("admin@example.com")
		for _, lang := range []string{"en", "it"} {
			if err := st.SetLanguage(ctx, admin.Principal(), lang); err != nil {
				t.Fatal(err)
			}
			for _, scheme := range []string{"light", "dark"} {
				b.do("choosing the colour scheme", colourScheme(scheme))
				for _, p := range pages {
					b.open(p)
					if got := evalJS[string](b, `document.documentElement.lang`); got != lang {
						b.fatalf("%s: html lang %q, want %q", p, got, lang)
					}
					name := fmt.Sprintf("%s (%s, %s)", p, lang, scheme)
					b.axe(name)
					if scheme == "light" {
						b.fitsWidth(name, 390)
						b.fitsWidth(name, 1400)
						if shot, ok := shots[p]; ok {
							b.screenshotWidths(shot + "-" + lang)
						}
						b.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
					}
				}
			}
		}
	})
}
