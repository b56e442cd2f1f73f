package review

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// stubRand always draws the same number, so backoff is predictable.
type stubRand float64

func (r stubRand) Float64() float64 { return float64(r) }

var classifyNow = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

// keyedDest honours keys and uses 409 for "same key in progress".
var keyedDest = Destination{HonoursKeys: true, ConflictMeansInProgress: true, Lease: DefaultLease}

// plainDest guarantees nothing, like an unconfigured destination.
var plainDest = SafeDestination()

// outcomeWant is where Decide should send the operation.
type outcomeWant struct {
	next  Next
	state State
}

var (
	wRetry    = outcomeWant{NextRetryAt, RetryWait}
	wAmbig    = outcomeWant{NextReconcile, Ambiguous}
	wFail     = outcomeWant{NextFailed, Failed}
	wConfirm  = outcomeWant{NextDone, Confirmed}
	wAccepted = outcomeWant{NextDone, Accepted}
	wReview   = outcomeWant{NextReview, NeedsReview}
)

func (w outcomeWant) String() string { return fmt.Sprintf("%s/%s", w.next, w.state) }

func testOp(risk Risk, flags ...Flag) *Operation {
	return &Operation{
		ID: "op-1", Tenant: "acme", SourceRef: "contract-583", LogicalVersion: "v7",
		Action: "upload", Destination: "files", Risk: risk, Flags: flags, State: InFlight,
		Deadline: classifyNow.Add(24 * time.Hour), MaxAttempts: 5,
	}
}

func decideIn(op *Operation, d Destination, o Outcome) DecideInput {
	return DecideInput{Op: op, N: 1, FirstAttemptAt: classifyNow.Add(-time.Second), Outcome: o,
		Destination: d, Now: classifyNow, Rand: stubRand(0.5)}
}

func httpErr(status int) Outcome {
	return Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: status}
}

// checkDecision asserts the invariants every decision keeps, whatever it is.
func checkDecision(t *testing.T, in DecideInput, got Decision) {
	t.Helper()
	if err := CheckTransition(InFlight, got.State); err != nil {
		t.Errorf("decision state %s is not reachable from in_flight: %v", got.State, err)
	}
	if got.Reason == "" {
		t.Errorf("decision has no reason")
	}
	if (got.Next == NextRetryAt) != (got.RetryAt != nil) {
		t.Errorf("next = %s but RetryAt = %v", got.Next, got.RetryAt)
	}
	if got.RetryAt != nil && got.RetryAt.Before(in.Now) {
		t.Errorf("RetryAt %v is before now %v", got.RetryAt, in.Now)
	}
}

// riskColumn is one column of the classification matrix: a declared risk at
// a destination, and whether an unknown effect may be retried there.
type riskColumn struct {
	name string
	risk Risk
	dest Destination
	// unsafe: the effective risk is compensable_write or irreversible.
	unsafe bool
}

var riskColumns = []riskColumn{
	{"read", RiskRead, keyedDest, false},
	{"generate", RiskGenerate, keyedDest, false},
	{"idempotent_write/keys honoured", RiskIdempotentWrite, keyedDest, false},
	{"idempotent_write/keys not honoured", RiskIdempotentWrite, plainDest, true},
	{"compensable_write", RiskCompensableWrite, keyedDest, true},
	{"irreversible", RiskIrreversible, keyedDest, true},
}

// classificationCell is one line of SPEC "Error classification": an outcome,
// and where it leads for safe and for unsafe risk classes.
type classificationCell struct {
	name    string
	outcome Outcome
	// dest, when set, replaces the column's destination.
	dest       *Destination
	want       outcomeWant
	wantUnsafe outcomeWant
}

