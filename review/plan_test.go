package review

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestPlanRegistration(t *testing.T) {
	now := classifyNow
	p, err := PlanRegistration(validRegistration(), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Registration
	if want := DeriveKey("acme", "contract-583", "convert_pdf", "v7"); r.Key != want || r.Deadline == nil || r.MaxAttempts == nil {
		t.Errorf("the plan's registration is not normalized: %+v", r)
	}
	if p.PayloadHash != PayloadHash(r.Payload) || p.State != Pending || p.Reason != "registered" {
		t.Errorf("plan %+v, want pending, registered, the payload's hash", p)
	}
	want := PlannedEvent{Action: "operation.registered", To: Pending,
		Detail: map[string]any{"key": r.Key, "payload_hash": p.PayloadHash, "risk": RiskCompensableWrite, "reason": "registered"}}
	if !reflect.DeepEqual(p.Event, want) {
		t.Errorf("event %+v, want %+v", p.Event, want)
	}

	// Approval is looked up under the normalized destination name: a
	// decomposed "é" finds the destination configured composed.
	cfg := &Config{Destinations: map[string]Destination{
		"caf\u00e9": {Actions: map[string]ActionConfig{"convert_pdf": {RequiresApproval: true}}},
	}}
	reg := validRegistration()
	reg.Destination = "cafe\u0301"
	if p, err = PlanRegistration(reg, cfg, now); err != nil {
		t.Fatal(err)
	}
	if p.State != AwaitingApproval || p.Event.To != AwaitingApproval || p.Event.Detail["reason"] != p.Reason ||
		p.Reason != "the action requires approval before any attempt" {
		t.Errorf("an action that needs approval: %+v", p)
	}

	bad := validRegistration()
	bad.Risk = "reckless"
	if p, err := PlanRegistration(bad, nil, now); !errors.Is(err, ErrInvalid) || p != nil {
		t.Errorf("an invalid registration: %+v, %v", p, err)
	}
}

func TestRegistrationPlanExistingKey(t *testing.T) {
	p, err := PlanRegistration(validRegistration(), nil, classifyNow)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Registration
	stored := &Operation{ID: "op_1", Tenant: r.Tenant, Key: r.Key, SourceRef: r.SourceRef, LogicalVersion: r.LogicalVersion,
		Action: r.Action, Destination: r.Destination, Risk: r.Risk, PayloadHash: p.PayloadHash}
	if kp := p.ExistingKey(stored); !reflect.DeepEqual(kp, KeyTakenPlan{}) {
		t.Errorf("the same intention plans %+v, want nothing", kp)
	}

	other := *stored
	other.PayloadHash, other.Risk = "sha256:other", RiskIrreversible
	kp := p.ExistingKey(&other)
	if kp.Mismatch == nil || kp.Mismatch.Operation != &other || !slices.Equal(kp.Mismatch.Fields, []string{"payload", "risk"}) {
		t.Fatalf("another intention: mismatch %+v", kp.Mismatch)
	}
	want := PlannedEvent{Action: "operation.payload_mismatch",
		Detail: map[string]any{"fields": []string{"payload", "risk"}, "payload_hash": p.PayloadHash}}
	if !reflect.DeepEqual(kp.Event, want) || !slices.Equal(kp.CaseReasons, []Reason{ReasonPayloadMismatch}) {
		t.Errorf("another intention plans %+v, want event %+v and a payload_mismatch case", kp, want)
	}
}

// TestPlanOutcome: an outcome is planned from the operation's whole
// record. A refusal proves only that its own attempt did nothing, and the
// evidence that landed while the attempt was in flight outweighs a retry
// or a failure the report alone would plan (the property test found an
// idempotent write declared failed on a 429 while its first attempt's 502
// had left the folder at the destination).
func TestPlanOutcome(t *testing.T) {
	quota := Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota"}
	earlier := classifyNow.Add(-time.Minute)
	unknown := Attempt{N: 1, StartedAt: earlier, FinishedAt: &earlier, Result: ResultError, Phase: PhaseUnknown, HTTPStatus: 502}
	refused := Attempt{N: 1, StartedAt: earlier, FinishedAt: &earlier, Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 422}
	open := Attempt{N: 2, StartedAt: classifyNow.Add(-time.Second), LeaseExpiresAt: classifyNow.Add(time.Minute)}
	match := Candidate{Ref: "fld-1", Kind: "folder", Version: "v7", OperationID: "op-1"}
	claim := Evidence{Source: SourceWebhook, Candidates: []Candidate{match}, Verdict: VerdictInconclusive, ObservedAt: classifyNow.Add(-time.Millisecond)}
	timeoutSent := Outcome{Result: ResultTimeout, Phase: PhaseAfterSend}
	found := Evidence{Source: SourceStatusLookup, Authoritative: true, Candidates: []Candidate{match}, Verdict: VerdictConfirms, ObservedAt: claim.ObservedAt}
	tests := []struct {
		name     string
		risk     Risk
		attempts []Attempt
		evidence []Evidence
		outcome  Outcome
		want     State
		next     Next
		resource string
	}{
		{"a refusal after an attempt whose effect is unknown", RiskIdempotentWrite, []Attempt{unknown, open}, nil, quota, Ambiguous, NextReconcile, ""},
		{"the same refusal after an attempt that did nothing", RiskIdempotentWrite, []Attempt{refused, open}, nil, quota, Failed, NextFailed, ""},
		{"a refused read fails whatever came before", RiskRead, []Attempt{unknown, open}, nil, quota, Failed, NextFailed, ""},
		{"a refusal while a webhook claims the effect", RiskIdempotentWrite, []Attempt{refused, open}, []Evidence{claim}, quota, Ambiguous, NextReconcile, ""},
		{"a transient error while a webhook claims the effect", RiskIdempotentWrite, []Attempt{refused, open}, []Evidence{claim}, httpErr(503), Ambiguous, NextReconcile, ""},
		{"a transient error while a lookup found the effect", RiskIdempotentWrite, []Attempt{refused, open}, []Evidence{found}, httpErr(503), Confirmed, NextDone, "fld-1"},
		{"a refusal while a lookup found the effect", RiskCompensableWrite, []Attempt{refused, open}, []Evidence{found}, quota, Confirmed, NextDone, "fld-1"},
		{"a transient error and nothing else", RiskIdempotentWrite, []Attempt{refused, open}, nil, httpErr(503), RetryWait, NextRetryAt, ""},
		// An unknown outcome needs no reconciling once the effect is named:
		// an earlier attempt's job that succeeded while the retry was in
		// flight, say.
		{"a timeout while a lookup found the effect", RiskCompensableWrite, []Attempt{unknown, open}, []Evidence{found}, timeoutSent, Confirmed, NextDone, "fld-1"},
		{"a timeout while a webhook claims the effect", RiskCompensableWrite, []Attempt{unknown, open}, []Evidence{claim}, timeoutSent, Ambiguous, NextReconcile, ""},
		{"a timeout and nothing else", RiskCompensableWrite, []Attempt{unknown, open}, nil, timeoutSent, Ambiguous, NextReconcile, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := testOp(tt.risk)
			op.Attempts, op.Evidence, op.AttemptCount = tt.attempts, tt.evidence, len(tt.attempts)
			in := decideIn(op, Destination{}, tt.outcome)
			in.N = 2
			p := PlanOutcome(in)
			d := p.Decision
			if d.State != tt.want || d.Next != tt.next {
				t.Fatalf("plan %s (%s), want %s (%s): %s", d.State, d.Next, tt.want, tt.next, d.Reason)
			}
			checkDecision(t, in, d)
			if got := p.Resource; (tt.resource == "") != (got == nil) || got != nil && got.Ref != tt.resource {
				t.Errorf("resource %+v, want %q", got, tt.resource)
			}
			if p.Evidence != nil || p.Job != nil || p.OpensCase() {
				t.Errorf("a failed attempt plans evidence %+v, job %+v, case %v", p.Evidence, p.Job, p.OpensCase())
			}
			want := PlannedEvent{Action: "attempt.outcome", From: InFlight, To: d.State,
				Detail: map[string]any{"n": 2, "result": tt.outcome.Result, "phase": tt.outcome.Phase, "next": d.Next, "reason": d.Reason}}
			if tt.outcome.HTTPStatus != 0 {
				want.Detail["http_status"] = tt.outcome.HTTPStatus
			}
			if !reflect.DeepEqual(p.Event, want) {
				t.Errorf("event %+v, want %+v", p.Event, want)
			}
		})
	}

	t.Run("a success confirms, with the response as its evidence", func(t *testing.T) {
		op := testOp(RiskIdempotentWrite)
		op.Attempts, op.AttemptCount = []Attempt{open}, 1
		o := Outcome{Result: ResultSuccess, Resource: &ResourceRef{Ref: "fld-9", Kind: "folder", Version: "v7"}}
		p := PlanOutcome(decideIn(op, Destination{}, o))
		if p.Decision.State != Confirmed || p.Resource == nil || *p.Resource != *o.Resource {
			t.Fatalf("plan %+v, want confirmed on fld-9", p)
		}
		if ev := p.Evidence; ev == nil || ev.Source != SourceResponse || !ev.Authoritative || ev.Verdict != VerdictConfirms ||
			len(ev.Candidates) != 1 || ev.Candidates[0].Ref != "fld-9" || ev.Candidates[0].OperationID != op.ID {
			t.Errorf("evidence %+v, want the response naming fld-9", p.Evidence)
		}
	})
	t.Run("a success beside another effect already named goes to a person", func(t *testing.T) {
		op := testOp(RiskCompensableWrite)
		op.Attempts, op.AttemptCount = []Attempt{open}, 1
		op.Evidence = []Evidence{found} // fld-1
		o := Outcome{Result: ResultSuccess, Resource: &ResourceRef{Ref: "fld-9", Kind: "folder", Version: "v7"}}
		p := PlanOutcome(decideIn(op, Destination{}, o))
		if p.Decision.State != NeedsReview || !slices.Contains(p.Decision.Escalation, ReasonMultipleCands) || p.Resource != nil {
			t.Errorf("plan %+v (resource %+v), want review for multiple candidates", p.Decision, p.Resource)
		}
		if ev := p.Evidence; ev == nil || ev.Verdict != VerdictConfirms || len(ev.Candidates) != 1 || ev.Candidates[0].Ref != "fld-9" {
			t.Errorf("evidence %+v, want the response naming fld-9", p.Evidence)
		}
		o.Resource.Ref = "fld-1" // the same effect: confirmed
		if p = PlanOutcome(decideIn(op, Destination{}, o)); p.Decision.State != Confirmed {
			t.Errorf("plan %+v, want confirmed on fld-1", p.Decision)
		}
	})
	t.Run("an accepted job is followed", func(t *testing.T) {
		op := testOp(RiskIdempotentWrite)
		op.Attempts, op.AttemptCount = []Attempt{open}, 1
		o := Outcome{Result: ResultSuccess, Job: &JobRef{Ref: "job-1"}}
		p := PlanOutcome(decideIn(op, Destination{}, o))
		if p.Decision.State != Accepted || p.Job == nil || *p.Job != (Job{Ref: "job-1", Status: JobQueued, InputVersion: "v7"}) {
			t.Errorf("plan %+v (job %+v), want accepted, following job-1", p.Decision, p.Job)
		}
		// Taking the job is no word that its effect happened: the
		// response is kept, but confirms nothing until the job ends.
		if ev := p.Evidence; ev == nil || ev.Source != SourceResponse || !ev.Authoritative || ev.Verdict != VerdictInconclusive {
			t.Errorf("evidence %+v, want the response, inconclusive", p.Evidence)
		}
	})
}

