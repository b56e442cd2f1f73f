package handlers_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// acceptLanguage makes the tab send Accept-Language: lang with every request.
func (b *browserTab) acceptLanguage(lang string) {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Accept-Language": lang}}); err != nil {
		b.fatalf("sending Accept-Language: %s: %v", lang, err)
	}
}

// fitsPhone checks the page is no wider than a phone's screen (390 px):
// nothing pushes it sideways, a wide table scrolls in its own box. It
// names the elements that stick out when it fails.
func (b *browserTab) fitsPhone(page string) {
	b.t.Helper()
	b.fitsWidth(page, 390)
	b.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
}

// italianPage checks the page at path speaks Italian: <html lang="it">,
// and each selector shows its Italian text.
func (b *browserTab) italianPage(path string, want [][2]string) {
	b.t.Helper()
	b.open(path)
	if lang := evalJS[string](b, `document.documentElement.lang`); lang != "it" {
		b.fatalf("%s: <html lang=%q>, want it", path, lang)
	}
	for _, w := range want {
		b.waitText(w[0], w[1])
	}
}

// TestBrowserCaseInItalian: the case page and the operation page in
// Italian, for a browser that asks for it (Accept-Language: it) and for a
// user who chose it (POST /preferences/language, from a browser that asks
// for English). Both pages pass axe-core and fit a phone's width.
func TestBrowserCaseInItalian(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "doc-it") // version_mismatch: one attempt, its answer, a case
		cs, err := st.GetCase(context.Background(), caseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		browser := startChromium(t)
		casePage := [][2]string{
			{"h1", "Caso " + caseID},
			{`section.summary .badge[title="version_mismatch"]`, "Versione diversa"},
			{"section.summary", "Raccomandato"},
			{"#attempts-h", "Tentativi ed evidenze"},
			{"#attempt-1", "Tentativo 1 — riuscito"},
			{"section.payload", "Hash del payload"},
			{"#decision", "Nessuno ha in carico questo caso."},
			{"#history-h", "Cronologia"},
		}
		opPage := [][2]string{
			{"h1", "Operazione " + cs.OperationID},
			{"#cases-h", "Casi"},
			{`section[aria-labelledby="cases-h"]`, "Caso " + caseID + " — Aperto"},
			{"#attempt-1", "Tentativo 1 — riuscito"},
			{`section[aria-labelledby="attempts-h"] table.evidence`, "Risposta della destinazione"},
			// The stored English reasons, read back in Italian: the state's,
			// the attempt's next step, the evidence's note.
			{"span.state-reason", "la destinazione ha restituito file-doc-it per la versione 6, attesa 7"},
			{`article[aria-labelledby="attempt-1"]`, "la destinazione ha restituito file-doc-it per la versione 6, attesa 7"},
			{`section[aria-labelledby="attempts-h"] table.evidence`, "tentativo 1: la destinazione ha restituito file-doc-it"},
			{"section.payload", "Hash del payload"},
			{"#history-h", "Cronologia"},
		}

		// A browser asking for Italian, the user with no saved choice. It
		// signs in first (the sign-in helper reads the English queue).
		acc := openBrowserTab(t, browser, srv.URL, "accept-language-it")
		acc.login("support@example.com")
		acc.acceptLanguage("it-IT,it;q=0.9")
		acc.italianPage("/cases/"+caseID, casePage)
		acc.axe("case (Accept-Language: it)")
		acc.fitsPhone("case")
		acc.screenshotWidths("case")
		acc.italianPage("/operations/"+cs.OperationID, opPage)
		acc.axe("operation (Accept-Language: it)")
		acc.fitsPhone("operation")
		acc.screenshotWidths("operation")

		// A browser asking for English, the user choosing Italian through
		// the preference route: the choice wins.
		pref := openBrowserTab(t, browser, srv.URL, "preference-it")
		pref.login("reviewer@example.com")
		pref.acceptLanguage("en-US,en;q=0.9")
		pref.open("/cases/" + caseID)
		if lang := evalJS[string](pref, `document.documentElement.lang`); lang != "en" {
			pref.fatalf("before choosing: <html lang=%q>, want en", lang)
		}
		pref.follow("choosing Italian", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const f = document.createElement("form");
			f.method = "post"; f.action = "/preferences/language";
			for (const [k, v] of [["csrf", document.querySelector('input[name="csrf"]').value], ["language", "it"], ["next", %s]]) {
				const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.append(i);
			}
			document.body.append(f); f.submit();
		})()`, jsString("/cases/"+caseID))))
		pref.waitFor(`document.documentElement.lang === "it"`, "the case page in Italian after choosing it")
		pref.italianPage("/cases/"+caseID, casePage)
		pref.axe("case (saved preference)")
		pref.italianPage("/operations/"+cs.OperationID, opPage)
		pref.axe("operation (saved preference)")
		pref.fitsPhone("operation (saved preference)")
	})
}
