package web

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
)

// The case page shows each history the reconciler read, one version a
// line (the operation that wrote it a link to it; an entry with neither
// version nor writer says so), with what it means,
// beside the candidates; in the reader's language.
func TestVersionHistories(t *testing.T) {
	op := &review.Operation{ID: "op-a", LogicalVersion: "7"}
	ev, _ := review.HistoryEvidence(op, review.ProbeResult{Kind: review.ProbeHistory, Ref: "file-1", Candidates: []review.Candidate{
		{Ref: "file-1@1", Version: "6", OperationID: "op-create"}, {Ref: "file-1@2", Version: "5", OperationID: "op-a"},
		{Ref: "file-1@0"}}}, nil)
	for _, tt := range []struct {
		lang string
		want []string
	}{
		{"en", []string{"Version history of <code>file-1</code>",
			`<li><code>file-1@1</code>: version 6 by <a href="/operations/op-create"><code>op-create</code></a></li>`,
			`<li><code>file-1@2</code>: version 5 by <a href="/operations/op-a"><code>op-a</code></a></li>`,
			`<li><code>file-1@0</code>: no version, by no known operation</li>`}},
		{"it", []string{"Cronologia delle versioni di <code>file-1</code>",
			`<li><code>file-1@1</code>: versione 6 da <a href="/operations/op-create"><code>op-create</code></a></li>`,
			`<li><code>file-1@0</code>: nessuna versione, da nessuna operazione nota</li>`}},
	} {
		var b strings.Builder
		if err := VersionHistories([]review.Evidence{{Note: "search found 1 candidates"}, ev}).Render(WithLang(context.Background(), tt.lang), &b); err != nil {
			t.Fatal(err)
		}
		html := b.String()
		for _, want := range tt.want {
			if !strings.Contains(html, want) {
				t.Errorf("%s: lacks %q:\n%s", tt.lang, want, html)
			}
		}
		if strings.Count(html, "<section") != 1 {
			t.Errorf("%s: want one history section:\n%s", tt.lang, html)
		}
	}
}

// What a history means is said in the reader's language; a note written
// otherwise is shown as it is.
func TestHistoryMeans(t *testing.T) {
	it := WithLang(context.Background(), "it")
	if got := historyMeans(it, "this operation's version 7 existed: a later version replaced it"); got != "La versione 7 di questa operazione è esistita: una versione successiva l'ha sostituita." {
		t.Errorf("mine: %q", got)
	}
	if got := historyMeans(it, "no version by this operation"); got != "Nessuna versione di questa operazione." {
		t.Errorf("none: %q", got)
	}
	if got := historyMeans(it, "something else"); got != "something else" {
		t.Errorf("other: %q", got)
	}
}
