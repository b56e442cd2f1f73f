package handlers_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// wantLang fails unless the page is in lang.
func (b *browserTab) wantLang(page, lang string) {
	b.t.Helper()
	if got := evalJS[string](b, `document.documentElement.lang`); got != lang {
		b.fatalf("%s: <html lang=%q>, want %q", page, got, lang)
	}
}

// TestBrowserShellLanguages: a reviewer whose browser asks for Italian
// (Accept-Language: it) reads queue, audit and dashboard in Italian (html
// lang it); asking for English, in English. Each page in each language,
// light and dark, has no serious or critical axe violation and is no
// wider than the window at 390 and 1,400 px (screenshots at both). The
// reviewer has no Admin link; an admin has one.
func TestBrowserShellLanguages(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "shell-1")
		flaggedCase(t, st, "shell-inv")
		browser := startChromium(t)

		rev := openBrowserTab(t, browser, srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		if evalJS[bool](rev, `document.querySelector('header nav a[href="/admin/users"]') !== null`) {
			rev.fatalf("a reviewer is offered the Admin link")
		}
		pages := []struct{ path, name, it, en string }{
			{"/", "queue", "Coda di revisione", "Review queue"},
			{"/audit", "audit", "Cronologia di audit", "Audit history"},
			{"/dashboard", "dashboard", "Casi aperti nel tempo", "Open cases over time"},
		}
		for _, lang := range []string{"it", "en"} {
			rev.acceptLanguage(map[string]string{"it": "it-IT,it;q=0.9,en;q=0.5", "en": "en-GB,en;q=0.9"}[lang])
			for _, p := range pages {
				rev.open(p.path)
				rev.wantLang(p.path, lang)
				rev.waitText("main", map[string]string{"it": p.it, "en": p.en}[lang])
				if p.name == "audit" {
					// limbo.js rewrites each time in the viewer's zone, with the time since.
					rev.waitFor(`document.querySelector("main time[datetime]").textContent.includes("(")`, "the audit's times localised")
					rev.waitText("main table", map[string]string{"it": "Operazione registrata", "en": "Operation registered"}[lang])
				}
				if evalJS[string](rev, `document.querySelector('header nav a[aria-current="page"]').getAttribute("href")`) != p.path {
					rev.fatalf("%s: the navigation does not mark this page as current", p.path)
				}
				for _, scheme := range []string{"light", "dark"} {
					rev.do("choosing the colour scheme", colourScheme(scheme))
					rev.axe(fmt.Sprintf("%s (%s, %s)", p.name, lang, scheme))
				}
				rev.do("back to light", colourScheme("light"))
				rev.fitsWidth(p.name+" ("+lang+")", 390)
				rev.fitsWidth(p.name+" ("+lang+")", 1400)
				rev.screenshotWidths("shell-" + p.name + "-" + lang)
			}
		}
		rev.noConsoleErrors()

		adm := openBrowserTab(t, browser, srv.URL, "admin")
		adm.login("admin@example.com")
		adm.waitText(`header nav a[href="/admin/users"]`, "Administration")
		adm.noConsoleErrors()
	})
}

