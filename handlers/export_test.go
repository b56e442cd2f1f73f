package handlers

// SafeNext lets the external tests table-test the one function that decides
// where a sign-in may redirect.
var SafeNext = safeNext

// HoldBatches takes n of h's batch admission (DefaultBatchesInFlight), as
// batches in flight would, and returns what gives it back.
func HoldBatches(h *Handlers, n int64) (release func()) {
	if !h.batches.TryAcquire(n) {
		panic("HoldBatches: the admission is already taken")
	}
	return func() { h.batches.Release(n) }
}
