package web

import (
	"fmt"
	"strings"
	"time"
)

// humanDuration is a duration as a person reads it ("90 days", "1 h 30
// min", "45 s", "500 ms"), never Go's "2160h0m0s". Whole days from two
// days up; otherwise hours, minutes and seconds, the zero parts left out,
// to the second.
func humanDuration(d time.Duration) string {
	if d < 0 {
		return "-" + humanDuration(-d)
	}
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	d = d.Round(time.Second)
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return fmt.Sprintf("%d days", d/day)
	}
	var parts []string
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, u.name))
			d -= n * u.unit
		}
	}
	return strings.Join(parts, " ")
}
