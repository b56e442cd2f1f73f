package review

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func validRegistration() Registration {
	return Registration{
		Tenant: "acme", SourceRef: "contract-583", LogicalVersion: "v7", Action: "convert_pdf",
		Destination: "files", Risk: RiskCompensableWrite, Payload: json.RawMessage(`{"id":583}`),
		Actor: "token:ci",
	}
}

func TestRegistrationNormalizeDefaults(t *testing.T) {
	now := classifyNow
	r := validRegistration()
	r.Flags = []Flag{FlagRegulated, FlagFinancial, FlagRegulated, FlagIrreversible, FlagFinancial}
	if err := r.Normalize(now); err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	if want := DeriveKey("acme", "contract-583", "convert_pdf", "v7"); r.Key != want {
		t.Errorf("Key = %q, want the derived key %q", r.Key, want)
	}
	if r.Deadline == nil || !r.Deadline.Equal(now.Add(DefaultDeadline)) {
		t.Errorf("Deadline = %v, want now + %v", r.Deadline, DefaultDeadline)
	}
	if r.MaxAttempts == nil || *r.MaxAttempts != DefaultMaxAttempts || DefaultMaxAttempts != 5 {
		t.Errorf("MaxAttempts = %v, want 5", r.MaxAttempts)
	}
	if r.CostBudget != nil {
		t.Errorf("CostBudget = %v, want nil (no budget)", *r.CostBudget)
	}
	if want := []Flag{FlagFinancial, FlagIrreversible, FlagRegulated}; !slices.Equal(r.Flags, want) {
		t.Errorf("Flags = %v, want sorted and unique %v", r.Flags, want)
	}
	// Normalizing again changes nothing.
	again := r
	if err := again.Normalize(now); err != nil {
		t.Fatalf("second Normalize: %v", err)
	}
	if again.Key != r.Key || !again.Deadline.Equal(*r.Deadline) || *again.MaxAttempts != *r.MaxAttempts || !slices.Equal(again.Flags, r.Flags) {
		t.Errorf("Normalize is not idempotent: %+v then %+v", r, again)
	}
}

