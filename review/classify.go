package review

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Outcome is what an integrator reports for one attempt.
type Outcome struct {
	Result            Result       `json:"result" text:"id,32"`
	Phase             Phase        `json:"phase" text:"id,32"`
	HTTPStatus        int          `json:"http_status,omitempty"`
	RetryAfter        string       `json:"retry_after,omitempty" text:"id,255"`
	ProviderCode      string       `json:"provider_code,omitempty" text:"id,255"`
	ProviderRequestID string       `json:"provider_request_id,omitempty" text:"id,255"`
	Resource          *ResourceRef `json:"resource,omitempty"`
	Job               *JobRef      `json:"job,omitempty"`
	Cost              float64      `json:"cost,omitempty"`
	// ShouldRetry is the provider's own word on retrying (x-should-retry:
	// true|false), honoured where the destination says so
	// (honours_should_retry); nil when the answer carried none.
	ShouldRetry *bool `json:"should_retry,omitempty"`
	// Usage is what a model call consumed; the destination's pricing
	// turns it into cost (Destination.UsageCost), added to Cost.
	Usage *Usage `json:"usage,omitempty"`
	// Output is a model's structured output (JSON, at most MaxOutputLen
	// bytes), kept with the attempt; OutputInvalid, when set, is why the
	// caller's schema refused it. A refused output of a generate or read
	// operation is not its result: nothing may run from it, and the next
	// generation is a new attempt (Decide). It proves nothing about tools:
	// each tool call is its own operation in the ledger.
	Output        json.RawMessage `json:"output,omitempty"`
	OutputInvalid string          `json:"output_invalid,omitempty" text:"free,2000"`
}

// OutputRefused is the structured-output gate: a success whose output the
// caller's schema refused is not the result of a read or a generation
// (they are asked again); a write that succeeded did its effect whatever
// its output says.
func OutputRefused(o Outcome, op *Operation) bool {
	return o.Result == ResultSuccess && o.OutputInvalid != "" && (op.Risk == RiskGenerate || op.Risk == RiskRead)
}

// MaxOutputLen bounds a structured output kept with an attempt.
const MaxOutputLen = 64 << 10

