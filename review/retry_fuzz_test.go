package review

import (
	"testing"
	"time"
)

// FuzzParseRetryAfter checks that ParseRetryAfter never panics, never returns
// a negative or over-cap duration, and returns 0 whenever ok is false.
func FuzzParseRetryAfter(f *testing.F) {
	const now = int64(1741953600) // 2025-03-14T12:00:00Z
	for _, s := range []string{
		"120",
		" 0 ",
		"99999999999999999999999999",
		"-1",
		"1.5",
		"Fri, 14 Mar 2025 12:01:30 GMT",
		"Friday, 14-Mar-25 12:00:10 GMT",
		"Fri Mar 14 12:00:05 2025",
	} {
		f.Add(s, now)
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		d, ok := ParseRetryAfter(v, time.Unix(unix, 0).UTC())
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", v, d, MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
		}
	})
}
