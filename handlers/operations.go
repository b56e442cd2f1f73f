package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// registerRequest is the body of POST /api/v1/operations. Every string
// declares its intake rule (intake.go); the deadline is read as RFC 3339
// exactly, not as time.Time's UnmarshalJSON reads it.
type registerRequest struct {
	SourceRef      string          `json:"source_ref" text:"id,255"`
	LogicalVersion string          `json:"logical_version" text:"id,255"`
	Action         string          `json:"action" text:"id,255"`
	Destination    string          `json:"destination" text:"id,255"`
	Risk           review.Risk     `json:"risk" text:"id,32"`
	Flags          []review.Flag   `json:"flags" text:"id,32"`
	Payload        json.RawMessage `json:"payload"`
	Key            string          `json:"key" text:"id,255,key"`
	Deadline       *string         `json:"deadline" text:"id,40,date-time"`
	MaxAttempts    *int            `json:"max_attempts"`
	CostBudget     *float64        `json:"cost_budget"`
	After          *afterRequest   `json:"after"`
	// Attempt asks for the first attempt in the same call (attempt below).
	Attempt bool `json:"attempt"`
}

// registerResponse is the operation, and with "attempt": true the attempt
// granted, or why none may start yet.
type registerResponse struct {
	*review.Operation
	Attempt        *store.Grant `json:"attempt,omitempty"`
	AttemptProblem *Problem     `json:"attempt_problem,omitempty"`
}

// afterRequest names the operation a registration waits for
// (review.Dependency).
type afterRequest struct {
	OperationID     string `json:"operation_id" text:"id,255"`
	State           string `json:"state" text:"id,32"`
	ResourceVersion string `json:"resource_version" text:"id,255"`
}

// RegisterOperation records an operation before its first call: 201 new,
// 200 the stored one for the same key and payload, 422 for the same key
// with a different payload.
func (h *Handlers) RegisterOperation(c echo.Context) error {
	var req registerRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	r, err := registration(c, &req)
	if err != nil {
		return err
	}
	op, created, err := h.Store.Register(c.Request().Context(), r)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/operations/"+op.ID)
	}
	if !req.Attempt {
		return c.JSON(status, op)
	}
	resp, err := h.attempt(c, op)
	if err != nil {
		return err
	}
	return c.JSON(status, resp)
}

// registration is what req asks to register, checked as far as the handler
// checks it (the store's plan checks the rest).
func registration(c echo.Context, req *registerRequest) (review.Registration, error) {
	if len(req.Payload) == 0 || string(req.Payload) == "null" {
		return review.Registration{}, &FieldError{Field: "payload", Problem: "required"}
	}
	if review.IsCompensation(req.Action) {
		return review.Registration{}, &FieldError{Field: "action", Problem: "actions starting with " + review.CompensationPrefix + " are Limbo's own: it registers a compensation when a reviewer decides one"}
	}
	payload, err := review.Canonicalize(req.Payload)
	if err != nil {
		return review.Registration{}, &FieldError{Field: "payload", Problem: err.Error()}
	}
	var deadline *time.Time
	if req.Deadline != nil {
		d, err := review.ParseRFC3339(*req.Deadline) // checked by bindJSON already
		if err != nil {
			return review.Registration{}, &FieldError{Field: "deadline", Problem: err.Error()}
		}
		deadline = &d
	}
	var after *review.Dependency
	if req.After != nil {
		after = &review.Dependency{OperationID: req.After.OperationID, State: review.State(req.After.State),
			ResourceVersion: req.After.ResourceVersion}
	}
	return review.Registration{
		Tenant: caller(c).Tenant, SourceRef: req.SourceRef, LogicalVersion: req.LogicalVersion,
		Action: req.Action, Destination: req.Destination, Risk: req.Risk, Flags: req.Flags,
		Payload: payload, Key: req.Key, Deadline: deadline, MaxAttempts: req.MaxAttempts,
		CostBudget: req.CostBudget, After: after, Actor: actor(c), RequestedBy: caller(c).CreatedBy,
	}, nil
}