func classificationCells() []classificationCell {
	conflict := Destination{HonoursKeys: true, ConflictMeansInProgress: true}
	noConflict := Destination{HonoursKeys: true}
	quota := Destination{HonoursKeys: true, QuotaCodes: []string{"billing_hard_limit"}}
	cells := []classificationCell{
		// Failure before any byte was sent: no effect possible → retry.
		{name: "connection_error before_send", outcome: Outcome{Result: ResultConnectionError, Phase: PhaseBeforeSend}, want: wRetry, wantUnsafe: wRetry},
		{name: "timeout before_send", outcome: Outcome{Result: ResultTimeout, Phase: PhaseBeforeSend}, want: wRetry, wantUnsafe: wRetry},
		{name: "error before_send", outcome: Outcome{Result: ResultError, Phase: PhaseBeforeSend}, want: wRetry, wantUnsafe: wRetry},
		// 408, 429, 503: not processed → retry.
		{name: "408", outcome: httpErr(408), want: wRetry, wantUnsafe: wRetry},
		{name: "429", outcome: httpErr(429), want: wRetry, wantUnsafe: wRetry},
		{name: "503", outcome: httpErr(503), want: wRetry, wantUnsafe: wRetry},
		{name: "429 with a transient provider code", outcome: Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "rate_limit_exceeded"}, want: wRetry, wantUnsafe: wRetry},
		{name: "503 phase unknown", outcome: Outcome{Result: ResultError, Phase: PhaseUnknown, HTTPStatus: 503}, want: wRetry, wantUnsafe: wRetry},
		// 429 with an exhausted quota is not transient.
		{name: "429 insufficient_quota", outcome: Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota"}, want: wFail, wantUnsafe: wFail},
		{name: "429 configured quota code", dest: &quota, outcome: Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "billing_hard_limit"}, want: wFail, wantUnsafe: wFail},
		{name: "429 insufficient_quota with Retry-After", outcome: Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota", RetryAfter: "5"}, want: wFail, wantUnsafe: wFail},
		// 409: "same key in progress" only where the destination says so.
		{name: "409 conflict_means_in_progress", dest: &conflict, outcome: httpErr(409), want: wRetry, wantUnsafe: wRetry},
		{name: "409 without conflict_means_in_progress", dest: &noConflict, outcome: httpErr(409), want: wFail, wantUnsafe: wFail},
		{name: "409 on an unconfigured destination", dest: &plainDest, outcome: httpErr(409), want: wFail, wantUnsafe: wFail},
		// 400, 401, 403, 404, 422: repeating identical data cannot help.
		{name: "400", outcome: httpErr(400), want: wFail, wantUnsafe: wFail},
		{name: "401", outcome: httpErr(401), want: wFail, wantUnsafe: wFail},
		{name: "403", outcome: httpErr(403), want: wFail, wantUnsafe: wFail},
		{name: "404", outcome: httpErr(404), want: wFail, wantUnsafe: wFail},
		{name: "422", outcome: httpErr(422), want: wFail, wantUnsafe: wFail},
		{name: "business error with 200", outcome: httpErr(200), want: wFail, wantUnsafe: wFail},
		// Success.
		{name: "success", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, HTTPStatus: 201}, want: wConfirm, wantUnsafe: wConfirm},
		{name: "success phase unknown", outcome: Outcome{Result: ResultSuccess, Phase: PhaseUnknown}, want: wConfirm, wantUnsafe: wConfirm},
		{name: "success with resource of this version", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: &ResourceRef{Ref: "file-1", Version: "v7"}}, want: wConfirm, wantUnsafe: wConfirm},
		{name: "success with unversioned resource", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: &ResourceRef{Ref: "file-1"}}, want: wConfirm, wantUnsafe: wConfirm},
		{name: "success with resource of another version", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: &ResourceRef{Ref: "file-1", Version: "v6"}}, want: wReview, wantUnsafe: wReview},
		{name: "success with a queued job", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, HTTPStatus: 202, Job: &JobRef{Ref: "job-9", Status: "queued"}}, want: wAccepted, wantUnsafe: wAccepted},
		{name: "success with a running job", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-9", Status: "running"}}, want: wAccepted, wantUnsafe: wAccepted},
		{name: "success with a job of no status", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-9"}}, want: wAccepted, wantUnsafe: wAccepted},
		{name: "success with a succeeded job", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-9", Status: "succeeded"}}, want: wConfirm, wantUnsafe: wConfirm},
		{name: "success with a failed job", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-9", Status: "failed"}}, want: wFail, wantUnsafe: wFail},
		{name: "success with a canceled job", outcome: Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-9", Status: "canceled"}}, want: wFail, wantUnsafe: wFail},
		// The attempt lease ran out with no report.
		{name: "lease expired", outcome: LeaseExpired(), want: wRetry, wantUnsafe: wAmbig},
	}
	// 500, 502, 504, timeout or broken connection after send (or phase
	// unknown): retry for read/generate/idempotent_write, else ambiguous.
	for _, p := range []Phase{PhaseAfterSend, PhaseUnknown} {
		for _, s := range []int{500, 502, 504} {
			cells = append(cells, classificationCell{name: fmt.Sprintf("%d %s", s, p),
				outcome: Outcome{Result: ResultError, Phase: p, HTTPStatus: s}, want: wRetry, wantUnsafe: wAmbig})
		}
		for _, r := range []Result{ResultTimeout, ResultConnectionError, ResultError} {
			cells = append(cells, classificationCell{name: fmt.Sprintf("%s %s", r, p),
				outcome: Outcome{Result: r, Phase: p}, want: wRetry, wantUnsafe: wAmbig})
		}
	}
	cells = append(cells,
		classificationCell{name: "timeout after_send with 504", outcome: Outcome{Result: ResultTimeout, Phase: PhaseAfterSend, HTTPStatus: 504}, want: wRetry, wantUnsafe: wAmbig},
		classificationCell{name: "error with 3xx", outcome: httpErr(302), want: wRetry, wantUnsafe: wAmbig},
	)
	return cells
}

// TestDecideClassificationMatrix walks every cell of SPEC's classification
// table across every risk class.
func TestDecideClassificationMatrix(t *testing.T) {
	type testCase struct {
		name string
		op   *Operation
		dest Destination
		in   Outcome
		want outcomeWant
	}
	var tests []testCase
	for _, cell := range classificationCells() {
		for _, col := range riskColumns {
			tc := testCase{name: col.name + "/" + cell.name, op: testOp(col.risk), dest: col.dest, in: cell.outcome, want: cell.want}
			if cell.dest != nil {
				tc.dest = *cell.dest
			}
			if col.unsafe {
				tc.want = cell.wantUnsafe
			}
			tests = append(tests, tc)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.in.Result != ResultUnknown {
				if err := tt.in.Validate(); err != nil {
					t.Fatalf("test outcome is invalid: %v", err)
				}
			}
			in := decideIn(tt.op, tt.dest, tt.in)
			got := Decide(in)
			if (outcomeWant{got.Next, got.State}) != tt.want {
				t.Errorf("Decide = %s (%s), want %s", outcomeWant{got.Next, got.State}, got.Reason, tt.want)
			}
			checkDecision(t, in, got)
		})
	}
}

func TestDecideEscalations(t *testing.T) {
	timeout := Outcome{Result: ResultTimeout, Phase: PhaseAfterSend}
	tests := []struct {
		name  string
		op    *Operation
		dest  Destination
		in    Outcome
		want  outcomeWant
		wantR []Reason
	}{
		{"financial read is never retried blind", testOp(RiskRead, FlagFinancial), keyedDest, timeout, wAmbig, []Reason{ReasonFinancial}},
		{"irreversible-flagged read", testOp(RiskRead, FlagIrreversible), keyedDest, timeout, wAmbig, []Reason{ReasonIrreversible}},
		{"financial generate on 502", testOp(RiskGenerate, FlagFinancial), keyedDest, httpErr(502), wAmbig, []Reason{ReasonFinancial}},
		{"financial idempotent_write on lease expiry", testOp(RiskIdempotentWrite, FlagFinancial), keyedDest, LeaseExpired(), wAmbig, []Reason{ReasonFinancial}},
		// Issue 14, part 5: regulated escalates like financial.
		{"regulated read is never retried blind", testOp(RiskRead, FlagRegulated), keyedDest, timeout, wAmbig, []Reason{ReasonRegulated}},
		{"financial read before_send retries", testOp(RiskRead, FlagFinancial), keyedDest, Outcome{Result: ResultConnectionError, Phase: PhaseBeforeSend}, wRetry, nil},
		{"financial read on 503 retries", testOp(RiskRead, FlagFinancial), keyedDest, httpErr(503), wRetry, nil},
		{"financial read on 400 fails", testOp(RiskRead, FlagFinancial), keyedDest, httpErr(400), wFail, nil},
		{"irreversible risk names itself", testOp(RiskIrreversible), keyedDest, timeout, wAmbig, []Reason{ReasonIrreversible}},
		{"irreversible risk and flag name it once", testOp(RiskIrreversible, FlagIrreversible), keyedDest, timeout, wAmbig, []Reason{ReasonIrreversible}},
		{"irreversible risk with financial flag", testOp(RiskIrreversible, FlagFinancial), keyedDest, timeout, wAmbig, []Reason{ReasonFinancial, ReasonIrreversible}},
		{"compensable_write has no flag reason", testOp(RiskCompensableWrite), keyedDest, timeout, wAmbig, nil},
		{"compensable_write with both flags", testOp(RiskCompensableWrite, FlagFinancial, FlagIrreversible), keyedDest, timeout, wAmbig, []Reason{ReasonFinancial, ReasonIrreversible}},
		{"version mismatch", testOp(RiskCompensableWrite), keyedDest,
			Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: &ResourceRef{Ref: "file-1", Version: "v8"}}, wReview, []Reason{ReasonVersionMismatch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := decideIn(tt.op, tt.dest, tt.in)
			got := Decide(in)
			if (outcomeWant{got.Next, got.State}) != tt.want {
				t.Errorf("Decide = %s (%s), want %s", outcomeWant{got.Next, got.State}, got.Reason, tt.want)
			}
			if !slices.Equal(got.Escalation, tt.wantR) {
				t.Errorf("Escalation = %v, want %v", got.Escalation, tt.wantR)
			}
			checkDecision(t, in, got)
		})
	}
}

func TestEffectiveRisk(t *testing.T) {
	keyed24h := Destination{HonoursKeys: true, KeyRetention: 24 * time.Hour}
	tests := []struct {
		name  string
		risk  Risk
		dest  Destination
		first time.Time
		want  Risk
	}{
		{"idempotent_write, keys honoured", RiskIdempotentWrite, keyedDest, classifyNow.Add(-time.Hour), RiskIdempotentWrite},
		{"idempotent_write, keys not honoured", RiskIdempotentWrite, plainDest, classifyNow.Add(-time.Hour), RiskCompensableWrite},
		{"idempotent_write, retention forever", RiskIdempotentWrite, keyedDest, classifyNow.Add(-1000 * time.Hour), RiskIdempotentWrite},
		{"idempotent_write, within retention", RiskIdempotentWrite, keyed24h, classifyNow.Add(-23 * time.Hour), RiskIdempotentWrite},
		{"idempotent_write, retention just lapsed", RiskIdempotentWrite, keyed24h, classifyNow.Add(-24 * time.Hour), RiskCompensableWrite},
		{"idempotent_write, retention long lapsed", RiskIdempotentWrite, keyed24h, classifyNow.Add(-48 * time.Hour), RiskCompensableWrite},
		{"idempotent_write, no first attempt yet", RiskIdempotentWrite, keyed24h, time.Time{}, RiskIdempotentWrite},
		{"read on plain", RiskRead, plainDest, classifyNow, RiskRead},
		{"generate on plain", RiskGenerate, plainDest, classifyNow, RiskGenerate},
		{"compensable_write on keyed", RiskCompensableWrite, keyedDest, classifyNow, RiskCompensableWrite},
		{"irreversible on keyed", RiskIrreversible, keyed24h, classifyNow.Add(-48 * time.Hour), RiskIrreversible},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectiveRisk(tt.risk, tt.dest, tt.first, classifyNow); got != tt.want {
				t.Errorf("EffectiveRisk = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDecideKeyRetentionLapsed(t *testing.T) {
	dest := Destination{HonoursKeys: true, KeyRetention: time.Hour}
	tests := []struct {
		name  string
		first time.Time
		in    Outcome
		want  outcomeWant
	}{
		{"within retention, timeout retries", classifyNow.Add(-30 * time.Minute), Outcome{Result: ResultTimeout, Phase: PhaseAfterSend}, wRetry},
		{"lapsed, timeout reconciles", classifyNow.Add(-2 * time.Hour), Outcome{Result: ResultTimeout, Phase: PhaseAfterSend}, wAmbig},
		{"lapsed, 500 reconciles", classifyNow.Add(-2 * time.Hour), httpErr(500), wAmbig},
		{"lapsed, lease expiry reconciles", classifyNow.Add(-2 * time.Hour), LeaseExpired(), wAmbig},
		{"lapsed, 503 still retries", classifyNow.Add(-2 * time.Hour), httpErr(503), wRetry},
		{"lapsed, before_send still retries", classifyNow.Add(-2 * time.Hour), Outcome{Result: ResultTimeout, Phase: PhaseBeforeSend}, wRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := decideIn(testOp(RiskIdempotentWrite), dest, tt.in)
			in.FirstAttemptAt = tt.first
			got := Decide(in)
			if (outcomeWant{got.Next, got.State}) != tt.want {
				t.Errorf("Decide = %s (%s), want %s", outcomeWant{got.Next, got.State}, got.Reason, tt.want)
			}
			if tt.want == wAmbig && !strings.Contains(got.Reason, "key guarantee") {
				t.Errorf("Reason %q does not say the key guarantee lapsed", got.Reason)
			}
			checkDecision(t, in, got)
		})
	}
}

func TestClassifyOverrides(t *testing.T) {
	dest := Destination{
		HonoursKeys: true,
		Errors:      map[string]ErrorClass{"404": ClassRetry, "500": ClassFail, "503": ClassFail, "429": ClassRetry, "400": ClassUnknown},
		Actions: map[string]ActionConfig{
			"upload": {Errors: map[string]ErrorClass{"404": ClassUnknown, "422": ClassRetry}},
			"delete": {Errors: map[string]ErrorClass{"404": ClassFail}},
		},
	}
	tests := []struct {
		name   string
		action string
		in     Outcome
		want   Effect
	}{
		{"destination override 404 retry", "list", httpErr(404), EffectNone},
		{"action override beats destination", "upload", httpErr(404), EffectUnknown},
		{"another action's override", "delete", httpErr(404), EffectRejected},
		{"action override where destination has none", "upload", httpErr(422), EffectNone},
		{"action without override falls back to destination", "upload", httpErr(500), EffectRejected},
		{"unconfigured action", "list", httpErr(422), EffectRejected},
		{"destination override 503 fail", "list", httpErr(503), EffectRejected},
		{"destination override 400 unknown", "list", httpErr(400), EffectUnknown},
		{"override beats the quota default", "list", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota"}, EffectNone},
		{"unlisted status keeps its default", "list", httpErr(502), EffectUnknown},
		{"no override before send", "upload", Outcome{Result: ResultError, Phase: PhaseBeforeSend}, EffectNone},
		{"no override without a status", "list", Outcome{Result: ResultTimeout, Phase: PhaseAfterSend}, EffectUnknown},
		{"success is never overridden", "upload", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, HTTPStatus: 404}, EffectDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.in, dest, tt.action, classifyNow)
			if got.Effect != tt.want {
				t.Errorf("Classify = %s (%s), want %s", got.Effect, got.Reason, tt.want)
			}
			if got.Reason == "" {
				t.Errorf("no reason")
			}
		})
	}
}

func TestDecideOverrides(t *testing.T) {
	dest := Destination{
		HonoursKeys: true,
		Errors:      map[string]ErrorClass{"404": ClassRetry, "502": ClassFail},
		Actions:     map[string]ActionConfig{"upload": {Errors: map[string]ErrorClass{"503": ClassUnknown}}},
	}
	tests := []struct {
		name string
		risk Risk
		in   Outcome
		want outcomeWant
	}{
		{"404 retry on compensable_write", RiskCompensableWrite, httpErr(404), wRetry},
		{"502 fail on read", RiskRead, httpErr(502), wFail},
		{"502 fail on irreversible", RiskIrreversible, httpErr(502), wFail},
		{"503 unknown for the action, compensable", RiskCompensableWrite, httpErr(503), wAmbig},
		{"503 unknown for the action, read", RiskRead, httpErr(503), wRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := decideIn(testOp(tt.risk), dest, tt.in)
			got := Decide(in)
			if (outcomeWant{got.Next, got.State}) != tt.want {
				t.Errorf("Decide = %s (%s), want %s", outcomeWant{got.Next, got.State}, got.Reason, tt.want)
			}
			checkDecision(t, in, got)
		})
	}
}

