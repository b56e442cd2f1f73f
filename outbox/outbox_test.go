package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/internal/testnet"
	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/outbox"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/webhook"
)

var t0 = time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)

const tenant = "tenant-a"

// fixedRand makes jitter deterministic: a failed first try waits 22.5 s.
type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	ctx context.Context
	s   *store.Store
	clk *storetest.Clock
	url string
	n   int
}

func setup(t *testing.T, e store.Engine) *env {
	t.Helper()
	clk := storetest.NewClock(t0)
	u := storetest.URL(t, e)
	s := open(t, u, clk)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &env{ctx: t.Context(), s: s, clk: clk, url: u}
}

// loopbackOnly opts the tests' receivers (httptest, on 127.0.0.1) in, for
// adding endpoints and for the worker's client: netguard refuses loopback
// to every webhook otherwise.
const loopbackOnly = "[127.0.0.1]"

// open opens another store on the same database: another server instance.
func open(t *testing.T, u string, clk *storetest.Clock) *store.Store {
	t.Helper()
	return openAllowing(t, u, clk, loopbackOnly)
}

// openAllowing opens a store whose webhooks.allow_internal is allow.
func openAllowing(t *testing.T, u string, clk *storetest.Clock, allow string) *store.Store {
	t.Helper()
	cfg, err := review.ParseConfig([]byte("webhooks:\n  allow_internal: " + allow + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), u, store.Options{Config: cfg, Clock: clk.Now, Rand: fixedRand(0.5), Resolve: storetest.Resolver(nil), MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// decide takes a fresh operation to review and confirms it: one decision.
func (v *env) decide(t *testing.T) *store.Decision {
	t.Helper()
	v.n++
	ctx, s := v.ctx, v.s
	op, _, err := s.Register(ctx, review.Registration{Tenant: tenant, SourceRef: fmt.Sprintf("doc-%d", v.n), LogicalVersion: "v1",
		Action: "transform", Destination: "plain", Risk: review.RiskCompensableWrite, Actor: "test",
		Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.StartAttempt(ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordOutcome(ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
		t.Fatal(err)
	}
	cands := []review.Candidate{{Ref: "f1", Kind: "file", Version: "v1", OperationID: op.ID}, {Ref: "f2", Kind: "file", Version: "v1", OperationID: op.ID}}
	if _, err := s.AddEvidence(ctx, tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: cands}, "test"); err != nil {
		t.Fatal(err)
	}
	cs, err := s.CasesForOperation(ctx, op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases = %v, %v", cs, err)
	}
	d, err := s.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideConfirm, Ref: "f1", Reason: "f1 is it", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (v *env) endpoint(t *testing.T, u, secret string) *store.WebhookEndpoint {
	t.Helper()
	ep, err := v.s.AddWebhookEndpoint(v.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenant, URL: u, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func (v *env) messages(t *testing.T, ep *store.WebhookEndpoint) []store.OutboxMessage {
	t.Helper()
	ms, _, err := v.s.EndpointMessages(v.ctx, ep.ID, nil, "", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func (v *env) history(t *testing.T, ep *store.WebhookEndpoint) []store.Delivery {
	t.Helper()
	p, err := v.s.DeliveryHistory(v.ctx, ep.ID, nil, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	return p.Deliveries
}

func runOnce(t *testing.T, w *outbox.Worker, want int) {
	t.Helper()
	n, err := w.RunOnce(t.Context())
	if err != nil || n != want {
		t.Fatalf("RunOnce = %d, %v; want %d claims", n, err, want)
	}
}

// receiver verifies every request as a Standard Webhooks receiver would,
// at the test's clock, and answers what answer says for the n-th valid
// request of a message.
type receiver struct {
	t      *testing.T
	secret string
	clk    *storetest.Clock
	answer func(n int) int
	delay  time.Duration

	mu     sync.Mutex
	got    map[string]int // valid requests per webhook-id
	bodies map[string]string
	bad    int
}

func newReceiver(t *testing.T, clk *storetest.Clock, answer func(int) int) *receiver {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return &receiver{t: t, secret: secret, clk: clk, answer: answer, got: map[string]int{}, bodies: map[string]string{}}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id, err := webhook.Verify([]string{r.secret}, req.Header, body, r.clk.Now(), 0)
	r.mu.Lock()
	if err != nil || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		r.bad++
		r.mu.Unlock()
		r.t.Errorf("receiver: %s %s, Content-Type %q: %v", req.Method, req.URL, req.Header.Get("Content-Type"), err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.got[id]++
	n := r.got[id]
	r.bodies[id] = string(body)
	r.mu.Unlock()
	time.Sleep(r.delay)
	w.WriteHeader(r.answer(n))
}

func (r *receiver) counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.got))
	for k, v := range r.got {
		m[k] = v
	}
	return m, r.bad
}

func always(code int) func(int) int { return func(int) int { return code } }

// TestDelivered: one decision, one endpoint: delivered once, signed, with
// the decision as body; nothing is left to send.
func TestDelivered(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := newReceiver(t, v.clk, always(http.StatusNoContent))
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		ep := v.endpoint(t, srv.URL+"/hooks", rcv.secret)
		d := v.decide(t)
		w := outbox.New(v.s, "w1", quiet, nil)

		runOnce(t, w, 1)
		runOnce(t, w, 0)
		got, bad := rcv.counts()
		ms := v.messages(t, ep)
		if len(got) != 1 || got[ms[0].EventID] != 1 || bad != 0 {
			t.Fatalf("receiver got %v (%d bad), want message %s once", got, bad, ms[0].EventID)
		}
		var body struct {
			Type     string         `json:"type"`
			Decision store.Decision `json:"data"`
		}
		if err := json.Unmarshal([]byte(rcv.bodies[ms[0].EventID]), &body); err != nil || body.Type != "decision.confirm" ||
			body.Decision.ID != d.ID || body.Decision.ResourceRef != "f1" {
			t.Errorf("body %s: %v", rcv.bodies[ms[0].EventID], err)
		}
		if m := ms[0]; m.Status != store.OutboxDelivered || m.Attempts != 1 || m.LastStatusCode != 204 || m.DeliveredAt == nil {
			t.Errorf("message = %+v", m)
		}
		if h := v.history(t, ep); len(h) != 1 || h[0].N != 1 || h[0].StatusCode != 204 || h[0].Error != "" || h[0].ErrorClass != "" {
			t.Errorf("history = %+v", h)
		}
	})
}

// TestRetriedThenDelivered: a 500 is retried after the backoff, with the
// same webhook-id; both tries are in the history.
func TestRetriedThenDelivered(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := newReceiver(t, v.clk, func(n int) int {
			if n == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		ep := v.endpoint(t, srv.URL, rcv.secret)
		v.decide(t)
		w := outbox.New(v.s, "w1", quiet, nil)
		mx := metrics.New(v.s, quiet)
		t.Cleanup(func() { mx.Close() })
		w.OnDelivered = mx.ObserveDelivery

		runOnce(t, w, 1)
		m := v.messages(t, ep)[0]
		if m.Status != store.OutboxPending || m.Attempts != 1 || m.LastStatusCode != 500 ||
			!m.NextAttemptAt.Equal(v.clk.Now().Add(22500*time.Millisecond)) {
			t.Fatalf("after a 500: %+v", m)
		}
		wantMetrics(t, mx, "limbo_outbox_pending 1", "limbo_outbox_delivered_total 0", "limbo_outbox_delivery_latency_seconds_count 0")
		runOnce(t, w, 0) // not due yet
		v.clk.Advance(22500 * time.Millisecond)
		runOnce(t, w, 1)
		m = v.messages(t, ep)[0]
		got, _ := rcv.counts()
		if m.Status != store.OutboxDelivered || m.Attempts != 2 || got[m.EventID] != 2 || len(got) != 1 {
			t.Fatalf("after the retry: %+v, receiver %v", m, got)
		}
		// Delivered 22.5 s (the store's clock) after the decision created it.
		wantMetrics(t, mx, "limbo_outbox_pending 0", "limbo_outbox_failed 0", "limbo_outbox_delivered_total 1",
			"limbo_outbox_delivery_latency_seconds_count 1", "limbo_outbox_delivery_latency_seconds_sum 22.5")
		h := v.history(t, ep)
		if len(h) != 2 || h[0].N != 2 || h[0].StatusCode != 200 || h[1].N != 1 || h[1].StatusCode != 500 || h[1].Error != "HTTP 500" ||
			h[1].ErrorClass != "http_status" {
			t.Errorf("history = %+v", h)
		}
	})
}

// TestReceiverDown: a refused connection is a failed try: retries are
// scheduled, 22.5 s then 45 s later, and the history says why — by class,
// not with the dial error (which would tell a closed port from a filtered
// one).
func TestReceiverDown(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		addr := strings.TrimPrefix(testnet.ClosedURL(t), "http://")
		ep := v.endpoint(t, "http://"+addr+"/hooks", "")
		v.decide(t)
		w := outbox.New(v.s, "w1", quiet, nil)

		for try, wait := range []time.Duration{22500 * time.Millisecond, 45 * time.Second} {
			runOnce(t, w, 1)
			m := v.messages(t, ep)[0]
			if m.Status != store.OutboxPending || m.Attempts != try+1 || m.LastStatusCode != 0 ||
				m.LastError != "no connection, or it closed without an answer" || !m.NextAttemptAt.Equal(v.clk.Now().Add(wait)) {
				t.Fatalf("try %d: %+v", try+1, m)
			}
			v.clk.Advance(wait)
		}
		if h := v.history(t, ep); len(h) != 2 || h[0].StatusCode != 0 || h[0].ErrorClass != "connect" ||
			strings.Contains(h[0].Error, addr) || strings.Contains(h[0].Error, "refused") {
			t.Errorf("history = %+v", h)
		}
	})
}

// TestNoRedirects: a redirect from an allowed receiver is an answer (not
// followed, not a delivery).
func TestNoRedirects(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Add(1) }))
	defer elsewhere.Close()
	v := setup(t, store.SQLite)
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusFound))
	defer redirect.Close()
	ep := v.endpoint(t, redirect.URL, "")
	v.decide(t)
	runOnce(t, outbox.New(v.s, "w1", quiet, nil), 1)
	if m := v.messages(t, ep)[0]; m.Status != store.OutboxPending || m.LastStatusCode != http.StatusFound || followed.Load() != 0 {
		t.Errorf("after a redirect: %+v, followed %d", m, followed.Load())
	}
	if h := v.history(t, ep); len(h) != 1 || h[0].ErrorClass != "http_status" || h[0].Error != "HTTP 302" {
		t.Errorf("history = %+v", h)
	}
}

