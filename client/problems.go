package client

// The problem types Limbo answers with (Problem.Type), for IsProblem:
//
//	if client.IsProblem(err, client.ProblemPayloadMismatch) { … }
//
// An answer that is not a problem document (a proxy's 502, say) has the
// type "http-" and its status ("http-502").
const (
	// ProblemInvalidRequest: the request is malformed; Field names the field.
	ProblemInvalidRequest = "invalid-request"
	// ProblemPayloadMismatch: the key is already used with another payload.
	ProblemPayloadMismatch = "payload-mismatch"
	// ProblemAwaitingApproval: no attempt before a reviewer approves.
	ProblemAwaitingApproval = "awaiting-approval"
	// ProblemNotAttemptable: the operation's state (State) allows no attempt.
	ProblemNotAttemptable = "not-attemptable"
	// ProblemWaitingForDependency: the operation waits for Dependency.
	ProblemWaitingForDependency = "waiting-for-dependency"
	// ProblemRetryLater: wait RetryAfter before the next attempt (429).
	ProblemRetryLater = "retry-later"
	// ProblemOutcomeConflict: the attempt already has another outcome.
	ProblemOutcomeConflict = "outcome-conflict"
	// ProblemNotFound: no such operation, attempt or route.
	ProblemNotFound = "not-found"
	// ProblemForbidden: the token may not do this.
	ProblemForbidden = "forbidden"
	// ProblemInvalidTransition: the operation cannot move to that state.
	ProblemInvalidTransition = "invalid-transition"
	// ProblemConflict: changed concurrently; read again and retry.
	ProblemConflict = "conflict"
	// ProblemClientClosedRequest: the client went away (499).
	ProblemClientClosedRequest = "client-closed-request"
	// ProblemUnavailable: the database cannot be reached; nothing changed (503).
	ProblemUnavailable = "unavailable"
	// ProblemBusy: too many bulk intake batches wait in the instance;
	// nothing was registered, send the batch again after RetryAfter (503).
	ProblemBusy = "busy"
	// ProblemInternal: the server failed (500).
	ProblemInternal = "internal"
	// ProblemPayloadTooLarge: the request body is over the limit.
	ProblemPayloadTooLarge = "payload-too-large"
	// ProblemRequestTimeout: the request body did not arrive in time
	// (408); nothing changed, the same request may be sent again.
	ProblemRequestTimeout = "request-timeout"
	// ProblemMethodNotAllowed: the route does not accept the method.
	ProblemMethodNotAllowed = "method-not-allowed"
	// ProblemUnauthorized: no token, or an unknown or revoked one.
	ProblemUnauthorized = "unauthorized"
	// ProblemUnsupportedMediaType: the body is not application/json.
	ProblemUnsupportedMediaType = "unsupported-media-type"
	// ProblemPurged: what was asked for was kept, and the payload
	// retention has emptied it since (410): an attempt's structured
	// output, for one. Detail says when.
	ProblemPurged = "purged"
	// ProblemNotReady: the server is not ready (readiness probe).
	ProblemNotReady = "not-ready"
	// ProblemInvalidSignature: an inbound webhook's signature is wrong.
	ProblemInvalidSignature = "invalid-signature"
)

// ProblemTypes lists every problem type above.
func ProblemTypes() []string {
	return []string{ProblemInvalidRequest, ProblemPayloadMismatch, ProblemAwaitingApproval, ProblemNotAttemptable,
		ProblemWaitingForDependency, ProblemRetryLater, ProblemOutcomeConflict, ProblemNotFound, ProblemForbidden,
		ProblemInvalidTransition, ProblemConflict, ProblemClientClosedRequest, ProblemUnavailable, ProblemBusy, ProblemInternal,
		ProblemPayloadTooLarge, ProblemRequestTimeout, ProblemMethodNotAllowed, ProblemUnauthorized, ProblemUnsupportedMediaType,
		ProblemNotReady, ProblemInvalidSignature, ProblemPurged}
}
