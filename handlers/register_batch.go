package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/sync/semaphore"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// MaxBatchBodyBytes is the largest body POST /operations/batch reads: a
// thousand registrations of up to 16 KiB each.
const MaxBatchBodyBytes = 16 << 20

// DefaultBatchesInFlight bounds the registrations POST /operations/batch
// works on at once in this process unless SetBatchesInFlight says
// otherwise: four full batches. A registration in flight holds about 5 KB
// (its plan, row, audit event and answer): without a bound, sixteen clients
// sending batches of 1,000 kept 80 MB live and the process at 243 – 266 MB
// resident; with it, at 166 – 174 MB, at the same rate on two cores, since
// the database sets the pace, not how many batches wait on it. A batch is
// one statement on one database connection, so a database with more cores
// to spare than four may take more at once (limbo serve --batch-in-flight).
// A batch waits its turn after its body is read, in arrival order
// (semaphore.Weighted is FIFO, so a full batch is not starved by small
// ones), and one whose client leaves while waiting writes nothing.
//
// The batches that wait are bounded too, by the bytes of registrations
// they hold (batchWaitBytes): otherwise a burst of clients could queue any
// number of 16 MiB bodies in memory. A batch that would go over is
// refused at once, 503 busy with a Retry-After, having written nothing.
const DefaultBatchesInFlight = 4 * store.MaxRegisterMany

// batchWaitBytes is how many bytes of registrations the batches waiting
// for their turn may hold when inFlight registrations may be worked on at
// once: the bodies of as many full batches as may be in flight, 64 MiB by
// default. At the least bound, one full batch's body may always wait.
func batchWaitBytes(inFlight int) int64 {
	return int64(inFlight) * MaxBatchBodyBytes / store.MaxRegisterMany
}

// busyRetryAfter is the Retry-After, in seconds, of a batch refused because
// too many wait: about how long the batches ahead of it take.
const busyRetryAfter = 1

// MaxBatchesInFlight is the largest bound SetBatchesInFlight takes: a
// hundred full batches, each one statement on its own connection, as many
// as a stock PostgreSQL takes connections (max_connections = 100); the
// batches waiting may then hold 1.6 GB.
const MaxBatchesInFlight = 100 * store.MaxRegisterMany

// CheckBatchesInFlight refuses a bound of batches in flight that could
// never admit a full batch (it would wait forever), or that is beyond what
// any database works on at once (MaxBatchesInFlight).
func CheckBatchesInFlight(n int) error {
	switch {
	case n < store.MaxRegisterMany:
		return fmt.Errorf("%d registrations is less than one full batch (%d)", n, store.MaxRegisterMany)
	case n > MaxBatchesInFlight:
		return fmt.Errorf("%d registrations is more than %d, a hundred full batches", n, MaxBatchesInFlight)
	}
	return nil
}

// SetBatchesInFlight bounds the registrations POST /operations/batch works
// on at once to n (CheckBatchesInFlight). Call it before serving.
func (h *Handlers) SetBatchesInFlight(n int) error {
	if err := CheckBatchesInFlight(n); err != nil {
		return fmt.Errorf("batches in flight: %w", err)
	}
	h.admitBatches(n)
	return nil
}

// admitBatches makes h work on n registrations of batches at once, the
// batches waiting holding at most batchWaitBytes(n).
func (h *Handlers) admitBatches(n int) {
	h.batches, h.batchLimit = semaphore.NewWeighted(int64(n)), n
	h.batchWait = semaphore.NewWeighted(batchWaitBytes(n))
}

// BatchesInFlight is the bound on the registrations POST /operations/batch
// works on at once.
func (h *Handlers) BatchesInFlight() int { return h.batchLimit }

// batchRequest is the body of POST /api/v1/operations/batch. Each element
// is read as the body of POST /operations is, on its own, so one that is
// malformed answers for itself.
type batchRequest struct {
	Operations []json.RawMessage `json:"operations"`
}

// batchResult is one registration's answer: the status and body that
// POST /operations would have answered for it.
type batchResult struct {
	Status    int               `json:"status"`
	Operation *review.Operation `json:"operation,omitempty"`
	Problem   *Problem          `json:"problem,omitempty"`
}

type batchResponse struct {
	Results []batchResult `json:"results"`
}

