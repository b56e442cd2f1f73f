package web

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// TestStateTabsCounts: the tabs say the page's own cap, and a search past
// its cap shows the total only, no state's count (which was not counted).
func TestStateTabsCounts(t *testing.T) {
	render := func(p *store.BrowsePage) string {
		t.Helper()
		var b bytes.Buffer
		v := BrowseView{Filter: BrowseForm{Q: "src-"}, Page: p}
		if err := OperationsPage(v).Render(WithLang(context.Background(), "en"), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	past := render(&store.BrowsePage{Counts: map[review.State]int{}, Capped: map[review.State]bool{}, Total: 1001, TotalCapped: true,
		CountCap: store.BrowseSearchCountCap, Uncounted: true})
	if n := strings.Count(past, `class="count"`); n != 1 || !strings.Contains(past, "more than 1,000") {
		t.Errorf("a search past its cap: %d counts shown, want the total only, as more than 1,000", n)
	}
	under := render(&store.BrowsePage{Counts: map[review.State]int{review.Confirmed: 3}, Capped: map[review.State]bool{}, Total: 3,
		CountCap: store.BrowseSearchCountCap})
	if n := strings.Count(under, `class="count"`); n != len(review.AllStates())+1 {
		t.Errorf("a search under its cap: %d counts shown, want the total and every state's", n)
	}
}
