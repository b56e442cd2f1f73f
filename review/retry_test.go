package review

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"spaces trimmed", "  30 ", 30 * time.Second, true},
		{"tab trimmed", "\t5", 5 * time.Second, true},
		{"one year cap", "31536000", MaxRetryAfter, true},
		{"over the cap", "31536001", MaxRetryAfter, true},
		{"would overflow int64", "99999999999999999999999999999", MaxRetryAfter, true},
		{"IMF-fixdate", "Fri, 14 Mar 2025 12:01:30 GMT", 90 * time.Second, true},
		{"RFC 850 date", "Friday, 14-Mar-25 12:00:10 GMT", 10 * time.Second, true},
		{"asctime date", "Fri Mar 14 12:00:05 2025", 5 * time.Second, true},
		{"date now", "Fri, 14 Mar 2025 12:00:00 GMT", 0, true},
		{"date in the past", "Thu, 13 Mar 2025 12:00:00 GMT", 0, true},
		{"date far ahead", "Fri, 01 Jan 9999 00:00:00 GMT", MaxRetryAfter, true},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"decimal seconds (retry-after-ms)", "1.5", 1500 * time.Millisecond, true},
		{"decimal milliseconds", "0.250", 250 * time.Millisecond, true},
		{"decimal over the cap", "31536000.5", MaxRetryAfter, true},
		{"trailing dot", "1.", 0, false},
		{"leading dot", ".5", 0, false},
		{"two dots", "1.2.3", 0, false},
		{"exponent", "1e3", 0, false},
		{"unit suffix", "10s", 0, false},
		{"inner space", "1 0", 0, false},
		{"garbage", "soon", 0, false},
		{"date without zone", "Fri, 14 Mar 2025 12:01:30", 0, false},
		{"RFC 3339 is not an HTTP date", "2025-03-14T12:01:30Z", 0, false},
		{"non-ASCII digits", "١٢", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// fixedRand returns the same value every time.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestBackoff(t *testing.T) {
	const almostOne = 1 - 1.0/(1<<53) // largest float64 below 1
	tests := []struct {
		name string
		n    int
		r    Rand
		want time.Duration
	}{
		{"zero draw", 3, fixedRand(0), 0},
		{"first attempt, half", 1, fixedRand(0.5), 500 * time.Millisecond}, // ceiling 1 s
		{"second attempt, half", 2, fixedRand(0.5), time.Second},           // ceiling 2 s
		{"n below 1 is 1", 0, fixedRand(0.5), 500 * time.Millisecond},
		{"negative n is 1", -7, fixedRand(0.5), 500 * time.Millisecond},
		{"sixth attempt, half", 6, fixedRand(0.5), 16 * time.Second},       // ceiling 32 s
		{"seventh attempt is capped", 7, fixedRand(0.5), 30 * time.Second}, // 64 s > cap
		{"huge n is capped", math.MaxInt, fixedRand(0.5), 30 * time.Second},
		{"n = 63 does not overflow", 63, fixedRand(0.25), 15 * time.Second},
		{"top of the range stays below the cap", 100, fixedRand(almostOne), BackoffCap - 1},
		{"draw of 1 is out of range", 1, fixedRand(1), 0},
		{"negative draw", 1, fixedRand(-0.5), 0},
		{"NaN draw", 1, fixedRand(math.NaN()), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Backoff(tt.n, tt.r)
			// Allow a nanosecond of float rounding.
			if diff := got - tt.want; diff < -1 || diff > 1 {
				t.Errorf("Backoff(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestBackoffCeiling(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := -2; n <= 80; n++ {
		ceiling := BackoffCap
		if k := max(n, 1); k < 7 {
			ceiling = BackoffBase << k
		}
		var maxSeen time.Duration
		for range 2000 {
			d := Backoff(n, r)
			if d < 0 || d >= ceiling {
				t.Fatalf("Backoff(%d) = %v, outside [0, %v)", n, d, ceiling)
			}
			maxSeen = max(maxSeen, d)
		}
		// Full jitter uses the whole range: with 2000 draws the largest
		// should be close to the ceiling.
		if maxSeen < ceiling*9/10 {
			t.Errorf("Backoff(%d): largest of 2000 draws %v, ceiling %v", n, maxSeen, ceiling)
		}
	}
}

func TestBackoffNilRand(t *testing.T) {
	for range 100 {
		if d := Backoff(1, nil); d < 0 || d >= time.Second {
			t.Fatalf("Backoff(1, nil) = %v", d)
		}
	}
}
