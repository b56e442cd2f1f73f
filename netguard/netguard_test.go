package netguard

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a DialFunc that records what it was asked to dial and
// connects nowhere: nothing leaves the machine.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

var errRecorded = errors.New("recorded, not dialled")

func (r *recorder) dial(_ context.Context, _, address string) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, address)
	return nil, errRecorded
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// names is an injected resolver: the test's own DNS, so no query leaves
// the machine. It counts lookups.
type names struct {
	m       map[string][]string
	lookups atomic.Int32
}

func (n *names) resolve(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.lookups.Add(1)
	ips, ok := n.m[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

var testNames = map[string][]string{
	"private.example":   {"10.1.2.3"},
	"cgnat.example":     {"100.64.7.7"},
	"mapped.example":    {"::ffff:192.168.0.9"},
	"metadata.example":  {"169.254.169.254"},
	"mixed.example":     {"192.0.2.10", "10.0.0.7"}, // one public, one private
	"public.example":    {"192.0.2.10", "2001:db8::10"},
	"internal.example":  {"10.0.0.5"},
	"Internal.Example.": {"10.0.0.5"},
}

// TestGuardRefusesBeforeDialling: every forbidden form, as an address and
// through a name, is refused with its rule, and the dialer is never asked.
func TestGuardRefusesBeforeDialling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address string
		rule    Rule
	}{
		{"127.0.0.1:80", RuleLoopback},
		{"127.1.2.3:80", RuleLoopback},
		{"[::1]:80", RuleLoopback},
		{"[::ffff:127.0.0.1]:80", RuleLoopback},
		{"[::ffff:7f00:1]:80", RuleLoopback},
		{"[::7f00:1]:80", RuleLoopback}, // IPv4-compatible
		{"10.0.0.1:80", RulePrivate},
		{"172.16.0.1:80", RulePrivate},
		{"172.31.255.255:80", RulePrivate},
		{"192.168.1.1:80", RulePrivate},
		{"100.64.0.1:80", RuleCGNAT},
		{"169.254.169.254:80", RuleLinkLocal},
		{"[fe80::1]:80", RuleLinkLocal},
		{"[fe80::1%eth0]:80", RuleLinkLocal},
		{"[fc00::1]:80", RuleUniqueLocal},
		{"[fd12::1]:80", RuleUniqueLocal},
		{"224.0.0.1:80", RuleMulticast},
		{"[ff02::1]:80", RuleMulticast},
		{"0.0.0.0:80", RuleUnspecified},
		{"[::]:80", RuleUnspecified},
		{"255.255.255.255:80", RuleReserved},
		{"240.0.0.1:80", RuleReserved},
		{"[64:ff9b::7f00:1]:80", RuleLoopback},     // NAT64 of 127.0.0.1
		{"[64:ff9b::a9fe:a9fe]:80", RuleLinkLocal}, // NAT64 of 169.254.169.254
		{"[2002:a00:1::1]:80", RulePrivate},        // 6to4 of 10.0.0.1
		{"private.example:80", RulePrivate},
		{"cgnat.example:443", RuleCGNAT},
		{"mapped.example:80", RulePrivate},
		{"metadata.example:80", RuleLinkLocal},
		{"mixed.example:80", RulePrivate},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			dns := &names{m: testNames}
			g := &Guard{Resolve: dns.resolve, Dial: rec.dial}
			_, err := g.DialContext(context.Background(), "tcp", tt.address)
			var r *Refusal
			if !errors.As(err, &r) || r.Rule != tt.rule {
				t.Fatalf("dial %s: %v, want refused as %s", tt.address, err, tt.rule)
			}
			if calls := rec.got(); len(calls) != 0 {
				t.Fatalf("dial %s: the dialer was asked for %v", tt.address, calls)
			}
			if class, msg := Explain(err); class != FailPolicy || !strings.Contains(msg, string(tt.rule)) {
				t.Errorf("Explain = %s %q, want policy naming %s", class, msg, tt.rule)
			}
		})
	}
}

// TestGuardRefusesRealLocalhost: the system's own resolution of localhost
// (the hosts file) is checked like any other.
func TestGuardRefusesRealLocalhost(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Guard{Dial: rec.dial}
	_, err := g.DialContext(context.Background(), "tcp", "localhost:80")
	var r *Refusal
	if !errors.As(err, &r) || r.Rule != RuleLoopback {
		t.Fatalf("dial localhost: %v, want refused as loopback", err)
	}
	if calls := rec.got(); len(calls) != 0 {
		t.Fatalf("the dialer was asked for %v", calls)
	}
	if want := "localhost resolves to a loopback address"; r.Error() != want {
		t.Errorf("refusal = %q, want %q", r.Error(), want)
	}
}