func TestClassifyRetryAfter(t *testing.T) {
	tests := []struct {
		name    string
		in      Outcome
		want    time.Duration
		wantHas bool
	}{
		{"seconds on 429", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, RetryAfter: "30"}, 30 * time.Second, true},
		{"HTTP date on 503", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 503, RetryAfter: "Fri, 14 Mar 2025 12:02:00 GMT"}, 2 * time.Minute, true},
		{"none on 408", httpErr(408), 0, false},
		{"garbage on 429", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, RetryAfter: "soon"}, 0, false},
		{"ignored before send", Outcome{Result: ResultError, Phase: PhaseBeforeSend, RetryAfter: "30"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.in, keyedDest, "upload", classifyNow)
			if got.RetryAfter != tt.want || got.HasRetryAfter != tt.wantHas {
				t.Errorf("Classify RetryAfter = %v, %v; want %v, %v", got.RetryAfter, got.HasRetryAfter, tt.want, tt.wantHas)
			}
		})
	}
}

func TestDecideRetryAfter(t *testing.T) {
	ra := func(status int, v string) Outcome {
		return Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: status, RetryAfter: v}
	}
	backoff := 500 * time.Millisecond // attempt 1, draw 0.5
	tests := []struct {
		name     string
		risk     Risk
		in       Outcome
		deadline time.Time
		want     outcomeWant
		wantAt   time.Duration // RetryAt − now, when retrying
		wantR    []Reason
	}{
		{"429 seconds", RiskCompensableWrite, ra(429, "30"), classifyNow.Add(time.Hour), wRetry, 30 * time.Second, nil},
		{"503 seconds", RiskIrreversible, ra(503, "120"), classifyNow.Add(time.Hour), wRetry, 120 * time.Second, nil},
		{"408 seconds", RiskRead, ra(408, "7"), classifyNow.Add(time.Hour), wRetry, 7 * time.Second, nil},
		{"429 HTTP date", RiskGenerate, ra(429, "Fri, 14 Mar 2025 12:05:00 GMT"), classifyNow.Add(time.Hour), wRetry, 5 * time.Minute, nil},
		{"503 RFC 850 date", RiskRead, ra(503, "Friday, 14-Mar-25 12:00:45 GMT"), classifyNow.Add(time.Hour), wRetry, 45 * time.Second, nil},
		{"Retry-After shorter than backoff", RiskRead, ra(429, "0"), classifyNow.Add(time.Hour), wRetry, backoff, nil},
		{"HTTP date in the past", RiskRead, ra(503, "Thu, 13 Mar 2025 12:00:00 GMT"), classifyNow.Add(time.Hour), wRetry, backoff, nil},
		{"unparsable Retry-After", RiskRead, ra(503, "later"), classifyNow.Add(time.Hour), wRetry, backoff, nil},
		{"500 with Retry-After on read", RiskRead, ra(500, "20"), classifyNow.Add(time.Hour), wRetry, 20 * time.Second, nil},
		{"Retry-After exactly at the deadline", RiskRead, ra(429, "60"), classifyNow.Add(time.Minute), wRetry, time.Minute, nil},
		{"Retry-After past the deadline", RiskCompensableWrite, ra(429, "61"), classifyNow.Add(time.Minute), wFail, 0, []Reason{ReasonDeadlineExpired}},
		{"HTTP date past the deadline", RiskRead, ra(503, "Fri, 14 Mar 2025 13:00:00 GMT"), classifyNow.Add(time.Minute), wFail, 0, []Reason{ReasonDeadlineExpired}},
		{"unknown effect past the deadline reconciles", RiskIdempotentWrite, ra(500, "3600"), classifyNow.Add(time.Minute), wAmbig, 0, []Reason{ReasonDeadlineExpired}},
		{"no deadline", RiskRead, ra(429, "86400"), time.Time{}, wRetry, 24 * time.Hour, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := testOp(tt.risk)
			op.Deadline = tt.deadline
			in := decideIn(op, keyedDest, tt.in)
			got := Decide(in)
			if (outcomeWant{got.Next, got.State}) != tt.want {
				t.Fatalf("Decide = %s (%s), want %s", outcomeWant{got.Next, got.State}, got.Reason, tt.want)
			}
			if got.RetryAt != nil {
				if d := got.RetryAt.Sub(classifyNow); d != tt.wantAt {
					t.Errorf("RetryAt = now + %v, want now + %v", d, tt.wantAt)
				}
			}
			if !slices.Equal(got.Escalation, tt.wantR) {
				t.Errorf("Escalation = %v, want %v", got.Escalation, tt.wantR)
			}
			if slices.Contains(tt.wantR, ReasonDeadlineExpired) && !strings.Contains(got.Reason, "deadline") {
				t.Errorf("Reason %q does not mention the deadline", got.Reason)
			}
			checkDecision(t, in, got)
		})
	}
}

