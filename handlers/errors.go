package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// Problem is an RFC 9457 problem detail. Type is a stable slug; clients
// switch on it, never on Title or Detail.
type Problem struct {
	Type        string              `json:"type"`
	Title       string              `json:"title"`
	Status      int                 `json:"status"`
	Detail      string              `json:"detail,omitempty"`
	Field       string              `json:"field,omitempty"`
	OperationID string              `json:"operation_id,omitempty"`
	State       review.State        `json:"state,omitempty"`
	Resource    *review.ResourceRef `json:"resource,omitempty"`
	// RetryAfter, in seconds, is also the answer's Retry-After header.
	RetryAfter int `json:"retry_after,omitempty"`
	// Dependency is the operation a waiting-for-dependency answer waits for.
	Dependency *problemDependency `json:"dependency,omitempty"`
	// RequestID is the request's id (X-Request-Id), to quote in a report.
	RequestID string `json:"request_id,omitempty"`
}

// problemDependency is the dependency a waiting operation waits for, as it is now.
type problemDependency struct {
	OperationID string       `json:"operation_id"`
	State       review.State `json:"state"`
}

func (p *Problem) Error() string { return p.Type + ": " + p.Detail }

func problemf(status int, typ, title, format string, args ...any) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: fmt.Sprintf(format, args...)}
}

// HandleError is the one place errors become HTTP answers: review's
// sentinel and typed errors map to problem+json; anything unexpected is
// logged once and answered 500 without internals.
func (h *Handlers) HandleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if isConsolePath(c.Request().URL.Path) {
		status, msg := h.consoleStatus(err, c)
		h.renderConsoleError(c, status, msg)
		return
	}
	p := *h.toProblem(err, c) // a copy: a Problem may be a shared value
	p.RequestID = requestID(c)
	if p.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if p.Status == http.StatusUnauthorized && p.Type == "unauthorized" {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="limbo"`)
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	if c.Request().Method == http.MethodHead {
		return
	}
	_ = jsonEncode(c.Response(), &p)
}

func (h *Handlers) toProblem(err error, c echo.Context) *Problem {
	var (
		p        *Problem
		field    *FieldError
		mismatch *review.PayloadMismatchError
		notAtt   *review.NotAttemptableError
		wait     *review.WaitError
		depWait  *review.DependencyWaitError
		outcome  *review.OutcomeConflictError
		he       *echo.HTTPError
		body     *bodyError
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &body):
		return body.problem()
	case errors.As(err, &field):
		return &Problem{Type: "invalid-request", Title: "Invalid request", Status: http.StatusBadRequest, Detail: field.Error(), Field: field.Field}
	case errors.As(err, &mismatch):
		return &Problem{Type: "payload-mismatch", Title: "Key already used with a different payload", Status: http.StatusUnprocessableEntity,
			Detail: mismatch.Error(), OperationID: mismatch.Operation.ID, State: mismatch.Operation.State}
	case errors.As(err, &notAtt) && notAtt.Operation.State == review.AwaitingApproval:
		op := notAtt.Operation
		return &Problem{Type: "awaiting-approval", Title: "The operation awaits approval", Status: http.StatusConflict,
			Detail: "no attempt may start before a reviewer approves the operation: " + op.StateReason, OperationID: op.ID, State: op.State}
	case errors.As(err, &notAtt):
		op := notAtt.Operation
		return &Problem{Type: "not-attemptable", Title: "No attempt may start", Status: http.StatusConflict,
			Detail: fmt.Sprintf("operation is %s: %s", op.State, op.StateReason), OperationID: op.ID, State: op.State, Resource: op.Resource}
	case errors.As(err, &depWait):
		return &Problem{Type: "waiting-for-dependency", Title: "The operation waits for another", Status: http.StatusConflict,
			Detail: depWait.Reason, OperationID: depWait.Operation.ID, State: depWait.Operation.State,
			Dependency: &problemDependency{OperationID: depWait.Dependency.ID, State: depWait.Dependency.State}}
	case errors.As(err, &wait):
		secs := max(int(math.Ceil(wait.Until.Sub(h.Store.Now()).Seconds())), 1)
		return &Problem{Type: "retry-later", Title: "Wait before the next attempt", Status: http.StatusTooManyRequests,
			Detail: wait.Reason, RetryAfter: secs}
	case errors.As(err, &outcome):
		return &Problem{Type: "outcome-conflict", Title: "The attempt already has another outcome", Status: http.StatusConflict,
			Detail: outcome.Reason, OperationID: outcome.Operation.ID, State: outcome.Operation.State}
	case errors.Is(err, review.ErrNotFound):
		return &Problem{Type: "not-found", Title: "Not found", Status: http.StatusNotFound, Detail: "no such resource"}
	case errors.Is(err, review.ErrForbidden):
		return &Problem{Type: "forbidden", Title: "Not allowed", Status: http.StatusForbidden, Detail: err.Error()}
	case errors.Is(err, review.ErrInvalid):
		p := &Problem{Type: "invalid-request", Title: "Invalid request", Status: http.StatusBadRequest, Detail: err.Error()}
		// review and store name the field as `field "x":` in their messages.
		if m := fieldInMessage.FindStringSubmatch(err.Error()); m != nil {
			p.Field = m[1]
		}
		return p
	case errors.Is(err, review.ErrInvalidTransition):
		return &Problem{Type: "invalid-transition", Title: "Transition not allowed", Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, review.ErrConflict):
		return &Problem{Type: "conflict", Title: "Changed concurrently", Status: http.StatusConflict, Detail: err.Error()}
	case errors.As(err, &he):
		return httpProblem(he)
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client went away; nobody reads this answer, nothing to alarm on.
		h.Log.DebugContext(c.Request().Context(), "client closed request", "path", c.Path())
		return &Problem{Type: "client-closed-request", Title: "Client closed request", Status: 499}
	case store.IsUnavailable(err):
		// Nothing was committed; the same request may succeed shortly.
		h.Log.WarnContext(c.Request().Context(), "database unavailable", "method", c.Request().Method, "path", c.Path(), "err", err)
		return &Problem{Type: "unavailable", Title: "Service unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the database cannot be reached; nothing was changed, retry after Retry-After seconds", RetryAfter: unavailableRetryAfter}
	}
	h.Log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method,
		"path", c.Path(), "op_id", c.Param("id"), "err", err)
	return &Problem{Type: "internal", Title: "Internal error", Status: http.StatusInternalServerError,
		Detail: "the server failed; the request may be retried"}
}

var fieldInMessage = regexp.MustCompile(`field "([^"]+)"`)