// attempt is the attempt a registration asked for, as POST
// /operations/{id}/attempts with no body would grant it: one call instead
// of two, each step durable and audited in its own transaction as before.
// The registration stands whatever the attempt's answer: a refusal (wait,
// not attemptable, awaiting approval, a dependency) is attempt_problem in
// the registration's answer. The operation is as the registration left
// it, not re-read (that would be a third round trip): a grant has since
// moved it to in_flight. Only a failure that may pass (the
// database) fails the whole call, which is safe to repeat: the same
// registration answers 200 and asks again.
func (h *Handlers) attempt(c echo.Context, op *review.Operation) (*registerResponse, error) {
	ctx := c.Request().Context()
	g, err := h.Store.StartAttempt(ctx, store.AttemptRequest{Tenant: caller(c).Tenant, OperationID: op.ID, Actor: actor(c)})
	if err == nil {
		return &registerResponse{Operation: op, Attempt: g}, nil
	}
	p := *h.toProblem(err, c)
	if p.Status >= http.StatusInternalServerError || p.Status == 499 {
		return nil, err
	}
	p.RequestID = requestID(c)
	return &registerResponse{Operation: op, AttemptProblem: &p}, nil
}

// GetOperation answers the tenant's operation with attempts, evidence and jobs.
func (h *Handlers) GetOperation(c echo.Context) error {
	op, err := h.Store.GetOperation(c.Request().Context(), caller(c).Tenant, c.Param("id"), "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, op)
}

// operationPage is one keyset page of operations.
type operationPage struct {
	Operations []*review.Operation `json:"operations"`
	NextCursor string              `json:"next_cursor,omitempty"`
}

// ListOperations pages through the tenant's operations, optionally by state
// and source_ref.
func (h *Handlers) ListOperations(c echo.Context) error {
	state := review.State(c.QueryParam("state"))
	if state != "" && !state.Valid() {
		return &FieldError{Field: "state", Problem: "not a known state"}
	}
	limit := 50
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return &FieldError{Field: "limit", Problem: "must be an integer between 1 and 500"}
		}
		limit = n
	}
	f := store.OperationFilter{State: state, SourceRef: c.QueryParam("source_ref")}
	if f.SourceRef != "" {
		if p := review.TextProblem(review.Identifier, review.MaxFieldLen, f.SourceRef); p != "" {
			return &FieldError{Field: "source_ref", Problem: p}
		}
		f.SourceRef = review.NFC(f.SourceRef)
	}
	ops, next, err := h.Store.ListOperations(c.Request().Context(), caller(c).Tenant, f, c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, operationPage{Operations: ops, NextCursor: next})
}

// attemptRequest is the body of POST /operations/{id}/attempts (optional).
type attemptRequest struct {
	Credential string `json:"credential" text:"id,255"`
	Model      string `json:"model" text:"id,255"`
}

// StartAttempt asks permission to send: 201 with n, lease and key; 429 with
// Retry-After while something says wait; 409 when the state forbids it.
func (h *Handlers) StartAttempt(c echo.Context) error {
	var req attemptRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		return err
	}
	g, err := h.Store.StartAttempt(c.Request().Context(), store.AttemptRequest{
		Tenant: caller(c).Tenant, OperationID: c.Param("id"),
		Credential: req.Credential, Model: req.Model, Actor: actor(c),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, g)
}

// outcomeResponse tells the integrator what comes next.
type outcomeResponse struct {
	Operation *review.Operation `json:"operation"`
	Next      review.Next       `json:"next"`
	RetryAt   *time.Time        `json:"retry_at,omitempty"`
	Reason    string            `json:"reason"`
}

// RecordOutcome applies the report of attempt n: 200 with the operation and
// what comes next; the same report again → 200 unchanged; another → 409.
func (h *Handlers) RecordOutcome(c echo.Context) error {
	n, err := attemptNumber(c)
	if err != nil {
		return err
	}
	var o review.Outcome
	if err := bindJSON(c, &o); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	res, err := h.Store.RecordOutcome(c.Request().Context(), caller(c).Tenant, c.Param("id"), n, o, actor(c))
	if err != nil {
		return err
	}
	if !res.Unchanged {
		h.Metrics.ObserveOutcome(res.Next, res.Operation.Destination)
	}
	return c.JSON(http.StatusOK, outcomeResponse{Operation: res.Operation, Next: res.Next, RetryAt: res.RetryAt, Reason: res.Reason})
}

