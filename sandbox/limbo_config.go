package sandbox

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// DestinationName is the name Limbo knows the sandbox destination by.
const DestinationName = "sandbox"

// LimboOptions is what the sandbox guarantees, as Limbo is told it.
type LimboOptions struct {
	// Base is the sandbox's address, http://IP:port.
	Base        string
	HonoursKeys bool
	// SearchLag is the lag Limbo is told, which a lying destination
	// exceeds; ConfirmWindow zero is the default (10 × SearchLag).
	SearchLag, ConfirmWindow time.Duration
	Lease                    time.Duration
	// WebhookSecret signs the sandbox's job webhooks; "" for none.
	WebhookSecret string
	RetryRatio    float64
	// Concurrency is the destination's concurrency limit (0: none).
	Concurrency int
}

// LimboConfig is Limbo's configuration of the "sandbox" destination at
// o.Base: what it guarantees (keys, 409 for a key in progress, search
// lag), its probes, and the secret of its webhooks, passed through the
// parser's own checks as a configuration file would be.
//
// The sandbox runs on loopback, which netguard refuses to every outbound
// request by default: its probes may reach it only because allow_internal
// names its address, and only that address.
func LimboConfig(o LimboOptions) (*review.Config, error) {
	cfg, err := o.draft()
	if err != nil {
		return nil, err
	}
	return review.ParseConfig(ConfigYAML(cfg))
}

// draft is LimboConfig before the parser.
func (o LimboOptions) draft() (*review.Config, error) {
	base := o.Base
	probe := func(path, candidates string) *review.Probe {
		return &review.Probe{URL: base + path, Timeout: 5 * time.Second, Candidates: candidates}
	}
	paged := func(p *review.Probe) *review.Probe {
		p.Next, p.CursorParam = "$.next", "cursor"
		return p
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("sandbox address %q: %w", base, err)
	}
	own, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("sandbox address %q: not an IP address", base)
	}
	var secrets []string
	if o.WebhookSecret != "" {
		secrets = []string{o.WebhookSecret}
	}
	cfg := &review.Config{
		Destinations: map[string]review.Destination{DestinationName: {
			HonoursKeys:             o.HonoursKeys,
			ConflictMeansInProgress: true,
			SearchLag:               o.SearchLag,
			ConfirmWindow:           o.ConfirmWindow,
			Lease:                   o.Lease,
			ProbeConcurrency:        8,
			Concurrency:             o.Concurrency,
			Probes: review.Probes{
				Status: probe("/resources/{{if .ResourceRef}}{{.ResourceRef}}{{else}}{{.JobRef}}{{end}}", ""),
				// Two hits a page: duplicates (no key support) are found
				// only by reading every page, as a real search's would be.
				Search: paged(probe("/search?operation_id={{.ID}}&limit=2", "items")),
				Job:    probe("/jobs/{{.JobRef}}", ""),
				// A file found at a later version: did this operation's
				// version exist? (a lost answer before another upload)
				History: probe("/resources/{{.ResourceRef}}/history", "versions"),
			},
			// DELETE /resources/{ref} undoes a resource, so Limbo runs the
			// compensations reviewers decide itself.
			Undo:           &review.Undo{Method: "DELETE", URL: base + "/resources/{{.Ref}}", Timeout: 5 * time.Second},
			WebhookSecrets: secrets,
			AllowInternal:  review.AllowList{Prefixes: []netip.Prefix{netip.PrefixFrom(own, own.BitLen())}},
		}},
		RetryBudget: review.RetryBudget{Ratio: o.RetryRatio},
	}
	return cfg, nil
}

// ConfigYAML renders cfg as the YAML a --config file would hold: how
// the fault run hands its configuration to a Limbo server it runs as a
// child process, and how LimboConfig passes through the parser.
func ConfigYAML(cfg *review.Config) []byte {
	var b []byte
	add := func(format string, args ...any) { b = fmt.Appendf(b, format, args...) }
	add("retry_budget:\n  ratio: %s\n", strconv.FormatFloat(cfg.RetryBudget.Ratio, 'f', -1, 64))
	add("destinations:\n")
	for name, d := range cfg.Destinations {
		add("  %s:\n", name)
		add("    honours_keys: %t\n    conflict_means_in_progress: %t\n", d.HonoursKeys, d.ConflictMeansInProgress)
		add("    search_lag: %s\n    lease: %s\n    probe_concurrency: %d\n", d.SearchLag, d.Lease, d.ProbeConcurrency)
		if d.Concurrency > 0 {
			add("    concurrency: %d\n", d.Concurrency)
		}
		if d.ConfirmWindow > 0 {
			add("    confirm_window: %s\n", d.ConfirmWindow)
		}
		add("    probes:\n")
		for _, p := range []struct {
			name string
			p    *review.Probe
		}{{"status", d.Probes.Status}, {"search", d.Probes.Search}, {"job", d.Probes.Job}, {"history", d.Probes.History}} {
			if p.p == nil {
				continue
			}
			add("      %s:\n        url: %q\n        timeout: %s\n", p.name, p.p.URL, p.p.Timeout)
			if p.p.Candidates != "" {
				add("        candidates: %q\n", p.p.Candidates)
			}
			if p.p.Next != "" {
				add("        next: %q\n        cursor_param: %q\n", p.p.Next, p.p.CursorParam)
			}
		}
		if u := d.Undo; u != nil {
			add("    undo:\n      method: %s\n      url: %q\n      timeout: %s\n", u.Method, u.URL, u.Timeout)
		}
		if !d.AllowInternal.Empty() {
			add("    allow_internal:\n")
			for _, a := range d.AllowInternal.Strings() {
				add("      - %q\n", a)
			}
		}
		if len(d.WebhookSecrets) > 0 {
			add("    webhook_secrets:\n")
			for _, s := range d.WebhookSecrets {
				add("      - %q\n", s)
			}
		}
	}
	return b
}
