package handlers_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// TestBrowserTablesOnAPhone: at 390 px the console's tables of evidence,
// candidates, compensations, payload differences, API tokens, webhook
// endpoints, retry budgets, the audit trail and the review queue scrolled sideways inside
// their box: a candidate's operation, an evidence row's note, a token's
// Revoke button, an event's detail lay past the screen's right edge with
// nothing saying so. Each is now a
// table of cards there, as the users page is (table.cards): every cell
// within the window, under its column's name; at 1,400 px each stays a
// table. In English and Italian (the labels are the column heads).
func TestBrowserTablesOnAPhone(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	srv, st := consoleServer(t, store.SQLite) // a page's layout: one engine is enough
	ctx := context.Background()
	caseID := needsReview(t, st, "contract-583-with-a-long-name-as-people-give-them.docx")
	c, err := st.GetCase(ctx, caseID, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
		{Ref: "file-contract-583-with-a-long-name.docx", Kind: "file", Version: "7", OperationID: c.OperationID},
		{Ref: "file-contract-583-copy-made-by-a-retry.docx", Kind: "file", Version: "7", OperationID: c.OperationID}}}
	if _, err := st.AddEvidence(ctx, "acme", c.OperationID, ev, "integrator"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: caseID, Action: review.DecideCompensate, Ref: "file-contract-583-copy-made-by-a-retry.docx",
		Compensation: "delete the copy", Actor: "reviewer@example.com", Reason: "a retry made a copy"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateToken(ctx, review.Operator("admin@example.com"), "acme-corporation-europe-west", "contracts-integration-production"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddWebhookEndpoint(ctx, review.Operator("admin@example.com"), store.NewWebhookEndpoint{Tenant: "acme",
		URL: "https://hooks.acme-corporation.example/limbo/decisions/production", Description: "decisions for the contracts team"}); err != nil {
		t.Fatal(err)
	}
	browser := startChromium(t)
	adm := openBrowserTab(t, browser, srv.URL, "admin")
	adm.login("admin@example.com")
	u, err := st.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	pages := []struct {
		path   string
		tables int // table.cards on the page, at least
	}{
		{"/operations/" + c.OperationID, 3}, // candidates, evidence, compensations
		{"/cases/" + caseID, 3},
		{"/admin/tokens", 1},
		{"/admin/webhooks", 1},
		{"/admin/destinations", 1},
		{"/audit?action=decision", 1}, // the trail (and which actions it searched): a manager reads it on a phone too
		{"/?show=all", 1},             // the review queue: its cases lay past the edge too
		{"/operations", 1},            // the operations browser: so did its operations
	}
	for _, lang := range []string{"en", "it"} {
		if err := st.SetLanguage(ctx, u.Principal(), lang); err != nil {
			t.Fatal(err)
		}
		for _, p := range pages {
			adm.open(p.path)
			for _, w := range []int64{390, 1400} {
				name := fmt.Sprintf("%s (%s) at %d px", p.path, lang, w)
				adm.fitsWidth(name, w)
				n := evalJS[int](adm, `document.querySelectorAll("table.cards").length`)
				if n < p.tables {
					adm.fatalf("%s: %d tables of cards, want %d", name, n, p.tables)
				}
				// Every cell whole within the window, none hidden in a
				// box that scrolls sideways; each labelled on a phone.
				outside := evalJS[[]string](adm, `Array.from(document.querySelectorAll("table.cards td")).filter(td => {
					const r = td.getBoundingClientRect();
					return r.width > 0 && (r.left < 0 || r.right > window.innerWidth + 1);
				}).slice(0, 5).map(td => td.dataset.label + ": " + td.textContent.trim().slice(0, 40) + " right=" + Math.round(td.getBoundingClientRect().right))`)
				if len(outside) > 0 {
					adm.fatalf("%s: cells past the screen's edge: %v", name, outside)
				}
				unlabelled := evalJS[int](adm, `Array.from(document.querySelectorAll("table.cards td")).filter(td => !td.dataset.label).length`)
				if unlabelled > 0 {
					adm.fatalf("%s: %d cells without a label", name, unlabelled)
				}
				// A label (a verdict, a state, a source) wraps between its
				// words, never inside one: "Inconclusive" is not
				// "Inconclusi/ve" beside a long note.
				broken := evalJS[[]string](adm, `Array.from(document.querySelectorAll("table.cards td span[title], table.cards td .badge, table.cards td .unclaimed")).filter(s =>
					s.getClientRects().length > s.textContent.trim().split(/\s+/).length).slice(0, 5).map(s => s.textContent.trim())`)
				if len(broken) > 0 {
					adm.fatalf("%s: labels broken inside a word: %v", name, broken)
				}
				// So does a card's own label ("Raccomandato" broke into
				// "Raccomandat/o" under the cells' wrapping).
				if wraps := evalJS[[]string](adm, `Array.from(document.querySelectorAll("table.cards td")).map(td => getComputedStyle(td, "::before").overflowWrap).filter(w => w !== "normal")`); w < 700 && len(wraps) > 0 {
					adm.fatalf("%s: card labels wrap %v, want between words only", name, wraps[:1])
				}
				heads := evalJS[bool](adm, `Array.from(document.querySelectorAll("table.cards thead")).every(h => getComputedStyle(h).display !== "none")`)
				if heads != (w > 700) {
					adm.fatalf("%s: column heads shown %v; want them only where the table is a table", name, heads)
				}
			}
			if lang == "en" {
				adm.screenshotWidths(p.path[1:])
			}
		}
	}
}