// attemptNumber reads the path's {n}, which the document declares an
// integer of at least 1: anything else is a 400 naming n. An integer too
// large for any attempt is one the operation has no attempt for: 404.
func attemptNumber(c echo.Context) (int, error) {
	s := c.Param("n")
	n, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-"):
		return 0, review.ErrNotFound
	case err != nil:
		return 0, &FieldError{Field: "n", Problem: "the attempt number must be an integer"}
	case n < 1:
		return 0, &FieldError{Field: "n", Problem: "attempts are numbered from 1"}
	}
	return n, nil
}

// AttemptOutput answers the structured output kept with an attempt (the
// structured-output gate), and why it was refused if it was.
func (h *Handlers) AttemptOutput(c echo.Context) error {
	n, err := attemptNumber(c)
	if err != nil {
		return err
	}
	out, err := h.Store.AttemptOutput(c.Request().Context(), caller(c).Tenant, c.Param("id"), n)
	if err != nil {
		return err
	}
	if out.PurgedAt != nil {
		// Kept, then emptied: not the 404 of an attempt that kept none.
		return problemf(http.StatusGone, "purged", "Purged",
			"attempt %d's structured output was kept, and purged by the payload retention at %s", n, out.PurgedAt.Format(time.RFC3339))
	}
	return c.JSON(http.StatusOK, out)
}

// evidenceRequest is the body of POST /operations/{id}/evidence.
type evidenceRequest struct {
	Source        review.EvidenceSource `json:"source" text:"id,32"`
	Authoritative bool                  `json:"authoritative"`
	Candidates    []review.Candidate    `json:"candidates"`
}

// AddEvidence records what the integrator observed; 200 with the new state.
func (h *Handlers) AddEvidence(c echo.Context) error {
	var req evidenceRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	op, err := h.Store.AddEvidence(c.Request().Context(), caller(c).Tenant, c.Param("id"), review.Evidence{
		Source: req.Source, Authoritative: req.Authoritative, Candidates: req.Candidates,
	}, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, op)
}

// jobRequest is the body of PUT /operations/{id}/jobs/{ref}.
type jobRequest struct {
	Status       review.JobStatus `json:"status" text:"id,32"`
	InputVersion string           `json:"input_version" text:"id,255"`
	OutputRef    string           `json:"output_ref" text:"id,255"`
}

// PutJob updates one of the operation's transformation jobs (store.PutJob
// refuses a ref the operation never reported); 200 with the operation.
func (h *Handlers) PutJob(c echo.Context) error {
	var req jobRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	op, err := h.Store.PutJob(c.Request().Context(), caller(c).Tenant, c.Param("id"), review.Job{
		Ref: c.Param("ref"), Status: req.Status, InputVersion: req.InputVersion, OutputRef: req.OutputRef,
	}, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, op)
}

// bindJSON reads the whole body (the BodyLimit middleware turns an oversize
// body into 413), decodes it strictly and holds every string in it to its
// declared rule (checkStrings).
func bindJSON(c echo.Context, v any) error {
	if err := checkContentType(c); err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	if err := DecodeJSON(body, v); err != nil {
		return err
	}
	return checkStrings(v)
}

// bindOptionalJSON is bindJSON for calls whose body may be empty.
func bindOptionalJSON(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return nil
	}
	if err := checkContentType(c); err != nil {
		return err
	}
	if err := DecodeJSON(body, v); err != nil {
		return err
	}
	return checkStrings(v)
}

// checkContentType accepts JSON, or no declared type at all.
func checkContentType(c echo.Context) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && mt != "application/problem+json") {
		return problemf(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", "send Content-Type: application/json")
	}
	return nil
}

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}
