package review

import (
	"errors"
	"fmt"
	"time"
)

// TimePattern is RFC 3339's date-time syntax as a regular expression, for
// the OpenAPI document; ParseRFC3339 also checks the ranges it cannot say.
const TimePattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$`

// ParseRFC3339 reads a date-time exactly as RFC 3339 (section 5.6) writes
// it: YYYY-MM-DDTHH:MM:SS, an optional fraction after a '.', then Z or an
// offset ±HH:MM within ±23:59; 'T' and 'Z' may be lower-case, as section 5.6
// allows. time.Parse(time.RFC3339, …) is not that grammar: it reads a comma
// as the fraction separator and refuses lower-case 't' and 'z'. A leap
// second (:60) is refused, since a time.Time cannot hold one; fraction
// digits beyond nanoseconds are dropped. A time whose year in UTC is
// outside 0001–9999 (InTimeRange) is refused: "9999-12-31T23:59:59-00:01"
// is in year 10000, which neither engine stores as the other does nor
// JSON can write.
func ParseRFC3339(s string) (time.Time, error) {
	if len(s) < len("2006-01-02T15:04:05Z") {
		return time.Time{}, errors.New("too short")
	}
	p := &timeParser{s: s}
	year := p.digits(4, "year")
	p.sep('-')
	month := p.digits(2, "month")
	p.sep('-')
	day := p.digits(2, "day")
	if p.err == nil && s[p.i] != 'T' && s[p.i] != 't' {
		p.fail("'T' between date and time")
	}
	p.i++
	hour := p.digits(2, "hour")
	p.sep(':')
	minute := p.digits(2, "minute")
	p.sep(':')
	second := p.digits(2, "second")
	nanos := 0
	if p.err == nil && p.i < len(s) && s[p.i] == ',' {
		p.fail("'.' before the fraction (not ',')")
	}
	if p.err == nil && p.i < len(s) && s[p.i] == '.' {
		p.i++
		start := p.i
		for p.i < len(s) && s[p.i] >= '0' && s[p.i] <= '9' {
			if p.i-start < 9 {
				nanos = nanos*10 + int(s[p.i]-'0')
			}
			p.i++
		}
		if p.i == start {
			p.fail("digits after '.'")
		}
		for k := p.i - start; k < 9; k++ {
			nanos *= 10
		}
	}
	offset := 0
	switch {
	case p.err != nil:
	case p.i >= len(s):
		p.fail("'Z' or an offset such as +01:00")
	case s[p.i] == 'Z' || s[p.i] == 'z':
		p.i++
	case s[p.i] == '+' || s[p.i] == '-':
		sign := 1
		if s[p.i] == '-' {
			sign = -1
		}
		p.i++
		oh := p.digits(2, "offset hours")
		p.sep(':')
		om := p.digits(2, "offset minutes")
		if p.err == nil && (oh > 23 || om > 59) {
			return time.Time{}, fmt.Errorf("offset %s is beyond ±23:59", s[p.i-6:p.i])
		}
		offset = sign * (oh*3600 + om*60)
	default:
		p.fail("'Z' or an offset such as +01:00")
	}
	if p.err == nil && p.i != len(s) {
		p.fail("the end after the offset")
	}
	if p.err != nil {
		return time.Time{}, p.err
	}
	switch {
	case month < 1 || month > 12:
		return time.Time{}, fmt.Errorf("month %02d is not 01–12", month)
	case day < 1 || day > daysIn(time.Month(month), year):
		return time.Time{}, fmt.Errorf("day %02d is not in %04d-%02d", day, year, month)
	case hour > 23:
		return time.Time{}, fmt.Errorf("hour %02d is not 00–23", hour)
	case minute > 59:
		return time.Time{}, fmt.Errorf("minute %02d is not 00–59", minute)
	case second == 60:
		return time.Time{}, errors.New("leap seconds (:60) are not accepted")
	case second > 59:
		return time.Time{}, fmt.Errorf("second %02d is not 00–59", second)
	}
	zone := time.UTC
	if offset != 0 {
		zone = time.FixedZone("", offset)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, nanos, zone)
	if !InTimeRange(t) {
		return time.Time{}, fmt.Errorf("%s is in year %d in UTC; times are within years 0001–9999 in UTC", s, t.UTC().Year())
	}
	return t, nil
}

// MinTime and MaxTime are the first and the last instant Limbo takes from
// outside: years 0001–9999 in UTC. Beyond them the engines part (PostgreSQL
// refuses what SQLite stores as text that sorts apart and cannot be read
// back) and encoding/json refuses to write the time.
var (
	MinTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999999999, time.UTC)
)

// InTimeRange reports whether t, in UTC, is within years 0001–9999
// (MinTime–MaxTime).
func InTimeRange(t time.Time) bool {
	return !t.Before(MinTime) && !t.After(MaxTime)
}

// timeParser reads fixed-width fields; the first problem sticks.
type timeParser struct {
	s   string
	i   int
	err error
}

func (p *timeParser) fail(want string) {
	if p.err == nil {
		p.err = fmt.Errorf("expected %s at character %d", want, p.i+1)
	}
}

func (p *timeParser) digits(n int, what string) int {
	if p.err != nil {
		return 0
	}
	v := 0
	for k := 0; k < n; k++ {
		if p.i >= len(p.s) || p.s[p.i] < '0' || p.s[p.i] > '9' {
			p.fail(fmt.Sprintf("%d digits of %s", n, what))
			return 0
		}
		v = v*10 + int(p.s[p.i]-'0')
		p.i++
	}
	return v
}

func (p *timeParser) sep(c byte) {
	if p.err != nil {
		return
	}
	if p.i >= len(p.s) || p.s[p.i] != c {
		p.fail(fmt.Sprintf("'%c'", c))
		return
	}
	p.i++
}

// daysIn is the number of days in month of year (proleptic Gregorian).
func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