// TestBrowserShellSupport: support opens the queue on the cases it can
// decide (the financial one is not there) and reaches all open cases by
// the visible link; "?" opens the keyboard help as a modal dialog with
// focus in it, Esc closes it and focus comes back, as does Close; "/"
// goes to the search field; choosing Italiano in the language menu, with
// a browser that asks for English, brings the page back with its query
// and holds across pages.
func TestBrowserShellSupport(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		plain := needsReview(t, st, "shell-1")
		flagged := flaggedCase(t, st, "shell-inv")
		browser := startChromium(t)

		sup := openBrowserTab(t, browser, srv.URL, "support")
		sup.login("support@example.com")
		sup.acceptLanguage("en-US,en;q=0.9")
		sup.open("/")
		if got := sup.queueCases(); !slices.Contains(got, plain) || slices.Contains(got, flagged) {
			sup.fatalf("support's queue opens on %v: want %s and not the financial %s", got, plain, flagged)
		}
		sup.waitText("p.queue-scope", "your role can decide")
		sup.follow("showing all open cases", chromedp.Click(chromedp.CSS(`p.queue-scope a`)))
		if got := sup.queueCases(); !slices.Contains(got, plain) || !slices.Contains(got, flagged) {
			sup.fatalf("all open cases: %v, want %s and %s", got, plain, flagged)
		}
		if evalJS[bool](sup, `document.querySelector('header nav a[href="/audit"]') !== null`) {
			sup.fatalf("support may not read the audit history, yet the navigation links it")
		}

		// j focuses a row's link, ? opens the dialog (focus on Close), Esc
		// closes it and focus is back on the row.
		sup.do("pressing j", chromedp.KeyEvent("j"))
		sup.waitFor(`document.activeElement.closest("tr.row.current") !== null`, "j to focus the first row")
		if !evalJS[bool](sup, `!document.querySelector("button.shortcuts-open").hidden`) {
			sup.fatalf("the keyboard-shortcuts button stays hidden with JavaScript on")
		}
		sup.do("pressing ?", chromedp.KeyEvent("?"))
		sup.waitFor(`document.getElementById("shortcuts").open && document.activeElement.classList.contains("shortcuts-close")`,
			"the shortcuts dialog open, focus on its Close button")
		sup.waitText("#shortcuts", "Queue: next and previous case")
		if !evalJS[bool](sup, `document.getElementById("shortcuts").matches(":modal")`) {
			sup.fatalf("the shortcuts dialog is not modal")
		}
		sup.axe("queue with the keyboard help open")
		sup.do("pressing j in the dialog", chromedp.KeyEvent("j"))
		sup.do("pressing Esc", chromedp.KeyEvent(kb.Escape))
		sup.waitFor(`!document.getElementById("shortcuts").open && document.activeElement.closest("tr.row.current") !== null`,
			"Esc to close the dialog, focus back on the selected row")
		if n := evalJS[int](sup, `[...document.querySelectorAll("tr.row")].findIndex(r => r.classList.contains("current"))`); n != 0 {
			sup.fatalf("j pressed while the dialog was open moved the selection to row %d", n)
		}
		sup.do("opening the help with its button", chromedp.Click(chromedp.CSS(`button.shortcuts-open`)))
		sup.waitFor(`document.getElementById("shortcuts").open`, "the button to open the dialog")
		sup.do("closing with Close", chromedp.Click(chromedp.CSS(`button.shortcuts-close`)))
		sup.waitFor(`!document.getElementById("shortcuts").open && document.activeElement.matches("button.shortcuts-open")`,
			"Close to close the dialog, focus back on the button")
		sup.do("pressing /", chromedp.Click(chromedp.CSS("h1")), chromedp.KeyEvent("/"))
		sup.waitFor(`document.activeElement.name === "q"`, "/ to go to the search field")
		// The dialog's close event may come after the person has moved on
		// (a busy browser runs input first): here it is held back until
		// "/" has put the cursor in the search field, which keeps it.
		sup.do("opening the help, its close event held back", chromedp.Click(chromedp.CSS(`button.shortcuts-open`)),
			chromedp.Evaluate[chromedp.Void](`(() => {
				const d = document.getElementById("shortcuts");
				d.addEventListener("close", function hold(e) {
					e.stopImmediatePropagation();
					d.removeEventListener("close", hold, true);
					window.lateClose = () => d.dispatchEvent(new Event("close"));
				}, true);
			})()`))
		sup.waitFor(`document.getElementById("shortcuts").open`, "the button to open the dialog")
		sup.do("closing with Close", chromedp.Click(chromedp.CSS(`button.shortcuts-close`)))
		sup.waitFor(`typeof window.lateClose === "function"`, "the close event held back")
		sup.do("pressing /", chromedp.Click(chromedp.CSS("h1")), chromedp.KeyEvent("/"))
		sup.waitFor(`document.activeElement.name === "q"`, "/ to go to the search field")
		sup.do("the close event, late", chromedp.Evaluate[chromedp.Void](`window.lateClose()`))
		if !evalJS[bool](sup, `document.activeElement.name === "q"`) {
			sup.fatalf("a late close event took the cursor out of the search field")
		}

		// Italiano from the menu wins over the English browser, on every
		// page, and comes back to the page with its query.
		sup.open("/dashboard?window=24h")
		sup.wantLang("/dashboard", "en")
		sup.do("choosing Italiano", chromedp.SetValue(chromedp.ID("language-choice"), "it"))
		sup.follow("saving the language", chromedp.Click(chromedp.CSS(`form.language button[type="submit"]`)))
		if p := evalJS[string](sup, `location.pathname + location.search`); p != "/dashboard?window=24h" {
			sup.fatalf("after saving the language: at %s, want back on /dashboard?window=24h", p)
		}
		sup.wantLang("/dashboard", "it")
		sup.waitText("h1", "Cruscotto")
		for _, p := range []string{"/", "/audit", "/cases/" + plain} {
			if p == "/audit" {
				continue // support may not read it
			}
			sup.open(p)
			sup.wantLang(p, "it")
		}
		sup.waitText("header nav", "Coda")
		if v := evalJS[string](sup, `document.getElementById("language-choice").value`); v != "it" {
			sup.fatalf("the language menu shows %q, want the saved it", v)
		}
		sup.noConsoleErrors()
	})
}
