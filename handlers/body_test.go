package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// slowBodyServer is the real server, console included, over b's store
// with a short body timeout.
func slowBodyServer(t *testing.T, b *testBundle, timeout time.Duration) (*handlers.Handlers, *httptest.Server) {
	h := handlers.New(b.store, nil)
	h.Console = handlers.NewConsole(make([]byte, 64), make([]byte, 32), false, store.SessionPolicy{})
	h.BodyTimeout = timeout
	srv := httptest.NewServer(handlers.NewServer(h))
	t.Cleanup(srv.Close)
	return h, srv
}

// TestSlowBodyTimesOut: a client that sends its headers and then trickles
// (here: stops sending) its body is answered 408 once the body timeout has
// passed, on the API as a problem and in the console as a page, and
// nothing is registered; the connection is not held for ever.
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	_, srv := slowBodyServer(t, b, 300*time.Millisecond)
	body := registration("slow", "drive", review.RiskRead)
	for _, tc := range []struct{ name, head, part, wantType string }{
		{"api", "POST /api/v1/operations HTTP/1.1\r\nAuthorization: Bearer " + b.token + "\r\nContent-Type: application/json\r\n",
			body[:len(body)/2], "application/problem+json"},
		{"console", "POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n",
			"email=a%40example.com&pass", "text/html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Twice the part's length is declared; only the part is sent.
			req := tc.head + "Host: limbo\r\nContent-Length: " + strconv.Itoa(2*len(tc.part)) + "\r\n\r\n" + tc.part
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body stalled: %v", err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.wantType) {
				t.Fatalf("%d %v %s %s; want 408 %s", resp.StatusCode, resp.Header, resp.Header.Get("Content-Type"), got, tc.wantType)
			}
			if tc.name == "api" {
				var p struct{ Type string }
				if err := json.Unmarshal(got, &p); err != nil || p.Type != "request-timeout" {
					t.Errorf("problem %s (%v); want type request-timeout", got, err)
				}
			} else if !strings.Contains(string(got), "took too long to arrive") {
				t.Errorf("the console's page does not say what happened: %s", got)
			}
		})
	}
	ops, _, err := b.store.ListOperations(context.Background(), "acme", store.OperationFilter{}, "", 10)
	if err != nil || len(ops) != 0 {
		t.Errorf("operations after a body that never arrived: %+v, %v", ops, err)
	}
}

// TestBodyDeadlineEndsWithTheBody: once a body is read to its end, the
// request may take longer than the body timeout. A batch waiting for its
// turn for several body timeouts is still answered; were the deadline left
// on the connection, the server's read behind the request would time out
// and cancel it.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	const timeout = 200 * time.Millisecond
	h, srv := slowBodyServer(t, b, timeout)
	release := handlers.HoldBatches(t, h, handlers.DefaultBatchesInFlight)
	on := b.on(t)
	on.srv = srv
	done := make(chan *response, 1)
	go func() {
		done <- on.do(request{method: http.MethodPost, path: "/api/v1/operations/batch",
			body: batchBody(registration("patient", "drive", review.RiskRead))})
	}()
	select {
	case r := <-done:
		t.Fatalf("answered without room: %d %s", r.Status, r.Body)
	case <-time.After(5 * timeout):
	}
	release()
	r := <-done
	var ans batchAnswer
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &ans) != nil || len(ans.Results) != 1 || ans.Results[0].Status != http.StatusCreated {
		t.Fatalf("%d %s; want 200 with the registration created", r.Status, r.Body)
	}
}

// TestBodyCutShort: a body that ends before its declared length (its
// client went away) is the client's error, 400, not the server's 500.
func TestBodyCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	h, _ := slowBodyServer(t, b, time.Minute)
	srv := handlers.NewServer(h)
	for _, tc := range []struct{ path, contentType, auth string }{
		{"/api/v1/operations", "application/json", "Bearer " + b.token},
		{"/api/v1/operations/batch", "application/json", "Bearer " + b.token},
		{"/login", "application/x-www-form-urlencoded", ""},
	} {
		req := httptest.NewRequest(http.MethodPost, tc.path, io.MultiReader(strings.NewReader(`{"source_ref":`), cutShort{}))
		req.Header.Set("Content-Type", tc.contentType)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "incomplete") && !strings.Contains(rec.Body.String(), "could not be read") {
			t.Errorf("POST %s with its body cut short: %d %s; want 400", tc.path, rec.Code, rec.Body)
		}
	}
}

type cutShort struct{}

func (cutShort) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestSlowBodySignedIn: a signed-in console form whose body stalls is
// answered 408 too, not refused as a forgery because its CSRF token (in
// the body) never arrived.
func TestSlowBodySignedIn(t *testing.T) {
	t.Parallel()
	srv, _ := consoleServer(t, store.SQLite, func(h *handlers.Handlers) { h.BodyTimeout = 300 * time.Millisecond })
	b := newBrowser(t, srv.URL)
	b.login("admin@example.com")
	u, _ := url.Parse(srv.URL)
	var cookies []string
	for _, c := range b.c.Jar.Cookies(u) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	part := "csrf=" + url.QueryEscape(b.csrf) + "&action=fail&reason=checked"
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /bulk HTTP/1.1\r\nHost: limbo\r\nContent-Type: application/x-www-form-urlencoded\r\nCookie: " + strings.Join(cookies, "; ") +
		"\r\nContent-Length: " + strconv.Itoa(2*len(part)) + "\r\n\r\n" + part
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout {
		i := strings.Index(string(got), `role="alert"`)
		snip := string(got)
		if i >= 0 {
			snip = snip[i:min(len(snip), i+200)]
		}
		t.Fatalf("POST /bulk with a stalled body: %d %s; want 408", resp.StatusCode, snip)
	}
}