func TestDecideBudgets(t *testing.T) {
	cost := func(v float64) *float64 { return &v }
	unavailable := httpErr(503)
	timeout := Outcome{Result: ResultTimeout, Phase: PhaseAfterSend}
	withCost := func(o Outcome, c float64) Outcome { o.Cost = c; return o }
	tests := []struct {
		name     string
		risk     Risk
		max      int
		n        int
		budget   *float64
		spent    float64
		deadline time.Duration // from now; 0: none
		in       Outcome
		want     outcomeWant
		wantR    []Reason
	}{
		{"attempts left", RiskRead, 5, 4, nil, 0, time.Hour, unavailable, wRetry, nil},
		{"max_attempts reached, no effect", RiskCompensableWrite, 5, 5, nil, 0, time.Hour, unavailable, wFail, []Reason{ReasonBudgetExhausted}},
		{"max_attempts reached before send", RiskIrreversible, 3, 3, nil, 0, time.Hour, Outcome{Result: ResultConnectionError, Phase: PhaseBeforeSend}, wFail, []Reason{ReasonBudgetExhausted}},
		{"max_attempts reached, idempotent_write unknown effect", RiskIdempotentWrite, 5, 5, nil, 0, time.Hour, timeout, wAmbig, []Reason{ReasonBudgetExhausted}},
		{"max_attempts reached, idempotent_write no effect", RiskIdempotentWrite, 5, 5, nil, 0, time.Hour, unavailable, wFail, []Reason{ReasonBudgetExhausted}},
		{"max_attempts reached, read unknown effect", RiskRead, 5, 5, nil, 0, time.Hour, timeout, wFail, []Reason{ReasonBudgetExhausted}},
		{"max_attempts reached, generate unknown effect", RiskGenerate, 2, 2, nil, 0, time.Hour, httpErr(502), wFail, []Reason{ReasonBudgetExhausted}},
		{"max_attempts reached, compensable unknown still reconciles", RiskCompensableWrite, 5, 5, nil, 0, time.Hour, timeout, wAmbig, nil},
		{"max_attempts 1", RiskRead, 1, 1, nil, 0, time.Hour, unavailable, wFail, []Reason{ReasonBudgetExhausted}},
		{"max_attempts unset defaults to 5, attempt 4", RiskRead, 0, 4, nil, 0, time.Hour, unavailable, wRetry, nil},
		{"max_attempts unset defaults to 5, attempt 5", RiskRead, 0, DefaultMaxAttempts, nil, 0, time.Hour, unavailable, wFail, []Reason{ReasonBudgetExhausted}},
		{"success ignores exhausted budgets", RiskRead, 1, 1, cost(1), 5, time.Hour, Outcome{Result: ResultSuccess, Phase: PhaseAfterSend}, wConfirm, nil},
		{"rejection ignores budgets", RiskRead, 5, 1, nil, 0, time.Hour, httpErr(400), wFail, nil},
		{"cost under budget", RiskRead, 5, 1, cost(1), 0.5, time.Hour, withCost(unavailable, 0.4), wRetry, nil},
		{"cost reaches budget", RiskRead, 5, 1, cost(1), 0.5, time.Hour, withCost(unavailable, 0.5), wFail, []Reason{ReasonBudgetExhausted}},
		{"cost already spent", RiskGenerate, 5, 1, cost(1), 1.5, time.Hour, unavailable, wFail, []Reason{ReasonBudgetExhausted}},
		{"cost exhausted, idempotent_write unknown effect", RiskIdempotentWrite, 5, 1, cost(2), 1, time.Hour, withCost(timeout, 1), wAmbig, []Reason{ReasonBudgetExhausted}},
		{"no cost budget", RiskRead, 5, 1, nil, 1e9, time.Hour, withCost(unavailable, 1e9), wRetry, nil},
		{"backoff passes the deadline", RiskRead, 5, 1, nil, 0, 100 * time.Millisecond, unavailable, wFail, []Reason{ReasonDeadlineExpired}},
		{"deadline already passed", RiskRead, 5, 1, nil, 0, -time.Minute, unavailable, wFail, []Reason{ReasonDeadlineExpired}},
		{"deadline passed, idempotent_write unknown effect", RiskIdempotentWrite, 5, 1, nil, 0, -time.Minute, timeout, wAmbig, []Reason{ReasonDeadlineExpired}},
		{"no deadline", RiskRead, 5, 1, nil, 0, 0, unavailable, wRetry, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := testOp(tt.risk)
			op.MaxAttempts, op.CostBudget, op.CostSpent = tt.max, tt.budget, tt.spent
			op.Deadline = time.Time{}
			if tt.deadline != 0 {
				op.Deadline = classifyNow.Add(tt.deadline)
			}
			in := decideIn(op, keyedDest, tt.in)
			in.N = tt.n
			got := Decide(in)
			if (outcomeWant{got.Next, got.State}) != tt.want {
				t.Errorf("Decide = %s (%s), want %s", outcomeWant{got.Next, got.State}, got.Reason, tt.want)
			}
			if !slices.Equal(got.Escalation, tt.wantR) {
				t.Errorf("Escalation = %v, want %v", got.Escalation, tt.wantR)
			}
			checkDecision(t, in, got)
		})
	}
}

