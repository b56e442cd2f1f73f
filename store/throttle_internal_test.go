package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestThrottleAddr(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"}, // IPv4-mapped is the IPv4 address
		{"2001:db8:1:2::a", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
		{"", ""},
		{"not an address", "not an address"},
	} {
		if got := throttleAddr(tt.addr); got != tt.want {
			t.Errorf("throttleAddr(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestPairDelay(t *testing.T) {
	for f, want := range map[int]time.Duration{
		0: 0, 2: 0, 3: time.Second, 4: 2 * time.Second, 5: 4 * time.Second, 1000: 1 << 20 * time.Second,
	} {
		if got := pairDelay(f); got != want {
			t.Errorf("pairDelay(%d) = %v, want %v", f, got, want)
		}
	}
}

// TestLoginGateBusyCounted: a sign-in that waited longer than
// loginGateWait for the one ahead of it on its account is refused, and
// counted (limbo_login_refusals_total{rule="busy"}); it was refused
// unseen, so a flood that kept an owner out showed nowhere.
func TestLoginGateBusyCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "limbo.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	leave, err := s.logins.enter(ctx, "acct:owner@example.com") // a check in progress
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	_, _, err = s.Login(ctx, "owner@example.com", "correct horse battery", "10.0.0.1", SessionPolicy{})
	var th *ThrottledError
	if !errors.As(err, &th) {
		t.Fatalf("a sign-in behind a held gate: %v, want throttled", err)
	}
	if n := s.LoginRefusals()[RefusedBusy]; n != 1 {
		t.Errorf("busy refusals counted: %d, want 1", n)
	}
}
