package review

import (
	"errors"
	"testing"
	"time"
)

// TestPayloadRetentionConfig: payload_retention and purge_every parse as
// Go durations, an action's retention wins (0 stated: forever, absent: the
// default), and a negative or too frequent value is refused.
func TestPayloadRetentionConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`
payload_retention: 720h
purge_every: 30m
destinations:
  mail:
    actions:
      send: {retention: 24h}
      archive: {retention: 0s}
      other: {owner: ops}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.PayloadRetention != 720*time.Hour || c.PurgeEvery != 30*time.Minute {
		t.Fatalf("parsed %s, %s", c.PayloadRetention, c.PurgeEvery)
	}
	for action, want := range map[string]time.Duration{"send": 24 * time.Hour, "archive": 0, "other": 720 * time.Hour, "unlisted": 720 * time.Hour} {
		if got := c.RetentionFor("mail", action); got != want {
			t.Errorf("RetentionFor(mail, %s) = %s, want %s", action, got, want)
		}
	}
	for _, bad := range []string{"payload_retention: -1h", "purge_every: -1s", "purge_every: 10ms",
		"destinations: {mail: {actions: {send: {retention: -1h}}}}", "payload_retention: 30d"} {
		if _, err := ParseConfig([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
}
