// Package netguard keeps Limbo's outbound HTTP (reconciliation probes,
// decision webhooks) away from addresses it must never reach: link-local
// ones, where cloud metadata services answer, and unspecified or multicast
// ones. The check runs on the address actually dialled, after DNS, so a
// name that resolves to 169.254.169.254 is refused too.
package netguard

import (
	"errors"
	"net"
	"syscall"
	"time"
)

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
