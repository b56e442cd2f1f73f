package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/internal/testnet"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// opaqueRT is a transport that reports none of httptrace's events (another
// HTTP stack, or one that sends under a context of its own): it delivers
// the request, then, while lose is set, loses the answer.
type opaqueRT struct{ lose atomic.Bool }

func (o *opaqueRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r.Clone(context.Background()))
	if err == nil && o.lose.Load() {
		resp.Body.Close()
		return nil, errors.New("stream reset")
	}
	return resp, err
}

// wrapRT hands the request on to net/http's Transport, as tracing and
// metrics wrappers do.
type wrapRT struct{ next http.RoundTripper }

func (w wrapRT) RoundTrip(r *http.Request) (*http.Response, error) { return w.next.RoundTrip(r) }

// TestOpaqueTransportMayHaveSent: a send whose transport cannot show that
// nothing left is not before_send. An irreversible write delivered through
// a transport that reports no progress, its answer lost, was reported
// before_send — "no effect possible" — and Limbo granted a second attempt,
// a second effect; it is after_send, and goes to reconciliation. A
// wrapper around net/http's Transport still proves a refused dial
// before_send.
func TestOpaqueTransportMayHaveSent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		l := newLimbo(t, engine)
		ctx := context.Background()
		var effects atomic.Int64
		dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			effects.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"ref":"msg-1"}`))
		}))
		defer dest.Close()

		rt := &opaqueRT{}
		rt.lose.Store(true)
		hc := &http.Client{Transport: rt, Timeout: 5 * time.Second}
		op := l.register(t, "opaque-transport", client.RiskIrreversible)
		res, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
			rt.lose.Store(g.N == 1) // a second attempt would be answered
			req, err := client.NewAttemptRequest(ctx, g, http.MethodPost, dest.URL+"/send", []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			_, o := client.SendAttempt(hc, req)
			return o
		})
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if res.Next != client.NextReconcile || res.Operation.State != client.Ambiguous {
			t.Errorf("next %s, state %s (%s); want reconcile, ambiguous", res.Next, res.Operation.State, res.Reason)
		}
		if a := res.Operation.Attempts[0]; a.Phase != client.PhaseAfterSend {
			t.Errorf("the lost answer was recorded %s/%s, want after_send", a.Result, a.Phase)
		}
		if n := effects.Load(); n != 1 {
			t.Errorf("the destination acted %d times, want 1", n)
		}

		req, err := client.NewAttemptRequest(ctx, nil, http.MethodPost, testnet.ClosedURL(t), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		wrapped := &http.Client{Transport: wrapRT{&http.Transport{}}, Timeout: 5 * time.Second}
		if _, o := client.SendAttempt(wrapped, req); o.Phase != client.PhaseBeforeSend {
			t.Errorf("a refused dial through a wrapper of net/http's Transport: %+v, want before_send", o)
		}
	})
}

// TestRetryBudgetOpaqueTransport: WithRetryBudget repeats a POST that
// failed in transit only when it provably never left; through a transport
// that reports no progress it may have reached Limbo, and is not repeated
// (a second StartAttempt asks for a second attempt).
func TestRetryBudgetOpaqueTransport(t *testing.T) {
	t.Parallel()
	f := &fakeLimbo{answers: []func(http.ResponseWriter, *http.Request){okAnswer}}
	url := serve(t, f)
	rt := &opaqueRT{}
	rt.lose.Store(true)
	c := client.New(url, "tok", client.WithHTTPClient(&http.Client{Transport: rt}), client.WithRetryBudget(3, time.Minute))
	if _, err := c.StartAttempt(context.Background(), "op_1", client.AttemptOptions{}); err == nil {
		t.Fatal("StartAttempt whose answer was lost succeeded")
	}
	if n := f.n.Load(); n != 1 {
		t.Errorf("the POST reached Limbo %d times, want 1", n)
	}

	// A wrapper of net/http's Transport shows a refused dial: sent again.
	var dials atomic.Int32
	addr := testnet.ClosedURL(t)[len("http://"):]
	inner := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	c = client.New("http://"+addr, "tok", client.WithHTTPClient(&http.Client{Transport: wrapRT{inner}}), client.WithRetryBudget(2, time.Minute))
	if _, err := c.StartAttempt(context.Background(), "op_1", client.AttemptOptions{}); err == nil {
		t.Fatal("StartAttempt to a closed port succeeded")
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("%d dials, want 3 (the first and two retries)", n)
	}
}
