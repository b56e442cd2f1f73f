package web

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
)

// TestRationale: every rationale review writes has Italian, and a stored
// rationale reads back in Italian with its arguments (resource refs with
// commas and spaces included) where they stand; English and unknown text
// are shown as stored.
func TestRationale(t *testing.T) {
	it := WithLang(context.Background(), "it")
	for _, f := range review.RationaleFormats() {
		if Rationale(it, f) == f && !strings.Contains(f, "%") {
			t.Errorf("%q has no Italian", f)
		}
	}
	stored := fmt.Sprintf(review.RationaleDuplicates, 2, "file a, b", "file-2")
	if got, want := Rationale(it, stored), "2 risorse indicano questa operazione e versione: tieni file a, b, compensa file-2"; got != want {
		t.Errorf("Rationale(it, %q) = %q, want %q", stored, got, want)
	}
	stored = fmt.Sprintf(review.RationaleOneResource, "pdf-7", "v3")
	if got := Rationale(it, stored); got != "una sola risorsa, pdf-7, indica questa operazione e la versione v3" {
		t.Errorf("one resource: %q", got)
	}
	if got := Rationale(it, review.RationaleNoEvidence); got == review.RationaleNoEvidence {
		t.Errorf("no evidence: not translated")
	}
	if got := Rationale(context.Background(), stored); got != stored {
		t.Errorf("English changed the rationale: %q", got)
	}
	if got := Rationale(it, "something older"); got != "something older" {
		t.Errorf("an unknown rationale: %q", got)
	}
}
