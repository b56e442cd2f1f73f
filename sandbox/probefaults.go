package sandbox

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// probeFault is the outcome of a probe's fault draw.
type probeFault int

const (
	probeTruth probeFault = iota
	// probe5xx: answered 500, 502 or 503 with a JSON error body.
	probe5xx
	// probeHang: held for ProbeHang, longer than a probe waits.
	probeHang
	// probeGarbage: answered 200 with a body that is not the answer:
	// invalid or truncated JSON, or valid JSON of the wrong shape.
	probeGarbage
)

// probeStatuses are the 5xx a faulted probe is answered with.
var probeStatuses = []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}

// garbage are the bodies a probe faulted as garbage answers with 200,
// given the true answer's body. Each is unreadable as the answer the probe
// asked for: broken JSON, or JSON of a shape that names no resource and no
// list of them where the sandbox's answer holds it.
var garbage = []func(truth []byte) []byte{
	// Cut off halfway, as when a proxy drops the connection mid-body.
	func(truth []byte) []byte { return truth[:len(truth)/2] },
	// An error page with a 200 and a JSON content type.
	func([]byte) []byte { return []byte("<html><body><h1>502 Bad Gateway</h1></body></html>") },
	// Nothing at all.
	func([]byte) []byte { return []byte{} },
	// The answer, then something else.
	func(truth []byte) []byte { return append(append([]byte{}, truth...), "<!-- cache -->"...) },
	// Valid JSON, the wrong shape: an empty object, null, a string, the
	// truth wrapped in an envelope the probe does not expect, and an
	// empty list.
	func([]byte) []byte { return []byte(`{}`) },
	func([]byte) []byte { return []byte(`null`) },
	func([]byte) []byte { return []byte(`"ok"`) },
	func(truth []byte) []byte { return append(append([]byte(`{"data":`), truth...), '}') },
	func([]byte) []byte { return []byte(`[]`) },
}

// ProbeStats counts the probe requests the sandbox answered and how many
// of their answers it faulted, by kind.
type ProbeStats struct {
	// Probes is every probe request (status lookup, search, job lookup).
	Probes int64
	// Errors were answered 500, 502 or 503.
	Errors int64
	// Hangs were held for ProbeHang (or until the client left or the
	// sandbox closed).
	Hangs int64
	// Garbage were answered 200 with a body that is not the answer.
	Garbage int64
}

// Faulted is how many probe answers were faulted, of every kind.
func (p ProbeStats) Faulted() int64 { return p.Errors + p.Hangs + p.Garbage }

// probeCounters are ProbeStats as they are counted.
type probeCounters struct {
	probes, errors, hangs, garbage atomic.Int64
}

// ProbeStats reports the probe answers so far and how many were faulted.
func (s *Sandbox) ProbeStats() ProbeStats {
	return ProbeStats{Probes: s.probeCount.probes.Load(), Errors: s.probeCount.errors.Load(),
		Hangs: s.probeCount.hangs.Load(), Garbage: s.probeCount.garbage.Load()}
}

// SetProbeErrors changes Options.ProbeErrors from the next probe on: a
// fault run can end its probe faults so that everything left settles. A
// share outside [0, 1] is refused.
func (s *Sandbox) SetProbeErrors(share float64) error {
	if math.IsNaN(share) || share < 0 || share > 1 {
		return fmt.Errorf("probe errors %v: a share must lie in [0, 1]", share)
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	s.probeErrors = share
	return nil
}

// pickProbe draws whether a probe is faulted and, if so, how, with the
// variant of that kind (the 5xx status, the garbage body): i indexes
// probeStatuses or garbage. The draws come from the probes' own stream of
// the seeded source: how many probes a reconciler sends varies with its
// timing, and must not shift the draws of the mutating requests' faults.
func (s *Sandbox) pickProbe() (f probeFault, i int) {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	if s.probeErrors <= 0 || s.probeRng.Float64() >= s.probeErrors {
		return probeTruth, 0
	}
	f = probe5xx + probeFault(min(int(s.probeRng.Float64()*3), 2))
	switch f {
	case probe5xx:
		i = min(int(s.probeRng.Float64()*float64(len(probeStatuses))), len(probeStatuses)-1)
	case probeGarbage:
		i = min(int(s.probeRng.Float64()*float64(len(garbage))), len(garbage)-1)
	}
	return f, i
}

// probe wraps a probe endpoint with its faults. The endpoint only reads,
// and runs whether or not the answer is faulted (a garbage answer spoils
// the true one): a fault never changes what the sandbox holds.
func (s *Sandbox) probe(fn probeEndpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.probeCount.probes.Add(1)
		f, i := s.pickProbe()
		status, v := fn(r)
		switch f {
		case probe5xx:
			s.probeCount.errors.Add(1)
			writeJSON(w, probeStatuses[i], apiError{Error: "unavailable", Detail: "probe fault"})
		case probeHang:
			s.probeCount.hangs.Add(1)
			s.hang(w, r)
		case probeGarbage:
			s.probeCount.garbage.Add(1)
			body, err := json.Marshal(v)
			if err != nil {
				body = []byte(`{"error":"internal"}`)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write(garbage[i](body))
		default:
			writeJSON(w, status, v)
		}
	})
}

// hang holds a probe's answer for ProbeHang, longer than a probe waits,
// then answers 504. It ends at once when the client goes away or the
// sandbox closes (which waits for it), so no hang outlives either.
func (s *Sandbox) hang(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closed {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "unavailable", Detail: "probe fault"})
		return
	}
	defer s.wg.Done()
	t := time.NewTimer(s.opts.ProbeHang)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-s.ctx.Done():
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "unavailable", Detail: "probe fault"})
	case <-t.C:
		writeJSON(w, http.StatusGatewayTimeout, apiError{Error: "timeout", Detail: "probe fault"})
	}
}