// RegisterOperations registers up to store.MaxRegisterMany operations in one
// call: 200 with one result per registration, in order, each as single
// registration answers it (201, 200, or its problem). One registration's
// refusal never fails its neighbours; only what fails the call as a whole
// (the body, the database) is the call's own problem, and then repeating
// it is safe.
func (h *Handlers) RegisterOperations(c echo.Context) error {
	var req batchRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	switch {
	case req.Operations == nil:
		return &FieldError{Field: "operations", Problem: "required"}
	case len(req.Operations) == 0 || len(req.Operations) > store.MaxRegisterMany:
		return &FieldError{Field: "operations", Problem: fmt.Sprintf("must hold 1 to %d registrations, got %d", store.MaxRegisterMany, len(req.Operations))}
	}
	n := int64(len(req.Operations))
	if err := h.admitBatch(c, req.Operations); err != nil {
		return err
	}
	defer h.batches.Release(n)
	results := make([]batchResult, len(req.Operations))
	var (
		regs []review.Registration
		at   []int // regs[k] answers results[at[k]]
	)
	for i, raw := range req.Operations {
		r, err := batchRegistration(c, raw)
		if err != nil {
			results[i] = h.batchProblem(c, err)
			continue
		}
		regs, at = append(regs, r), append(at, i)
	}
	if len(regs) > 0 {
		got, err := h.Store.RegisterMany(c.Request().Context(), regs)
		if err != nil {
			return err
		}
		for k, g := range got {
			switch {
			case g.Err != nil:
				results[at[k]] = h.batchProblem(c, g.Err)
			case g.Created:
				results[at[k]] = batchResult{Status: http.StatusCreated, Operation: g.Op}
			default:
				results[at[k]] = batchResult{Status: http.StatusOK, Operation: g.Op}
			}
		}
	}
	return c.JSON(http.StatusOK, batchResponse{Results: results})
}

// admitBatch returns once the batch ops may be worked on, having taken
// its registrations of the admission; the caller gives them back. A batch
// that must wait holds its bytes of the waiting room while it does, and is
// refused (busy) when they do not fit; one whose client leaves while it
// waits ends (499). Either way it has taken nothing.
func (h *Handlers) admitBatch(c echo.Context, ops []json.RawMessage) error {
	n := int64(len(ops))
	if h.batches.TryAcquire(n) {
		return nil
	}
	var size int64
	for _, raw := range ops {
		size += int64(len(raw))
	}
	if !h.batchWait.TryAcquire(size) {
		h.Metrics.BatchRefused(len(ops))
		h.Log.WarnContext(c.Request().Context(), "bulk intake busy: batch refused", "registrations", n, "bytes", size)
		return &Problem{Type: "busy", Title: "Too many batches waiting", Status: http.StatusServiceUnavailable,
			Detail:     fmt.Sprintf("the batches waiting for their turn in this instance already hold all it allows (%d MiB of registrations); nothing was registered, retry after Retry-After seconds", batchWaitBytes(h.batchLimit)>>20),
			RetryAfter: busyRetryAfter}
	}
	defer h.batchWait.Release(size)
	defer h.Metrics.BatchWaits(len(ops))()
	return h.batches.Acquire(c.Request().Context(), n) // an error: the client left while the batch waited (499)
}

// batchRegistration reads one element of a batch as RegisterOperation reads
// its body.
func batchRegistration(c echo.Context, raw json.RawMessage) (review.Registration, error) {
	var req registerRequest
	if err := DecodeJSON(raw, &req); err != nil {
		return review.Registration{}, err
	}
	if err := checkStrings(&req); err != nil {
		return review.Registration{}, err
	}
	if req.Attempt {
		return review.Registration{}, &FieldError{Field: "attempt", Problem: "a batch only registers: ask for each attempt with POST /api/v1/operations/{id}/attempts"}
	}
	return registration(c, &req)
}

// batchProblem is err as one registration's answer. Errors that are not the
// registration's own (the database) fail the whole call before this.
func (h *Handlers) batchProblem(c echo.Context, err error) batchResult {
	p := *h.toProblem(err, c) // a copy: a Problem may be a shared value
	p.RequestID = requestID(c)
	return batchResult{Status: p.Status, Problem: &p}
}

// bodyLimit is middleware.BodyLimit answering 413 with what the route's
// limit is.
func bodyLimit(limit int64, detail string) echo.MiddlewareFunc {
	limited := middleware.BodyLimit(strconv.FormatInt(limit, 10))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := limited(next)
		return func(c echo.Context) error {
			err := h(c)
			var he *echo.HTTPError
			if errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge {
				return &Problem{Type: "payload-too-large", Title: "Request body too large", Status: he.Code, Detail: detail}
			}
			return err
		}
	}
}
