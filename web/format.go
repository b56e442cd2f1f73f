package web

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// humanDuration is a duration as a person reads it, in ctx's language
// ("90 days", "1 h 30 min", "45 s", "500 ms" / "90 giorni"), never Go's
// "2160h0m0s". Whole days from two days up; otherwise hours, minutes and
// seconds, the zero parts left out, to the second. The unit symbols (h,
// min, s, ms) are the same in both languages; numbers are grouped the
// language's way.
func humanDuration(ctx context.Context, d time.Duration) string {
	if d < 0 {
		return "-" + humanDuration(ctx, -d)
	}
	if d < time.Second {
		return Tf(ctx, "%d ms", d.Milliseconds())
	}
	d = d.Round(time.Second)
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return Tf(ctx, "%d days", int64(d/day))
	}
	var parts []string
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "%d h"}, {time.Minute, "%d min"}, {time.Second, "%d s"}} {
		if n := d / u.unit; n > 0 {
			parts = append(parts, Tf(ctx, u.name, int64(n)))
			d -= n * u.unit
		}
	}
	return strings.Join(parts, " ")
}

// capitalFirst is s with its first letter a capital: a label the catalogs
// hold as prose ("approve: the action may run") shown among labels that
// begin with one.
func capitalFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
