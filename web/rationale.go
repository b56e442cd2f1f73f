package web

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/limbo-dev/limbo/review"
)

// rationalePattern is one of review's rationale formats as a pattern
// that reads its arguments back: %d a number, %s any text.
type rationalePattern struct {
	format string
	re     *regexp.Regexp
	verbs  []string
}

var rationalePatterns = func() []rationalePattern {
	var ps []rationalePattern
	verb := regexp.MustCompile(`%[ds]`)
	for _, f := range review.RationaleFormats() {
		p := rationalePattern{format: f, verbs: verb.FindAllString(f, -1)}
		var b strings.Builder
		b.WriteString("^")
		last := 0
		for _, m := range verb.FindAllStringIndex(f, -1) {
			b.WriteString(regexp.QuoteMeta(f[last:m[0]]))
			if f[m[0]:m[1]] == "%d" {
				b.WriteString(`(\d+)`)
			} else {
				b.WriteString(`(.+?)`)
			}
			last = m[1]
		}
		b.WriteString(regexp.QuoteMeta(f[last:]) + "$")
		p.re = regexp.MustCompile(b.String())
		ps = append(ps, p)
	}
	return ps
}()

// Rationale is a case's stored rationale in the reader's language: the
// format it was written with, translated, with the same arguments (the
// resources and versions it names stay as they are). A rationale no
// format matches (written by an older version) is shown as stored.
func Rationale(ctx context.Context, stored string) string {
	if Lang(ctx) == "en" {
		return stored
	}
	for _, p := range rationalePatterns {
		m := p.re.FindStringSubmatch(stored)
		if m == nil {
			continue
		}
		args := make([]any, len(p.verbs))
		for i, v := range p.verbs {
			args[i] = m[i+1]
			if v == "%d" {
				n, err := strconv.Atoi(m[i+1])
				if err != nil {
					return stored
				}
				args[i] = n
			}
		}
		if len(args) == 0 {
			return T(ctx, p.format)
		}
		return Tf(ctx, p.format, args...)
	}
	return stored
}
