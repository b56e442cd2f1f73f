package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Failure is the class of a failed outbound request, as the delivery
// history and probe evidence record it.
type Failure string

const (
	// FailPolicy: refused by this package before any connection.
	FailPolicy Failure = "policy"
	// FailDNS: the name did not resolve.
	FailDNS Failure = "dns"
	// FailConnect: no connection, or one that broke before an answer.
	FailConnect Failure = "connect"
	// FailTLS: the TLS handshake failed (certificate, protocol).
	FailTLS Failure = "tls"
	// FailTimeout: no answer in time.
	FailTimeout Failure = "timeout"
	// FailHTTPStatus: an answer, but not a 2xx one.
	FailHTTPStatus Failure = "http_status"
)

// Explain classifies a request's error and returns the fixed message to
// record in its place. The raw error is never recorded: it names internal
// addresses and ports, and tells a refused port from a filtered one, which
// turns whoever may set a URL into a port scanner. Log it at debug level
// if at all. A nil err explains as "", "".
func Explain(err error) (Failure, string) {
	var (
		refusal *Refusal
		dnsErr  *net.DNSError
		netErr  net.Error
	)
	switch {
	case err == nil:
		return "", ""
	case errors.As(err, &refusal):
		return FailPolicy, "refused by policy: " + refusal.Error()
	case errors.As(err, &dnsErr):
		return FailDNS, "the name did not resolve"
	case isTLS(err):
		return FailTLS, "the TLS handshake failed"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return FailTimeout, "no answer in time"
	}
	return FailConnect, "no connection, or it closed without an answer"
}

// Status explains an answer whose status is not 2xx.
func Status(code int) (Failure, string) {
	return FailHTTPStatus, fmt.Sprintf("HTTP %d", code)
}

// isTLS reports whether err came from the TLS handshake. crypto/tls and
// net/http return many handshake errors untyped, so their text is the
// last resort.
func isTLS(err error) bool {
	var (
		alert   tls.AlertError
		record  tls.RecordHeaderError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		name    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	if errors.As(err, &alert) || errors.As(err, &record) || errors.As(err, &verify) || errors.As(err, &unknown) ||
		errors.As(err, &name) || errors.As(err, &invalid) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "tls: ") || strings.Contains(s, "x509: ") || strings.Contains(s, "HTTP response to HTTPS client")
}
