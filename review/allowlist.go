package review

import (
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AllowList is an operator's explicit opt-in to internal targets that
// outbound requests may reach (`allow_internal` in the configuration
// file): CIDR prefixes, single addresses (kept as one-address prefixes)
// and host names. Everything else internal is refused at dial time.
type AllowList struct {
	Prefixes []netip.Prefix
	// Hosts are lower-case names without a trailing dot. A listed name is
	// trusted wherever it resolves.
	Hosts []string
}

// Empty reports whether the list allows nothing.
func (a AllowList) Empty() bool { return len(a.Prefixes) == 0 && len(a.Hosts) == 0 }

// UnmarshalYAML reads a list of CIDRs, addresses and host names, each
// checked here so that a typo fails at startup rather than refusing (or
// admitting) the wrong target later.
func (a *AllowList) UnmarshalYAML(n *yaml.Node) error {
	var items []string
	if err := n.Decode(&items); err != nil {
		return fmt.Errorf("line %d: allow_internal: give a list of CIDRs or host names", n.Line)
	}
	var out AllowList
	for _, it := range items {
		s := strings.TrimSpace(it)
		switch p, err := parseAllowed(s); {
		case err != nil:
			return fmt.Errorf("line %d: allow_internal: %q: %v", n.Line, it, err)
		case p.IsValid():
			out.Prefixes = append(out.Prefixes, p)
		default:
			out.Hosts = append(out.Hosts, strings.TrimSuffix(strings.ToLower(s), "."))
		}
	}
	*a = out
	return nil
}

// MarshalYAML writes the list back as the file would hold it.
func (a AllowList) MarshalYAML() (any, error) { return a.Strings(), nil }

// Strings lists the entries as the file would hold them.
func (a AllowList) Strings() []string {
	out := make([]string, 0, len(a.Prefixes)+len(a.Hosts))
	for _, p := range a.Prefixes {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	return append(out, a.Hosts...)
}

// parseAllowed returns the prefix s names, or the zero prefix when s is a
// valid host name.
func parseAllowed(s string) (netip.Prefix, error) {
	if strings.Contains(s, "://") {
		return netip.Prefix{}, fmt.Errorf("give a plain host name, not a URL")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not a CIDR prefix")
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("host bits set: did you mean %s?", p.Masked())
		}
		return p, nil
	}
	if addr, err := netip.ParseAddr(s); err == nil {
		if addr.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("give the address without a zone")
		}
		return netip.PrefixFrom(addr, addr.BitLen()), nil
	}
	if !validHostName(strings.TrimSuffix(s, ".")) {
		return netip.Prefix{}, fmt.Errorf("neither a CIDR, an address nor a plain host name (no scheme, port, path or wildcard)")
	}
	return netip.Prefix{}, nil
}

// validHostName accepts letters, digits and hyphens in dot-separated
// labels of 1–63 characters, at most 253 in all.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