func TestRegistrationNormalizeKeepsGivenValues(t *testing.T) {
	now := classifyNow
	deadline := now.Add(time.Hour)
	maxAttempts := 3
	budget := 2.5
	tests := []struct {
		name   string
		modify func(r *Registration)
		check  func(t *testing.T, r *Registration)
	}{
		{"caller key", func(r *Registration) { r.Key = "caller-key-0000000001" }, func(t *testing.T, r *Registration) {
			if r.Key != "caller-key-0000000001" {
				t.Errorf("Key = %q", r.Key)
			}
		}},
		{"deadline", func(r *Registration) { r.Deadline = &deadline }, func(t *testing.T, r *Registration) {
			if !r.Deadline.Equal(deadline) {
				t.Errorf("Deadline = %v", r.Deadline)
			}
		}},
		{"max_attempts", func(r *Registration) { r.MaxAttempts = &maxAttempts }, func(t *testing.T, r *Registration) {
			if *r.MaxAttempts != 3 {
				t.Errorf("MaxAttempts = %d", *r.MaxAttempts)
			}
		}},
		{"max_attempts 1", func(r *Registration) { one := 1; r.MaxAttempts = &one }, func(t *testing.T, r *Registration) {
			if *r.MaxAttempts != 1 {
				t.Errorf("MaxAttempts = %d", *r.MaxAttempts)
			}
		}},
		{"max_attempts at the cap", func(r *Registration) { c := MaxAttemptsCap; r.MaxAttempts = &c }, func(t *testing.T, r *Registration) {
			if *r.MaxAttempts != 100 {
				t.Errorf("MaxAttempts = %d", *r.MaxAttempts)
			}
		}},
		{"cost_budget", func(r *Registration) { r.CostBudget = &budget }, func(t *testing.T, r *Registration) {
			if *r.CostBudget != 2.5 {
				t.Errorf("CostBudget = %v", *r.CostBudget)
			}
		}},
		{"no flags", func(r *Registration) { r.Flags = nil }, func(t *testing.T, r *Registration) {
			if len(r.Flags) != 0 {
				t.Errorf("Flags = %v", r.Flags)
			}
		}},
		{"fields at the length limit", func(r *Registration) {
			r.SourceRef = strings.Repeat("s", MaxFieldLen)
			r.Action = strings.Repeat("a", MaxFieldLen)
		}, func(t *testing.T, r *Registration) {
			if len(r.SourceRef) != 255 {
				t.Errorf("SourceRef shortened to %d", len(r.SourceRef))
			}
		}},
		{"unicode fields", func(r *Registration) { r.SourceRef = "Vertrag-583 — Übersicht" }, func(t *testing.T, r *Registration) {
			if r.SourceRef != "Vertrag-583 — Übersicht" {
				t.Errorf("SourceRef = %q", r.SourceRef)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRegistration()
			tt.modify(&r)
			if err := r.Normalize(now); err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			tt.check(t, &r)
		})
	}
	for _, risk := range AllRisks() {
		r := validRegistration()
		r.Risk = risk
		if err := r.Normalize(now); err != nil {
			t.Errorf("risk %s: %v", risk, err)
		}
	}
}

func TestRegistrationNormalizeErrors(t *testing.T) {
	now := classifyNow
	past := now.Add(-time.Second)
	zero, over, negative := 0, MaxAttemptsCap+1, -1
	nothing, negCost, nan, huge := 0.0, -1.0, math.NaN(), 1.7e308
	tests := []struct {
		name   string
		modify func(r *Registration)
		field  string
	}{
		{"source_ref empty", func(r *Registration) { r.SourceRef = "" }, "source_ref"},
		{"source_ref blank", func(r *Registration) { r.SourceRef = " \t " }, "source_ref"},
		{"source_ref too long", func(r *Registration) { r.SourceRef = strings.Repeat("s", MaxFieldLen+1) }, "source_ref"},
		{"source_ref control character", func(r *Registration) { r.SourceRef = "contract\n583" }, "source_ref"},
		{"source_ref DEL", func(r *Registration) { r.SourceRef = "contract\x7f583" }, "source_ref"},
		{"source_ref invalid UTF-8", func(r *Registration) { r.SourceRef = "contract-\xff" }, "source_ref"},
		{"logical_version empty", func(r *Registration) { r.LogicalVersion = "" }, "logical_version"},
		{"logical_version too long", func(r *Registration) { r.LogicalVersion = strings.Repeat("7", 256) }, "logical_version"},
		{"logical_version NUL", func(r *Registration) { r.LogicalVersion = "v\x007" }, "logical_version"},
		{"action empty", func(r *Registration) { r.Action = "" }, "action"},
		{"action tab", func(r *Registration) { r.Action = "convert\tpdf" }, "action"},
		{"destination empty", func(r *Registration) { r.Destination = "" }, "destination"},
		{"destination invalid UTF-8", func(r *Registration) { r.Destination = "\xc3(" }, "destination"},
		{"risk empty", func(r *Registration) { r.Risk = "" }, "risk"},
		{"risk unknown", func(r *Registration) { r.Risk = "dangerous" }, "risk"},
		{"risk wrong case", func(r *Registration) { r.Risk = "READ" }, "risk"},
		{"flag unknown", func(r *Registration) { r.Flags = []Flag{FlagFinancial, "urgent"} }, "flags"},
		{"flag empty", func(r *Registration) { r.Flags = []Flag{""} }, "flags"},
		{"payload missing", func(r *Registration) { r.Payload = nil }, "payload"},
		{"payload empty", func(r *Registration) { r.Payload = json.RawMessage{} }, "payload"},
		{"key too short", func(r *Registration) { r.Key = "short" }, "key"},
		{"key too long", func(r *Registration) { r.Key = strings.Repeat("k", MaxKeyLen+1) }, "key"},
		{"key with a space around", func(r *Registration) { r.Key = " caller-key-0000000001" }, "key"},
		{"key non-ASCII", func(r *Registration) { r.Key = "caller-key-ü-000000001" }, "key"},
		{"deadline in the past", func(r *Registration) { r.Deadline = &past }, "deadline"},
		{"deadline now", func(r *Registration) { r.Deadline = &now }, "deadline"},
		{"max_attempts 0", func(r *Registration) { r.MaxAttempts = &zero }, "max_attempts"},
		{"max_attempts negative", func(r *Registration) { r.MaxAttempts = &negative }, "max_attempts"},
		{"max_attempts over the cap", func(r *Registration) { r.MaxAttempts = &over }, "max_attempts"},
		{"cost_budget 0", func(r *Registration) { r.CostBudget = &nothing }, "cost_budget"},
		{"cost_budget negative", func(r *Registration) { r.CostBudget = &negCost }, "cost_budget"},
		{"cost_budget NaN", func(r *Registration) { r.CostBudget = &nan }, "cost_budget"},
		{"cost_budget past MaxCost", func(r *Registration) { r.CostBudget = &huge }, "cost_budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRegistration()
			tt.modify(&r)
			err := r.Normalize(now)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Normalize = %v, want an error wrapping ErrInvalid", err)
			}
			if want := `field "` + tt.field + `"`; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		})
	}
}

func TestRegistrationSameIntention(t *testing.T) {
	r := validRegistration()
	if err := r.Normalize(classifyNow); err != nil {
		t.Fatal(err)
	}
	stored := func() *Operation {
		return &Operation{ID: "op-1", Tenant: r.Tenant, SourceRef: r.SourceRef, LogicalVersion: r.LogicalVersion,
			Action: r.Action, Destination: r.Destination, Risk: r.Risk, Key: r.Key, PayloadHash: "hash-a"}
	}
	tests := []struct {
		name   string
		modify func(op *Operation)
		hash   string
		want   []string
	}{
		{"same intention", func(*Operation) {}, "hash-a", nil},
		{"payload", func(*Operation) {}, "hash-b", []string{"payload"}},
		{"source_ref", func(op *Operation) { op.SourceRef = "contract-584" }, "hash-a", []string{"source_ref"}},
		{"logical_version", func(op *Operation) { op.LogicalVersion = "v8" }, "hash-a", []string{"logical_version"}},
		{"action", func(op *Operation) { op.Action = "convert_docx" }, "hash-a", []string{"action"}},
		{"destination", func(op *Operation) { op.Destination = "mail" }, "hash-a", []string{"destination"}},
		{"risk", func(op *Operation) { op.Risk = RiskRead }, "hash-a", []string{"risk"}},
		{"everything", func(op *Operation) {
			op.SourceRef, op.LogicalVersion, op.Action, op.Destination, op.Risk = "x", "y", "z", "w", RiskRead
		}, "hash-b", []string{"payload", "source_ref", "logical_version", "action", "destination", "risk"}},
		{"flags count", func(op *Operation) { op.Flags = []Flag{FlagFinancial} }, "hash-a", []string{"flags"}},
		{"budgets do not count", func(op *Operation) { op.MaxAttempts = 9 }, "hash-a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := stored()
			tt.modify(op)
			if got := r.SameIntention(op, tt.hash, nil); !slices.Equal(got, tt.want) {
				t.Errorf("SameIntention = %v, want %v", got, tt.want)
			}
		})
	}
}
