//go:build unix

// Package testnet holds what tests need of the network on loopback.
package testnet

import (
	"fmt"
	"syscall"
	"testing"
)

// ClosedURL is an address on loopback where a dial is refused, for the
// whole test: a TCP socket bound there and never listening, so the kernel
// answers a connection with a reset and no other test's server can take
// the port meanwhile (a listener closed at once left the port free, and a
// parallel test's server once took it: the "refused" send then reached it).
func ClosedURL(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