// retryAfterProperty draws random outcomes with and without Retry-After and
// counts the retries scheduled before the destination allowed them, or
// outside the full-jitter ceiling. nowAt picks the decision time.
func retryAfterProperty(t *testing.T, nowAt func(r *rand.Rand) time.Time) {
	t.Helper()
	var early, outside, retries int
	for seed := uint64(0); seed < 1000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x11b0))
		now := nowAt(r)
		n := 1 + r.IntN(DefaultMaxAttempts-1)
		status := []int{408, 429, 503, 500, 502, 504}[r.IntN(6)]
		risk := []Risk{RiskRead, RiskGenerate, RiskIdempotentWrite}[r.IntN(3)]
		o := Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: status}
		var minWait time.Duration
		switch r.IntN(3) {
		case 0: // delta-seconds
			minWait = time.Duration(r.IntN(600)) * time.Second
			o.RetryAfter = fmt.Sprint(int(minWait / time.Second))
		case 1: // HTTP date, whole seconds, possibly in the past
			at := now.Truncate(time.Second).Add(time.Duration(r.IntN(660)-60) * time.Second)
			o.RetryAfter = at.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")
			minWait = max(at.Sub(now), 0)
		}
		op := testOp(risk)
		op.Deadline = now.Add(24 * time.Hour)
		in := DecideInput{Op: op, N: n, FirstAttemptAt: now, Outcome: o, Destination: keyedDest, Now: now, Rand: r}
		got := Decide(in)
		if got.State != RetryWait || got.RetryAt == nil {
			t.Fatalf("seed %d: Decide = %s/%s (%s), want a retry", seed, got.Next, got.State, got.Reason)
		}
		retries++
		if got.RetryAt.Before(now.Add(minWait)) {
			early++
			if early <= 3 {
				t.Logf("seed %d: Retry-After %q at %s, RetryAt %s is %v early", seed, o.RetryAfter,
					now.Format(time.RFC3339Nano), got.RetryAt.Format(time.RFC3339Nano), now.Add(minWait).Sub(*got.RetryAt))
			}
		}
		if o.RetryAfter == "" {
			ceiling := min(BackoffCap, BackoffBase<<n)
			// The ledger keeps microseconds, so allow RetryAt to be rounded
			// to the microsecond on either side of [now, now+ceiling).
			if got.RetryAt.Before(now.Truncate(time.Microsecond)) || got.RetryAt.Sub(now) > ceiling+time.Microsecond {
				outside++
				t.Logf("seed %d: attempt %d, RetryAt now+%v outside [0, %v)", seed, n, got.RetryAt.Sub(now), ceiling)
			}
		}
	}
	if early != 0 {
		t.Errorf("%d of %d retries granted before Retry-After allowed, want 0", early, retries)
	}
	if outside != 0 {
		t.Errorf("%d of %d retries outside the full-jitter ceiling, want 0", outside, retries)
	}
}

