package review

import (
	"errors"
	"reflect"
	"slices"
	"testing"
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