// TestWorkersRace: two workers on two store instances sharing one
// database drain the outbox together; the receiver sees every message
// exactly once.
func TestWorkersRace(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := newReceiver(t, v.clk, always(http.StatusOK))
		rcv.delay = 2 * time.Millisecond
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		var eps []*store.WebhookEndpoint
		for i := range 4 {
			eps = append(eps, v.endpoint(t, fmt.Sprintf("%s/ep%d", srv.URL, i), rcv.secret))
		}
		const decisions = 10
		for range decisions {
			v.decide(t)
		}
		want := decisions * len(eps)

		workers := []*outbox.Worker{outbox.New(v.s, "w1", quiet, nil), outbox.New(open(t, v.url, v.clk), "w2", quiet, nil)}
		claimed := make([]int, len(workers))
		var wg sync.WaitGroup
		for i, w := range workers {
			w.Batch = 3
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n, err := w.RunOnce(t.Context())
					if err != nil {
						t.Errorf("worker %d: %v", i+1, err)
						return
					}
					if n == 0 {
						return
					}
					claimed[i] += n
				}
			}()
		}
		wg.Wait()

		got, bad := rcv.counts()
		for id, n := range got {
			if n != 1 {
				t.Errorf("message %s delivered %d times", id, n)
			}
		}
		delivered := 0
		for _, ep := range eps {
			for _, m := range v.messages(t, ep) {
				if m.Status == store.OutboxDelivered && m.Attempts == 1 && got[m.EventID] == 1 {
					delivered++
				}
			}
		}
		if len(got) != want || delivered != want || bad != 0 || claimed[0]+claimed[1] != want {
			t.Errorf("receiver saw %d messages, %d delivered once each, %d bad, claims %v; want %d", len(got), delivered, bad, claimed, want)
		}
		t.Logf("%s: %d messages, claimed %d by w1 and %d by w2, each delivered once", e, want, claimed[0], claimed[1])
	})
}