// unavailableRetryAfter is the Retry-After, in seconds, of a 503 while the
// database cannot be reached: the pool dials again on the next request, so
// a client that waits this long finds it back as soon as it is back.
const unavailableRetryAfter = 2

func httpProblem(he *echo.HTTPError) *Problem {
	switch he.Code {
	case http.StatusRequestEntityTooLarge:
		return &Problem{Type: "payload-too-large", Title: "Request body too large", Status: he.Code, Detail: "request bodies are limited to 1 MiB"}
	case http.StatusNotFound:
		return &Problem{Type: "not-found", Title: "Not found", Status: he.Code, Detail: "no such route"}
	case http.StatusMethodNotAllowed:
		return &Problem{Type: "method-not-allowed", Title: "Method not allowed", Status: he.Code, Detail: "this route does not accept that method"}
	case http.StatusUnauthorized:
		return &Problem{Type: "unauthorized", Title: "Unauthorized", Status: he.Code, Detail: fmt.Sprint(he.Message)}
	}
	return &Problem{Type: "http-" + strconv.Itoa(he.Code), Title: http.StatusText(he.Code), Status: he.Code, Detail: fmt.Sprint(he.Message)}
}

// consoleStatus maps an error to a status and a message a person can
// read, translated when it is rendered (domain refusals: errorMessage).
func (h *Handlers) consoleStatus(err error, c echo.Context) (int, web.Message) {
	var (
		ce      *ConsoleError
		already *review.AlreadyDecidedError
		held    *review.ClaimHeldError
		field   *FieldError
		he      *echo.HTTPError
		body    *bodyError
	)
	ctx := c.Request().Context()
	switch {
	case errors.As(err, &ce):
		return ce.Status, ce.Message
	case errors.As(err, &body) && body.timedOut():
		return body.status(), web.Msg("What was sent took too long to arrive; nothing was changed. Send it again.")
	case errors.As(err, &body):
		return body.status(), web.Msg("What was sent arrived incomplete; nothing was changed. Send it again.")
	case errors.As(err, &already), errors.As(err, &held):
		return http.StatusConflict, errorMessage(ctx, err)
	case errors.Is(err, review.ErrNotFound):
		return http.StatusNotFound, web.Msg("Not found.")
	case errors.Is(err, review.ErrForbidden):
		return http.StatusForbidden, errorMessage(ctx, err)
	case errors.Is(err, review.ErrInvalid), errors.Is(err, review.ErrInvalidTransition), errors.Is(err, review.ErrSecondApprover),
		errors.Is(err, review.ErrOwnRequest), errors.Is(err, review.ErrStale):
		return http.StatusBadRequest, errorMessage(ctx, err)
	case errors.Is(err, review.ErrConflict):
		return http.StatusConflict, errorMessage(ctx, err)
	case errors.As(err, &he):
		return he.Code, httpStatusMessage(he.Code)
	case errors.As(err, &field):
		// A FieldError names its field and says what is wrong, in
		// English (the API's detail): translated as the domain's
		// sentences are, else under a translated lead-in.
		return http.StatusBadRequest, domainMessage(review.ErrInvalid, domainSentence(field))
	case errors.Is(err, context.Canceled):
		return 499, web.Msg("Request cancelled.")
	case store.IsUnavailable(err):
		h.Log.WarnContext(ctx, "database unavailable", "method", c.Request().Method, "path", c.Path(), "err", err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(unavailableRetryAfter))
		return http.StatusServiceUnavailable, web.Msg("The database cannot be reached right now; nothing was changed. Try again in a moment.")
	}
	h.Log.ErrorContext(ctx, "console request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
	return http.StatusInternalServerError, web.Msg("Something failed on our side; nothing was changed. Try again.")
}

// httpStatusMessage is an HTTP error Echo answers itself (no route, a
// method the route lacks, a body too large) as a person reads it.
func httpStatusMessage(code int) web.Message {
	switch code {
	case http.StatusNotFound:
		return web.Msg("Not found.")
	case http.StatusMethodNotAllowed:
		return web.Msg("This page does not take that kind of request.")
	case http.StatusRequestEntityTooLarge:
		return web.Msg("What was sent is too large (at most 1 MiB).")
	case http.StatusUnauthorized:
		return web.Msg("Sign in first.")
	case http.StatusForbidden:
		return web.Msg("Not allowed.")
	case http.StatusBadRequest:
		return web.Msg("The request was not understood.")
	}
	return web.Msg("The request failed (HTTP %d).", code)
}
