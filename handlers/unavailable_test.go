package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// tcpProxy forwards connections on 127.0.0.1 to a target; closing it
// refuses new connections and cuts the ones it carries, as a database
// that goes away does.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target, addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	p.open()
	t.Cleanup(p.close)
	return p
}

// open listens (again, on the same address after a close).
func (p *tcpProxy) open() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// track remembers a pair of connections, unless the proxy closed meanwhile.
func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

// close stops listening — new connections are refused — and cuts every
// connection in flight.
func (p *tcpProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// TestDatabaseDown runs the API on PostgreSQL through a proxy, then closes
// the proxy: PostgreSQL refuses connections and the ones in the pool are
// cut. Every API call then answers 503 unavailable with Retry-After (never
// 500), the console a readable 503 page; once the proxy is back the same
// calls succeed again without a restart.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	if !slices.Contains(storetest.Engines(t), store.Postgres) {
		t.Skip("PostgreSQL unavailable")
	}
	ctx := context.Background()
	direct, err := url.Parse(storetest.URL(t, store.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, direct.Host)
	via := *direct
	via.Host = proxy.addr
	clk := storetest.NewClock(t0)
	st, err := store.Open(ctx, via.String(), store.Options{Clock: clk.Now, MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h := handlers.New(st, nil)
	h.Console = handlers.NewConsole(make([]byte, 64), make([]byte, 32), false, store.SessionPolicy{})
	srv := httptest.NewServer(handlers.NewServer(h))
	t.Cleanup(srv.Close)
	b := &testBundle{t: t, engine: store.Postgres, store: st, clock: clk, srv: srv}
	b.token = b.newToken("acme")
	if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "reviewer@example.com", Password: "correct horse battery",
		Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
		t.Fatal(err)
	}
	reviewer := newBrowser(t, srv.URL)
	reviewer.login("reviewer@example.com")
	op := b.register(t, "down-1", review.RiskCompensableWrite)

	calls := []request{
		{method: http.MethodGet, path: "/api/v1/operations/" + op.ID},
		{method: http.MethodGet, path: "/api/v1/operations"},
		{method: http.MethodPost, path: "/api/v1/operations", body: registration("down-2", "drive", review.RiskRead)},
		{method: http.MethodPost, path: "/api/v1/operations/batch", body: `{"operations":[` + registration("down-3", "drive", review.RiskRead) + `]}`},
		{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts"},
		{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/evidence", body: `{"source":"response"}`},
		{method: http.MethodGet, path: "/api/v1/decisions"},
	}

	proxy.close()
	for _, r := range calls {
		res := b.send(r)
		if res.Status != http.StatusServiceUnavailable {
			t.Errorf("%s with the database down: %d, want 503: %s", res.what, res.Status, res.Body)
			continue
		}
		var p handlers.Problem
		if err := json.Unmarshal(res.Body, &p); err != nil || p.Type != "unavailable" || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %s %q, want an unavailable problem", res.what, res.Header.Get("Content-Type"), res.Body)
		}
		if n, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || n < 1 || p.RetryAfter != n {
			t.Errorf("%s: Retry-After %q (problem retry_after %d), want whole seconds ≥ 1 in both", res.what, res.Header.Get("Retry-After"), p.RetryAfter)
		}
		for _, e := range checkAgainstDoc(r.method, r.path, r.body, res) {
			t.Errorf("%s: 503 does not match openapi.json: %s", res.what, e)
		}
	}
	code, body := reviewer.get("/")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "database cannot be reached") || !strings.Contains(body, "<html") {
		t.Errorf("console queue with the database down: %d, want a readable 503 page: %.300s", code, body)
	}
	if res := b.send(request{path: "/readyz", token: strp("")}); res.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the database down: %d, want 503", res.Status)
	}

	proxy.open()
	for _, r := range calls {
		if res := b.send(r); res.Status >= 500 {
			t.Errorf("%s after the database came back: %d: %s", res.what, res.Status, res.Body)
		}
	}
	if code, _ := reviewer.get("/"); code != http.StatusOK {
		t.Errorf("console queue after the database came back: %d", code)
	}
}

// send is do without do's "never a 5xx" check, for the tests where a 503
// is the right answer.
func (b *testBundle) send(r request) *response {
	b.t.Helper()
	return b.sendWithin(0, r)
}

// sendWithin is send failing the test when the answer takes longer than
// d (0: no limit).
func (b *testBundle) sendWithin(d time.Duration, r request) *response {
	b.t.Helper()
	ctx := context.Background()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, cmpOr(r.method, http.MethodGet), b.srv.URL+r.path, strings.NewReader(r.body))
	if err != nil {
		b.t.Fatal(err)
	}
	if r.token == nil {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, r.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		b.t.Fatal(err)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: data, what: req.Method + " " + r.path}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
