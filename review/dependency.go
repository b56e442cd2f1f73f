package review

import (
	"fmt"
	"slices"
	"strings"
)

// Operations that depend on another: "publish the share link only once the
// transformation is confirmed, for version 7". The rule lives here, not in
// each integrator's code: a dependent operation gets no attempt until its
// dependency is confirmed with the version it names, and fails (or goes to
// a person, when its policy escalates dependency_failed) once the
// dependency can no longer be: failed, compensated, or confirmed for
// another version.

// Dependency is what an operation waits for (Registration.After).
type Dependency struct {
	// OperationID is the operation depended on, of the same tenant.
	OperationID string `json:"operation_id" text:"id,255"`
	// State is the state it must reach: confirmed (the only one; the
	// field is there so a registration says what it means).
	State State `json:"state,omitempty" text:"id,32"`
	// ResourceVersion, when set, is the version its confirmed resource
	// must have (a transformation of version 7, not 8).
	ResourceVersion string `json:"resource_version,omitempty" text:"id,255"`
	// Resource is what the dependency was confirmed with, once it is: the
	// input a dependent's attempt builds on (the PDF to share). Filled
	// when the operation is read, never registered.
	Resource *ResourceRef `json:"resource,omitempty"`
	// DependencyState is the dependency's state when the operation was
	// read. Filled when read, never registered.
	DependencyState State `json:"dependency_state,omitempty"`
}

// ReasonDependencyFailed: the operation's dependency failed, was
// compensated, or was confirmed for another version, so the operation can
// never run as registered.
const ReasonDependencyFailed Reason = "dependency_failed"

// normalize checks a registration's dependency: an operation id, the
// confirmed state (the default), a version within the identifier rule.
func (d *Dependency) normalize() error {
	d.OperationID, d.ResourceVersion = NFC(d.OperationID), NFC(d.ResourceVersion)
	if strings.TrimSpace(d.OperationID) == "" {
		return fmt.Errorf("%w: field \"after.operation_id\": required: the operation this one waits for", ErrInvalid)
	}
	if err := CheckText("after.operation_id", Identifier, MaxFieldLen, d.OperationID); err != nil {
		return err
	}
	if d.State == "" {
		d.State = Confirmed
	}
	if d.State != Confirmed {
		return fmt.Errorf("%w: field \"after.state\": an operation waits for its dependency to be confirmed, not %q", ErrInvalid, d.State)
	}
	if d.ResourceVersion != "" {
		if err := CheckText("after.resource_version", Identifier, MaxFieldLen, d.ResourceVersion); err != nil {
			return err
		}
	}
	d.Resource, d.DependencyState = nil, ""
	return nil
}

// Readiness is what a dependency means for its dependent's next attempt.
type Readiness int

const (
	// DependencyMet: confirmed, with the version asked for.
	DependencyMet Readiness = iota
	// DependencyPending: not settled yet; the dependent waits.
	DependencyPending
	// DependencyBroken: it can never be met; the dependent fails, or goes
	// to a person.
	DependencyBroken
)

// DependencyReady judges dep, the operation after names, for the dependent
// operation's next attempt, and says why in words for the dependent's
// state reason or the caller's 409.
func DependencyReady(after Dependency, dep *Operation) (Readiness, string) {
	switch dep.State {
	case Confirmed:
		got := ""
		if dep.Resource != nil {
			got = dep.Resource.Version
		}
		if after.ResourceVersion != "" && got != after.ResourceVersion {
			return DependencyBroken, fmt.Sprintf(WhyDependencyOtherVersion, dep.ID, orNone(got), after.ResourceVersion)
		}
		return DependencyMet, fmt.Sprintf(WhyDependencyConfirmed, dep.ID)
	case Failed:
		return DependencyBroken, fmt.Sprintf(WhyDependencyFailed, dep.ID, orNone(dep.StateReason))
	case Compensated:
		return DependencyBroken, fmt.Sprintf(WhyDependencyCompensated, dep.ID, orNone(dep.StateReason))
	}
	return DependencyPending, fmt.Sprintf(WhyDependencyWaiting, dep.ID, dep.State)
}

// NotGiven stands in a reason for what the record does not hold (a
// dependency's version or state reason, a history entry's version or
// writer); the console words it for its place.
const NotGiven = "none"

func orNone(s string) string {
	if s == "" {
		return NotGiven
	}
	return s
}

// BrokenDependencyState is where a dependent operation goes when its
// dependency is broken: failed, or needs_review when its policy escalates
// dependency_failed (a person decides whether it still makes sense).
func BrokenDependencyState(ac ActionConfig) State {
	if slices.Contains(ac.EscalateOn, ReasonDependencyFailed) {
		return NeedsReview
	}
	return Failed
}

// DependencyWaitError refuses an attempt whose operation's dependency is
// not confirmed yet (409 waiting-for-dependency).
type DependencyWaitError struct {
	Operation  *Operation
	Dependency *Operation
	Reason     string
}

func (e *DependencyWaitError) Error() string { return e.Reason }