// wantMetrics checks lines of m's exposition.
func wantMetrics(t *testing.T, m *metrics.Metrics, lines ...string) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, l := range lines {
		if !strings.Contains(rec.Body.String(), "\n"+l+"\n") {
			t.Errorf("/metrics lacks the line %q", l)
		}
	}
}

// TestNoTryPastItsLease: a round claims no more messages than its workers
// can try within their lease when every try takes the whole Timeout (a
// receiver that hangs). Before, a round of one worker claimed eight, and
// the fourth went out after its lease had lapsed, when another instance
// may have claimed and sent it too. The rest wait, unclaimed, for the next
// rounds, and every message is delivered once.
func TestNoTryPastItsLease(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := newReceiver(t, v.clk, always(http.StatusNoContent))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			rcv.ServeHTTP(w, req)
			v.clk.Advance(outbox.Timeout) // the try took all the time it may
		}))
		defer srv.Close()
		ep := v.endpoint(t, srv.URL+"/hooks", rcv.secret)
		for range 8 {
			v.decide(t)
		}
		w := outbox.New(v.s, "w1", quiet, nil)
		w.Concurrency, w.Batch = 1, 8
		n, err := w.RunOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := rcv.counts(); n != 3 || len(got) != 3 {
			t.Fatalf("one round claimed %d and sent %d messages, want 3 (the tries its lease of %s covers at %s each)",
				n, len(got), w.Lease, outbox.Timeout)
		}
		for round := 0; round < 10; round++ {
			if _, err := w.RunOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		got, bad := rcv.counts()
		for _, m := range v.messages(t, ep) {
			if m.Status != store.OutboxDelivered || got[m.EventID] != 1 {
				t.Errorf("message %s: %s, received %d times", m.ID, m.Status, got[m.EventID])
			}
		}
		if bad != 0 {
			t.Errorf("%d bad requests", bad)
		}
	})
}

