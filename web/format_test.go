package web

import (
	"testing"
	"time"
)

func TestHumanDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{500 * time.Millisecond, "500 ms"},
		{45 * time.Second, "45 s"},
		{time.Minute, "1 min"},
		{90 * time.Minute, "1 h 30 min"},
		{24 * time.Hour, "24 h"},
		{2160 * time.Hour, "90 days"},
		{49*time.Hour + time.Second, "49 h 1 s"},
		{1500 * time.Millisecond, "2 s"},
	} {
		if got := humanDuration(tt.d); got != tt.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
