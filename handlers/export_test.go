package handlers

import (
	"context"
	"sync"
	"testing"

	"golang.org/x/sync/semaphore"
)

// SafeNext lets the external tests table-test the one function that decides
// where a sign-in may redirect.
var SafeNext = safeNext

// HoldBatches takes n of h's batch admission (DefaultBatchesInFlight), as
// batches in flight would, and returns what gives it back. It is given
// back at the test's end too, at the latest: a test that fails while it
// holds must not leave a waiting batch for the server's Close to wait on.
func HoldBatches(t testing.TB, h *Handlers, n int64) (release func()) {
	if !h.batches.TryAcquire(n) {
		t.Fatal("HoldBatches: the admission is already taken")
	}
	release = sync.OnceFunc(func() { h.batches.Release(n) })
	t.Cleanup(release)
	return release
}

// BatchWaitBytes is what the batches waiting for their turn may hold, for
// a bound of registrations in flight.
var BatchWaitBytes = batchWaitBytes

// ShrinkBatchWait lets the batches waiting for their turn in h hold only
// bytes of registrations, so that a test fills the room with small
// batches. Call it before serving.
func ShrinkBatchWait(h *Handlers, bytes int64) { h.batchWait = semaphore.NewWeighted(bytes) }

// NonNullable is an OpenAPI node with "X or null" documented as X alone.
var NonNullable = nonNullable

// ErrorMessage is a domain error as the console shows it, in ctx's language.
func ErrorMessage(ctx context.Context, err error) string { return errorMessage(ctx, err).In(ctx) }
