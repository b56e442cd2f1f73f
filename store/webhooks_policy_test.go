package store_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// policyNames is the tests' DNS for the endpoint checks.
var policyNames = map[string][]string{
	"db.internal":     {"10.9.8.7"},
	"cgnat.internal":  {"100.64.1.1"},
	"mapped.internal": {"::ffff:127.0.0.1"},
	"mixed.example":   {"192.0.2.10", "10.0.0.7"},
	"public.example":  {"192.0.2.10"},
	"inside.internal": {"10.0.0.7", "10.0.0.8"},
}

func policyStore(t *testing.T, e store.Engine, allow string) *bundle {
	t.Helper()
	cfg, err := review.ParseConfig([]byte("webhooks:\n  allow_internal: " + allow + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := storetest.NewClock(t0)
	s := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now, Resolve: storetest.Resolver(policyNames)})
	return &bundle{ctx: context.Background(), s: s, clk: clk}
}

// TestWebhookEndpointRefusedByPolicy: an endpoint aimed inside the network
// is refused when it is added, with the rule and how to opt in; so are
// credentials in the URL and plain http to anything not listed. Nothing
// refused is stored or audited.
func TestWebhookEndpointRefusedByPolicy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := policyStore(t, e, "[]")
		const optIn = "; to allow it, add it to webhooks.allow_internal in the configuration file"
		for _, tt := range []struct{ url, want string }{
			{"https://10.0.0.5/h", `field "url": 10.0.0.5 is private (RFC 1918)` + optIn},
			{"https://127.0.0.1:8443/h", "127.0.0.1 is loopback" + optIn},
			{"https://127.1.2.3/h", "127.1.2.3 is loopback"},
			{"https://localhost:8443/h", "localhost resolves to a loopback address" + optIn},
			{"https://[::1]/h", "::1 is loopback"},
			{"https://[::ffff:127.0.0.1]/h", "::ffff:127.0.0.1 is loopback (it embeds 127.0.0.1)"},
			{"https://[::ffff:7f00:1]/h", "is loopback"},
			{"https://[64:ff9b::a00:5]/h", "is private (RFC 1918) (it embeds 10.0.0.5)"},
			{"https://172.16.0.1/h", "private (RFC 1918)"},
			{"https://192.168.1.1/h", "private (RFC 1918)"},
			{"https://100.64.0.1/h", "100.64.0.1 is CGNAT"},
			{"https://169.254.169.254/latest", "169.254.169.254 is link-local"},
			{"https://[fe80::1]/h", "link-local"},
			{"https://[fc00::1]/h", "unique-local"},
			{"https://[fd12::1]/h", "unique-local"},
			{"https://224.0.0.1/h", "multicast"},
			{"https://[ff02::1]/h", "multicast"},
			{"https://0.0.0.0/h", "unspecified"},
			{"https://[::]/h", "unspecified"},
			{"https://db.internal/h", "db.internal resolves to a private (RFC 1918) address" + optIn},
			{"https://cgnat.internal/h", "cgnat.internal resolves to a CGNAT address"},
			{"https://mapped.internal/h", "mapped.internal resolves to a loopback address"},
			{"https://mixed.example/h", "mixed.example resolves to a private (RFC 1918) address"},
			{"http://public.example/h", "use https: plain http is accepted only for targets listed in webhooks.allow_internal"},
			{"http://192.0.2.10/h", "use https"},
			{"http://unresolved.example/h", "use https"},
			{"https://user:hunter2@public.example/h", "must not carry credentials"},
			{"https://user@public.example/h", "must not carry credentials"},
		} {
			_, err := b.s.AddWebhookEndpoint(b.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenantA, URL: tt.url})
			if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("add %s = %v, want ErrInvalid saying %q", tt.url, err, tt.want)
			}
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM webhook_endpoints`); n != 0 {
			t.Errorf("%d refused endpoints stored", n)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events WHERE action = 'webhook.endpoint_added'`); n != 0 {
			t.Errorf("%d refused endpoints audited as added", n)
		}
		// Public targets over https pass, and so does a name that does not
		// resolve now: the dial-time guard decides at each delivery.
		for _, u := range []string{"https://public.example/h", "https://192.0.2.10/h", "https://unresolved.example/h"} {
			b.addEndpoint(t, tenantA, u)
		}
	})
}

