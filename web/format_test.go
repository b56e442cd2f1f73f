package web

import (
	"context"
	"testing"
	"time"
)

func TestHumanDuration(t *testing.T) {
	en, it := context.Background(), WithLang(context.Background(), "it")
	for _, tt := range []struct {
		d        time.Duration
		want, it string
	}{
		{500 * time.Millisecond, "500 ms", "500 ms"},
		{45 * time.Second, "45 s", "45 s"},
		{time.Minute, "1 min", "1 min"},
		{90 * time.Minute, "1 h 30 min", "1 h 30 min"},
		{24 * time.Hour, "24 h", "24 h"},
		{2160 * time.Hour, "90 days", "90 giorni"},
		{49*time.Hour + time.Second, "49 h 1 s", "49 h 1 s"},
		{1500 * time.Millisecond, "2 s", "2 s"},
		{-90 * time.Second, "-1 min 30 s", "-1 min 30 s"},
		{2000 * 24 * time.Hour, "2,000 days", "2.000 giorni"},
	} {
		if got := humanDuration(en, tt.d); got != tt.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
		if got := humanDuration(it, tt.d); got != tt.it {
			t.Errorf("humanDuration(%v) in Italian = %q, want %q", tt.d, got, tt.it)
		}
	}
}

// TestDashboardDuration: the dashboard's measured times are to the minute
// from an hour up, to the second below it, and "—" when there is none.
func TestDashboardDuration(t *testing.T) {
	it := WithLang(context.Background(), "it")
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "—"},
		{45*time.Second + 400*time.Millisecond, "45 s"},
		{59*time.Minute + 59*time.Second, "59 min 59 s"},
		{3*time.Hour + 15*time.Minute + 55*time.Second, "3 h 16 min"},
		{18*time.Hour + 18*time.Minute + 29*time.Second, "18 h 18 min"},
		{59*time.Minute + 59*time.Second + 700*time.Millisecond, "1 h"},
		{50*time.Hour + 10*time.Second, "50 h"},
	} {
		if got := dur(it, tt.d); got != tt.want {
			t.Errorf("dur(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestCapitalFirst(t *testing.T) {
	for in, want := range map[string]string{"": "", "approve: x": "Approve: x", "èra": "Èra", "Già": "Già", "(x)": "(x)", "\xffx": "\xffx"} {
		if got := capitalFirst(in); got != want {
			t.Errorf("capitalFirst(%q) = %q, want %q", in, got, want)
		}
	}
}
