package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// maxBody bounds a request body, as Limbo's own API does.
const maxBody = 1 << 20

// answer is what an endpoint decided. committed says an effect took place
// (or was undone): only then do the after-commit faults apply, and only then
// is the answer kept under the idempotency key.
type answer struct {
	status    int
	body      []byte
	committed bool
}

func answerJSON(status int, v any, committed bool) answer {
	a := answer{status: status, committed: committed}
	if v != nil {
		body, err := json.Marshal(v)
		if err != nil {
			return answer{status: http.StatusInternalServerError, body: []byte(`{"error":"internal"}`)}
		}
		a.body = body
	}
	return a
}

func invalid(detail string) answer {
	return answerJSON(http.StatusBadRequest, apiError{Error: "invalid_request", Detail: detail}, false)
}

// endpoint performs one mutating request whose body has been read.
type endpoint func(r *http.Request, body []byte) answer

// fault is the outcome of a fault draw.
type fault int

const (
	faultNone fault = iota
	faultRateLimited
	faultUnavailable
	faultErrorAfterCommit
	faultLoss
)

func (s *Sandbox) draw() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

// before draws the fault that refuses a request before any effect.
func (s *Sandbox) before() fault {
	u := s.draw()
	switch {
	case u < s.opts.RateLimited:
		return faultRateLimited
	case u < s.opts.RateLimited+s.opts.Unavailable:
		return faultUnavailable
	}
	return faultNone
}

// after draws the fault that spoils the answer of a committed request.
func (s *Sandbox) after() fault {
	u := s.draw()
	switch {
	case u < s.opts.ErrorAfterCommit:
		return faultErrorAfterCommit
	case u < s.opts.ErrorAfterCommit+s.opts.Loss:
		return faultLoss
	}
	return faultNone
}

// mutating wraps an endpoint with the delay, the faults and the
// Idempotency-Key handling.
func (s *Sandbox) mutating(fn endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sleep(r.Context(), s.opts.Delay) {
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: "too_large"})
			}
			return
		}
		switch s.before() {
		case faultRateLimited:
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, apiError{Error: "rate_limited"})
			return
		case faultUnavailable:
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "unavailable"})
			return
		}

		a, replayed := s.perform(fn, r, body)
		if !a.committed && !replayed {
			writeRaw(w, a.status, a.body)
			return
		}
		switch s.after() {
		case faultErrorAfterCommit:
			writeJSON(w, http.StatusInternalServerError, apiError{Error: "internal"})
			return
		case faultLoss:
			drop(w)
			return
		}
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeRaw(w, a.status, a.body)
	})
}

// perform runs fn once per idempotency key: a key seen before replays the
// first committed answer; a key in use answers 409; a key reused with a
// different request answers 422. Answers that committed nothing (invalid
// requests) are not kept, so the key can be used again.
func (s *Sandbox) perform(fn endpoint, r *http.Request, body []byte) (a answer, replayed bool) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || s.opts.NoKeySupport || r.Method != http.MethodPost {
		return fn(r, body), false
	}
	fp := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + "\n" + string(body)))

	s.mu.Lock()
	e, seen := s.keys[key]
	switch {
	case seen && e.fingerprint != fp:
		s.mu.Unlock()
		return answerJSON(http.StatusUnprocessableEntity, apiError{Error: "key_reused", Detail: "this Idempotency-Key was used with a different request"}, false), false
	case seen && !e.done:
		s.mu.Unlock()
		return answerJSON(http.StatusConflict, apiError{Error: "key_in_progress", Detail: "a request with this Idempotency-Key is still being processed"}, false), false
	case seen:
		s.mu.Unlock()
		return e.answer, true
	}
	e = &keyEntry{fingerprint: fp}
	s.keys[key] = e
	s.mu.Unlock()

	kept := false
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if kept {
			e.answer, e.done = a, true
		} else {
			delete(s.keys, key)
		}
	}()
	a = fn(r, body)
	kept = a.committed
	return a, false
}

// keyEntry is what the sandbox remembers about one Idempotency-Key.
type keyEntry struct {
	fingerprint [32]byte
	done        bool
	answer      answer
}

// drop loses the answer: the connection closes without a byte written, as
// when a response is lost on the way back.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 or a wrapper without Hijack: abort the stream instead.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// sleep waits d, or until ctx ends; it reports whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
