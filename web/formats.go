package web

import (
	"cmp"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// English texts that review composes and the ledger stores as written
// (rationales, reasons, notes: the API and the audit trail keep them in
// English) are read back for the console from the formats they were
// written with, and shown in the reader's language with the same
// arguments. Each format is written once, in review.

// formatPattern is one of review's formats as a pattern that reads its
// arguments back: %d a number, %s any text.
type formatPattern struct {
	format string
	re     *regexp.Regexp
	verbs  []string
	lits   []string // the literal text between the verbs, for a quick look first
	size   int      // its length without the verbs
}

var formatVerb = regexp.MustCompile(`%[ds]`)

// formatPatterns are formats as patterns, the most specific first (the
// most literal text), so that a format that holds another's text wins
// over it. A format with no text of its own would match anything: it
// panics, at start-up.
func formatPatterns(formats []string) []formatPattern {
	var ps []formatPattern
	for _, f := range formats {
		p := formatPattern{format: f, verbs: formatVerb.FindAllString(f, -1)}
		var b strings.Builder
		b.WriteString("^")
		last := 0
		for _, m := range formatVerb.FindAllStringIndex(f, -1) {
			p.lits = append(p.lits, f[last:m[0]])
			b.WriteString(regexp.QuoteMeta(f[last:m[0]]))
			if f[m[0]:m[1]] == "%d" {
				b.WriteString(`(-?\d+)`)
			} else {
				b.WriteString(`(.+?)`)
			}
			last = m[1]
		}
		p.lits = append(p.lits, f[last:])
		b.WriteString(regexp.QuoteMeta(f[last:]) + "$")
		for _, l := range p.lits {
			p.size += len(l)
		}
		if p.size == 0 {
			panic("web: format " + strconv.Quote(f) + " has no text of its own")
		}
		p.re = regexp.MustCompile(b.String())
		ps = append(ps, p)
	}
	slices.SortStableFunc(ps, func(a, b formatPattern) int { return cmp.Compare(b.size, a.size) })
	return ps
}

// maxNesting bounds how deep a text read back as another's argument is
// itself read back.
const maxNesting = 3

// readBack is s, written whole by one of ps, in ctx's language, and
// whether one was found. With nest, its %s arguments are themselves read
// back with ps (a reason quoted in a reason) when one of ps wrote them, and
// kept as written otherwise (a ref, a version, a person's words). An
// argument of several clauses must read back whole, clause by clause: a
// %s at a format's end would otherwise take in the clauses after it.
func readBack(ctx context.Context, ps []formatPattern, s string, nest bool, depth int) (string, bool) {
next:
	for _, p := range ps {
		if !p.holds(s) {
			continue
		}
		m := p.re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		args := make([]any, len(p.verbs))
		for i, v := range p.verbs {
			args[i] = m[i+1]
			switch {
			case v == "%d":
				n, err := strconv.Atoi(m[i+1])
				if err != nil {
					continue next // too large: not this format's number
				}
				args[i] = n
			case !nest || depth >= maxNesting:
			case strings.Contains(m[i+1], clauseSep):
				t, whole := readBackClauses(ctx, ps, m[i+1], depth+1)
				if !whole {
					continue next
				}
				args[i] = t
			default:
				if t, ok := readBack(ctx, ps, m[i+1], true, depth+1); ok {
					args[i] = t
				} else {
					args[i] = argInLang(ctx, p.format, i, m[i+1])
				}
			}
		}
		if len(args) == 0 {
			return T(ctx, p.format), true
		}
		return Tf(ctx, p.format, args...), true
	}
	return s, false
}

// holds reports whether s holds each of p's literal texts, the first at
// its start and the last at its end: most formats do not, and this is
// cheaper than their pattern. The ends are looked at first, in constant
// time, since they turn most formats away.
func (p *formatPattern) holds(s string) bool {
	if len(p.lits) == 1 { // no verbs: the text itself
		return s == p.lits[0]
	}
	if !strings.HasPrefix(s, p.lits[0]) || !strings.HasSuffix(s, p.lits[len(p.lits)-1]) {
		return false
	}
	for _, l := range p.lits[1 : len(p.lits)-1] {
		if !strings.Contains(s, l) {
			return false
		}
	}
	return true
}

// clauseSep joins the clauses of a composed reason.
const clauseSep = "; "

// readBackClauses is s, clauses joined by "; ", in ctx's language, and
// whether every clause was read back: from the first clause, the longest
// run of clauses one of ps wrote whole is read back, then the next run; a
// clause none wrote is kept as written.
func readBackClauses(ctx context.Context, ps []formatPattern, s string, depth int) (string, bool) {
	clauses := strings.Split(s, clauseSep)
	out := make([]string, 0, len(clauses))
	whole := true
	for i := 0; i < len(clauses); {
		j := len(clauses)
		for ; j > i; j-- {
			if t, ok := readBack(ctx, ps, strings.Join(clauses[i:j], clauseSep), true, depth); ok {
				out = append(out, t)
				break
			}
		}
		if j == i { // none: as written
			out, j, whole = append(out, clauses[i]), i+1, false
		}
		i = j
	}
	return strings.Join(out, clauseSep), whole
}
