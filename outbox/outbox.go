// Package outbox is the background worker that delivers decision webhooks
// from the store's transactional outbox: it claims due messages with a
// fenced lease, POSTs each one signed the Standard Webhooks way, and records
// the try, which delivers the message or schedules the next one. Several
// workers may run against one PostgreSQL: claims are disjoint, and a worker
// that wakes up after its lease was taken over is fenced.
package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

// Timeout bounds one delivery, connection included.
const Timeout = 10 * time.Second

// Worker delivers outbox messages.
type Worker struct {
	Store *store.Store
	// Owner names this worker in claims (host and process, say).
	Owner string
	// Client sends the requests; it must not follow redirects.
	Client *http.Client
	// Lease is how long a claim holds; it outlasts Timeout so that a try
	// in progress is not claimed again by another worker.
	Lease time.Duration
	// Batch is how many messages one round claims.
	Batch int
	// Concurrency is how many deliveries run at once.
	Concurrency int
	Log         *slog.Logger
	// OnDelivered, when set, hears of every message this worker
	// delivered, as the store recorded it (the app feeds metrics).
	OnDelivered func(*store.OutboxMessage)
}

// New returns a worker with sensible defaults. A nil client means
// NewClient under the store's webhooks.allow_internal: the policy the
// store checked endpoints against when they were added.
func New(st *store.Store, owner string, log *slog.Logger, client *http.Client) *Worker {
	if log == nil {
		log = slog.Default()
	}
	if client == nil {
		client = NewClient(store.WebhookPolicy(st.Config()))
	}
	return &Worker{Store: st, Owner: owner, Client: client, Lease: 3 * Timeout, Batch: 32, Concurrency: 8, Log: log}
}

// NewClient returns the HTTP client deliveries use: Timeout per request,
// redirects answered as they are (a 3xx is not a delivery), no proxy, and
// every connection through netguard under policy. https endpoints may
// reach any public address and the internal ones policy lists; plain http
// only what policy lists, so a signed decision crosses no network in clear
// text that the operator did not name.
func NewClient(policy netguard.Policy) *http.Client { return newClient(policy, nil, nil) }

// newClient is NewClient with netguard's resolver and dialer injected (nil:
// the system's), so a test can see what would be dialled without a packet.
func newClient(policy netguard.Policy, resolve netguard.Resolver, dial netguard.DialFunc) *http.Client {
	transport := func(listedOnly bool) *http.Transport {
		tr := netguard.Transport(&netguard.Guard{Policy: policy, ListedOnly: listedOnly, Resolve: resolve, Dial: dial,
			Timeout: 5 * time.Second})
		tr.MaxIdleConnsPerHost, tr.ResponseHeaderTimeout = 4, Timeout
		return tr
	}
	rt := &byScheme{https: transport(false), http: transport(true)}
	return &http.Client{Transport: rt, Timeout: Timeout, CheckRedirect: netguard.NoRedirects}
}

// byScheme sends http requests and https ones through their own
// transports: the guard that dials cannot see the scheme, and pooled
// connections must not cross from one to the other.
type byScheme struct{ https, http *http.Transport }

func (b *byScheme) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		return b.http.RoundTrip(req)
	}
	return b.https.RoundTrip(req)
}

// Run delivers every interval until ctx ends, draining full batches at once.
func (w *Worker) Run(ctx context.Context, every time.Duration) {
	loop.Drain(ctx, every, w.Log, "outbox round", w.batch(), w.RunOnce)
}

// batch is how many messages one round claims: Batch, but no more than
// its Concurrency can try within their lease when every try takes the
// whole Timeout. A message claimed beyond that would be sent after its
// lease lapsed, when another worker may have claimed and sent it too.
func (w *Worker) batch() int {
	waves := max(1, int(w.Lease/Timeout))
	return max(1, min(w.Batch, max(1, w.Concurrency)*waves))
}

// RunOnce claims a batch of due messages and tries each once. It returns
// how many it claimed; with messages that could not be claimed
// (*store.SkippedRows), the others are tried, and the error says which.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	claims, err := w.Store.ClaimDeliveries(ctx, w.Owner, w.batch(), w.Lease)
	var skipped *store.SkippedRows
	if err != nil && !errors.As(err, &skipped) {
		return 0, err
	}
	sem := make(chan struct{}, max(1, w.Concurrency))
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// A panic here would end the process: the round's own
			// recovery (loop.Drain) does not reach this goroutine. The
			// claim's lease lapses and the message is tried again.
			defer loop.Recover(ctx, w.Log, "outbox delivery")
			w.deliver(ctx, c)
		}()
	}
	wg.Wait()
	return len(claims), err
}

// deliver makes one try and records it.
func (w *Worker) deliver(ctx context.Context, c store.DeliveryClaim) {
	if left := c.LeaseUntil.Sub(w.Store.Now()); left < Timeout {
		// Waited too long for its turn: a try now could outlast the
		// claim, and run beside another worker's. Its lease lapses and a
		// later round claims it again.
		w.Log.Warn("outbox: claim too close to its lease's end, not sent", "outbox_id", c.ID, "endpoint_id", c.EndpointID, "lease_left", left)
		return
	}
	start := time.Now()
	status, sendErr := w.send(ctx, c)
	took := time.Since(start)
	if ctx.Err() != nil {
		// Shutting down: the try says nothing about the receiver. The
		// lease expires and the message is tried again.
		return
	}
	if sendErr != nil {
		// The raw error, with the addresses and ports it names, only here:
		// the history records its class (store.CompleteDelivery).
		w.Log.Debug("outbox: delivery failed", "outbox_id", c.ID, "endpoint_id", c.EndpointID, "err", sendErr)
	}
	m, err := w.Store.CompleteDelivery(ctx, c, status, sendErr, took)
	if err != nil {
		w.Log.Warn("outbox: delivery not recorded", "outbox_id", c.ID, "endpoint_id", c.EndpointID, "err", err)
		return
	}
	switch m.Status {
	case store.OutboxDelivered:
		if w.OnDelivered != nil {
			w.OnDelivered(m)
		}
	case store.OutboxFailed:
		w.Log.Warn("outbox: gave up on a webhook", "outbox_id", c.ID, "endpoint_id", c.EndpointID, "attempts", m.Attempts,
			"status_code", m.LastStatusCode, "err", m.LastError)
	case store.OutboxPending:
		w.Log.Info("outbox: webhook not delivered, will retry", "outbox_id", c.ID, "endpoint_id", c.EndpointID,
			"attempts", m.Attempts, "next_attempt_at", m.NextAttemptAt, "status_code", m.LastStatusCode, "err", m.LastError)
	}
}

// send POSTs the message, signed at the store's clock, and returns the
// receiver's status code (0 when none came) or the error.
func (w *Worker) send(ctx context.Context, c store.DeliveryClaim) (int, error) {
	body := []byte(c.Payload)
	h, err := webhook.Headers(c.Secret, c.EventID, w.Store.Now(), body)
	if err != nil {
		return 0, fmt.Errorf("sign: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if req.URL.User != nil {
		// Stored before credentials were refused: the client would send
		// them as Basic authentication. Refused instead, as policy.
		return 0, &netguard.Refusal{Host: req.URL.Hostname(), Rule: netguard.RuleUserInfo}
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Limbo-Webhooks/1")
	resp, err := w.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read a little so the connection can be reused; the body says nothing.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
