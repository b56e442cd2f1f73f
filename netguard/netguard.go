// Package netguard is the one guard on every outbound request Limbo makes
// (reconciliation probes, decision webhooks): it keeps them away from the
// network Limbo runs in — loopback, private (RFC 1918), CGNAT, link-local
// (where cloud metadata services answer), unique-local, multicast,
// unspecified and reserved addresses, and the IPv6 forms that embed such an
// IPv4 address — unless the operator listed the target in the
// configuration file.
//
// The check runs at dial time, after DNS: a name is resolved once, every
// address it resolves to is checked, and the checked address itself is
// dialled, never the name again, so a DNS answer that changes between the
// check and the connection (rebinding) cannot pass.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Rule names why an address is refused.
type Rule string

// The rules, as refusals and the admin page name them.
const (
	RuleLoopback    Rule = "loopback"
	RulePrivate     Rule = "private (RFC 1918)"
	RuleCGNAT       Rule = "CGNAT"
	RuleLinkLocal   Rule = "link-local"
	RuleUniqueLocal Rule = "unique-local"
	RuleMulticast   Rule = "multicast"
	RuleUnspecified Rule = "unspecified"
	RuleReserved    Rule = "reserved"
	// RuleNotListed: a public address where only listed targets may be
	// reached (plain-http webhooks).
	RuleNotListed Rule = "not in the allow-list"
	// RuleUserInfo: the URL carries credentials (user:password@).
	RuleUserInfo Rule = "credentials in the URL"
)

// forbidden maps each refused range to its rule. IPv4 ranges apply to
// IPv4 addresses and to the IPv4 address an IPv6 one embeds (see embedded).
var forbidden = []struct {
	prefix netip.Prefix
	rule   Rule
}{
	{netip.MustParsePrefix("0.0.0.0/8"), RuleUnspecified}, // "this network"
	{netip.MustParsePrefix("127.0.0.0/8"), RuleLoopback},
	{netip.MustParsePrefix("10.0.0.0/8"), RulePrivate},
	{netip.MustParsePrefix("172.16.0.0/12"), RulePrivate},
	{netip.MustParsePrefix("192.168.0.0/16"), RulePrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), RuleCGNAT},
	{netip.MustParsePrefix("169.254.0.0/16"), RuleLinkLocal},
	{netip.MustParsePrefix("224.0.0.0/4"), RuleMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), RuleReserved},   // and 255.255.255.255, broadcast
	{netip.MustParsePrefix("192.0.0.0/24"), RuleReserved},  // IETF protocol assignments (RFC 6890)
	{netip.MustParsePrefix("198.18.0.0/15"), RuleReserved}, // benchmarking (RFC 2544), used inside networks
	{netip.MustParsePrefix("::/128"), RuleUnspecified},
	{netip.MustParsePrefix("::1/128"), RuleLoopback},
	{netip.MustParsePrefix("fe80::/10"), RuleLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), RuleReserved}, // site-local, deprecated
	{netip.MustParsePrefix("fc00::/7"), RuleUniqueLocal},
	{netip.MustParsePrefix("ff00::/8"), RuleMulticast},
	// Teredo tunnels to an IPv4 client address the address hides (XORed):
	// judged unreachable rather than unwrapped.
	{netip.MustParsePrefix("2001::/32"), RuleReserved},
	{netip.MustParsePrefix("100::/64"), RuleReserved}, // discard-only (RFC 6666)
	// What is left of ::/8 after the mapped and compatible forms (which
	// embedded unwraps) is not routable: nothing to reach there.
	{netip.MustParsePrefix("::/8"), RuleReserved},
}

// IPv6 ranges that carry an IPv4 address: a connection there reaches (or
// is translated to) that IPv4 address, so it is judged by it.
var (
	v4Compatible = netip.MustParsePrefix("::/96")        // ::a.b.c.d, deprecated
	nat64        = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052
	sixToFour    = netip.MustParsePrefix("2002::/16")    // 2002:aabb:ccdd::, RFC 3056
)