// TestWebhookEndpointAllowList: webhooks.allow_internal opts exactly its
// targets in, and is what lets plain http through.
func TestWebhookEndpointAllowList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := policyStore(t, e, "[localhost, 10.0.0.0/24, hooks.internal]")
		for _, u := range []string{"http://localhost:9000/h", "http://hooks.internal/h", "https://localhost/h", "https://10.0.0.5/h", "http://10.0.0.5/h",
			"http://[::ffff:10.0.0.5]/h", "http://inside.internal/h", "https://inside.internal/h", "https://public.example/h"} {
			b.addEndpoint(t, tenantA, u)
		}
		for _, tt := range []struct{ url, want string }{
			{"https://127.0.0.1/h", "127.0.0.1 is loopback"}, // localhost is listed by name, not its address
			{"https://[::1]/h", "::1 is loopback"},
			{"https://10.0.1.5/h", "10.0.1.5 is private (RFC 1918)"},
			{"https://db.internal/h", "db.internal resolves to a private (RFC 1918) address"},
			{"http://mixed.example/h", "use https"}, // one address listed, one public
			{"http://public.example/h", "use https"},
		} {
			_, err := b.s.AddWebhookEndpoint(b.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenantA, URL: tt.url})
			if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("add %s = %v, want ErrInvalid saying %q", tt.url, err, tt.want)
			}
		}
	})
}

