package reconcile_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// listener is an HTTP server on a loopback address that counts the
// connections it accepts (not requests): 0 proves nothing reached it.
type listener struct {
	port     string
	conns    atomic.Int32
	redirect atomic.Int32 // requests to /elsewhere: a followed redirect
}

// loopbackListener listens on addr ("127.0.0.1:0", "[::1]:0"); nil when
// the address family is not available here.
func loopbackListener(t *testing.T, addr string) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Logf("no listener on %s: %v", addr, err)
		return nil
	}
	l := &listener{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/elsewhere":
			l.redirect.Add(1)
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"items":[]}`))
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			l.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	_, l.port, _ = net.SplitHostPort(ln.Addr().String())
	return l
}

// forbiddenForms are the ways to name the loopback listeners that
// netguard must refuse: the IPv4 literal, a name resolving to it (the
// hosts file's localhost), its IPv4-mapped IPv6 forms, and ::1. Only
// loopback: were the guard broken, a test naming a private or link-local
// address would send packets there (netguard's own tests cover those
// with a recording dialer).
func forbiddenForms(v4, v6 *listener) map[string]string {
	forms := map[string]string{
		"v4":          "http://127.0.0.1:" + v4.port,
		"localhost":   "http://localhost:" + v4.port,
		"mapped":      "http://[::ffff:127.0.0.1]:" + v4.port,
		"mapped-hex":  "http://[::ffff:7f00:1]:" + v4.port,
		"v4-loopback": "http://127.1.2.3:" + v4.port,
	}
	if v6 != nil {
		forms["v6"] = "http://[::1]:" + v6.port
	}
	return forms
}

func searchAt(u string, allow review.AllowList) review.Destination {
	return review.Destination{Lease: time.Minute, AllowInternal: allow, Probes: review.Probes{
		Search: &review.Probe{URL: u + "/search?operation_id={{.ID}}", Candidates: "items", Timeout: 2 * time.Second}}}
}

func noConnections(t *testing.T, ls ...*listener) {
	t.Helper()
	for _, l := range ls {
		if l != nil && l.conns.Load() != 0 {
			t.Errorf("listener on port %s accepted %d connections, want 0", l.port, l.conns.Load())
		}
	}
}

// TestProbeSSRFRefused: every forbidden form of a loopback listener, as a
// probe URL, is refused at dial time with the rule, recorded as class
// policy, and no connection arrives.
func TestProbeSSRFRefused(t *testing.T) {
	t.Parallel()
	v4, v6 := loopbackListener(t, "127.0.0.1:0"), loopbackListener(t, "[::1]:0")
	p := reconcile.NewProber(&review.Config{})
	for name, u := range forbiddenForms(v4, v6) {
		d := searchAt(u, review.AllowList{})
		res := p.Probe(context.Background(), &review.Operation{ID: "op-1", Destination: "d"}, d)
		if len(res) != 1 || res[0].Class != string(netguard.FailPolicy) || !strings.Contains(res[0].Err, "loopback") {
			t.Errorf("%s (%s): %+v, want one result of class policy naming loopback", name, u, res)
		}
	}
	noConnections(t, v4, v6)
}

// TestReconcilerSSRFRefused: the same through the reconciler and the
// store: the operation stays ambiguous, the refusal is inconclusive
// evidence naming its class and rule, no connection arrives.
func TestReconcilerSSRFRefused(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v4, v6 := loopbackListener(t, "127.0.0.1:0"), loopbackListener(t, "[::1]:0")
		forms := forbiddenForms(v4, v6)
		extra := map[string]review.Destination{}
		for name, u := range forms {
			extra["ssrf-"+name] = searchAt(u, review.AllowList{})
		}
		b := setup(t, e, sandbox.Options{}, extra)
		ops := map[string]*review.Operation{}
		for name := range forms {
			ops[name] = b.ambiguous(t, "folder-"+name, "ssrf-"+name, nil)
		}
		b.clk.Advance(time.Minute)
		b.runOnce(t, len(forms))
		for name, op := range ops {
			got := b.get(t, op)
			wantState(t, got, review.Ambiguous)
			if len(got.Evidence) != 1 || got.Evidence[0].Authoritative || got.Evidence[0].Verdict != review.VerdictInconclusive ||
				!strings.Contains(got.Evidence[0].Note, "(policy): refused by policy") || !strings.Contains(got.Evidence[0].Note, "loopback") {
				t.Errorf("%s: evidence %+v, want one inconclusive row refused by policy as loopback", name, got.Evidence)
			}
		}
		noConnections(t, v4, v6)
	})
}

// TestProbeAllowList: allow_internal opts exactly its targets in. Listing
// localhost reaches the listener by that name while its literal address
// and ::1 stay refused; listing 127.0.0.1 reaches it by address (and by
// names resolving only there) but not ::1. A redirect from an allowed
// target is an answer, not followed.
func TestProbeAllowList(t *testing.T) {
	t.Parallel()
	v4, v6 := loopbackListener(t, "127.0.0.1:0"), loopbackListener(t, "[::1]:0")
	byName := review.AllowList{Hosts: []string{"localhost"}}
	byAddr := review.AllowList{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	type allowCase struct {
		name    string
		allow   review.AllowList
		url     string
		reached bool
	}
	tests := []allowCase{
		{"name listed", byName, "http://localhost:" + v4.port, true},
		{"name listed, literal not", byName, "http://127.0.0.1:" + v4.port, false},
		{"name listed, mapped not", byName, "http://[::ffff:127.0.0.1]:" + v4.port, false},
		{"address listed", byAddr, "http://127.0.0.1:" + v4.port, true},
		{"address listed, mapped form", byAddr, "http://[::ffff:127.0.0.1]:" + v4.port, true},
		{"address listed, name resolving there", byAddr, "http://localhost:" + v4.port, true},
		{"address listed, another loopback not", byAddr, "http://127.0.0.2:" + v4.port, false},
	}
	if v6 != nil {
		tests = append(tests, allowCase{"name listed, ::1 not", byName, "http://[::1]:" + v6.port, false},
			allowCase{"address listed, ::1 not", byAddr, "http://[::1]:" + v6.port, false})
	}
	for _, tt := range tests {
		before := v4.conns.Load()
		// A prober per case: no connection carried over from the last.
		res := reconcile.NewProber(&review.Config{}).Probe(context.Background(), &review.Operation{ID: "op-1"}, searchAt(tt.url, tt.allow))
		arrived := v4.conns.Load() - before
		switch {
		case len(res) != 1:
			t.Errorf("%s: %d results", tt.name, len(res))
		case tt.reached && (res[0].Err != "" || arrived != 1):
			t.Errorf("%s: %+v, %d connections; want the listener's answer over one connection", tt.name, res[0], arrived)
		case !tt.reached && (res[0].Class != string(netguard.FailPolicy) || arrived != 0):
			t.Errorf("%s: %+v, %d connections; want refused by policy, none", tt.name, res[0], arrived)
		}
	}
	if v6 != nil {
		noConnections(t, v6)
	}

	d := review.Destination{AllowInternal: byName, Probes: review.Probes{
		Search: &review.Probe{URL: "http://localhost:" + v4.port + "/redirect", Candidates: "items", Timeout: 2 * time.Second}}}
	res := reconcile.NewProber(&review.Config{}).Probe(context.Background(), &review.Operation{ID: "op-1"}, d)
	if len(res) != 1 || res[0].Class != string(netguard.FailHTTPStatus) || res[0].Err != "HTTP 302" || v4.redirect.Load() != 0 {
		t.Errorf("redirect: %+v, %d followed; want HTTP 302 recorded, not followed", res, v4.redirect.Load())
	}
}
