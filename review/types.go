package review

import (
	"encoding/json"
	"errors"
	"time"
)

// Sentinel errors. Handlers map them to HTTP answers in one place.
var (
	// ErrNotFound: no such record in the caller's scope.
	ErrNotFound = errors.New("not found")
	// ErrInvalidTransition: the state machine forbids the move.
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrConflict: somebody else changed the record first (optimistic lock),
	// or a unique key is taken.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the input breaks a rule; the error text says which.
	ErrInvalid = errors.New("invalid input")
	// ErrForbidden: the caller sees the record but may not make this
	// change (a scope or role rule); the error text says which.
	ErrForbidden = errors.New("forbidden")
)

// Risk is the class of external effect an action has (SPEC "Risk classes").
type Risk string

const (
	// RiskRead has no effect: list files, get job status.
	RiskRead Risk = "read"
	// RiskGenerate produces output with no external effect.
	RiskGenerate Risk = "generate"
	// RiskIdempotentWrite writes at a destination that honours the same key.
	RiskIdempotentWrite Risk = "idempotent_write"
	// RiskCompensableWrite writes something that can be undone (folder, file, job).
	RiskCompensableWrite Risk = "compensable_write"
	// RiskIrreversible cannot be undone (email, charge, publish).
	RiskIrreversible Risk = "irreversible"
)

// AllRisks lists the risk classes from least to most dangerous.
func AllRisks() []Risk {
	return []Risk{RiskRead, RiskGenerate, RiskIdempotentWrite, RiskCompensableWrite, RiskIrreversible}
}

// Valid reports whether r is a known risk class.
func (r Risk) Valid() bool {
	for _, k := range AllRisks() {
		if r == k {
			return true
		}
	}
	return false
}

// Flag marks an operation for extra care.
type Flag string

const (
	FlagFinancial    Flag = "financial"
	FlagIrreversible Flag = "irreversible"
	FlagRegulated    Flag = "regulated"
)

// AllFlags lists the known flags.
func AllFlags() []Flag { return []Flag{FlagFinancial, FlagIrreversible, FlagRegulated} }

// Valid reports whether f is a known flag.
func (f Flag) Valid() bool {
	return f == FlagFinancial || f == FlagIrreversible || f == FlagRegulated
}

// Phase is how far an attempt got before its outcome was known.
type Phase string

const (
	// PhaseBeforeSend: no byte reached the destination; no effect is possible.
	PhaseBeforeSend Phase = "before_send"
	// PhaseAfterSend: the request was (at least partly) sent.
	PhaseAfterSend Phase = "after_send"
	// PhaseUnknown: the caller cannot tell; treated as after_send.
	PhaseUnknown Phase = "unknown"
)

// Valid reports whether p is a known phase.
func (p Phase) Valid() bool {
	return p == PhaseBeforeSend || p == PhaseAfterSend || p == PhaseUnknown
}

// Result is what the integrator observed for one attempt.
type Result string

const (
	ResultSuccess         Result = "success"
	ResultError           Result = "error"
	ResultTimeout         Result = "timeout"
	ResultConnectionError Result = "connection_error"
	// ResultUnknown is never sent by callers: the lease sweeper records it for
	// an attempt whose lease expired without an outcome.
	ResultUnknown Result = "unknown"
)

// Valid reports whether r may be reported by a caller.
func (r Result) Valid() bool {
	return r == ResultSuccess || r == ResultError || r == ResultTimeout || r == ResultConnectionError
}

// Next tells the integrator what comes after an outcome.
type Next string

const (
	// NextDone: nothing more to do (confirmed, or an accepted job to wait for).
	NextDone Next = "done"
	// NextRetryAt: ask for another attempt at RetryAt, same key.
	NextRetryAt Next = "retry_at"
	// NextReconcile: the outcome is unknown; Limbo reconciles before anything repeats.
	NextReconcile Next = "reconcile"
	// NextReview: a person decides.
	NextReview Next = "review"
	// NextFailed: the operation failed; do not repeat it.
	NextFailed Next = "failed"
)

// Reason is a machine-readable escalation or failure reason (SPEC "Escalation reasons").
type Reason string

const (
	ReasonFinancial       Reason = "financial"
	ReasonIrreversible    Reason = "irreversible"
	ReasonRegulated       Reason = "regulated"
	ReasonSourcesDisagree Reason = "sources_disagree"
	ReasonDeadlineExpired Reason = "deadline_expired"
	ReasonNoDedupEvidence Reason = "no_dedup_evidence"
	ReasonPayloadMismatch Reason = "payload_mismatch"
	ReasonMultipleCands   Reason = "multiple_candidates"
	ReasonVersionMismatch Reason = "version_mismatch"
	ReasonStateConflict   Reason = "state_conflict"
	ReasonBudgetExhausted Reason = "budget_exhausted"
	// ReasonCompensationFailed: an undo a reviewer decided did not happen;
	// the operation is back in review.
	ReasonCompensationFailed Reason = "compensation_failed"
	// ReasonApprovalRequired: the action's policy asks for approval before
	// it runs; the case is the approval request (awaiting_approval).
	ReasonApprovalRequired Reason = "approval_required"
)

