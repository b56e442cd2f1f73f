package web

import (
	"context"

	"github.com/limbo-dev/limbo/review"
)

var whyPatterns = formatPatterns(review.WhyFormats())

// Reason is a stored reason in the reader's language: an operation's
// state reason, an attempt's next step, an evidence note, which review
// writes in English clauses joined by "; " (the API and the audit trail
// keep them so). Each clause is read back from the format it was written
// with (review.WhyFormats), a reason quoted in it too; what no format
// wrote (an older version's words, a person's) is shown as stored. In
// English too: a code among its arguments reads as its label (english).
func Reason(ctx context.Context, stored string) string {
	if stored == "" {
		return stored
	}
	t, _ := readBackClauses(ctx, whyPatterns, stored, 0)
	return t
}
