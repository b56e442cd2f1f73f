package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// syncBuffer is a log destination the server's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON log lines written so far, parsed.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestAccessLog: one JSON line per request with method, route (the
// pattern, never the path), status, duration, bytes, request id and the
// tenant; the id is in the X-Request-Id answer header and in the
// problem+json; a client's own X-Request-Id is ignored unless it comes
// through a trusted proxy, and then only when well formed.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		st := storetest.Open(t, e, store.Options{})
		var logs syncBuffer
		h := handlers.New(st, slog.New(slog.NewJSONHandler(&logs, nil)))
		_, loopback, _ := net.ParseCIDR("127.0.0.1/32")
		srv := httptest.NewServer(handlers.NewServer(h))
		t.Cleanup(srv.Close)
		token, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "test")
		if err != nil {
			t.Fatal(err)
		}
		call := func(path, auth, reqID string) (*http.Response, map[string]any) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			if reqID != "" {
				req.Header.Set("X-Request-Id", reqID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			return resp, m
		}

		resp, problem := call("/api/v1/operations/op_missing?secret=x", token, "")
		id := resp.Header.Get("X-Request-Id")
		if resp.StatusCode != 404 || len(id) < 16 || problem["request_id"] != id {
			t.Fatalf("404: status %d, X-Request-Id %q, problem request_id %v", resp.StatusCode, id, problem["request_id"])
		}
		var line map[string]any
		for _, l := range logs.lines(t) {
			if l["msg"] == "request" && l["request_id"] == id {
				line = l
			}
		}
		if line == nil {
			t.Fatalf("no access log line with request_id %s", id)
		}
		for k, want := range map[string]any{"method": "GET", "route": "/api/v1/operations/:id", "status": float64(404), "tenant": "acme", "level": "INFO"} {
			if line[k] != want {
				t.Errorf("access line %s = %v, want %v (line %v)", k, line[k], want, line)
			}
		}
		if _, ok := line["duration_ms"].(float64); !ok || line["bytes"].(float64) <= 0 {
			t.Errorf("access line without duration or bytes: %v", line)
		}
		for _, l := range logs.lines(t) {
			b, _ := json.Marshal(l)
			if strings.Contains(string(b), token) || strings.Contains(string(b), "op_missing") || strings.Contains(string(b), "secret=x") {
				t.Errorf("a log line holds the token, the path or the query: %s", b)
			}
		}

		// Untrusted: the client's id is not taken.
		if resp, _ := call("/healthz", "", "client-chosen-id"); resp.Header.Get("X-Request-Id") == "client-chosen-id" {
			t.Errorf("an untrusted client chose its request id")
		}
		// Through a trusted proxy: taken when well formed.
		h.TrustedProxies = []*net.IPNet{loopback}
		proxied := httptest.NewServer(handlers.NewServer(h))
		t.Cleanup(proxied.Close)
		srv.URL = proxied.URL
		if resp, _ := call("/healthz", "", "proxy-id-0123"); resp.Header.Get("X-Request-Id") != "proxy-id-0123" {
			t.Errorf("the trusted proxy's request id was not kept: %q", resp.Header.Get("X-Request-Id"))
		}
		for _, bad := range []string{"has space", strings.Repeat("x", 129), "line\u2028break", "quote\"d"} {
			if resp, _ := call("/healthz", "", bad); resp.Header.Get("X-Request-Id") == bad {
				t.Errorf("a malformed request id %q was kept", bad)
			}
		}
	})
}

// TestLogSinkCatchesSecrets: the suite's log sink (TestMain) does catch a
// token, a password and a session id; a request id or a hash is not one.
func TestLogSinkCatchesSecrets(t *testing.T) {
	t.Parallel()
	sink := storetest.NewLogSink("correct horse battery")
	log := slog.New(sink).With("component", "test")
	log.Info("fine", "request_id", "1897e7192c4f0d2dccdda7b6", "hash", strings.Repeat("ab", 32))
	log.Info("token", "t", "limbo_"+strings.Repeat("0a", 32))
	log.Warn("password", "p", "correct horse battery")
	log.Info("session", "id", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcde")
	log.Info("header", "authorization", "Bearer abcdefgh123")
	lines, leaks := sink.Report()
	if lines != 5 || len(leaks) != 4 {
		t.Fatalf("checked %d lines, caught %d: %q", lines, len(leaks), leaks)
	}
}