// AllReasons lists every escalation reason, in an order that only ever
// grows at its end: the store keeps a case's reasons as bits in this order
// (cases.reason_bits), so reordering it would misread stored cases.
func AllReasons() []Reason {
	return []Reason{ReasonFinancial, ReasonIrreversible, ReasonRegulated, ReasonSourcesDisagree, ReasonDeadlineExpired,
		ReasonNoDedupEvidence, ReasonPayloadMismatch, ReasonMultipleCands, ReasonVersionMismatch, ReasonStateConflict,
		ReasonBudgetExhausted, ReasonCompensationFailed, ReasonApprovalRequired, ReasonDependencyFailed}
}

// The `text` tags on types that arrive in API bodies declare each string's
// intake rule (CheckText's kind and limit; see handlers/intake.go).

// ResourceRef names a resource at the destination.
type ResourceRef struct {
	Ref     string `json:"ref" text:"id,255"`
	Kind    string `json:"kind,omitempty" text:"id,255"`
	Version string `json:"version,omitempty" text:"id,255"`
}

// JobRef is an asynchronous job as reported in an outcome.
type JobRef struct {
	Ref    string `json:"ref" text:"id,255"`
	Status string `json:"status,omitempty" text:"id,32"`
}

// Operation is one business intention and its ledger state.
type Operation struct {
	ID             string          `json:"id" db:"id"`
	Tenant         string          `json:"tenant" db:"tenant"`
	SourceRef      string          `json:"source_ref" db:"source_ref"`
	LogicalVersion string          `json:"logical_version" db:"logical_version"`
	Action         string          `json:"action" db:"action"`
	Destination    string          `json:"destination" db:"destination"`
	Risk           Risk            `json:"risk" db:"risk"`
	Flags          []Flag          `json:"flags"`
	Key            string          `json:"key" db:"key"`
	Payload        json.RawMessage `json:"payload"`
	PayloadHash    string          `json:"payload_hash" db:"payload_hash"`
	// PayloadPurgedAt is when payload retention emptied Payload (nil while
	// it is kept); the hash stays, so the same key still compares.
	PayloadPurgedAt *time.Time `json:"payload_purged_at,omitempty"`
	State           State      `json:"state" db:"state"`
	// StateReason is the human-readable reason for the current state.
	StateReason string    `json:"state_reason,omitempty" db:"state_reason"`
	Deadline    time.Time `json:"deadline" db:"deadline"`
	MaxAttempts int       `json:"max_attempts" db:"max_attempts"`
	// CostBudget is nil when no cost budget applies.
	CostBudget *float64 `json:"cost_budget,omitempty" db:"cost_budget"`
	CostSpent  float64  `json:"cost_spent" db:"cost_spent"`
	// AttemptCount is the number of attempts granted so far.
	AttemptCount int `json:"attempt_count" db:"attempt_count"`
	// NextAttemptAt is when a retry_wait operation may try again.
	NextAttemptAt *time.Time   `json:"next_attempt_at,omitempty" db:"next_attempt_at"`
	Resource      *ResourceRef `json:"resource,omitempty"`
	// After is the operation this one waits for, with its state when read.
	After     *Dependency `json:"after,omitempty"`
	Version   int64       `json:"version" db:"version"`
	CreatedAt time.Time   `json:"created_at" db:"created_at"`
	UpdatedAt time.Time   `json:"updated_at" db:"updated_at"`

	Attempts []Attempt  `json:"attempts"`
	Evidence []Evidence `json:"evidence"`
	// Jobs are in the order of their attempts, then as recorded: the last
	// is the latest attempt's, even when an earlier attempt's job was
	// reported late.
	Jobs []Job `json:"jobs"`
	// Undone are the resources whose undo (a compensation operation) is
	// confirmed, or that a reviewer said are undone (compensation_done
	// naming one): no longer the operation's effects, whatever the
	// evidence says, before or after.
	Undone []string `json:"-"`
	// Undoing are the resources whose undo is registered and has not
	// settled (ChildCompensation.Unsettled): pending, running, or in
	// doubt. Nothing more is to be decided about them until it settles.
	Undoing []string `json:"-"`
	// UndoingByHand are those of Undoing left to a person (UndoByHand):
	// Limbo sends nothing, so only that person's word settles them.
	UndoingByHand []string `json:"-"`
}

// HasFlag reports whether the operation carries f.
func (o *Operation) HasFlag(f Flag) bool {
	for _, g := range o.Flags {
		if g == f {
			return true
		}
	}
	return false
}

