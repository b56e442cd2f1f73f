package web

import (
	"context"

	"github.com/limbo-dev/limbo/review"
)

var rationalePatterns = formatPatterns(review.RationaleFormats())

// Rationale is a case's stored rationale in the reader's language: the
// format it was written with, translated, with the same arguments (the
// resources and versions it names stay as they are). A rationale no
// format matches (written by an older version) is shown as stored.
func Rationale(ctx context.Context, stored string) string {
	if Lang(ctx) == "en" {
		return stored
	}
	t, _ := readBack(ctx, rationalePatterns, stored, false, 0)
	return t
}
