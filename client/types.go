package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// The types below are API v1's JSON as the client reads and writes it. They
// mirror the server's (package review) without importing it, so that the
// client depends on the standard library only; TestTypesMatchTheServer
// checks that they carry the same JSON fields.

// State is an operation's state.
type State string

// The states of an operation.
const (
	AwaitingApproval State = "awaiting_approval"
	Pending          State = "pending"
	InFlight         State = "in_flight"
	RetryWait        State = "retry_wait"
	Ambiguous        State = "ambiguous"
	Accepted         State = "accepted"
	NeedsReview      State = "needs_review"
	Compensating     State = "compensating"
	Confirmed        State = "confirmed"
	Compensated      State = "compensated"
	Failed           State = "failed"
)

// Terminal reports whether nothing more happens to an operation in s.
func (s State) Terminal() bool { return s == Confirmed || s == Compensated || s == Failed }

// Attemptable reports whether an operation in s can be granted an attempt.
func (s State) Attemptable() bool { return s == Pending || s == RetryWait }

// Risk is what a duplicate of an operation would cost.
type Risk string

// The risks an operation is registered with.
const (
	RiskRead             Risk = "read"
	RiskGenerate         Risk = "generate"
	RiskIdempotentWrite  Risk = "idempotent_write"
	RiskCompensableWrite Risk = "compensable_write"
	RiskIrreversible     Risk = "irreversible"
)

// Flag marks an operation for a person's attention.
type Flag string

// The flags an operation may carry.
const (
	FlagFinancial    Flag = "financial"
	FlagIrreversible Flag = "irreversible"
	FlagRegulated    Flag = "regulated"
)

// Phase is how far an attempt got before its outcome.
type Phase string

// The phases of an outcome.
const (
	PhaseBeforeSend Phase = "before_send"
	PhaseAfterSend  Phase = "after_send"
	PhaseUnknown    Phase = "unknown"
)

// Result is what an attempt's send came to.
type Result string

// The results an outcome reports (ResultUnknown is recorded by Limbo for an
// attempt whose lease expired unreported; a client does not send it).
const (
	ResultSuccess         Result = "success"
	ResultError           Result = "error"
	ResultTimeout         Result = "timeout"
	ResultConnectionError Result = "connection_error"
	ResultUnknown         Result = "unknown"
)

// Next is what comes after an outcome.
type Next string

// What comes next.
const (
	NextDone      Next = "done"
	NextRetryAt   Next = "retry_at"
	NextReconcile Next = "reconcile"
	NextReview    Next = "review"
	NextFailed    Next = "failed"
)

// Reason is why a policy sends an operation to a person.
type Reason string

// ResourceRef names what an operation created at its destination.
type ResourceRef struct {
	Ref     string `json:"ref"`
	Kind    string `json:"kind,omitempty"`
	Version string `json:"version,omitempty"`
}

// JobRef names an asynchronous job the destination queued.
type JobRef struct {
	Ref    string `json:"ref"`
	Status string `json:"status,omitempty"`
}

// Operation is one external call Limbo keeps track of, with its attempts,
// evidence and jobs.
type Operation struct {
	ID             string          `json:"id"`
	Tenant         string          `json:"tenant"`
	SourceRef      string          `json:"source_ref"`
	LogicalVersion string          `json:"logical_version"`
	Action         string          `json:"action"`
	Destination    string          `json:"destination"`
	Risk           Risk            `json:"risk"`
	Flags          []Flag          `json:"flags"`
	Key            string          `json:"key"`
	Payload        json.RawMessage `json:"payload"`
	PayloadHash    string          `json:"payload_hash"`
	// PayloadPurgedAt is when payload retention emptied Payload (then
	// null); nil while it is kept. The hash and key stay.
	PayloadPurgedAt *time.Time      `json:"payload_purged_at,omitempty"`
	State           State           `json:"state"`
	StateReason     string          `json:"state_reason,omitempty"`
	Deadline        time.Time       `json:"deadline"`
	MaxAttempts     int             `json:"max_attempts"`
	CostBudget      *float64        `json:"cost_budget,omitempty"`
	CostSpent       float64         `json:"cost_spent"`
	AttemptCount    int             `json:"attempt_count"`
	NextAttemptAt   *time.Time      `json:"next_attempt_at,omitempty"`
	Resource        *ResourceRef    `json:"resource,omitempty"`
	After           *Dependency     `json:"after,omitempty"`
	Version         int64           `json:"version"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	Attempts        []Attempt       `json:"attempts"`
	Evidence        []EvidenceEntry `json:"evidence"`
	Jobs            []Job           `json:"jobs"`
}

// HasFlag reports whether o carries f.
func (o *Operation) HasFlag(f Flag) bool {
	for _, g := range o.Flags {
		if g == f {
			return true
		}
	}
	return false
}

// Attempt is one granted attempt and, once reported, its outcome.
type Attempt struct {
	N              int        `json:"n"`
	Generation     int64      `json:"generation"`
	Credential     string     `json:"credential,omitempty"`
	Model          string     `json:"model,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	LeaseExpiresAt time.Time  `json:"lease_expires_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	Result         Result     `json:"result,omitempty"`
	Phase          Phase      `json:"phase,omitempty"`
	HTTPStatus     int        `json:"http_status,omitempty"`
	ProviderCode   string     `json:"provider_code,omitempty"`
	ProviderReqID  string     `json:"provider_request_id,omitempty"`
	RetryAfter     string     `json:"retry_after,omitempty"`
	Cost           float64    `json:"cost,omitempty"`
	Next           Next       `json:"next,omitempty"`
	NextReason     string     `json:"reason,omitempty"`
	RetryAt        *time.Time `json:"retry_at,omitempty"`
}

