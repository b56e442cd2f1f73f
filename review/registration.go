package review

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Registration is a request to record a new operation. Payload must already
// be canonical (see Canonicalize).
type Registration struct {
	Tenant         string
	SourceRef      string
	LogicalVersion string
	Action         string
	Destination    string
	Risk           Risk
	Flags          []Flag
	Payload        json.RawMessage
	// After, when set, is the operation this one waits for (dependency.go).
	After *Dependency
	// Key is the caller's idempotency key; empty means DeriveKey.
	Key         string
	Deadline    *time.Time
	MaxAttempts *int
	CostBudget  *float64
	// Actor is who registers (for the audit trail).
	Actor string
	// RequestedBy is the person answerable for the request: the creator of
	// the API token that registers it, who may not approve it.
	RequestedBy string

	// What ApplyPolicy filled in from the action's policy rather than the
	// caller: the policy's flags (added to the caller's) and whether the
	// risk was left to the policy. A policy changed since the stored
	// operation was registered differs there, which says nothing about the
	// caller's intention (SameIntention).
	policyFlags   []Flag
	declaredFlags []Flag
	riskDefaulted bool
}

// Limits on registration fields.
const (
	// MaxFieldLen bounds identity fields and tenant names, in characters.
	MaxFieldLen    = 255
	MaxAttemptsCap = 100
)

// Normalize validates r and fills defaults: the identity fields in NFC, the
// derived key, the default deadline and attempt budget, sorted unique flags.
// Errors wrap ErrInvalid and name the field.
func (r *Registration) Normalize(now time.Time) error {
	// NFC first: "café" composed or decomposed is one intention, one key.
	r.Tenant = NFC(r.Tenant)
	for _, f := range []struct {
		name string
		v    *string
	}{
		{"source_ref", &r.SourceRef}, {"logical_version", &r.LogicalVersion},
		{"action", &r.Action}, {"destination", &r.Destination},
	} {
		*f.v = NFC(*f.v)
		if err := checkText(f.name, *f.v); err != nil {
			return err
		}
	}
	if !r.Risk.Valid() {
		return fmt.Errorf("%w: field \"risk\": must be one of read, generate, idempotent_write, compensable_write, irreversible", ErrInvalid)
	}
	seen := map[Flag]bool{}
	var flags []Flag
	for _, f := range r.Flags {
		if !f.Valid() {
			return fmt.Errorf("%w: field \"flags\": %q is not one of financial, irreversible, regulated", ErrInvalid, f)
		}
		if !seen[f] {
			seen[f] = true
			flags = append(flags, f)
		}
	}
	sort.Slice(flags, func(i, j int) bool { return flags[i] < flags[j] })
	r.Flags = flags
	if r.After != nil {
		if err := r.After.normalize(); err != nil {
			return err
		}
	}
	if len(r.Payload) == 0 {
		return fmt.Errorf("%w: field \"payload\": required", ErrInvalid)
	}
	if r.Key == "" {
		r.Key = DeriveKey(r.Tenant, r.SourceRef, r.Action, r.LogicalVersion)
	} else if err := ValidateKey(r.Key); err != nil {
		return fmt.Errorf("field \"key\": %w", err)
	}
	if r.Deadline == nil {
		d := now.Add(DefaultDeadline)
		r.Deadline = &d
	} else if !r.Deadline.After(now) {
		return fmt.Errorf("%w: field \"deadline\": must be in the future", ErrInvalid)
	}
	if r.MaxAttempts == nil {
		m := DefaultMaxAttempts
		r.MaxAttempts = &m
	} else if *r.MaxAttempts < 1 || *r.MaxAttempts > MaxAttemptsCap {
		return fmt.Errorf("%w: field \"max_attempts\": must be between 1 and %d", ErrInvalid, MaxAttemptsCap)
	}
	if r.CostBudget != nil && !(*r.CostBudget > 0 && *r.CostBudget <= MaxCost) {
		return fmt.Errorf("%w: field \"cost_budget\": must be greater than 0 and at most %g", ErrInvalid, MaxCost)
	}
	return nil
}

// checkText: an identity field is required and an Identifier (CheckText).
func checkText(name, v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("%w: field %q: required", ErrInvalid, name)
	}
	return CheckText(name, Identifier, MaxFieldLen, v)
}

// SameIntention reports which fields differ between a stored operation and a
// registration under the same key (empty when it is the same intention).
// With a key recipe (keyFields), payloads that agree on those members are
// the same intention; without one, the whole payload must be the same.
// Once the stored payload is purged (payload retention) only its hash is
// left, so the whole payload must be the same whatever the recipe.
func (r *Registration) SameIntention(op *Operation, payloadHash string, keyFields []string) []string {
	var diff []string
	if len(keyFields) > 0 && op.PayloadPurgedAt == nil {
		if !bytes.Equal(Intention(op.Payload, keyFields), Intention(r.Payload, keyFields)) {
			diff = append(diff, "payload")
		}
	} else if op.PayloadHash != payloadHash {
		diff = append(diff, "payload")
	}
	if op.SourceRef != r.SourceRef {
		diff = append(diff, "source_ref")
	}
	if op.LogicalVersion != r.LogicalVersion {
		diff = append(diff, "logical_version")
	}
	if op.Action != r.Action {
		diff = append(diff, "action")
	}
	if op.Destination != r.Destination {
		diff = append(diff, "destination")
	}
	// A risk the registration left to the action's policy is the stored
	// operation's: the policy may have changed since it was registered.
	if op.Risk != r.Risk && !r.riskDefaulted {
		diff = append(diff, "risk")
	}
	// Flags are part of the intention: they decide whether a person must
	// approve a retry. Dropping or adding one silently would let the same
	// key run under other safety rules (issue 12, hole 8). Both sides are
	// sorted and unique (Normalize). Flags the action's policy adds now and
	// the stored operation lacks are the policy's change since, not the
	// caller's: the operation keeps the rules it was registered under.
	if !slices.Equal(op.Flags, r.Flags) && !slices.Equal(op.Flags, r.flagsAsStored(op.Flags)) {
		diff = append(diff, "flags")
	}
	// What it waits for is part of the intention too: the same key may
	// not drop the rule "only after the transformation of version 7".
	if !sameDependency(op.After, r.After) {
		diff = append(diff, "after")
	}
	return diff
}

// flagsAsStored is r's flags without those only the action's policy adds
// that stored lacks: the caller's own, and the policy's stored has (sorted,
// unique, as Normalize leaves them).
func (r *Registration) flagsAsStored(stored []Flag) []Flag {
	var out []Flag
	for _, f := range r.Flags {
		if slices.Contains(r.declaredFlags, f) || !slices.Contains(r.policyFlags, f) || slices.Contains(stored, f) {
			out = append(out, f)
		}
	}
	return out
}

func sameDependency(a, b *Dependency) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.OperationID == b.OperationID && a.State == b.State && a.ResourceVersion == b.ResourceVersion
}