func TestDecideRetryAtProperty(t *testing.T) {
	base := classifyNow.Unix()
	t.Run("microsecond clock", func(t *testing.T) {
		// The store truncates its clock to microseconds before deciding.
		retryAfterProperty(t, func(r *rand.Rand) time.Time {
			return time.Unix(base+r.Int64N(1e7), r.Int64N(1e6)*1e3).UTC()
		})
	})
	t.Run("nanosecond clock", func(t *testing.T) {
		// Decide is pure and takes any Now; Retry-After must hold for it too.
		retryAfterProperty(t, func(r *rand.Rand) time.Time {
			return time.Unix(base+r.Int64N(1e7), r.Int64N(1e9)).UTC()
		})
	})
}

func TestOutcomeValidate(t *testing.T) {
	tests := []struct {
		name    string
		in      Outcome
		wantErr string // "" when valid
	}{
		{"success after send", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, HTTPStatus: 200}, ""},
		{"success phase unknown", Outcome{Result: ResultSuccess, Phase: PhaseUnknown}, ""},
		{"timeout before send", Outcome{Result: ResultTimeout, Phase: PhaseBeforeSend}, ""},
		{"error with everything", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, RetryAfter: "5",
			ProviderCode: "rate_limited", ProviderRequestID: "req-1", Cost: 0.02}, ""},
		{"success with resource and job", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend,
			Resource: &ResourceRef{Ref: "f1", Kind: "file", Version: "v7"}, Job: &JobRef{Ref: "j1", Status: "queued"}}, ""},
		{"job without status", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "j1"}}, ""},
		{"zero cost", Outcome{Result: ResultError, Phase: PhaseAfterSend, Cost: 0}, ""},
		{"empty result", Outcome{Phase: PhaseAfterSend}, "result"},
		{"unknown result", Outcome{Result: "exploded", Phase: PhaseAfterSend}, "result"},
		{"lease-expiry result from a caller", Outcome{Result: ResultUnknown, Phase: PhaseUnknown}, "result"},
		{"empty phase", Outcome{Result: ResultError}, "phase"},
		{"bad phase", Outcome{Result: ResultError, Phase: "during_send"}, "phase"},
		{"success before send", Outcome{Result: ResultSuccess, Phase: PhaseBeforeSend}, "success"},
		{"http_status before send", Outcome{Result: ResultError, Phase: PhaseBeforeSend, HTTPStatus: 503}, "before_send"},
		{"http_status too low", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 99}, "http_status"},
		{"http_status too high", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 600}, "http_status"},
		{"negative http_status", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: -1}, "http_status"},
		{"negative cost", Outcome{Result: ResultError, Phase: PhaseAfterSend, Cost: -0.01}, "cost"},
		{"cost at MaxCost", Outcome{Result: ResultError, Phase: PhaseAfterSend, Cost: MaxCost}, ""},
		{"cost past MaxCost", Outcome{Result: ResultError, Phase: PhaseAfterSend, Cost: 1.7e308}, "cost"},
		{"resource without ref", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: &ResourceRef{Kind: "file"}}, "resource.ref"},
		{"job without ref", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Status: "queued"}}, "job.ref"},
		{"job with bad status", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "j1", Status: "done"}}, "job.status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %q, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestLeaseExpiredOutcome(t *testing.T) {
	o := LeaseExpired()
	if o.Result != ResultUnknown || o.Phase != PhaseUnknown {
		t.Fatalf("LeaseExpired() = %+v", o)
	}
	got := Classify(o, keyedDest, "upload", classifyNow)
	if got.Effect != EffectUnknown {
		t.Errorf("Classify(LeaseExpired()) = %s, want %s", got.Effect, EffectUnknown)
	}
	if !strings.Contains(got.Reason, "lease") {
		t.Errorf("Reason %q does not mention the lease", got.Reason)
	}
}

