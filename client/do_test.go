package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/internal/testnet"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestOutcomeFromHTTP(t *testing.T) {
	answer := func(status int, body string, h ...string) *http.Response {
		r := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		resp *http.Response
		err  error
		sent bool
		want client.Outcome
	}{
		{"refused before send", nil, refused, false,
			client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}},
		{"dial timeout before send", nil, &net.OpError{Op: "dial", Err: timeoutErr{}}, false,
			client.Outcome{Result: client.ResultTimeout, Phase: client.PhaseBeforeSend}},
		{"reset after send", nil, &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true,
			client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseAfterSend}},
		{"EOF after send", nil, io.EOF, true,
			client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseAfterSend}},
		{"client timeout after send", nil, fmt.Errorf("Post: %w", context.DeadlineExceeded), true,
			client.Outcome{Result: client.ResultTimeout, Phase: client.PhaseAfterSend}},
		{"net timeout after send", nil, timeoutErr{}, true,
			client.Outcome{Result: client.ResultTimeout, Phase: client.PhaseAfterSend}},
		{"created", answer(201, `{"ref":"fld-1"}`, "X-Request-Id", "req-9"), nil, true,
			client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201, ProviderRequestID: "req-9"}},
		{"an answer means it was sent", answer(202, `{}`), nil, false,
			client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 202}},
		{"429 with Retry-After and a code", answer(429, `{"error":"rate_limited"}`, "Retry-After", "7"), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 429, RetryAfter: "7", ProviderCode: "rate_limited"}},
		{"429 quota, OpenAI style", answer(429, `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota"}},
		{"429 with an HTTP date", answer(429, ``, "Retry-After", "Wed, 21 Oct 2037 07:28:00 GMT"), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 429, RetryAfter: "Wed, 21 Oct 2037 07:28:00 GMT"}},
		{"503", answer(503, `{"error":"unavailable"}`), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 503, ProviderCode: "unavailable"}},
		{"500 after commit", answer(500, `<html>oops</html>`), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 500}},
		{"409 key in progress", answer(409, `{"code":"key_in_progress"}`), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 409, ProviderCode: "key_in_progress"}},
		{"422", answer(422, `{"type":"invalid","error":{"code":"unsupported_font"}}`), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 422, ProviderCode: "unsupported_font"}},
		{"redirect kept as an answer", answer(307, ``, "Location", "/elsewhere"), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 307}},
		// What the destination sends is made acceptable to Limbo, never
		// refused with the report: a request id that is not UTF-8, a code
		// with a control character, one longer than the limit.
		{"a request id that is not UTF-8", answer(201, `{}`, "X-Request-Id", "req-\xff\xfe"), nil, true,
			client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201, ProviderRequestID: "req-\ufffd"}},
		{"a code with a NUL, one too long", answer(400, `{"code":"bad\u0000code","error":"x"}`, "X-Request-Id", strings.Repeat("é", 300)), nil, true,
			client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 400, ProviderCode: "bad\ufffdcode", ProviderRequestID: strings.Repeat("é", 255)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := client.OutcomeFromHTTP(tt.resp, tt.err, tt.sent)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("OutcomeFromHTTP = %+v, want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("the outcome does not validate: %v", err)
			}
			for name, v := range map[string]string{"provider_code": got.ProviderCode, "provider_request_id": got.ProviderRequestID, "retry_after": got.RetryAfter} {
				if err := review.CheckText(name, review.Identifier, review.MaxFieldLen, v); err != nil {
					t.Fatalf("the API would refuse the outcome: %v", err)
				}
			}
		})
	}
	t.Run("the error body stays readable", func(t *testing.T) {
		resp := answer(503, `{"error":"unavailable"}`)
		client.OutcomeFromHTTP(resp, nil, true)
		b, _ := io.ReadAll(resp.Body)
		if string(b) != `{"error":"unavailable"}` {
			t.Fatalf("body after classification = %q", b)
		}
	})
}

// countingSandbox serves a sandbox and counts the mutating requests that
// reach it.
func countingSandbox(t *testing.T, opts sandbox.Options) (*httptest.Server, *sandbox.Sandbox, *atomic.Int64) {
	t.Helper()
	sb := sandbox.New(opts)
	t.Cleanup(sb.Close)
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		sb.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, sb, &posts
}

// TestAttemptRequestIsSentOnce: with every answer lost on a reused
// keep-alive connection, net/http re-sends a POST carrying an
// Idempotency-Key on its own — a second send inside one attempt. A request
// from NewAttemptRequest is sent exactly once.
func TestAttemptRequestIsSentOnce(t *testing.T) {
	srv, sb, posts := countingSandbox(t, sandbox.Options{Loss: 1, Seed: 1})
	body := []byte(`{"name":"reports","metadata":{"operation_id":"op_1","logical_version":"1"}}`)
	g := &client.Grant{OperationID: "op_1", N: 1, Key: "key-sent-once"}

	send := func(t *testing.T, build func() *http.Request) (int64, client.Outcome) {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
		defer hc.CloseIdleConnections()
		// Warm a keep-alive connection, so the POST goes out on a reused one.
		warm, err := hc.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, warm.Body)
		warm.Body.Close()
		before := posts.Load()
		resp, o := client.SendAttempt(hc, build())
		if resp != nil {
			resp.Body.Close()
			t.Fatalf("the sandbox answered %d with Loss=1", resp.StatusCode)
		}
		return posts.Load() - before, o
	}

	// The trap, reproduced: a plain request with a rewindable body.
	n, _ := send(t, func() *http.Request {
		naive := strings.Replace(string(body), "op_1", "op_0", 1)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/folders", strings.NewReader(naive))
		req.Header.Set("Idempotency-Key", "key-naive")
		return req
	})
	if n != 2 {
		t.Fatalf("a plain POST with Idempotency-Key reached the sandbox %d times; this test expects net/http to re-send it (2) — it no longer reproduces the trap", n)
	}

	n, o := send(t, func() *http.Request {
		req, err := client.NewAttemptRequest(context.Background(), g, http.MethodPost, srv.URL+"/folders", body)
		if err != nil {
			t.Fatal(err)
		}
		return req
	})
	if n != 1 {
		t.Fatalf("NewAttemptRequest's POST reached the sandbox %d times, want exactly 1", n)
	}
	if o.Result != client.ResultConnectionError || o.Phase != client.PhaseAfterSend {
		t.Fatalf("outcome of a lost answer = %+v, want connection_error after_send", o)
	}
	// The effect happened once, and the key remembers it.
	effects := 0
	for _, e := range sb.Truth() {
		if e.OperationID == "op_1" {
			effects++
		}
	}
	if effects != 1 {
		t.Fatalf("sandbox truth has %d effects for op_1, want 1", effects)
	}
}

// limbo is one API server on a fresh database with destination "dest".
type limbo struct {
	store  *store.Store
	client *client.Client
}

func newLimbo(t *testing.T, engine store.Engine) *limbo {
	t.Helper()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"dest": {HonoursKeys: true, ConflictMeansInProgress: true, Lease: 30 * time.Second},
	}}
	st := storetest.Open(t, engine, store.Options{Config: cfg})
	srv := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
	t.Cleanup(srv.Close)
	tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	return &limbo{store: st, client: client.New(srv.URL, tok)}
}

func (l *limbo) register(t *testing.T, source string, risk client.Risk) *client.Operation {
	t.Helper()
	op, _, err := l.client.Register(context.Background(), client.Registration{
		SourceRef: source, LogicalVersion: "1", Action: "create_folder", Destination: "dest", Risk: risk,
		Payload: json.RawMessage(`{"name":"` + source + `"}`),
	})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return op
}

// script is a destination answering each request with the next step.
type script struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter)
	keys  []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	step := s.steps[min(len(s.keys), len(s.steps))-1]
	s.mu.Unlock()
	step(w)
}

func status(code int, body string, h ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(h); i += 2 {
			w.Header().Set(h[i], h[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func lose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// sendTo returns a send function that POSTs to url and reads a created
// resource from a success.
func sendTo(url string, sends *[]time.Time) func(ctx context.Context, g *client.Grant) client.Outcome {
	hc := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context, g *client.Grant) client.Outcome {
		if sends != nil {
			*sends = append(*sends, time.Now())
		}
		req, err := client.NewAttemptRequest(ctx, g, http.MethodPost, url, []byte(`{"name":"x"}`))
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
		}
		resp, o := client.SendAttempt(hc, req)
		if resp == nil {
			return o
		}
		defer resp.Body.Close()
		if o.Result == client.ResultSuccess {
			var r client.ResourceRef
			if json.NewDecoder(resp.Body).Decode(&r) == nil && r.Ref != "" {
				o.Resource = &r
			}
		}
		return o
	}
}

func TestDo(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		l := newLimbo(t, engine)
		ctx := context.Background()

		t.Run("retries with the same key until done", func(t *testing.T) {
			dest := &script{steps: []func(http.ResponseWriter){
				status(503, `{"error":"unavailable"}`),
				status(429, `{"error":"rate_limited"}`, "Retry-After", "1"),
				status(201, `{"ref":"fld-7","kind":"folder","version":"1"}`),
			}}
			srv := httptest.NewServer(dest)
			defer srv.Close()
			op := l.register(t, "retry-until-done", client.RiskCompensableWrite)
			var sends []time.Time
			res, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, sendTo(srv.URL, &sends))
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if res.Next != client.NextDone || res.Operation.State != client.Confirmed {
				t.Fatalf("Do ended with next %s, state %s (%s)", res.Next, res.Operation.State, res.Reason)
			}
			if res.Operation.Resource == nil || res.Operation.Resource.Ref != "fld-7" {
				t.Fatalf("resource = %+v, want fld-7", res.Operation.Resource)
			}
			if len(dest.keys) != 3 || dest.keys[0] != op.Key || dest.keys[1] != op.Key || dest.keys[2] != op.Key {
				t.Fatalf("keys sent = %v, want %s three times", dest.keys, op.Key)
			}
			if len(res.Operation.Attempts) != 3 {
				t.Fatalf("%d attempts, want 3", len(res.Operation.Attempts))
			}
			if gap := sends[2].Sub(sends[1]); gap < time.Second {
				t.Fatalf("the attempt after a 429 with Retry-After: 1 came %v later", gap)
			}

			_, err = l.client.Do(ctx, op.ID, client.AttemptOptions{}, sendTo(srv.URL, nil))
			var p *client.Problem
			if !errors.As(err, &p) || p.Type != "not-attemptable" || p.State != client.Confirmed || p.Resource == nil {
				t.Fatalf("Do on a confirmed operation: %v, want a not-attemptable problem naming the state and resource", err)
			}
		})

		t.Run("a failure before send is retried", func(t *testing.T) {
			closed := testnet.ClosedURL(t)
			srv := httptest.NewServer(&script{steps: []func(http.ResponseWriter){status(201, `{"ref":"fld-8"}`)}})
			defer srv.Close()
			op := l.register(t, "before-send", client.RiskIrreversible)
			var phases []client.Phase
			res, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
				url := srv.URL
				if g.N == 1 {
					url = closed
				}
				o := sendTo(url, nil)(ctx, g)
				phases = append(phases, o.Phase)
				return o
			})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if res.Operation.State != client.Confirmed || len(phases) != 2 || phases[0] != client.PhaseBeforeSend {
				t.Fatalf("state %s after phases %v, want confirmed after before_send then success", res.Operation.State, phases)
			}
		})

		t.Run("a lost answer of a compensable write goes to reconciliation", func(t *testing.T) {
			srv := httptest.NewServer(&script{steps: []func(http.ResponseWriter){lose}})
			defer srv.Close()
			op := l.register(t, "lost-answer", client.RiskCompensableWrite)
			res, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, sendTo(srv.URL, nil))
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if res.Next != client.NextReconcile || res.Operation.State != client.Ambiguous {
				t.Fatalf("next %s state %s, want reconcile/ambiguous", res.Next, res.Operation.State)
			}
			a := res.Operation.Attempts[0]
			if a.Phase != client.PhaseAfterSend || a.Result != client.ResultConnectionError {
				t.Fatalf("attempt recorded %s/%s, want connection_error/after_send", a.Result, a.Phase)
			}
		})

		t.Run("a 429 from Limbo is waited out", func(t *testing.T) {
			op := l.register(t, "limbo-429", client.RiskIdempotentWrite)
			g, err := l.client.StartAttempt(ctx, op.ID, client.AttemptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.client.ReportOutcome(ctx, op.ID, g.N, client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 503, RetryAfter: "2"})
			if err != nil || res.Next != client.NextRetryAt {
				t.Fatalf("ReportOutcome: %v %+v", err, res)
			}
			if _, err := l.client.StartAttempt(ctx, op.ID, client.AttemptOptions{}); !isStatus(err, 429) {
				t.Fatalf("StartAttempt during backoff: %v, want 429", err)
			}
			srv := httptest.NewServer(&script{steps: []func(http.ResponseWriter){status(201, `{"ref":"fld-9"}`)}})
			defer srv.Close()
			var sends []time.Time
			done, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, sendTo(srv.URL, &sends))
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if done.Operation.State != client.Confirmed || len(sends) != 1 {
				t.Fatalf("state %s after %d sends", done.Operation.State, len(sends))
			}
			if sends[0].Before(*res.RetryAt) {
				t.Fatalf("sent at %v, before retry_at %v", sends[0], *res.RetryAt)
			}
		})

		t.Run("cancelling stops the wait", func(t *testing.T) {
			srv := httptest.NewServer(&script{steps: []func(http.ResponseWriter){status(503, `{}`, "Retry-After", "30")}})
			defer srv.Close()
			op := l.register(t, "cancelled", client.RiskIdempotentWrite)
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			began := time.Now()
			_, err := l.client.Do(cctx, op.ID, client.AttemptOptions{}, sendTo(srv.URL, nil))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Do: %v, want the context's error", err)
			}
			if d := time.Since(began); d > 5*time.Second {
				t.Fatalf("Do returned %v after its context ended", d)
			}
		})

		t.Run("an invalid outcome is not reported", func(t *testing.T) {
			op := l.register(t, "invalid-outcome", client.RiskCompensableWrite)
			_, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, func(context.Context, *client.Grant) client.Outcome {
				return client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseBeforeSend}
			})
			if err == nil || !strings.Contains(err.Error(), "invalid outcome") {
				t.Fatalf("Do: %v, want an invalid-outcome error", err)
			}
			got, _ := l.client.Get(ctx, op.ID)
			if got.State != client.InFlight {
				t.Fatalf("state %s, want in_flight (left to the lease sweeper)", got.State)
			}
		})
	})
}

func isStatus(err error, status int) bool {
	var p *client.Problem
	return errors.As(err, &p) && p.Status == status
}
