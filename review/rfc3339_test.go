package review

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseRFC3339(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, in string
		want     time.Time // zero: refused
	}{
		{"plain", "2030-01-02T03:04:05Z", utc("2030-01-02T03:04:05Z")},
		// time.Parse refuses these; RFC 3339 section 5.6 allows them.
		{"lower-case t and z", "2030-01-02t03:04:05z", utc("2030-01-02T03:04:05Z")},
		{"lower-case t", "2030-01-02t03:04:05+01:00", utc("2030-01-02T02:04:05Z")},
		{"fraction beyond nanoseconds is dropped", "2030-01-02T03:04:05.1234567891234Z", utc("2030-01-02T03:04:05.123456789Z")},
		{"one fraction digit", "2030-01-02T03:04:05.5Z", utc("2030-01-02T03:04:05.5Z")},
		{"offset +23:59", "2030-01-02T03:04:05+23:59", utc("2030-01-01T03:05:05Z")},
		{"offset -23:59", "2030-01-02T03:04:05-23:59", utc("2030-01-03T03:03:05Z")},
		{"unknown local offset -00:00", "2030-01-02T03:04:05-00:00", utc("2030-01-02T03:04:05Z")},
		{"29 February of a leap year", "2032-02-29T00:00:00Z", utc("2032-02-29T00:00:00Z")},
		{"end of day", "2030-12-31T23:59:59.999999999Z", utc("2030-12-31T23:59:59.999999999Z")},
		{"last instant of year 9999", "9999-12-31T23:59:59.999999999Z", utc("9999-12-31T23:59:59.999999999Z")},
		{"a second into year 0001", "0001-01-01T00:00:01Z", utc("0001-01-01T00:00:01Z")}, // 00:00:00 is the zero time, which the table reads as refused
		{"year 10000 by an offset kept to 9999 in UTC", "9999-12-31T23:00:00-00:59", utc("9999-12-31T23:59:00Z")},

		// Years outside 0001–9999 in UTC: PostgreSQL and SQLite store them
		// apart, and encoding/json cannot write them.
		{"year 10000 in UTC by an offset", "9999-12-31T23:59:59-00:01", time.Time{}},
		{"year 0000 in UTC by an offset", "0001-01-01T00:00:00+00:01", time.Time{}},
		{"year 0000", "0000-06-01T00:00:00Z", time.Time{}},

		// time.Parse accepts these (some, depending on the Go version); RFC 3339 does not.
		{"comma fraction", "2030-01-02T03:04:05,5Z", time.Time{}},
		{"offset hour 24", "2030-01-02T03:04:05+24:00", time.Time{}},
		{"offset minute 60", "2030-01-02T03:04:05+01:60", time.Time{}},
		{"offset without colon", "2030-01-02T03:04:05+0100", time.Time{}},
		{"offset hours only", "2030-01-02T03:04:05+01", time.Time{}},

		{"no zone", "2030-01-02T03:04:05", time.Time{}},
		{"space for T", "2030-01-02 03:04:05Z", time.Time{}},
		{"empty fraction", "2030-01-02T03:04:05.Z", time.Time{}},
		{"month 13", "2030-13-02T03:04:05Z", time.Time{}},
		{"month 00", "2030-00-02T03:04:05Z", time.Time{}},
		{"day 00", "2030-01-00T03:04:05Z", time.Time{}},
		{"31 April", "2030-04-31T03:04:05Z", time.Time{}},
		{"29 February of a common year", "2031-02-29T00:00:00Z", time.Time{}},
		{"hour 24", "2030-01-02T24:00:00Z", time.Time{}},
		{"minute 60", "2030-01-02T03:60:05Z", time.Time{}},
		{"leap second", "2030-12-31T23:59:60Z", time.Time{}},
		{"one-digit month", "2030-1-02T03:04:05Z", time.Time{}},
		{"five-digit year", "20300-01-02T03:04:05Z", time.Time{}},
		{"non-ASCII digit", "2030-01-0\u0662T03:04:05Z", time.Time{}},
		{"trailing data", "2030-01-02T03:04:05Zjunk", time.Time{}},
		{"NUL", "2030-01-02T03:04:05Z\x00", time.Time{}},
		{"leading space", " 2030-01-02T03:04:05Z", time.Time{}},
		{"date only", "2030-01-02", time.Time{}},
		{"empty", "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRFC3339(tc.in)
			switch {
			case tc.want.IsZero() && err == nil:
				t.Fatalf("ParseRFC3339(%q) = %v, want an error", tc.in, got)
			case !tc.want.IsZero() && err != nil:
				t.Fatalf("ParseRFC3339(%q): %v", tc.in, err)
			case !tc.want.IsZero() && !got.Equal(tc.want):
				t.Fatalf("ParseRFC3339(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if matched := timePattern.MatchString(tc.in); err == nil && !matched {
				t.Errorf("%q is accepted but does not match TimePattern", tc.in)
			}
		})
	}
}

var timePattern = regexp.MustCompile(TimePattern)

// FuzzParseRFC3339 checks ParseRFC3339 against the grammar and against
// time.Parse where both read the same text: anything accepted matches
// TimePattern and means the instant time.Parse reads from its upper-case
// form; anything that matches the pattern, has a '.' fraction of at most
// nine digits, no leap second and an offset within ±23:59, and that
// time.Parse reads as an instant within years 0001–9999 in UTC, is
// accepted.
func FuzzParseRFC3339(f *testing.F) {
	for _, s := range []string{
		"2030-01-02T03:04:05Z", "2030-01-02t03:04:05.25z", "2030-01-02T03:04:05,5Z", "2030-01-02T03:04:05+24:00",
		"2030-02-29T00:00:00Z", "2030-12-31T23:59:60Z", "0000-01-01T00:00:00-23:59", "9999-12-31T23:59:59.999999999+00:00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseRFC3339(s)
		upper := strings.Map(func(r rune) rune {
			if r == 't' || r == 'z' {
				return r - 'a' + 'A'
			}
			return r
		}, s)
		goTime, goErr := time.Parse(time.RFC3339Nano, upper)
		if err == nil {
			if !timePattern.MatchString(s) {
				t.Fatalf("ParseRFC3339(%q) accepted text that does not match TimePattern", s)
			}
			if fraction(s) <= 9 && (goErr != nil || !goTime.Equal(got)) {
				t.Fatalf("ParseRFC3339(%q) = %v; time.Parse(%q) = %v, %v", s, got, upper, goTime, goErr)
			}
			return
		}
		if timePattern.MatchString(s) && goErr == nil && fraction(s) <= 9 && s[17:19] != "60" && offsetInRange(s) && InTimeRange(goTime) {
			t.Fatalf("ParseRFC3339(%q): %v; but it is RFC 3339 and time.Parse reads %v", s, err, goTime)
		}
	})
}

// fraction counts the fraction digits of a date-time that matches TimePattern.
func fraction(s string) int {
	if len(s) < 20 || s[19] != '.' {
		return 0
	}
	n := 0
	for _, c := range s[20:] {
		if c < '0' || c > '9' {
			break
		}
		n++
	}
	return n
}

// offsetInRange reports whether a date-time matching TimePattern has Z or
// an offset within ±23:59.
func offsetInRange(s string) bool {
	if last := s[len(s)-1]; last == 'Z' || last == 'z' {
		return true
	}
	off := s[len(s)-5:]
	return off[:2] <= "23" && off[3:] <= "59"
}
