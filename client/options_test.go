package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/internal/testnet"
)

// fakeLimbo answers the i-th request with answers[i] (the last one again
// after the end) and records the requests' User-Agent.
type fakeLimbo struct {
	answers []func(w http.ResponseWriter, r *http.Request)
	n       atomic.Int32
	mu      sync.Mutex
	agents  []string
}

func (f *fakeLimbo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(f.n.Add(1)) - 1
	f.mu.Lock()
	f.agents = append(f.agents, r.Header.Get("User-Agent"))
	f.mu.Unlock()
	f.answers[min(i, len(f.answers)-1)](w, r)
}

func problemAnswer(status int, typ, retryAfter string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"type":"` + typ + `","title":"t","status":` + strconv.Itoa(status) + `,"detail":"d"}`))
	}
}

func okAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":"op_1","state":"pending"}`))
}

// hangUp closes the connection without an answer, after reading the request.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func serve(t *testing.T, f *fakeLimbo) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The retry budget: 503, 429 and 408 answers are asked again, up to the number
// of retries and within the total wait; other answers are returned at once;
// a request that failed in transit is repeated only if it cannot act twice.
func TestRetryBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	unavailable := problemAnswer(http.StatusServiceUnavailable, client.ProblemUnavailable, "")
	tests := []struct {
		name     string
		opts     []client.Option
		answers  []func(http.ResponseWriter, *http.Request)
		post     bool // StartAttempt (POST) instead of Get
		requests int
		problem  string // "" for success; "transport" for a transport error
	}{
		{"default: no retries", nil, []func(http.ResponseWriter, *http.Request){unavailable, okAnswer}, false, 1, client.ProblemUnavailable},
		{"503 twice, then an answer", []client.Option{client.WithRetryBudget(2, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){unavailable, unavailable, okAnswer}, false, 3, ""},
		{"retries run out", []client.Option{client.WithRetryBudget(1, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){unavailable}, false, 2, client.ProblemUnavailable},
		{"429 with a short Retry-After, for a POST too", []client.Option{client.WithRetryBudget(3, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){problemAnswer(429, client.ProblemRetryLater, "0"), okAnswer}, true, 2, ""},
		{"a Retry-After past the budget is returned at once", []client.Option{client.WithRetryBudget(3, time.Second)},
			[]func(http.ResponseWriter, *http.Request){problemAnswer(429, client.ProblemRetryLater, "3600"), okAnswer}, true, 1, client.ProblemRetryLater},
		{"the total wait bounds the retries", []client.Option{client.WithRetryBudget(100, 250*time.Millisecond)},
			// backoff 100 ms, 200 ms: the second wait would pass 250 ms.
			[]func(http.ResponseWriter, *http.Request){unavailable}, false, 2, client.ProblemUnavailable},
		{"408, the body too slow to arrive, for a POST too", []client.Option{client.WithRetryBudget(2, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){problemAnswer(408, client.ProblemRequestTimeout, ""), okAnswer}, true, 2, ""},
		{"other problems are answers", []client.Option{client.WithRetryBudget(3, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){problemAnswer(409, client.ProblemNotAttemptable, ""), okAnswer}, true, 1, client.ProblemNotAttemptable},
		{"500 is not retried: it may have committed", []client.Option{client.WithRetryBudget(3, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){problemAnswer(500, client.ProblemInternal, ""), okAnswer}, false, 1, client.ProblemInternal},
		{"a GET lost in transit is sent again", []client.Option{client.WithRetryBudget(2, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){hangUp, okAnswer}, false, 2, ""},
		{"a POST lost in transit is not", []client.Option{client.WithRetryBudget(2, time.Minute)},
			[]func(http.ResponseWriter, *http.Request){hangUp, okAnswer}, true, 1, "transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeLimbo{answers: tt.answers}
			c := client.New(serve(t, f), "tok", tt.opts...)
			var err error
			if tt.post {
				_, err = c.StartAttempt(ctx, "op_1", client.AttemptOptions{})
			} else {
				_, err = c.Get(ctx, "op_1")
			}
			if got := int(f.n.Load()); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			var p *client.Problem
			switch {
			case tt.problem == "" && err != nil:
				t.Errorf("err = %v, want success", err)
			case tt.problem == "transport" && (err == nil || asProblem(err, &p)):
				t.Errorf("err = %v, want a transport error", err)
			case tt.problem != "" && tt.problem != "transport" && !client.IsProblem(err, tt.problem):
				t.Errorf("err = %v, want %s", err, tt.problem)
			}
			if tt.problem == client.ProblemRetryLater && (!asProblem(err, &p) || p.RetryAfter != time.Hour) {
				t.Errorf("err = %#v, want RetryAfter 1h (the answer's 3600 s)", err)
			}
		})
	}
	t.Run("a POST refused before it was sent is sent again", func(t *testing.T) {
		t.Parallel()
		// Nothing listens there: the dial is refused, nothing was sent.
		addr := strings.TrimPrefix(testnet.ClosedURL(t), "http://")
		var dials atomic.Int32
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
		c := client.New("http://"+addr, "tok", client.WithHTTPClient(hc), client.WithRetryBudget(2, time.Minute))
		if _, err := c.StartAttempt(ctx, "op_1", client.AttemptOptions{}); err == nil {
			t.Fatal("StartAttempt to a closed port succeeded")
		}
		if n := dials.Load(); n != 3 {
			t.Errorf("%d dials, want 3 (the first and two retries)", n)
		}
	})
}

func TestUserAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeLimbo{answers: []func(http.ResponseWriter, *http.Request){okAnswer}}
	url := serve(t, f)
	if _, err := client.New(url, "tok").Get(ctx, "op_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(url, "tok", client.WithUserAgent("billing/1.2")).Get(ctx, "op_1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"limbo-go-client/" + client.Version(), "billing/1.2 limbo-go-client/" + client.Version()}
	if client.Version() == "" || len(f.agents) != 2 || f.agents[0] != want[0] || f.agents[1] != want[1] {
		t.Errorf("User-Agent %q, want %q", f.agents, want)
	}
}

// WithTimeout with WithHTTPClient applies to a copy of the caller's client.
func TestWithTimeoutLeavesTheCallersClient(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	hc := &http.Client{}
	c := client.New(srv.URL, "tok", client.WithHTTPClient(hc), client.WithTimeout(50*time.Millisecond))
	_, err := c.Get(context.Background(), "op_1")
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("Get = %v, want a timeout", err)
	}
	if hc.Timeout != 0 {
		t.Errorf("the caller's client has timeout %v now", hc.Timeout)
	}
}