// TestGuardDialsTheCheckedAddress: a public name is resolved once and its
// checked address is dialled, never the name again, so a second DNS answer
// (rebinding to an internal address) is never asked for.
func TestGuardDialsTheCheckedAddress(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	dns := &names{m: testNames}
	g := &Guard{Resolve: dns.resolve, Dial: rec.dial}
	if _, err := g.DialContext(context.Background(), "tcp", "public.example:443"); !errors.Is(err, errRecorded) {
		t.Fatalf("dial public.example: %v, want the recorder's error", err)
	}
	calls := rec.got()
	if len(calls) != 2 || calls[0] != "192.0.2.10:443" || calls[1] != "[2001:db8::10]:443" || dns.lookups.Load() != 1 {
		t.Fatalf("dialled %v after %d lookups; want each checked address once, after one lookup", calls, dns.lookups.Load())
	}
	rec = &recorder{}
	g.Dial = rec.dial
	if _, err := g.DialContext(context.Background(), "tcp", "192.0.2.99:80"); !errors.Is(err, errRecorded) || len(rec.got()) != 1 {
		t.Fatalf("dial a public address: %v, dialled %v", err, rec.got())
	}
}

// TestGuardAllowList: a listed prefix or name opts exactly its targets in.
func TestGuardAllowList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		policy  Policy
		listed  bool
		address string
		want    Rule // "" when it must reach the dialer
	}{
		{"prefix", Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, false, "10.0.0.5:80", ""},
		{"prefix, mapped form", Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}}, false, "[::ffff:10.0.0.5]:80", ""},
		{"prefix, name inside", Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}}, false, "internal.example:80", ""},
		{"prefix, outside", Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, false, "10.0.1.5:80", RulePrivate},
		{"prefix, other rule", Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, false, "127.0.0.1:80", RuleLoopback},
		{"name", Policy{Hosts: []string{"internal.example"}}, false, "internal.example:80", ""},
		{"name, any case, trailing dot", Policy{Hosts: []string{"internal.example"}}, false, "Internal.Example.:80", ""},
		{"name, not its address", Policy{Hosts: []string{"internal.example"}}, false, "10.0.0.5:80", RulePrivate},
		{"name, another name", Policy{Hosts: []string{"internal.example"}}, false, "private.example:80", RulePrivate},
		{"listed only, public", Policy{}, true, "public.example:443", RuleNotListed},
		{"listed only, public literal", Policy{}, true, "192.0.2.10:80", RuleNotListed},
		{"listed only, forbidden keeps its rule", Policy{}, true, "127.0.0.1:80", RuleLoopback},
		{"listed only, listed name", Policy{Hosts: []string{"internal.example"}}, true, "internal.example:80", ""},
		{"listed only, listed prefix", Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}, true, "192.0.2.10:80", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			dns := &names{m: testNames}
			g := &Guard{Policy: tt.policy, ListedOnly: tt.listed, Resolve: dns.resolve, Dial: rec.dial}
			_, err := g.DialContext(context.Background(), "tcp", tt.address)
			if tt.want == "" {
				if !errors.Is(err, errRecorded) || len(rec.got()) == 0 {
					t.Fatalf("dial %s: %v, dialled %v; want it dialled", tt.address, err, rec.got())
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) || r.Rule != tt.want || len(rec.got()) != 0 {
				t.Fatalf("dial %s: %v, dialled %v; want refused as %s", tt.address, err, rec.got(), tt.want)
			}
		})
	}
}

// TestGuardDNSFailure: a name that does not resolve is a DNS failure,
// nothing is dialled.
func TestGuardDNSFailure(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	dns := &names{m: map[string][]string{"empty.example": {}}}
	g := &Guard{Resolve: dns.resolve, Dial: rec.dial}
	for _, a := range []string{"nowhere.example:80", "empty.example:80"} {
		_, err := g.DialContext(context.Background(), "tcp", a)
		if class, _ := Explain(err); class != FailDNS || len(rec.got()) != 0 {
			t.Errorf("dial %s: %v (%s), dialled %v; want a DNS failure", a, err, class, rec.got())
		}
	}
}

// TestControlHookRefusesLoopback: the second line, on the socket address
// actually connected, refuses on its own: a listener on loopback sees no
// connection.
func TestControlHookRefusesLoopback(t *testing.T) {
	t.Parallel()
	ln, accepted := listen(t, "127.0.0.1:0")
	g := &Guard{}
	_, err := g.dial(context.Background(), "tcp", ln.Addr().String(), false)
	var r *Refusal
	if !errors.As(err, &r) || r.Rule != RuleLoopback {
		t.Fatalf("dial %s past the first check: %v, want the Control hook's loopback refusal", ln.Addr(), err)
	}
	ln.Close()
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections arrived", n)
	}
}

// listen counts the connections a loopback listener accepts.
func listen(t *testing.T, addr string) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln, &n
}

