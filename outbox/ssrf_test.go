package outbox_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/outbox"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// counter is a receiver on a loopback address that counts the
// connections it accepts: 0 proves no delivery reached it.
type counter struct {
	port  string
	conns atomic.Int32
}

// countingReceiver listens on addr ("127.0.0.1:0", "[::1]:0"); nil when
// that address family is not available here.
func countingReceiver(t *testing.T, addr string) *counter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Logf("no listener on %s: %v", addr, err)
		return nil
	}
	c := &counter{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	_, c.port, _ = net.SplitHostPort(ln.Addr().String())
	return c
}

// TestWebhookSSRFRefusedAtDelivery: endpoints aimed at a loopback receiver
// in every form — the address, a name resolving to it, its IPv4-mapped
// forms, ::1 — stored while the configuration allowed them, are refused at
// dial time once it no longer does: no connection arrives, and each try
// is in the history as class policy naming the rule.
func TestWebhookSSRFRefusedAtDelivery(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		v4, v6 := countingReceiver(t, "127.0.0.1:0"), countingReceiver(t, "[::1]:0")
		urls := []string{
			"http://127.0.0.1:" + v4.port + "/h",
			"https://127.0.0.1:" + v4.port + "/h",
			"https://localhost:" + v4.port + "/h",
			"https://[::ffff:127.0.0.1]:" + v4.port + "/h",
			"https://[::ffff:7f00:1]:" + v4.port + "/h",
		}
		if v6 != nil {
			urls = append(urls, "https://[::1]:"+v6.port+"/h")
		}
		// Added when the configuration opted them in (or before the guard).
		then := openAllowing(t, v.url, v.clk, "[127.0.0.1, \"::1\", localhost]")
		var eps []*store.WebhookEndpoint
		for _, u := range urls {
			ep, err := then.AddWebhookEndpoint(v.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenant, URL: u})
			if err != nil {
				t.Fatalf("add %s: %v", u, err)
			}
			eps = append(eps, ep)
		}
		v.decide(t)
		// Now: nothing internal allowed.
		now := openAllowing(t, v.url, v.clk, "[]")
		runOnce(t, outbox.New(now, "w1", quiet, nil), len(urls))
		for _, ep := range eps {
			h := v.history(t, ep)
			if len(h) != 1 || h[0].ErrorClass != string(netguard.FailPolicy) || !strings.Contains(h[0].Error, "refused by policy") ||
				!strings.Contains(h[0].Error, "loopback") || h[0].StatusCode != 0 {
				t.Errorf("%s: history %+v, want one try of class policy naming loopback", ep.URL, h)
			}
			if m := v.messages(t, ep)[0]; m.Status != store.OutboxPending || m.Attempts != 1 {
				t.Errorf("%s: message %+v, want pending after one try", ep.URL, m)
			}
		}
		if n := v4.conns.Load(); n != 0 {
			t.Errorf("the 127.0.0.1 receiver accepted %d connections, want 0", n)
		}
		if v6 != nil && v6.conns.Load() != 0 {
			t.Errorf("the ::1 receiver accepted %d connections, want 0", v6.conns.Load())
		}
	})
}

// TestWebhookAllowListAtDelivery: with webhooks.allow_internal [localhost]
// exactly that target is reached — by name, over plain http — while the
// same receiver by address, stored earlier, is still refused.
func TestWebhookAllowListAtDelivery(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		named, literal := countingReceiver(t, "127.0.0.1:0"), countingReceiver(t, "127.0.0.1:0")
		st := openAllowing(t, v.url, v.clk, "[localhost]")
		byName, err := st.AddWebhookEndpoint(v.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenant, URL: "http://localhost:" + named.port + "/h"})
		if err != nil {
			t.Fatal(err)
		}
		lit := "http://127.0.0.1:" + literal.port + "/h"
		if _, err := st.AddWebhookEndpoint(v.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenant, URL: lit}); err == nil ||
			!strings.Contains(err.Error(), "127.0.0.1 is loopback") {
			t.Fatalf("add %s under [localhost] = %v, want refused as loopback", lit, err)
		}
		byAddr := v.endpoint(t, lit, "") // through the test's own store, which lists 127.0.0.1
		v.decide(t)
		runOnce(t, outbox.New(st, "w1", quiet, nil), 2)
		if m := v.messages(t, byName)[0]; m.Status != store.OutboxDelivered || named.conns.Load() != 1 {
			t.Errorf("by name: %+v, %d connections; want delivered over one", m, named.conns.Load())
		}
		if h := v.history(t, byAddr); len(h) != 1 || h[0].ErrorClass != string(netguard.FailPolicy) || literal.conns.Load() != 0 {
			t.Errorf("by address: %+v, %d connections; want refused by policy, none", h, literal.conns.Load())
		}
	})
}

// TestWebhookCredentialsRefusedAtDelivery: an endpoint stored with user
// info is refused before any connection, although its target is allowed,
// and its listing hides the password.
func TestWebhookCredentialsRefusedAtDelivery(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := countingReceiver(t, "127.0.0.1:0")
		ep := v.endpoint(t, "http://127.0.0.1:"+rcv.port+"/h", "")
		if _, err := v.s.DB().Exec(v.s.DB().Rebind(`UPDATE webhook_endpoints SET url = ? WHERE id = ?`),
			"http://limbo:hunter2@127.0.0.1:"+rcv.port+"/h", ep.ID); err != nil {
			t.Fatal(err)
		}
		v.decide(t)
		runOnce(t, outbox.New(v.s, "w1", quiet, nil), 1)
		h := v.history(t, ep)
		if len(h) != 1 || h[0].ErrorClass != string(netguard.FailPolicy) || h[0].Error != "refused by policy: credentials in the URL" {
			t.Errorf("history = %+v, want refused by policy for its credentials", h)
		}
		if n := rcv.conns.Load(); n != 0 {
			t.Errorf("the receiver accepted %d connections, want 0", n)
		}
		if got, err := v.s.GetWebhookEndpoint(v.ctx, ep.ID, nil); err != nil || strings.Contains(got.URL, "hunter2") {
			t.Errorf("endpoint = %+v, %v; want the password hidden", got, err)
		}
	})
}
