package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store/storetest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/store"
)

func grantAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"operation_id":"op_1","n":1,"key":"k-1","key_header":"Idempotency-Key","lease_expires_at":%q}`,
		time.Now().Add(time.Minute).Format(time.RFC3339Nano))
}

func doneAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"operation":{"id":"op_1","state":"confirmed"},"next":"done","reason":"ok"}`))
}

// WithRetryBudget's doc: "The default is no retries: Do and WaitDecision
// wait out 429 and 503 answers on their own". Do does not wait out a 503
// (database failover) on its StartAttempt: it fails at once.
// TestDoWaitsOut503OnGrant: Do waits out a 503 on the grant (nothing was
// changed), as WithRetryBudget's doc says, instead of returning it.
func TestDoWaitsOut503OnGrant(t *testing.T) {
	f := &fakeLimbo{answers: []func(http.ResponseWriter, *http.Request){
		problemAnswer(503, client.ProblemUnavailable, "1"),
		grantAnswer,
		doneAnswer,
	}}
	c := client.New(serve(t, f), "tok")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Do(ctx, "op_1", client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
		return client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 200}
	})
	if err != nil || res.Next != client.NextDone {
		t.Fatalf("Do: %+v, %v (requests: %d)", res, err, f.n.Load())
	}
}

// report retries "while Limbo cannot be reached or answers 5xx", but a 408
// request-timeout ("nothing changed, the same request may be sent again")
// ends Do with the attempt unreported: it turns unknown/ambiguous.
// TestDoReportRetries408: a 408 on the report (nothing was changed) is
// sent again, not left for the lease to expire.
func TestDoReportRetries408(t *testing.T) {
	f := &fakeLimbo{answers: []func(http.ResponseWriter, *http.Request){
		grantAnswer,
		problemAnswer(408, client.ProblemRequestTimeout, ""),
		doneAnswer,
	}}
	c := client.New(serve(t, f), "tok")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Do(ctx, "op_1", client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
		return client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 200}
	})
	if err != nil || res.Next != client.NextDone {
		t.Fatalf("Do: %+v, %v (requests: %d)", res, err, f.n.Load())
	}
}

// WaitDecision takes every non-Problem error as transient, so a permanent
// one (a base URL without scheme, an answer that is not JSON) polls until
// ctx ends instead of being returned.
// TestWaitDecisionPermanentError: an error that asking again cannot
// change (a URL without its scheme) is returned, not polled until ctx ends.
func TestWaitDecisionPermanentError(t *testing.T) {
	c := client.New("127.0.0.1:1", "tok") // forgot http://
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.WaitDecision(ctx, "op_1")
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDecision polled a permanent error until ctx ended: %v", err)
	}
}

type countRT struct{ req, resp *int64 }

func (c countRT) RoundTrip(r *http.Request) (*http.Response, error) {
	*c.req = r.ContentLength
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		*c.resp = int64(len(b))
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return resp, err
}

func newLimboWith(t *testing.T, opts ...client.Option) *client.Client {
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"dest": {HonoursKeys: true, ConflictMeansInProgress: true, Lease: 30 * time.Second},
	}}
	st := storetest.Open(t, store.SQLite, store.Options{Config: cfg})
	srv := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
	t.Cleanup(srv.Close)
	tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	return client.New(srv.URL, tok, opts...)
}

// TestRegisterManyAnswerOver16MiB: the answer to a batch the server took
// is read however long it is (larger than the batch itself).
func TestRegisterManyAnswerOver16MiB(t *testing.T) {
	var rq, rp int64
	c := newLimboWith(t, client.WithHTTPClient(&http.Client{Transport: countRT{&rq, &rp}}))
	body := strings.Repeat("a", 16500)
	var rs []client.Registration
	for i := range 1000 {
		p, _ := json.Marshal(map[string]string{"html": body})
		rs = append(rs, client.Registration{SourceRef: fmt.Sprintf("mail-%d", i), LogicalVersion: "1", Action: "create_folder",
			Destination: "dest", Risk: client.RiskIdempotentWrite, Payload: p})
	}
	got, err := c.RegisterMany(context.Background(), rs)
	if err != nil || len(got) != len(rs) {
		t.Fatalf("request %d bytes (accepted), answer %d bytes: %d answers, %v", rq, rp, len(got), err)
	}
}

// The client's json.Marshal HTML-escapes every '<', '>' and '&' inside
// json.RawMessage members (\u003c: 6 bytes for 1), so an Output that
// Validate accepts (≤ MaxOutputLen) reaches the server over its limit and
// the report is refused; Do gives up and the attempt is left unreported.
// TestOutputNotEscapedOverLimit: an output within the limit as written
// stays within it as sent (no HTML escaping of < > &).
func TestOutputNotEscapedOverLimit(t *testing.T) {
	l := newLimbo(t, store.SQLite)
	ctx := context.Background()
	op := l.register(t, "gen-1", client.RiskIdempotentWrite)
	out := json.RawMessage(`{"html":"` + strings.Repeat("<p>", 6000) + `"}`) // ~15 KB
	o := client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 200, Output: out}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := l.client.Do(ctx, op.ID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome { return o })
	if err != nil {
		t.Fatalf("Do with a %d-byte output: %v", len(out), err)
	}
	t.Log(res.Next)
}

// Register: a payload well under the 1 MiB body limit is refused 413
// because the client's encoding sends each '<' as \u003c.
// TestRegisterPayloadNotEscaped: a payload within 1 MiB as written is not
// tripled on the wire by HTML escaping.
func TestRegisterPayloadNotEscaped(t *testing.T) {
	l := newLimbo(t, store.SQLite)
	p := json.RawMessage(`{"html":"` + strings.Repeat("<br>", 100_000) + `"}`) // ~400 KB
	_, _, err := l.client.Register(context.Background(), client.Registration{SourceRef: "mail-1", LogicalVersion: "1",
		Action: "send_mail", Destination: "dest", Payload: p})
	if err != nil {
		t.Fatalf("Register with a %d-byte payload: %v", len(p), err)
	}
}