// TestTransportThroughTheGuard: an http.Client built on Transport gets the
// typed refusal back, no connection arrives, and an opted-in target is
// reached without following its redirect.
func TestTransportThroughTheGuard(t *testing.T) {
	t.Parallel()
	var hits, followed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		hits.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	strict := &http.Client{Transport: Transport(&Guard{}), CheckRedirect: NoRedirects}
	_, err := strict.Get(srv.URL)
	var r *Refusal
	if !errors.As(err, &r) || r.Rule != RuleLoopback || hits.Load() != 0 {
		t.Fatalf("GET %s: %v, %d hits; want refused as loopback, no hit", srv.URL, err, hits.Load())
	}
	open := &http.Client{Transport: Transport(&Guard{Policy: Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}),
		CheckRedirect: NoRedirects}
	resp, err := open.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits.Load() != 1 || followed.Load() != 0 {
		t.Fatalf("allowed GET: %d, %d hits, %d followed; want the 302 itself", resp.StatusCode, hits.Load(), followed.Load())
	}
}

// TestExplain: each class of failure gets its fixed message, never the
// raw error's text.
func TestExplain(t *testing.T) {
	t.Parallel()
	allow := &Guard{Policy: Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	client := &http.Client{Transport: Transport(allow), CheckRedirect: NoRedirects}

	closed, _ := listen(t, "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(http.NotFoundHandler())
	defer plainSrv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dead, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second)) // already past
	defer stop()

	tests := []struct {
		name string
		err  func() error
		want Failure
	}{
		{"refused by the guard", func() error { _, err := (&http.Client{Transport: Transport(&Guard{})}).Get(plainSrv.URL); return err }, FailPolicy},
		{"connection refused", func() error { _, err := client.Get(closedURL); return err }, FailConnect},
		{"unknown certificate", func() error { _, err := client.Get(tlsSrv.URL); return err }, FailTLS},
		{"https to plain http", func() error {
			_, err := client.Get(strings.Replace(plainSrv.URL, "http://", "https://", 1))
			return err
		}, FailTLS},
		{"deadline", func() error {
			req, _ := http.NewRequestWithContext(dead, http.MethodGet, plainSrv.URL, nil)
			_, err := client.Do(req)
			return err
		}, FailTimeout},
		{"dns", func() error { return &net.DNSError{Err: "no such host", Name: "x.example"} }, FailDNS},
		{"canceled", func() error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, plainSrv.URL, nil)
			_, err := client.Do(req)
			return err
		}, FailConnect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			class, msg := Explain(err)
			if class != tt.want {
				t.Fatalf("Explain(%v) = %s, want %s", err, class, tt.want)
			}
			if msg == "" || (err != nil && strings.Contains(msg, err.Error())) || strings.Contains(msg, "127.0.0.1:") {
				t.Errorf("message %q repeats the raw error %q", msg, err)
			}
		})
	}
	if class, msg := Status(503); class != FailHTTPStatus || msg != "HTTP 503" {
		t.Errorf("Status(503) = %s %q", class, msg)
	}
	if class, msg := Explain(nil); class != "" || msg != "" {
		t.Errorf("Explain(nil) = %s %q", class, msg)
	}
}

// TestRefusalMessages: an address the URL gave is named; the addresses a
// name resolves to are not.
func TestRefusalMessages(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		r    Refusal
		want string
	}{
		{Refusal{Host: "10.0.0.5", Addr: netip.MustParseAddr("10.0.0.5"), Rule: RulePrivate}, "10.0.0.5 is private (RFC 1918)"},
		{Refusal{Host: "::ffff:127.0.0.1", Addr: netip.MustParseAddr("::ffff:127.0.0.1"), Rule: RuleLoopback},
			"::ffff:127.0.0.1 is loopback (it embeds 127.0.0.1)"},
		{Refusal{Host: "db.internal", Addr: netip.MustParseAddr("10.9.8.7"), Rule: RulePrivate}, "db.internal resolves to a private (RFC 1918) address"},
		{Refusal{Host: "zero.example", Addr: netip.MustParseAddr("0.0.0.0"), Rule: RuleUnspecified}, "zero.example resolves to an unspecified address"},
		{Refusal{Host: "db.internal", Addr: netip.MustParseAddr("192.0.2.1"), Rule: RuleNotListed}, "db.internal resolves to an address not in the allow-list"},
		{Refusal{Rule: RuleUserInfo}, "credentials in the URL"},
	} {
		if got := tt.r.Error(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.r, got, tt.want)
		}
	}
}

// TestClassify: the public side of the table is left alone.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ip   string
		want Rule
	}{
		{"192.0.2.10", ""},
		{"8.8.8.8", ""},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"2001:db8::1", ""},
		{"2606:4700::1111", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of a public address
		{"2002:808:808::1", ""},  // 6to4 of a public address
		{"::ffff:8.8.8.8", ""},
		{"fec0::1", RuleReserved},
		{"::ffff:0:a00:1", RuleReserved}, // IPv4-translated, unroutable
		{"192.0.0.1", RuleReserved},
		{"198.18.0.1", RuleReserved},
		{"198.19.255.254", RuleReserved},
		{"198.20.0.1", ""},
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", RuleReserved}, // Teredo, to 10.0.0.1
		{"100::1", RuleReserved},
	} {
		if got := Classify(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("Classify(%s) = %q, want %q", tt.ip, got, tt.want)
		}
	}
}