// TestWebhookEndpointStoredWithCredentials: an endpoint stored before
// credentials were refused never shows its password: not in listings, not
// on its page, not in the audit detail of its disabling.
func TestWebhookEndpointStoredWithCredentials(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://hooks.example/h")
		exec(t, b.s, `UPDATE webhook_endpoints SET url = ? WHERE id = ?`, "https://limbo:hunter2@hooks.example/h", ep.ID)
		all, err := b.s.ListWebhookEndpoints(b.ctx, nil)
		if err != nil || len(all) != 1 || strings.Contains(all[0].URL, "hunter2") || all[0].URL != "https://limbo:xxxxx@hooks.example/h" {
			t.Fatalf("listing = %+v, %v; want the password hidden", all, err)
		}
		got, err := b.s.GetWebhookEndpoint(b.ctx, ep.ID, nil)
		if err != nil || strings.Contains(got.URL, "hunter2") {
			t.Fatalf("get = %+v, %v", got, err)
		}
		if err := b.s.DisableWebhookEndpoint(b.ctx, review.Operator("admin"), ep.ID); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events WHERE detail LIKE '%hunter2%'`); n != 0 {
			t.Errorf("%d audit events carry the password", n)
		}
	})
}

// TestDeliveryRecordsAClass: a try's error is recorded as its class and a
// fixed message, never the raw error with its addresses and port states.
func TestDeliveryRecordsAClass(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)
		refusedPort := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 22},
			Err: &net.AddrError{Err: syscall.ECONNREFUSED.Error(), Addr: "10.0.0.5:22"}}
		tries := []struct {
			status int
			err    error
			class  netguard.Failure
			msg    string
		}{
			{0, &netguard.Refusal{Host: "10.0.0.5", Addr: netip.MustParseAddr("10.0.0.5"), Rule: netguard.RulePrivate},
				netguard.FailPolicy, "refused by policy: 10.0.0.5 is private (RFC 1918)"},
			{0, refusedPort, netguard.FailConnect, "no connection, or it closed without an answer"},
			{0, &net.DNSError{Err: "no such host", Name: "a.example", Server: "10.0.0.53:53"}, netguard.FailDNS, "the name did not resolve"},
			{0, context.DeadlineExceeded, netguard.FailTimeout, "no answer in time"},
			{502, nil, netguard.FailHTTPStatus, "HTTP 502"},
		}
		for _, tr := range tries {
			cs := b.claimAll(t, "w1")
			if len(cs) != 1 {
				t.Fatalf("claims = %d", len(cs))
			}
			m, err := b.s.CompleteDelivery(b.ctx, cs[0], tr.status, tr.err, time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if m.LastError != tr.msg {
				t.Errorf("last error = %q, want %q", m.LastError, tr.msg)
			}
			b.clk.Advance(m.NextAttemptAt.Sub(b.clk.Now()))
		}
		p, err := b.s.DeliveryHistory(b.ctx, ep.ID, nil, "", 10)
		if err != nil || len(p.Deliveries) != len(tries) {
			t.Fatalf("history = %+v, %v", p, err)
		}
		for i, d := range p.Deliveries { // newest first
			tr := tries[len(tries)-1-i]
			if d.ErrorClass != string(tr.class) || d.Error != tr.msg || strings.Contains(d.Error, ":22") || strings.Contains(d.Error, "10.0.0.53") {
				t.Errorf("try %d: %s %q, want %s %q", d.N, d.ErrorClass, d.Error, tr.class, tr.msg)
			}
		}
	})
}

// TestMigrationClassifiesOldDeliveries: migration 0017 rewrites the raw
// errors recorded before it into classes and fixed messages.
func TestMigrationClassifiesOldDeliveries(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)
		m := b.messages(t, ep)[0]
		// Back to the schema before 0017, with the rows it left.
		exec(t, b.s, `ALTER TABLE webhook_deliveries DROP COLUMN error_class`)
		exec(t, b.s, `DELETE FROM schema_migrations WHERE version = 17`)
		old := map[string]string{
			`Post "http://10.0.0.5:22/h": dial tcp 10.0.0.5:22: connect: connection refused`:                                        "connect",
			`Post "http://10.0.0.5:23/h": dial tcp 10.0.0.5:23: i/o timeout`:                                                        "timeout",
			`Post "https://x.example/h": dial tcp: lookup x.example on 10.0.0.53:53: no such host`:                                  "dns",
			`Post "https://10.0.0.5/h": tls: failed to verify certificate: x509: certificate signed by unknown authority`:           "tls",
			`Post "http://169.254.169.254/": dial tcp 169.254.169.254:80: address is link-local, unspecified or multicast: refused`: "policy",
			`HTTP 500`: "http_status",
			`Post "http://10.0.0.5:25/h": dial tcp 10.0.0.5:25: connect: connection refused; endpoint disabled`: "connect",
		}
		n := 0
		for raw := range old {
			n++
			exec(t, b.s, `INSERT INTO webhook_deliveries (id, outbox_id, endpoint_id, tenant, n, at, status_code, error, duration_ms)
VALUES (?, ?, ?, ?, ?, ?, 0, ?, 1)`, "dlv_old_"+string(rune('a'+n)), m.ID, ep.ID, tenantA, n, b.clk.Now(), raw)
		}
		exec(t, b.s, `UPDATE outbox SET last_error = ? WHERE id = ?`, `Post "http://10.0.0.5:22/h": dial tcp 10.0.0.5:22: connect: connection refused`, m.ID)
		if err := b.s.Migrate(b.ctx); err != nil {
			t.Fatal(err)
		}
		p, err := b.s.DeliveryHistory(b.ctx, ep.ID, nil, "", 50)
		if err != nil || len(p.Deliveries) != len(old) {
			t.Fatalf("history = %+v, %v", p, err)
		}
		classes := map[string]int{}
		for _, d := range p.Deliveries {
			classes[d.ErrorClass]++
			if strings.Contains(d.Error, "10.0.0.") || strings.Contains(d.Error, "dial") {
				t.Errorf("%s: %q still carries the raw error", d.ErrorClass, d.Error)
			}
		}
		want := map[string]int{"connect": 2, "timeout": 1, "dns": 1, "tls": 1, "policy": 1, "http_status": 1}
		for k, v := range want {
			if classes[k] != v {
				t.Errorf("classes = %v, want %v", classes, want)
				break
			}
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM webhook_deliveries WHERE error = 'no connection, or it closed without an answer; endpoint disabled'`); n != 1 {
			t.Errorf("the endpoint-disabled note was not kept")
		}
		if got := b.messages(t, ep)[0].LastError; got != "no connection, or it closed without an answer" {
			t.Errorf("outbox last error = %q", got)
		}
	})
}
