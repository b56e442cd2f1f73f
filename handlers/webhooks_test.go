package handlers_test

import (
	"context"
	"html"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleWebhookRefusals: the admin page refuses an endpoint aimed
// inside the network, saying which rule refused it and how to opt in;
// nothing is contacted to decide. A delivery refused by policy shows its
// class in the history.
func TestConsoleWebhookRefusals(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var conns atomic.Int32
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				c.Close()
			}
		}()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		const optIn = "; to allow it, add it to webhooks.allow_internal in the configuration file"
		for _, tt := range []struct{ url, want string }{
			{"https://10.0.0.5/h", "10.0.0.5 is private (RFC 1918)" + optIn},
			{"https://127.0.0.1:" + port + "/h", "127.0.0.1 is loopback" + optIn},
			{"http://127.0.0.1:" + port + "/h", "127.0.0.1 is loopback" + optIn},
			{"https://localhost:" + port + "/h", "localhost resolves to a loopback address" + optIn},
			{"https://[::ffff:127.0.0.1]:" + port + "/h", "::ffff:127.0.0.1 is loopback (it embeds 127.0.0.1)" + optIn},
			{"https://[::1]:" + port + "/h", "::1 is loopback" + optIn},
			{"https://169.254.169.254/latest", "169.254.169.254 is link-local" + optIn},
			{"http://hooks.example.com/limbo", "use https: plain http is accepted only for targets listed in webhooks.allow_internal"},
			{"https://limbo:hunter2@hooks.example.com/limbo", "must not carry credentials"},
		} {
			code, body, _ := adm.post("/admin/webhooks", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {tt.url}})
			if code != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(body), tt.want) {
				t.Errorf("add %s: %d, want 422 saying %q", tt.url, code, tt.want)
			}
		}
		if n := conns.Load(); n != 0 {
			t.Errorf("checking the endpoints made %d connections", n)
		}
		if es, _ := st.ListWebhookEndpoints(context.Background(), nil); len(es) != 0 {
			t.Fatalf("refused endpoints stored: %+v", es)
		}

		// A delivery refused by policy, in the history.
		code, _, _ := adm.post("/admin/webhooks", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {"https://hooks.example.com/limbo"}})
		es, _ := st.ListWebhookEndpoints(context.Background(), nil)
		if code != http.StatusOK || len(es) != 1 {
			t.Fatalf("add https://hooks.example.com/limbo: %d, %d endpoints", code, len(es))
		}
		ctx := context.Background()
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: needsReview(t, st, "hook-1"), Action: review.DecideFail,
			Reason: "wrong version rendered", Actor: "admin@example.com"}); err != nil {
			t.Fatal(err)
		}
		cs, err := st.ClaimDeliveries(ctx, "w1", 10, time.Minute)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claims = %d, %v", len(cs), err)
		}
		refused := &netguard.Refusal{Host: "hooks.example.com", Addr: netip.MustParseAddr("10.1.2.3"), Rule: netguard.RulePrivate}
		if _, err := st.CompleteDelivery(ctx, cs[0], 0, refused, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		code, body := adm.get("/admin/webhooks/" + es[0].ID)
		body = html.UnescapeString(body)
		if code != 200 || !strings.Contains(body, `<span title="policy">refused by policy</span>`) ||
			!strings.Contains(body, "refused by policy: hooks.example.com resolves to a private (RFC 1918) address") ||
			strings.Contains(body, "10.1.2.3") {
			t.Errorf("history page: %d, want the class and the rule, not the address", code)
		}
	})
}

// TestConsoleWebhookWayOut: a disabled endpoint and its given-up messages
// have a way out in the console. The endpoint's page counts them and says
// to enable it first; enabling it offers to deliver them again, which
// makes them due at once. A stale form that redelivers to an endpoint
// disabled meanwhile gets a readable refusal.
func TestConsoleWebhookWayOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		if code, _, _ := adm.post("/admin/webhooks", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "url": {"https://hooks.example.com/limbo"}}); code != http.StatusOK {
			t.Fatalf("add: %d", code)
		}
		es, _ := st.ListWebhookEndpoints(ctx, nil)
		ep := es[0]
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: needsReview(t, st, "hook-1"), Action: review.DecideFail,
			Reason: "wrong version rendered", Actor: "admin@example.com"}); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := adm.post("/admin/webhooks/"+ep.ID+"/disable", url.Values{"csrf": {adm.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("disable: %d", code)
		}
		page := "/admin/webhooks/" + ep.ID
		_, body := adm.get(page)
		body = html.UnescapeString(body)
		if !strings.Contains(body, "Messages given up: 1.") || !strings.Contains(body, "Enable the endpoint to deliver them again.") ||
			strings.Contains(body, page+"/redeliver") || !strings.Contains(body, page+"/enable") {
			t.Errorf("disabled endpoint's page: want the count, the enable button and no redeliver button:\n%s", body)
		}
		if _, list := adm.get("/admin/webhooks"); !strings.Contains(list, page+"/enable") {
			t.Errorf("the list offers no way to enable the disabled endpoint")
		}
		// A form from before the endpoint was disabled.
		code, body, _ := adm.post(page+"/redeliver", url.Values{"csrf": {adm.csrf}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "the endpoint is disabled; enable it first") {
			t.Errorf("redeliver to a disabled endpoint: %d, want 422 saying to enable it first", code)
		}

		code, _, hdr := adm.post(page+"/enable", url.Values{"csrf": {adm.csrf}})
		if code != http.StatusSeeOther || hdr.Get("Location") != page {
			t.Fatalf("enable: %d to %q", code, hdr.Get("Location"))
		}
		_, body = adm.get(page)
		if !strings.Contains(body, page+"/redeliver") || strings.Contains(body, page+"/enable") {
			t.Errorf("enabled endpoint's page: want the redeliver button")
		}
		code, _, hdr = adm.post(page+"/redeliver", url.Values{"csrf": {adm.csrf}})
		if code != http.StatusSeeOther || hdr.Get("Location") != page {
			t.Fatalf("redeliver: %d to %q", code, hdr.Get("Location"))
		}
		_, body = adm.get(page)
		if !strings.Contains(body, "Messages being delivered again: 1.") || strings.Contains(body, "Messages given up") {
			t.Errorf("page after redelivering: want the notice and nothing given up")
		}
		if cs, err := st.ClaimDeliveries(ctx, "w1", 10, time.Minute); err != nil || len(cs) != 1 {
			t.Errorf("claims after redelivering = %d, %v; want the message due at once", len(cs), err)
		}
		u, err := st.UserByEmail(ctx, "admin@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetLanguage(ctx, u.Principal(), "it"); err != nil {
			t.Fatal(err)
		}
		if _, body = adm.get(page); !strings.Contains(html.UnescapeString(body), "Messaggi in nuova consegna: 1.") {
			t.Errorf("the notice is not in Italian")
		}
	})
}