// TestDeliveryPanicIsRecovered: a panic in one delivery's goroutine (here
// the OnDelivered hook) is logged and counted as the loop's panic; before,
// it ended the whole process, since the round's own recovery does not
// reach the goroutines it starts.
func TestDeliveryPanicIsRecovered(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := newReceiver(t, v.clk, always(http.StatusNoContent))
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		ep := v.endpoint(t, srv.URL+"/hooks", rcv.secret)
		v.decide(t)
		w := outbox.New(v.s, "w1", quiet, nil)
		w.OnDelivered = func(*store.OutboxMessage) { panic("hook") }
		st := &loop.Status{}
		if n, err := w.RunOnce(loop.WithStatus(t.Context(), st)); err != nil || n != 1 {
			t.Fatalf("RunOnce = %d, %v", n, err)
		}
		if ms := v.messages(t, ep); ms[0].Status != store.OutboxDelivered {
			t.Errorf("message %+v, want delivered (recorded before the hook)", ms[0])
		}
		if s := st.Snapshot(); s.Panics != 1 {
			t.Errorf("status %+v, want one panic counted", s)
		}
	})
}

// TestPoisonMessageSkipped: a message whose claim fails every time (a
// trigger refuses to update its row) is skipped, named in the round's
// error, and the messages after it are delivered in the same round: the
// batch's claim used to fail whole, every round, and nothing was
// delivered. Once it can be claimed, it is delivered too.
func TestPoisonMessageSkipped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		v := setup(t, e)
		rcv := newReceiver(t, v.clk, always(http.StatusNoContent))
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		ep := v.endpoint(t, srv.URL+"/hooks", rcv.secret)
		v.decide(t)
		v.clk.Advance(time.Second)
		v.decide(t)
		ms := v.messages(t, ep)
		if len(ms) != 2 {
			t.Fatalf("%d messages, want 2", len(ms))
		}
		first, second := ms[0], ms[1]
		if second.CreatedAt.Before(first.CreatedAt) {
			first, second = second, first
		}
		mend := storetest.FailOn(t, v.s, "UPDATE", "outbox", "NEW.id = '"+first.ID+"'")
		w := outbox.New(v.s, "w1", quiet, nil)

		n, err := w.RunOnce(t.Context())
		var sk *store.SkippedRows
		if n != 1 || !errors.As(err, &sk) || len(sk.Rows) != 1 || sk.Rows[0].ID != first.ID {
			t.Fatalf("RunOnce = %d, %v; want 1 claim and %s skipped", n, err, first.ID)
		}
		if got, _ := rcv.counts(); len(got) != 1 || got[second.EventID] != 1 {
			t.Fatalf("receiver got %v, want %s once", got, second.EventID)
		}

		mend()
		runOnce(t, w, 1)
		for _, m := range v.messages(t, ep) {
			if m.Status != store.OutboxDelivered {
				t.Errorf("message %s is %s once mended, want delivered", m.ID, m.Status)
			}
		}
	})
}
