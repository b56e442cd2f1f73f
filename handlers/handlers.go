// Package handlers is Limbo's HTTP surface: the integration API (JSON,
// problem+json errors) and the review console. Handlers are short: they
// bind and validate, call review and store, and return errors to the one
// error handler in errors.go.
package handlers

import (
	"context"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Handlers holds what the HTTP handlers need. Build it in cmd and pass it
// down; there are no package-level globals.
type Handlers struct {
	Store *store.Store
	Log   *slog.Logger
	// Metrics, when set, times requests and serves GET /metrics.
	Metrics *metrics.Metrics
	// Console, when set, serves the review console; without it the
	// console routes answer 404.
	Console *Console
	// AuditAnchor, when set, is the directory the sealer copies signed
	// checkpoints to; the console's chain verification checks against it.
	AuditAnchor string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed (see clientAddress). Empty: the connection's peer is the
	// client and forwarding headers are ignored.
	TrustedProxies []*net.IPNet
	// Warnings are what an operator should fix that does not make the
	// instance unready, such as a probe credential not set; GET /readyz
	// lists them.
	Warnings []string
	// BodyTimeout is how long a client may take to send a request's body;
	// zero is DefaultBodyTimeout.
	BodyTimeout time.Duration

	// Checker asks a destination about an operation at a person's word
	// (a check from the case page; the reconciler's Check); nil: the
	// console offers none.
	Checker Checker

	// live ends the console's event streams at shutdown (live.go).
	live liveStreams
	// batches admits POST /operations/batch, batchLimit registrations at
	// once (DefaultBatchesInFlight, SetBatchesInFlight).
	batches    *semaphore.Weighted
	batchLimit int
	// batchWait bounds the bytes of registrations the batches waiting for
	// their turn hold (batchWaitBytes).
	batchWait *semaphore.Weighted
}

// Checker sends a destination's probes for op now and returns the
// answers to record (reconcile.Reconciler.Check).
type Checker interface {
	Check(ctx context.Context, op *review.Operation) (review.CheckAnswers, error)
}

// New returns Handlers over s, logging to log.
func New(s *store.Store, log *slog.Logger) *Handlers {
	if log == nil {
		log = slog.Default()
	}
	h := &Handlers{Store: s, Log: log}
	h.admitBatches(DefaultBatchesInFlight)
	return h
}