func TestRetryNeedsReconcile(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := Destination{HonoursKeys: true, KeyRetention: 3 * time.Second}
	op := &Operation{Risk: RiskIdempotentWrite, AttemptCount: 1}
	for _, tt := range []struct {
		name  string
		op    *Operation
		d     Destination
		at    time.Duration
		prior bool
		want  bool
	}{
		{"inside the retention", op, keys, 2 * time.Second, true, false},
		{"past the retention, effect possible", op, keys, 3 * time.Second, true, true},
		{"past the retention, no effect possible", op, keys, time.Hour, false, false},
		{"keys remembered forever", op, Destination{HonoursKeys: true}, time.Hour, true, false},
		{"not an idempotent write", &Operation{Risk: RiskCompensableWrite, AttemptCount: 1}, keys, time.Hour, true, false},
		{"no attempt yet", &Operation{Risk: RiskIdempotentWrite}, keys, time.Hour, true, false},
	} {
		if got := RetryNeedsReconcile(tt.op, tt.d, t0, t0.Add(tt.at), tt.prior); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestBudgetEnded: the one rule for a budget that ends with no attempt
// left — failed, unless an attempt may have had its effect and the
// operation writes (reconcile, never declare failed).
func TestBudgetEnded(t *testing.T) {
	for _, r := range AllRisks() {
		if got := BudgetEnded(r, false); got != Failed {
			t.Errorf("BudgetEnded(%s, no effect possible) = %s, want failed", r, got)
		}
		want := Ambiguous
		if r == RiskRead || r == RiskGenerate {
			want = Failed
		}
		if got := BudgetEnded(r, true); got != want {
			t.Errorf("BudgetEnded(%s, an effect may exist) = %s, want %s", r, got, want)
		}
	}
}
