package netguard

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestForbidden(t *testing.T) {
	tests := []struct {
		name string
		ip   string
		want bool
	}{
		{"cloud metadata", "169.254.169.254", true},
		{"link-local v6", "fe80::1", true},
		{"unspecified", "0.0.0.0", true},
		{"multicast", "224.0.0.1", true},
		{"loopback", "127.0.0.1", false},
		{"public", "192.0.2.10", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Forbidden(net.ParseIP(tt.ip)); got != tt.want {
				t.Errorf("Forbidden(%s) = %v, want %v", tt.ip, got, tt.want)
			}
		})
	}
}

func TestDialerRefusesBeforeConnecting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Dialer(time.Second).DialContext(ctx, "tcp", "169.254.169.254:80")
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("dial 169.254.169.254: %v, want ErrForbiddenAddress", err)
	}
}
