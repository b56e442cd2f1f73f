package handlers_test

import (
	"context"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/store"
)

// TestBrowserQueueOnAPhone: on a 390 px phone the review queue shows each
// case as a card, each field under its column's name, the case's link
// within the screen. The table scrolled sideways in its box: only the
// priority and the case id showed, the reasons, the recommendation and who
// holds the case lay past the right edge, and nothing said to scroll. In
// English and Italian (whose "Raccomandato" must not break mid-word), and
// axe finds nothing serious in the cards.
func TestBrowserQueueOnAPhone(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	srv, st := consoleServer(t, store.SQLite) // a page's layout: one engine is enough
	ctx := context.Background()
	for _, src := range []string{"charge-phone-1", "charge-phone-2"} {
		flaggedCase(t, st, src)
	}
	browser := startChromium(t)
	rev := openBrowserTab(t, browser, srv.URL, "reviewer")
	rev.login("reviewer@example.com")
	u, err := st.UserByEmail(ctx, "reviewer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"en", "it"} {
		if err := st.SetLanguage(ctx, u.Principal(), lang); err != nil {
			t.Fatal(err)
		}
		rev.open("/?show=all")
		rev.screenshotWidths("queue-" + lang)
		rev.fitsWidth("/ ("+lang+")", 390)
		outside := evalJS[[]string](rev, `Array.from(document.querySelectorAll("table.queue tbody td")).filter(td => {
			const r = td.getBoundingClientRect();
			return r.left < 0 || r.right > window.innerWidth;
		}).map(td => getComputedStyle(td, "::before").content + " right=" + Math.round(td.getBoundingClientRect().right))`)
		if cells := evalJS[int](rev, `document.querySelectorAll("table.queue tbody td").length`); len(outside) > 0 || cells < 2*8 {
			rev.fatalf("the queue (%s) at 390 px: %d cells, these past the screen's edge: %v", lang, cells, outside)
		}
		heads := evalJS[[]string](rev, `Array.from(document.querySelectorAll("table.queue thead th")).map(th => th.textContent.trim())`)
		labels := evalJS[[]string](rev, `Array.from(document.querySelector("table.queue tbody tr").cells).map(td => getComputedStyle(td, "::before").content.replace(/^"|"$/g, ""))`)
		if !slices.Equal(heads, labels) {
			rev.fatalf("the queue (%s) at 390 px: a card's fields are labelled %q, want the columns %q", lang, labels, heads)
		}
		// A label breaks between its words only: the cells wrap anywhere
		// (for what people type), and "Raccomandato" broke into
		// "Raccomandat/o".
		if wraps := evalJS[[]string](rev, `Array.from(document.querySelector("table.queue tbody tr").cells).map(td => getComputedStyle(td, "::before").overflowWrap)`); slices.ContainsFunc(wraps, func(w string) bool { return w != "normal" }) {
			rev.fatalf("the queue (%s) at 390 px: its labels wrap %v, want normal (between words)", lang, wraps)
		}
		rev.axe("the queue (" + lang + ", 390 px)")
		rev.do("restoring the page size", chromedp.EmulateViewport(1280, 900))
	}
}
