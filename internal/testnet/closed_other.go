//go:build !unix

package testnet

import (
	"net"
	"testing"
)

// ClosedURL is an address nothing listens on: a dial there is refused
// (unless another server takes the port meanwhile; closed_unix_test.go
// holds it).
func ClosedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "http://" + ln.Addr().String()
}