// TestExistingKeyAfterAPolicyChange: an operation registered before its
// action's policy gained flags or a risk is the same intention when the
// same registration comes again (a client's retry, an agent resuming): the
// flags and risk the policy fills in now are not the caller's. It was a
// payload mismatch (422, and a case opened) for every such operation.
// What the caller itself states still counts: a flag it adds or drops, or
// a risk it names, differs as before.
func TestExistingKeyAfterAPolicyChange(t *testing.T) {
	before := &Config{Destinations: map[string]Destination{"files": {Actions: map[string]ActionConfig{"convert_pdf": {}}}}}
	after := &Config{Destinations: map[string]Destination{"files": {Actions: map[string]ActionConfig{"convert_pdf": {
		Risk: RiskIrreversible, Flags: []Flag{FlagFinancial}}}}}}
	stored := func(r Registration) (*Operation, *RegistrationPlan) {
		p, err := PlanRegistration(r, before, classifyNow)
		if err != nil {
			t.Fatal(err)
		}
		g := p.Registration
		return &Operation{ID: "op_1", Tenant: g.Tenant, Key: g.Key, SourceRef: g.SourceRef, LogicalVersion: g.LogicalVersion,
			Action: g.Action, Destination: g.Destination, Risk: g.Risk, Flags: g.Flags, PayloadHash: p.PayloadHash}, p
	}
	again := func(op *Operation, r Registration) []string {
		p, err := PlanRegistration(r, after, classifyNow)
		if err != nil {
			t.Fatal(err)
		}
		if kp := p.ExistingKey(op); kp.Mismatch != nil {
			return kp.Mismatch.Fields
		}
		return nil
	}

	unstated := validRegistration()
	unstated.Risk = ""
	op, _ := stored(unstated)
	if op.Risk != SafeRisk || len(op.Flags) != 0 {
		t.Fatalf("registered under the old policy as %s %v", op.Risk, op.Flags)
	}
	if d := again(op, unstated); d != nil {
		t.Errorf("the same registration after the policy changed differs in %v", d)
	}

	regulated := unstated
	regulated.Flags = []Flag{FlagRegulated}
	op, _ = stored(regulated)
	if d := again(op, regulated); d != nil {
		t.Errorf("the same registration (a flag of its own) after the policy changed differs in %v", d)
	}
	for _, tt := range []struct {
		flags []Flag
		want  []string
	}{
		{[]Flag{FlagRegulated, FlagIrreversible}, []string{"flags"}}, // a flag the caller adds
		{[]Flag{FlagRegulated, FlagFinancial}, []string{"flags"}},    // the policy's, now stated by the caller
		{nil, []string{"flags"}},                                     // its own flag dropped
	} {
		r := regulated
		r.Flags = tt.flags
		if d := again(op, r); !slices.Equal(d, tt.want) {
			t.Errorf("flags %v: differs in %v, want %v", tt.flags, d, tt.want)
		}
	}
	named := regulated
	named.Risk = RiskIrreversible
	if d := again(op, named); !slices.Equal(d, []string{"risk"}) {
		t.Errorf("a risk the caller names differs in %v, want [risk]", d)
	}
}