// Candidate is a resource evidence found at the destination.
type Candidate struct {
	Ref         string `json:"ref"`
	Kind        string `json:"kind,omitempty"`
	Version     string `json:"version,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	Status      string `json:"status,omitempty"`
}

// EvidenceSource is where evidence was observed.
type EvidenceSource string

// The sources of evidence.
const (
	SourceResponse       EvidenceSource = "response"
	SourceStatusLookup   EvidenceSource = "status_lookup"
	SourceMetadataSearch EvidenceSource = "metadata_search"
	SourceWebhook        EvidenceSource = "webhook"
	SourceReviewer       EvidenceSource = "reviewer"
)

// Verdict is what Limbo made of a piece of evidence.
type Verdict string

// The verdicts on evidence.
const (
	VerdictConfirms     Verdict = "confirms"
	VerdictRefutes      Verdict = "refutes"
	VerdictInconclusive Verdict = "inconclusive"
)

// EvidenceEntry is evidence as Limbo recorded it on an operation.
type EvidenceEntry struct {
	ID            int64          `json:"id"`
	Source        EvidenceSource `json:"source"`
	Authoritative bool           `json:"authoritative"`
	Candidates    []Candidate    `json:"candidates"`
	Verdict       Verdict        `json:"verdict"`
	Note          string         `json:"note,omitempty"`
	ObservedAt    time.Time      `json:"observed_at"`
}

// JobStatus is an asynchronous job's status.
type JobStatus string

// The statuses of a job.
const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
	JobCanceled  JobStatus = "canceled"
)

// Done reports whether a job in s has finished.
func (s JobStatus) Done() bool { return s == JobSucceeded || s == JobFailed || s == JobCanceled }

// Job is an asynchronous job at the destination.
type Job struct {
	Ref          string    `json:"ref"`
	Status       JobStatus `json:"status"`
	InputVersion string    `json:"input_version,omitempty"`
	OutputRef    string    `json:"output_ref,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Dependency is what an operation waits for, as Limbo reports it: the
// registration's After, and once read, what the dependency was confirmed
// with and its state.
type Dependency struct {
	OperationID     string       `json:"operation_id"`
	State           State        `json:"state,omitempty"`
	ResourceVersion string       `json:"resource_version,omitempty"`
	Resource        *ResourceRef `json:"resource,omitempty"`
	DependencyState State        `json:"dependency_state,omitempty"`
}

// Outcome is what an integrator reports for one attempt.
type Outcome struct {
	Result            Result       `json:"result"`
	Phase             Phase        `json:"phase"`
	HTTPStatus        int          `json:"http_status,omitempty"`
	RetryAfter        string       `json:"retry_after,omitempty"`
	ProviderCode      string       `json:"provider_code,omitempty"`
	ProviderRequestID string       `json:"provider_request_id,omitempty"`
	Resource          *ResourceRef `json:"resource,omitempty"`
	Job               *JobRef      `json:"job,omitempty"`
	Cost              float64      `json:"cost,omitempty"`
	// ShouldRetry is the provider's own word on retrying (x-should-retry).
	ShouldRetry *bool `json:"should_retry,omitempty"`
	// Usage is what a model call consumed.
	Usage *Usage `json:"usage,omitempty"`
	// Output is a model's structured output (JSON, at most MaxOutputLen
	// bytes); OutputInvalid, when set, is why the caller's schema refused it.
	Output        json.RawMessage `json:"output,omitempty"`
	OutputInvalid string          `json:"output_invalid,omitempty"`
}

// Usage is the tokens a model call consumed.
type Usage struct {
	Model            string `json:"model,omitempty"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

// Limits of an outcome, as the server enforces them.
const (
	MaxOutputLen = 64 << 10
	MaxTokens    = 1_000_000_000_000
	MaxFieldLen  = 255
)

// errInvalid is what Validate's errors wrap.
var errInvalid = errors.New("invalid outcome")

// Validate rejects the outcomes the server would refuse as contradicting
// themselves, before they are sent (Do then leaves the attempt unreported).
func (o Outcome) Validate() error {
	bad := func(s string) error { return fmt.Errorf("%w: %s", errInvalid, s) }
	switch {
	case o.Result != ResultSuccess && o.Result != ResultError && o.Result != ResultTimeout && o.Result != ResultConnectionError:
		return bad("result must be success, error, timeout or connection_error")
	case o.Phase != PhaseBeforeSend && o.Phase != PhaseAfterSend && o.Phase != PhaseUnknown:
		return bad("phase must be before_send, after_send or unknown")
	case o.Result == ResultSuccess && o.Phase == PhaseBeforeSend:
		return bad("a success cannot happen before the request was sent")
	case o.HTTPStatus != 0 && (o.HTTPStatus < 100 || o.HTTPStatus > 599):
		return bad("http_status must be between 100 and 599")
	case o.HTTPStatus != 0 && o.Phase == PhaseBeforeSend:
		return bad("an HTTP status means the request was sent; phase cannot be before_send")
	case o.Cost < 0:
		return bad("cost must not be negative")
	case o.Resource != nil && o.Resource.Ref == "":
		return bad("resource.ref is required")
	case o.Usage != nil && (o.Usage.PromptTokens < 0 || o.Usage.CompletionTokens < 0):
		return bad("usage tokens must not be negative")
	case o.Usage != nil && (o.Usage.PromptTokens > MaxTokens || o.Usage.CompletionTokens > MaxTokens):
		return bad(fmt.Sprintf("usage tokens must be at most %d", MaxTokens))
	case len(o.Output) > MaxOutputLen:
		return bad(fmt.Sprintf("output must be at most %d bytes", MaxOutputLen))
	case o.OutputInvalid != "" && o.Output == nil:
		return bad("output_invalid says why an output was refused: send the output with it")
	case o.Output != nil && o.Result != ResultSuccess:
		return bad("an output comes with a success only")
	case o.Job != nil && o.Job.Ref == "":
		return bad("job.ref is required")
	case o.Job != nil && o.Job.Status != "" && !validJobStatus(JobStatus(o.Job.Status)):
		return bad("job.status must be queued, running, succeeded, failed or canceled")
	}
	return nil
}

func validJobStatus(s JobStatus) bool {
	switch s {
	case JobQueued, JobRunning, JobSucceeded, JobFailed, JobCanceled:
		return true
	}
	return false
}

// PublishedPolicy is an action's policy as GET /api/v1/actions tells an
// integrator. Durations are in seconds; 0 means the item is not set. The
// *_seconds fields are whole seconds, rounded up (a set duration is never
// 0); the Exact fields are the same durations in fractional seconds, as
// configured (a 500ms max_wait: MaxWait 1, MaxWaitExact 0.5).
type PublishedPolicy struct {
	Destination      string   `json:"destination"`
	Action           string   `json:"action"`
	Owner            string   `json:"owner,omitempty"`
	Effects          string   `json:"effects,omitempty"`
	DuplicateCost    string   `json:"duplicate_cost,omitempty"`
	Risk             Risk     `json:"risk,omitempty"`
	Flags            []Flag   `json:"flags"`
	KeyFields        []string `json:"key_fields"`
	Evidence         []string `json:"evidence"`
	RequiresApproval bool     `json:"requires_approval"`
	// Approvals is how many different reviewers an approval takes (two
	// for a financial, irreversible or regulated action); 0 when none is
	// needed.
	Approvals       int      `json:"approvals,omitempty"`
	ApprovalTimeout int64    `json:"approval_timeout_seconds,omitempty"`
	ApprovalExact   float64  `json:"approval_timeout_exact_seconds,omitempty"`
	Deadline        int64    `json:"deadline_seconds,omitempty"`
	DeadlineExact   float64  `json:"deadline_exact_seconds,omitempty"`
	MaxAttempts     int      `json:"max_attempts,omitempty"`
	CostBudget      float64  `json:"cost_budget,omitempty"`
	MaxWait         int64    `json:"max_wait_seconds,omitempty"`
	MaxWaitExact    float64  `json:"max_wait_exact_seconds,omitempty"`
	EscalateOn      []Reason `json:"escalate_on"`
	Concurrency     int      `json:"concurrency,omitempty"`
	Priority        bool     `json:"priority"`
}

// fit makes a string read from the destination's answer one Limbo accepts
// as an identifier (valid UTF-8, no control characters or line breaks, at
// most MaxFieldLen characters), so the outcome is never refused for what
// the destination sent.
func fit(s string) string {
	ok := func(r rune) bool {
		return r >= 0x20 && !(r >= 0x7f && r <= 0x9f) && r != '\u2028' && r != '\u2029'
	}
	var b strings.Builder
	n := 0
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if n == MaxFieldLen {
			break
		}
		if !ok(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// maxRetryAfter caps a Retry-After, as the server does.
const maxRetryAfter = 365 * 24 * time.Hour

// parseRetryAfter reads a Retry-After answer from Limbo: delta-seconds or
// an HTTP date; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var secs int64
	digits := true
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			digits = false
			break
		}
		secs = secs*10 + int64(v[i]-'0')
		if secs >= int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
	}
	if digits {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}
