package netguard

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// The old link-local-only guard, until its callers move to Guard.

// ErrForbiddenAddress: the dialled address is link-local, unspecified or multicast.
var ErrForbiddenAddress = errors.New("address is link-local, unspecified or multicast: refused")

// Forbidden reports whether Limbo must not connect to ip.
func Forbidden(ip net.IP) bool {
	return ip == nil || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()
}

// Dialer returns a dialer with timeout that refuses forbidden addresses.
func Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		if Forbidden(net.ParseIP(host)) {
			return ErrForbiddenAddress
		}
		return nil
	}}
}