// Attempt is one send of the request.
type Attempt struct {
	OperationID string `json:"-" db:"operation_id"`
	N           int    `json:"n" db:"n"`
	// Generation fences completion writes: a write must name the generation
	// it was granted, so a late writer cannot overwrite a newer decision.
	Generation     int64      `json:"generation" db:"generation"`
	Credential     string     `json:"credential,omitempty" db:"credential"`
	Model          string     `json:"model,omitempty" db:"model"`
	StartedAt      time.Time  `json:"started_at" db:"started_at"`
	LeaseExpiresAt time.Time  `json:"lease_expires_at" db:"lease_expires_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty" db:"finished_at"`
	Result         Result     `json:"result,omitempty" db:"result"`
	Phase          Phase      `json:"phase,omitempty" db:"phase"`
	HTTPStatus     int        `json:"http_status,omitempty" db:"http_status"`
	ProviderCode   string     `json:"provider_code,omitempty" db:"provider_code"`
	ProviderReqID  string     `json:"provider_request_id,omitempty" db:"provider_request_id"`
	RetryAfter     string     `json:"retry_after,omitempty" db:"retry_after"`
	Cost           float64    `json:"cost,omitempty" db:"cost"`
	Next           Next       `json:"next,omitempty" db:"next"`
	NextReason     string     `json:"reason,omitempty" db:"next_reason"`
	RetryAt        *time.Time `json:"retry_at,omitempty" db:"retry_at"`
	// OutcomeHash is the SHA-256 of the canonical outcome report; the same
	// report again is answered unchanged, a different one is a conflict.
	OutcomeHash string `json:"-" db:"outcome_hash"`
}

// Candidate is a resource found at the destination that may be this
// operation's effect.
type Candidate struct {
	Ref         string `json:"ref" text:"id,255"`
	Kind        string `json:"kind,omitempty" text:"id,255"`
	Version     string `json:"version,omitempty" text:"id,255"`
	OperationID string `json:"operation_id,omitempty" text:"id,255"`
	// Status is the destination's word on the resource ("active",
	// "deleted"…), as a status lookup answered it; read only to settle
	// an undo (settleUndo, undoStatus).
	Status string `json:"status,omitempty" text:"id,255"`
}

// EvidenceSource says where evidence came from.
type EvidenceSource string

const (
	SourceResponse       EvidenceSource = "response"
	SourceStatusLookup   EvidenceSource = "status_lookup"
	SourceMetadataSearch EvidenceSource = "metadata_search"
	SourceWebhook        EvidenceSource = "webhook"
	SourceReviewer       EvidenceSource = "reviewer"
)

// Valid reports whether s is a known evidence source.
func (s EvidenceSource) Valid() bool {
	switch s {
	case SourceResponse, SourceStatusLookup, SourceMetadataSearch, SourceWebhook, SourceReviewer:
		return true
	}
	return false
}

// Verdict is what a piece of evidence says about the effect.
type Verdict string

const (
	VerdictConfirms     Verdict = "confirms"
	VerdictRefutes      Verdict = "refutes"
	VerdictInconclusive Verdict = "inconclusive"
)

// Evidence is something observed about the effect.
type Evidence struct {
	ID            int64          `json:"id" db:"id"`
	OperationID   string         `json:"-" db:"operation_id"`
	Source        EvidenceSource `json:"source" db:"source"`
	Authoritative bool           `json:"authoritative" db:"authoritative"`
	Candidates    []Candidate    `json:"candidates" db:"-"`
	Verdict       Verdict        `json:"verdict" db:"verdict"`
	Note          string         `json:"note,omitempty" db:"note"`
	ObservedAt    time.Time      `json:"observed_at" db:"observed_at"`
}

// JobStatus is the state of an asynchronous transformation job.
type JobStatus string

const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
	JobCanceled  JobStatus = "canceled"
)

// Valid reports whether s is a known job status.
func (s JobStatus) Valid() bool {
	switch s {
	case JobQueued, JobRunning, JobSucceeded, JobFailed, JobCanceled:
		return true
	}
	return false
}

// Done reports whether the job has finished, one way or the other.
func (s JobStatus) Done() bool { return s == JobSucceeded || s == JobFailed || s == JobCanceled }

// Job is an asynchronous transformation accepted by the destination.
type Job struct {
	OperationID  string    `json:"-" db:"operation_id"`
	Ref          string    `json:"ref" db:"ref"`
	Status       JobStatus `json:"status" db:"status"`
	InputVersion string    `json:"input_version,omitempty" db:"input_version"`
	OutputRef    string    `json:"output_ref,omitempty" db:"output_ref"`
	// Attempt is the attempt the job belongs to: the one whose outcome
	// named it, or the latest when reconciliation found it (0: recorded
	// before jobs kept it). JobEndSettles reads it.
	Attempt int `json:"-" db:"attempt_n"`
	// Found: reconciliation or evidence found the job at the destination,
	// and no attempt's outcome named it. Attempt is then the latest when
	// it was found, a guess: it may be an earlier attempt's
	// (JobFailureSettles).
	Found     bool      `json:"-" db:"found"`
	CreatedAt time.Time `json:"created_at" db:"created_at"`
	UpdatedAt time.Time `json:"updated_at" db:"updated_at"`
}

// Clock tells the time. Production passes time.Now; tests pass a stub.
type Clock func() time.Time