// Usage is the tokens a model call consumed, as the provider reported them
// (OpenAI's usage.prompt_tokens and usage.completion_tokens).
type Usage struct {
	Model            string `json:"model,omitempty" text:"id,255"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

// Validate rejects reports that contradict themselves.
func (o Outcome) Validate() error {
	// Each refusal names its field as `field "x":`, which the API answers
	// as the problem's field.
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: field %q: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	tokens := func(n int64) bool { return n < 0 || n > MaxTokens }
	switch {
	case !o.Result.Valid():
		return bad("result", "must be success, error, timeout or connection_error")
	case !o.Phase.Valid():
		return bad("phase", "must be before_send, after_send or unknown")
	case o.Result == ResultSuccess && o.Phase == PhaseBeforeSend:
		return bad("phase", "a success cannot happen before the request was sent")
	case o.HTTPStatus != 0 && (o.HTTPStatus < 100 || o.HTTPStatus > 599):
		return bad("http_status", "must be between 100 and 599")
	case o.HTTPStatus != 0 && o.Phase == PhaseBeforeSend:
		return bad("phase", "an HTTP status means the request was sent; phase cannot be before_send")
	case o.Cost < 0:
		return bad("cost", "must not be negative")
	case !(o.Cost <= MaxCost):
		return bad("cost", "must be at most %g", MaxCost)
	case o.Resource != nil && o.Resource.Ref == "":
		return bad("resource.ref", "required")
	case o.Usage != nil && tokens(o.Usage.PromptTokens):
		return bad("usage.prompt_tokens", "must be between 0 and %d", MaxTokens)
	case o.Usage != nil && tokens(o.Usage.CompletionTokens):
		return bad("usage.completion_tokens", "must be between 0 and %d", MaxTokens)
	case len(o.Output) > MaxOutputLen:
		return bad("output", "must be at most %d bytes", MaxOutputLen)
	case o.OutputInvalid != "" && o.Output == nil:
		// The output is what is missing: output_invalid itself is fine.
		return bad("output", "required with output_invalid, which says why an output was refused")
	case o.Output != nil && o.Result != ResultSuccess:
		return bad("output", "an output comes with a success only")
	case o.Job != nil && o.Job.Ref == "":
		return bad("job.ref", "required")
	case o.Job != nil && o.Job.Status != "" && !JobStatus(o.Job.Status).Valid():
		return bad("job.status", "must be queued, running, succeeded, failed or canceled")
	}
	return nil
}

// MaxTokens bounds a reported token count (a trillion: far past any real
// call, well inside float64's exact integers once priced).
const MaxTokens = 1_000_000_000_000

// MaxCost bounds the cost one report states, and a cost budget: far above
// any call's, and low enough that an operation's cost spent, a sum of
// reports, stays a finite number (an infinite one could be neither
// written to PostgreSQL nor answered as JSON).
const MaxCost = 1e15

// MaxPricePerMTok bounds a model's price per million tokens in the
// configuration, so that MaxTokens priced stay far below MaxCost.
const MaxPricePerMTok = 1e6

// Effect is what an outcome says about the destination's side.
type Effect string

const (
	// EffectDone: the destination did it.
	EffectDone Effect = "done"
	// EffectAccepted: the destination queued an asynchronous job.
	EffectAccepted Effect = "accepted"
	// EffectNone: not processed; no effect is possible.
	EffectNone Effect = "none"
	// EffectUnknown: the effect may or may not have happened.
	EffectUnknown Effect = "unknown"
	// EffectRejected: refused; repeating identical data cannot help.
	EffectRejected Effect = "rejected"
)

// Classification is the verdict on one outcome, before budgets.
type Classification struct {
	Effect Effect
	// RetryAfter is the destination's requested wait, when it gave one.
	RetryAfter    time.Duration
	HasRetryAfter bool
	Reason        string
}

// EffectiveRisk is the risk class the destination's guarantees allow: an
// idempotent_write on a destination that does not honour keys, or whose key
// memory has lapsed since the first attempt, is a compensable_write.
func EffectiveRisk(r Risk, d Destination, firstAttempt, now time.Time) Risk {
	if r != RiskIdempotentWrite {
		return r
	}
	if !d.HonoursKeys {
		return RiskCompensableWrite
	}
	if d.KeyRetention > 0 && !firstAttempt.IsZero() && now.Sub(firstAttempt) >= d.KeyRetention {
		return RiskCompensableWrite
	}
	return r
}

// RetryNeedsReconcile reports whether the next attempt of op, at now, must
// not be granted but reconciled first: an idempotent_write is retried with
// the same key because the destination deduplicates it — but once
// key_retention has passed since the first attempt the destination may
// have forgotten the key, and if an earlier attempt may have had its
// effect, a retry could make a second one. The risk is re-derived at every
// grant, not only when the outcome was classified (issue 12, hole 5).
func RetryNeedsReconcile(op *Operation, d Destination, firstAttempt, now time.Time, priorMayHaveEffect bool) bool {
	return op.AttemptCount > 0 && op.Risk == RiskIdempotentWrite && priorMayHaveEffect &&
		EffectiveRisk(op.Risk, d, firstAttempt, now) != RiskIdempotentWrite
}

// Classify applies SPEC's error classification to an outcome, with the
// destination's and the action's overrides.
func Classify(o Outcome, d Destination, action string, now time.Time) Classification {
	if o.Result == ResultSuccess {
		if o.Job != nil && !JobStatus(o.Job.Status).Done() {
			return Classification{Effect: EffectAccepted, Reason: fmt.Sprintf(WhyAcceptedJob, o.Job.Ref)}
		}
		return Classification{Effect: EffectDone, Reason: WhyAnsweredSuccess}
	}
	if o.Result == ResultUnknown {
		return Classification{Effect: EffectUnknown, Reason: WhyLeaseExpired}
	}
	if o.Phase == PhaseBeforeSend {
		return Classification{Effect: EffectNone, Reason: fmt.Sprintf(WhyBeforeSend, o.Result)}
	}
	if o.HTTPStatus == 0 {
		return Classification{Effect: EffectUnknown, Reason: fmt.Sprintf(WhyAfterSend, o.Result)}
	}
	c := Classification{}
	c.RetryAfter, c.HasRetryAfter = ParseRetryAfter(o.RetryAfter, now)
	status := strconv.Itoa(o.HTTPStatus)
	if cl, ok := d.Actions[action].Errors[status]; ok {
		return c.with(cl, fmt.Sprintf(WhyHTTPForAction, o.HTTPStatus, action))
	}
	if cl, ok := d.Errors[status]; ok {
		return c.with(cl, fmt.Sprintf(WhyHTTPForDestination, o.HTTPStatus))
	}
	s := o.HTTPStatus
	if s == 429 && d.isQuotaCode(o.ProviderCode) {
		return c.with(ClassFail, fmt.Sprintf(WhyHTTPQuota, o.ProviderCode))
	}
	if d.HonoursShouldRetry && o.ShouldRetry != nil {
		// The provider's explicit word wins over its status (as the
		// Stainless SDKs read x-should-retry), but not over an operator's
		// override or a quota code above.
		if *o.ShouldRetry {
			return c.with(ClassRetry, fmt.Sprintf(WhyHTTPShouldRetry, s))
		}
		return c.with(ClassFail, fmt.Sprintf(WhyHTTPShouldNotRetry, s))
	}
	switch {
	case s == 408 || s == 429 || s == 503:
		return c.with(ClassRetry, fmt.Sprintf(WhyHTTPNotProcessed, s))
	case s == 409 && d.HonoursKeys && d.ConflictMeansInProgress:
		return c.with(ClassRetry, WhyHTTPKeyInProgress)
	case s == 409:
		return c.with(ClassFail, WhyHTTPConflict)
	case s >= 500:
		return c.with(ClassUnknown, fmt.Sprintf(WhyHTTPAfterSend, s))
	case s >= 400:
		return c.with(ClassFail, fmt.Sprintf(WhyHTTPRejected, s))
	case s >= 200 && s < 300:
		return c.with(ClassFail, fmt.Sprintf(WhyBusinessError, s))
	default:
		return c.with(ClassUnknown, fmt.Sprintf(WhyHTTPWithError, s))
	}
}

func (c Classification) with(cl ErrorClass, reason string) Classification {
	switch cl {
	case ClassRetry:
		c.Effect = EffectNone
	case ClassFail:
		c.Effect = EffectRejected
	default:
		c.Effect = EffectUnknown
	}
	c.Reason = reason
	return c
}

func (d Destination) isQuotaCode(code string) bool {
	if code == "" {
		return false
	}
	if code == "insufficient_quota" {
		return true
	}
	for _, q := range d.QuotaCodes {
		if q == code {
			return true
		}
	}
	return false
}

// Decision is what happens after an outcome: the next state, what the
// integrator should do, and why, in words a person can read.
type Decision struct {
	Next    Next
	State   State
	RetryAt *time.Time
	Reason  string
	// Escalation lists case reasons when the operation goes to review or is
	// left ambiguous for a reason reconciliation must know.
	Escalation []Reason
}

// DecideInput is everything Decide needs; the store fills it inside the
// transaction that applies the decision.
type DecideInput struct {
	Op *Operation
	// N is the attempt whose outcome this is.
	N int
	// FirstAttemptAt is when attempt 1 started (key retention counts from it).
	FirstAttemptAt time.Time
	Outcome        Outcome
	Destination    Destination
	Now            time.Time
	Rand           Rand
	// PriorMayHaveEffect: an earlier attempt of this operation ended with
	// its effect unknown (see MayHaveHadEffect), so running out of budget
	// now cannot prove that nothing happened.
	PriorMayHaveEffect bool
}

// MayHaveHadEffect reports whether an attempt that ended with o may have
// had its effect at the destination.
func MayHaveHadEffect(o Outcome, d Destination, action string, now time.Time) bool {
	switch Classify(o, d, action, now).Effect {
	case EffectNone, EffectRejected:
		return false
	}
	return true
}

// PriorMayHaveEffect reports whether a finished attempt before n ended
// with its effect unknown, by classifying each stored outcome again (pure,
// so the answer is the one given at the time).
func PriorMayHaveEffect(attempts []Attempt, n int, d Destination, action string, now time.Time) bool {
	for _, a := range attempts {
		if a.N >= n || a.FinishedAt == nil {
			continue
		}
		o := Outcome{Result: a.Result, Phase: a.Phase, HTTPStatus: a.HTTPStatus, ProviderCode: a.ProviderCode, RetryAfter: a.RetryAfter}
		if MayHaveHadEffect(o, d, action, now) {
			return true
		}
	}
	return false
}

// BudgetEnded is where an operation goes when its budget (attempts, cost
// or deadline) ends with no attempt left to run: failed — unless an
// attempt may have had its effect (mayHaveEffect) and the operation writes,
// when the budget ending proves nothing and it is reconciled (ambiguous),
// never declared failed.
func BudgetEnded(risk Risk, mayHaveEffect bool) State {
	if mayHaveEffect && risk != RiskRead && risk != RiskGenerate {
		return Ambiguous
	}
	return Failed
}

// Decide turns an outcome into the operation's next state. Budgets count the
// attempt just finished and its cost.
func Decide(in DecideInput) Decision {
	op, o, now := in.Op, in.Outcome, in.Now
	cl := Classify(o, in.Destination, op.Action, now)
	risk := EffectiveRisk(op.Risk, in.Destination, in.FirstAttemptAt, now)
	if cl.Effect == EffectDone && o.OutputInvalid != "" {
		if OutputRefused(o, op) {
			cl = Classification{Effect: EffectNone, Reason: fmt.Sprintf(WhyOutputRefused, o.OutputInvalid)}
		} else {
			cl.Reason += "; " + WhyOutputIgnored
		}
	}

	switch cl.Effect {
	case EffectDone:
		if o.Resource != nil && o.Resource.Version != "" && o.Resource.Version != op.LogicalVersion {
			return Decision{Next: NextReview, State: NeedsReview, Escalation: []Reason{ReasonVersionMismatch},
				Reason: fmt.Sprintf(WhyReturnedOtherVersion, o.Resource.Ref, o.Resource.Version, op.LogicalVersion)}
		}
		if o.Job != nil && JobStatus(o.Job.Status) != JobSucceeded {
			return Decision{Next: NextFailed, State: Failed, Reason: fmt.Sprintf(WhyJobEnded, o.Job.Ref, o.Job.Status)}
		}
		return Decision{Next: NextDone, State: Confirmed, Reason: cl.Reason}
	case EffectAccepted:
		return Decision{Next: NextDone, State: Accepted, Reason: cl.Reason + "; " + WhyConfirmedWhenJobEnds}
	case EffectRejected:
		// The destination refused this attempt, which proves only that
		// this one did nothing: an earlier attempt whose effect is unknown
		// may have written, and a failure would hide it.
		if BudgetEnded(risk, in.PriorMayHaveEffect) == Ambiguous {
			return Decision{Next: NextReconcile, State: Ambiguous,
				Reason: cl.Reason + "; " + WhyEarlierNeverFailed}
		}
		return Decision{Next: NextFailed, State: Failed, Reason: cl.Reason}
	case EffectUnknown:
		if RetryNeedsReviewer(op) || risk == RiskCompensableWrite || risk == RiskIrreversible {
			esc := flagReasons(op)
			if risk == RiskIrreversible && !op.HasFlag(FlagIrreversible) {
				esc = append(esc, ReasonIrreversible)
			}
			why := WhyNeverRepeated
			if risk == RiskCompensableWrite && op.Risk == RiskIdempotentWrite {
				why = WhyKeyGuaranteeNotCovered
			}
			return Decision{Next: NextReconcile, State: Ambiguous, Escalation: esc,
				Reason: cl.Reason + "; " + fmt.Sprintf(why, risk)}
		}
	}

	// EffectNone, or EffectUnknown for read / generate / idempotent_write:
	// another attempt is safe if the budgets allow it.
	policy := in.Destination.Actions[op.Action]
	retryAt, stop, stopReason, stopWhy, stopWhyUnknown := retrySlot(in, cl, policy)
	if !stop {
		return Decision{Next: NextRetryAt, State: RetryWait, RetryAt: &retryAt,
			Reason: cl.Reason + "; " + fmt.Sprintf(WhyRetryAt, retryAt.UTC().Format(time.RFC3339Nano))}
	}
	if BudgetEnded(risk, cl.Effect == EffectUnknown || in.PriorMayHaveEffect) == Ambiguous {
		// The write may have happened (now or in an earlier attempt) and no
		// retry will settle it: reconcile, never declare it failed.
		return Decision{Next: NextReconcile, State: Ambiguous, Escalation: []Reason{stopReason},
			Reason: cl.Reason + "; " + stopWhyUnknown}
	}
	if slices.Contains(policy.EscalateOn, stopReason) {
		// The action's policy sends this stop to a person rather than
		// failing quietly: a budget a reviewer may decide to extend.
		return Decision{Next: NextReview, State: NeedsReview, Escalation: []Reason{stopReason},
			Reason: cl.Reason + "; " + stopWhy + "; " + fmt.Sprintf(WhyPolicyEscalates, stopReason)}
	}
	return Decision{Next: NextFailed, State: Failed, Escalation: []Reason{stopReason},
		Reason: cl.Reason + "; " + stopWhy}
}

// retrySlot picks when the next attempt may start, or says why none may
// (a reason and its words, and its words when the effect is unknown).
func retrySlot(in DecideInput, cl Classification, policy ActionConfig) (time.Time, bool, Reason, string, string) {
	op := in.Op
	max := op.MaxAttempts
	if max <= 0 {
		max = DefaultMaxAttempts
	}
	if in.N >= max {
		return time.Time{}, true, ReasonBudgetExhausted, fmt.Sprintf(WhyAttemptBudgetSpent, in.N, max),
			fmt.Sprintf(WhyAttemptBudgetSpentUnknown, in.N, max)
	}
	if op.CostBudget != nil && op.CostSpent+in.Outcome.Cost >= *op.CostBudget {
		spent, budget := formatCost(op.CostSpent+in.Outcome.Cost), formatCost(*op.CostBudget)
		return time.Time{}, true, ReasonBudgetExhausted, fmt.Sprintf(WhyCostBudgetSpent, spent, budget),
			fmt.Sprintf(WhyCostBudgetSpentUnknown, spent, budget)
	}
	wait := Backoff(in.N, in.Rand)
	if cl.HasRetryAfter && cl.RetryAfter > wait {
		wait = cl.RetryAfter
	}
	if policy.MaxWait > 0 && wait > policy.MaxWait {
		return time.Time{}, true, ReasonBudgetExhausted,
			fmt.Sprintf(WhyWaitTooLong, wait, policy.MaxWait), fmt.Sprintf(WhyWaitTooLongUnknown, wait, policy.MaxWait)
	}
	// Round up to the microsecond the store keeps, never down: rounding
	// down could grant an attempt up to 999 ns before Retry-After allows.
	at := in.Now.Add(wait).UTC()
	if t := at.Truncate(time.Microsecond); t.Before(at) {
		at = t.Add(time.Microsecond)
	}
	if !op.Deadline.IsZero() && at.After(op.Deadline) {
		return time.Time{}, true, ReasonDeadlineExpired, WhyRetryPastDeadline, WhyRetryPastDeadlineUnknown
	}
	return at, false, "", "", ""
}

// formatCost writes a cost as %g does (the reasons take %s and %d only).
func formatCost(c float64) string {
	return strconv.FormatFloat(c, 'g', -1, 64)
}

func flagReasons(op *Operation) []Reason {
	var rs []Reason
	for _, f := range op.Flags {
		rs = append(rs, Reason(f))
	}
	return rs
}

// LeaseExpired is the outcome the sweeper records for an attempt whose lease
// ran out without a report: nobody knows whether the request was sent.
func LeaseExpired() Outcome {
	return Outcome{Result: ResultUnknown, Phase: PhaseUnknown}
}
