package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
)

// TestBodilessAttemptRequestIsSentOnce: a request with no body (a POST that
// captures a payment, a DELETE) carrying its key in Idempotency-Key is one
// net/http replays on its own when a reused connection breaks before the
// answer — a second send inside one attempt. NewAttemptRequest built it
// so: the destination acted twice. It is sent once, and the destination
// still reads the key.
func TestBodilessAttemptRequestIsSentOnce(t *testing.T) {
	t.Parallel()
	for _, header := range []string{"Idempotency-Key", "X-Idempotency-Key", "idempotency-key"} {
		for _, method := range []string{http.MethodPost, http.MethodDelete, http.MethodPatch} {
			t.Run(header+" "+method, func(t *testing.T) {
				t.Parallel()
				var (
					mu   sync.Mutex
					keys []string // the key of each send that reached the destination
				)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodGet { // warms a keep-alive connection
						return
					}
					mu.Lock()
					keys = append(keys, r.Header.Get(header))
					mu.Unlock()
					// The effect happened; the answer is lost.
					if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
						conn.Close()
					}
				}))
				defer srv.Close()
				send := func(req *http.Request) int {
					hc := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
					defer hc.CloseIdleConnections()
					warm, err := hc.Get(srv.URL)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, warm.Body)
					warm.Body.Close()
					mu.Lock()
					before := len(keys)
					mu.Unlock()
					resp, o := client.SendAttempt(hc, req)
					if resp != nil {
						resp.Body.Close()
						t.Fatalf("the destination answered %d", resp.StatusCode)
					}
					if o.Phase != client.PhaseAfterSend {
						t.Errorf("outcome %+v, want after_send", o)
					}
					mu.Lock()
					defer mu.Unlock()
					return len(keys) - before
				}

				// The trap, reproduced with a plain request.
				plain, _ := http.NewRequest(method, srv.URL+"/capture", nil)
				plain.Header.Set(header, "key-plain")
				if n := send(plain); n != 2 {
					t.Fatalf("a plain %s with %s and no body reached the destination %d times; this test expects net/http to re-send it (2) — it no longer reproduces the trap", method, header, n)
				}

				g := &client.Grant{OperationID: "op_1", N: 1, Key: "key-once", KeyHeader: header}
				for _, body := range [][]byte{nil, {}} {
					req, err := client.NewAttemptRequest(context.Background(), g, method, srv.URL+"/capture", body)
					if err != nil {
						t.Fatal(err)
					}
					if n := send(req); n != 1 {
						t.Errorf("NewAttemptRequest's %s with body %q reached the destination %d times, want exactly 1", method, body, n)
					}
					mu.Lock()
					if last := keys[len(keys)-1]; last != "key-once" {
						t.Errorf("the destination read the key %q, want key-once", last)
					}
					mu.Unlock()
				}
			})
		}
	}
}
