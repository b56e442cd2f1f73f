package sandbox

import (
	"net/netip"
	"testing"
	"time"
)

// TestSandboxConfigOptsInItsOwnAddress: the in-process sandbox (demo,
// chaos, bench) is on loopback, refused by default: its configuration
// opts in exactly its own address, for its own probes, through the parser.
func TestSandboxConfigOptsInItsOwnAddress(t *testing.T) {
	t.Parallel()
	cfg, err := LimboConfig(LimboOptions{Base: "http://127.0.0.1:8090", HonoursKeys: true, SearchLag: time.Second, Lease: time.Minute, RetryRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Destination(DestinationName).AllowInternal
	if len(got.Hosts) != 0 || len(got.Prefixes) != 1 || got.Prefixes[0] != netip.MustParsePrefix("127.0.0.1/32") {
		t.Errorf("sandbox allow_internal = %+v, want exactly 127.0.0.1", got)
	}
	if !cfg.Webhooks.AllowInternal.Empty() {
		t.Errorf("webhooks allow_internal = %+v, want nothing", cfg.Webhooks.AllowInternal)
	}
	// The sandbox's search pages; its probe reads every page.
	if s := cfg.Destination(DestinationName).Probes.Search; s == nil || s.Next != "$.next" || s.CursorParam != "cursor" {
		t.Errorf("sandbox search probe = %+v, want it paged through next and cursor", s)
	}
	if _, err := LimboConfig(LimboOptions{Base: "http://localhost:8090", HonoursKeys: true, SearchLag: time.Second, Lease: time.Minute, RetryRatio: 0.1}); err == nil {
		t.Error("a sandbox named by a host name was accepted; only its own address may be opted in")
	}
}
