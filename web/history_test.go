package web

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
)

// The case page shows each history the reconciler read, one version a
// line, with what it means, beside the candidates.
func TestVersionHistories(t *testing.T) {
	op := &review.Operation{ID: "op-a", LogicalVersion: "7"}
	ev, _ := review.HistoryEvidence(op, review.ProbeResult{Kind: review.ProbeHistory, Ref: "file-1", Candidates: []review.Candidate{
		{Ref: "file-1@1", Version: "6", OperationID: "op-create"}, {Ref: "file-1@2", Version: "5", OperationID: "op-a"}}}, nil)
	var b strings.Builder
	if err := VersionHistories([]review.Evidence{{Note: "search found 1 candidates"}, ev}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"Version history of <code>file-1</code>", "<li>file-1@1: version 6 by op-create</li>", "<li>file-1@2: version 5 by op-a</li>"} {
		if !strings.Contains(html, want) {
			t.Errorf("lacks %q:\n%s", want, html)
		}
	}
	if strings.Count(html, "<section") != 1 {
		t.Errorf("want one history section:\n%s", html)
	}
}
