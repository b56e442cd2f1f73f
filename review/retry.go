package review

import (
	"math/rand/v2"
	"strings"
	"time"
)

// BackoffBase is the base of the exponential backoff (SPEC "Backoff").
const BackoffBase = 500 * time.Millisecond

// BackoffCap is the largest backoff ceiling (SPEC "Backoff").
const BackoffCap = 60 * time.Second

// MaxRetryAfter bounds what ParseRetryAfter returns, so a hostile or broken
// header cannot park an operation for centuries or overflow a Duration.
const MaxRetryAfter = 365 * 24 * time.Hour

// Rand is the source of randomness for Backoff; *math/rand/v2.Rand satisfies
// it, and tests can pass a fixed value.
type Rand interface {
	// Float64 returns a number in [0, 1).
	Float64() float64
}

// Backoff returns the full-jitter wait after attempt n failed:
// a uniform random duration in [0, min(BackoffCap, BackoffBase·2^n)).
// n counts attempts from 1 (the first attempt); n < 1 is treated as 1.
// A nil r uses the math/rand/v2 global source.
func Backoff(n int, r Rand) time.Duration {
	if n < 1 {
		n = 1
	}
	ceiling := BackoffCap
	// BackoffBase<<n stays far below the int64 limit for n < 30 (2^30 ·
	// 5e8 ns ≈ 5.4e17), and past n = 7 it is above the cap anyway.
	if n < 30 {
		if c := BackoffBase << n; c < ceiling {
			ceiling = c
		}
	}
	var f float64
	if r != nil {
		f = r.Float64()
	} else {
		f = rand.Float64()
	}
	if !(f >= 0 && f < 1) { // a misbehaving Rand, including NaN
		f = 0
	}
	d := time.Duration(f * float64(ceiling))
	if d >= ceiling { // float rounding must not reach the open end
		d = ceiling - 1
	}
	return d
}

// httpDateLayouts are the three forms RFC 9110 §5.6.7 accepts for an HTTP
// date, the same ones net/http.ParseTime tries. They are repeated here to keep
// this package free of net/http.
var httpDateLayouts = []string{
	"Mon, 02 Jan 2006 15:04:05 GMT", // IMF-fixdate (http.TimeFormat)
	time.RFC850,                     // obsolete RFC 850 form
	time.ANSIC,                      // asctime()
}

// ParseRetryAfter interprets a raw Retry-After header value relative to now.
// It accepts delta-seconds (digits, surrounding spaces ignored; capped at
// MaxRetryAfter), decimal seconds ("1.5", how retry-after-ms is reported)
// or an HTTP date (a date in the past gives 0). ok is false, and the
// duration 0, for an empty or unparsable value, including negative numbers.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if whole, frac, ok := strings.Cut(v, "."); ok && whole != "" && frac != "" && isDigits(whole) && isDigits(frac) {
		// Decimal seconds: what a client makes of retry-after-ms (OpenAI
		// and other Stainless-shaped APIs send it beside Retry-After).
		d, _ := ParseRetryAfter(whole, now)
		if d >= MaxRetryAfter {
			return MaxRetryAfter, true
		}
		scale := time.Second
		for i := 0; i < len(frac) && i < 9; i++ {
			scale /= 10
			d += time.Duration(frac[i]-'0') * scale
		}
		return d, true
	}
	if isDigits(v) {
		const maxSeconds = int64(MaxRetryAfter / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs >= maxSeconds { // stop before the product can overflow
				return MaxRetryAfter, true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	for _, layout := range httpDateLayouts {
		t, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		// Sub saturates at the Duration limits instead of overflowing.
		d := t.Sub(now)
		switch {
		case d < 0:
			return 0, true
		case d > MaxRetryAfter:
			return MaxRetryAfter, true
		}
		return d, true
	}
	return 0, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