// embedded returns the IPv4 address a carries: a itself when it is IPv4,
// the IPv4 address of an IPv4-mapped, IPv4-compatible, NAT64 or 6to4
// address; otherwise a, unchanged, and false.
func embedded(a netip.Addr) (netip.Addr, bool) {
	a = a.WithZone("")
	switch {
	case a.Is4():
		return a, true
	case a.Is4In6():
		return a.Unmap(), true
	}
	b := a.As16()
	switch {
	case a == netip.IPv6Unspecified() || a == netip.IPv6Loopback():
		return a, false // inside ::/96, but IPv6's own
	case v4Compatible.Contains(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return a, false
}

// Classify returns the rule that forbids a, or "" for an address Limbo
// may reach by default.
func Classify(a netip.Addr) Rule {
	if !a.IsValid() {
		return RuleUnspecified
	}
	judged, _ := embedded(a)
	for _, f := range forbidden {
		if f.prefix.Contains(judged) {
			return f.rule
		}
	}
	return ""
}

// Refusal is a request refused by policy before any connection was made.
type Refusal struct {
	// Host is the host as the URL named it: a name or an address.
	Host string
	// Addr is the refused address; the zero Addr for a refusal of the URL
	// itself (RuleUserInfo).
	Addr netip.Addr
	Rule Rule
}

// Error names the rule. The address is named only when the URL itself
// gave it: the addresses a name resolves to stay out of messages, or a
// refusal would tell whoever set the URL what the internal DNS answers.
func (r *Refusal) Error() string {
	switch {
	case !r.Addr.IsValid():
		return string(r.Rule)
	case r.named():
		if r.Rule == RuleNotListed {
			return fmt.Sprintf("%s resolves to an address not in the allow-list", r.Host)
		}
		article := "a"
		if r.Rule == RuleUnspecified {
			article = "an"
		}
		return fmt.Sprintf("%s resolves to %s %s address", r.Host, article, r.Rule)
	}
	s := fmt.Sprintf("%s is %s", r.Addr, r.Rule)
	if v4, ok := embedded(r.Addr); ok && v4 != r.Addr.WithZone("") {
		s += fmt.Sprintf(" (it embeds %s)", v4)
	}
	return s
}

// named reports whether Host is a name rather than the address itself.
func (r *Refusal) named() bool {
	_, err := netip.ParseAddr(strings.Trim(r.Host, "[]"))
	return r.Host != "" && err != nil
}

// Policy is what the operator opted into: the internal prefixes and host
// names a destination's probes (or the webhooks) may reach. The zero
// Policy allows nothing internal.
type Policy struct {
	Prefixes []netip.Prefix
	// Hosts are lower-case names without a trailing dot. A listed name is
	// trusted wherever it resolves; list prefixes to pin the addresses.
	Hosts []string
}

// AllowsHost reports whether host (a name) is listed.
func (p Policy) AllowsHost(host string) bool {
	name := normalName(host)
	for _, h := range p.Hosts {
		if h == name {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether a listed prefix holds a, as given or as the
// IPv4 address it embeds (listing 127.0.0.1 also admits ::ffff:127.0.0.1).
func (p Policy) AllowsAddr(a netip.Addr) bool {
	a = a.WithZone("")
	v4, _ := embedded(a)
	for _, pr := range p.Prefixes {
		if pr.Contains(a) || pr.Contains(v4) {
			return true
		}
	}
	return false
}

// Empty reports whether p allows nothing internal.
func (p Policy) Empty() bool { return len(p.Prefixes) == 0 && len(p.Hosts) == 0 }

// Key identifies p's allowances, so that clients can be shared between
// equal policies and never between different ones.
func (p Policy) Key() string {
	var b strings.Builder
	for _, pr := range p.Prefixes {
		b.WriteString(pr.String() + ",")
	}
	b.WriteString("|")
	for _, h := range p.Hosts {
		b.WriteString(h + ",")
	}
	return b.String()
}

func normalName(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// Resolver looks a name up; network is "ip", "ip4" or "ip6".
type Resolver func(ctx context.Context, network, host string) ([]netip.Addr, error)

// DialFunc connects to address (an IP and a port).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Guard dials for an http.Transport under a Policy.
type Guard struct {
	Policy Policy
	// ListedOnly refuses every address the policy does not list, public
	// ones too: plain-http webhooks may reach only targets the operator
	// named.
	ListedOnly bool
	// Resolve looks names up; nil means net.DefaultResolver.LookupNetIP.
	Resolve Resolver
	// Dial connects to a checked address; nil means a net.Dialer with
	// Timeout whose Control hook checks the connected socket address once
	// more. A test injects a recorder to see that nothing was dialled.
	Dial DialFunc
	// Timeout bounds one connection attempt (default 5 s).
	Timeout time.Duration
}

// DialContext resolves address's host, checks every address it resolves
// to, and dials the checked addresses in turn until one connects.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, listed, err := g.check(ctx, network, host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, a := range addrs {
		c, err := g.dial(ctx, network, net.JoinHostPort(a.String(), port), listed)
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// Check resolves host (a name or an address literal) as DialContext
// would and reports the refusal, if any, without dialling. A lookup that
// fails is a *net.DNSError.
func (g *Guard) Check(ctx context.Context, host string) error {
	_, _, err := g.check(ctx, "tcp", host)
	return err
}

// check returns the addresses to dial for host and whether host is a
// listed name (then its addresses are trusted as they come).
func (g *Guard) check(ctx context.Context, network, host string) ([]netip.Addr, bool, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, false, g.checkAddr(host, a)
	}
	listed := g.Policy.AllowsHost(host)
	resolve := g.Resolve
	if resolve == nil {
		resolve = net.DefaultResolver.LookupNetIP
	}
	ipNet := "ip"
	switch network {
	case "tcp4", "udp4":
		ipNet = "ip4"
	case "tcp6", "udp6":
		ipNet = "ip6"
	}
	addrs, err := resolve(ctx, ipNet, host)
	if err != nil {
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) {
			err = &net.DNSError{Err: err.Error(), Name: host}
		}
		return nil, false, err
	}
	if len(addrs) == 0 {
		return nil, false, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	if !listed {
		// Every address, not only the first: a name that resolves to one
		// public and one internal address would otherwise reach the
		// internal one whenever the public one does not answer.
		for _, a := range addrs {
			if err := g.checkAddr(host, a); err != nil {
				return nil, false, err
			}
		}
	}
	return addrs, listed, nil
}

// checkAddr refuses a unless the policy lists it or it is public (and
// public addresses are enough).
func (g *Guard) checkAddr(host string, a netip.Addr) error {
	if g.Policy.AllowsAddr(a) {
		return nil
	}
	rule := Classify(a)
	if rule == "" && g.ListedOnly {
		rule = RuleNotListed
	}
	if rule == "" {
		return nil
	}
	return &Refusal{Host: host, Addr: a, Rule: rule}
}

func (g *Guard) dial(ctx context.Context, network, address string, listed bool) (net.Conn, error) {
	if g.Dial != nil {
		return g.Dial(ctx, network, address)
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	d := &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		// The second line: the socket address actually being connected,
		// whatever path led here.
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("netguard: unexpected socket address %q", address)
		}
		if listed {
			return nil
		}
		return g.checkAddr(ap.Addr().String(), ap.Addr())
	}}
	return d.DialContext(ctx, network, address)
}

// Transport returns an http.Transport that connects only through g. It
// never uses a proxy: one from the environment would be dialled instead
// of the target, and the guard would check the proxy's address, not the
// target's.
func Transport(g *Guard) *http.Transport {
	return &http.Transport{DialContext: g.DialContext, Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second}
}

// NoRedirects is the CheckRedirect of every outbound client: a redirect is
// an answer, never followed, so an allowed target cannot send the request
// on to another.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
