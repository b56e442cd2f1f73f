package outbox

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/netguard"
)

// TestPlainHTTPOnlyToListedTargets: the delivery client lets https reach
// public addresses but plain http only listed ones. A recording dialer and
// the test's own resolver: nothing leaves the machine.
func TestPlainHTTPOnlyToListedTargets(t *testing.T) {
	t.Parallel()
	names := map[string][]netip.Addr{
		"public.example": {netip.MustParseAddr("192.0.2.10")},
		"hooks.internal": {netip.MustParseAddr("10.0.0.5")},
	}
	resolve := func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return a, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var mu sync.Mutex
	var dialled []string
	errRecorded := errors.New("recorded, not dialled")
	dial := func(_ context.Context, _, address string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		dialled = append(dialled, address)
		return nil, errRecorded
	}
	c := newClient(netguard.Policy{Hosts: []string{"hooks.internal"}}, resolve, dial)
	for _, tt := range []struct {
		url  string
		dial string        // what the dialer must be asked for; "" when refused
		rule netguard.Rule // the refusal's rule
	}{
		{"https://public.example/h", "192.0.2.10:443", ""},
		{"http://public.example/h", "", netguard.RuleNotListed},
		{"http://192.0.2.10/h", "", netguard.RuleNotListed},
		{"http://hooks.internal:8080/h", "10.0.0.5:8080", ""},
		{"https://hooks.internal/h", "10.0.0.5:443", ""},
		{"https://10.0.0.5/h", "", netguard.RulePrivate}, // listed by name, not by address
	} {
		mu.Lock()
		dialled = nil
		mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, tt.url, nil)
		_, err := c.Do(req)
		mu.Lock()
		got := append([]string(nil), dialled...)
		mu.Unlock()
		var r *netguard.Refusal
		switch {
		case tt.dial != "" && (!errors.Is(err, errRecorded) || len(got) != 1 || got[0] != tt.dial):
			t.Errorf("POST %s: %v, dialled %v; want %s dialled", tt.url, err, got, tt.dial)
		case tt.dial == "" && (!errors.As(err, &r) || r.Rule != tt.rule || len(got) != 0):
			t.Errorf("POST %s: %v, dialled %v; want refused as %s", tt.url, err, got, tt.rule)
		}
	}
}
