package review

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanCompensation(t *testing.T) {
	parent := testOp(RiskCompensableWrite, FlagFinancial)
	parent.Key = DeriveKey(parent.Tenant, parent.SourceRef, parent.Action, parent.LogicalVersion)
	p, err := PlanCompensation(parent, "fld-2", "delete the duplicate folder", "dec-1", "rita", classifyNow)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Registration
	if r.Action != "compensate:upload" || r.Risk != RiskCompensableWrite || r.Tenant != parent.Tenant || r.Destination != parent.Destination ||
		!IsCompensation(r.Action) || p.State != Pending || len(r.Flags) != 1 {
		t.Errorf("registration %+v", r)
	}
	if r.Key != CompensationKey(parent.Key, "fld-2", "dec-1") || r.Key == parent.Key || r.Key == CompensationKey(parent.Key, "fld-3", "dec-1") {
		t.Errorf("key %s is not derived from the parent, the resource and the decision", r.Key)
	}
	if !strings.Contains(string(r.Payload), `"compensates":"op-1"`) || !strings.Contains(string(r.Payload), `"resource":"fld-2"`) {
		t.Errorf("payload %s does not link the parent and the resource", r.Payload)
	}
	for _, tt := range []struct {
		child State
		keep  string
		want  State
	}{
		{Confirmed, "", Compensated}, {Confirmed, "fld-1", Confirmed}, {Failed, "", NeedsReview},
		{Ambiguous, "fld-1", Compensating}, {NeedsReview, "", NeedsReview}, {InFlight, "", ""}, {RetryWait, "", ""},
	} {
		if got, _, _ := CompensationSettles(tt.child, tt.keep); got != tt.want {
			t.Errorf("child %s (keep %q): parent %q, want %q", tt.child, tt.keep, got, tt.want)
		}
	}
}

// TestSettlesByHand: a reviewer's word on an undo cancels the
// compensations not yet attempted and is refused while one may be having
// its effect; other decisions leave them be.
func TestSettlesByHand(t *testing.T) {
	kids := func(states ...State) []ChildCompensation {
		var out []ChildCompensation
		for i, s := range states {
			out = append(out, ChildCompensation{ID: fmt.Sprintf("op_%d", i), State: s})
		}
		return out
	}
	for _, a := range []string{DecideCompensationDone, DecideCompensationFailed} {
		got, err := SettlesByHand(a, kids(Pending, RetryWait, Confirmed, Failed))
		if err != nil || !slices.Equal(got, []string{"op_0", "op_1"}) {
			t.Errorf("%s over pending ones: %v, %v", a, got, err)
		}
		for _, s := range []State{InFlight, Accepted, Ambiguous, NeedsReview} {
			if _, err := SettlesByHand(a, kids(Pending, s)); !errors.Is(err, ErrInvalidTransition) {
				t.Errorf("%s while one is %s: %v, want refused", a, s, err)
			}
		}
	}
	if got, err := SettlesByHand(DecideCompensate, kids(InFlight, Pending)); got != nil || err != nil {
		t.Errorf("compensate: %v, %v; want nothing canceled", got, err)
	}
}

// TestSettleUndo: an ambiguous compensation is settled by looking up the
// resource it undoes — gone or shown undone confirms it, shown live sends
// it again — never by a search, which cannot show an undo.
func TestSettleUndo(t *testing.T) {
	now := classifyNow
	op := &Operation{ID: "op-u", Action: CompensationPrefix + "upload", Risk: RiskCompensableWrite, State: Ambiguous, AttemptCount: 1,
		MaxAttempts: 5, Deadline: now.Add(time.Hour), Payload: []byte(`{"compensates":"op-1","resource":"fld-2"}`)}
	if ref, _ := LookupRef(op); ref != "fld-2" {
		t.Fatalf("LookupRef = %q, want the resource undone", ref)
	}
	status := func(r ProbeResult) Settlement {
		r.Kind, r.Ref = ProbeStatus, "fld-2"
		return Settle(SettleInput{Op: op, Results: []ProbeResult{r, {Kind: ProbeSearch, Candidates: []Candidate{}}}, Now: now})
	}
	for _, tt := range []struct {
		name string
		r    ProbeResult
		want State
	}{
		{"gone", ProbeResult{NotFound: true}, Confirmed},
		{"shown compensated", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", OperationID: "op-1", Status: "compensated"}}}, Confirmed},
		{"shown deleted", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", Status: "Deleted"}}}, Confirmed},
		{"shown active", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", OperationID: "op-1", Status: "active"}}}, RetryWait},
		{"no status", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", OperationID: "op-1"}}}, ""},
		{"lookup failed", ProbeResult{Err: "timeout"}, ""},
	} {
		if got := status(tt.r); got.State != tt.want {
			t.Errorf("%s: %q (%s), want %q", tt.name, got.State, got.Reason, tt.want)
		}
	}
	// An empty search alone proves nothing about an undo.
	if got := Settle(SettleInput{Op: op, Results: []ProbeResult{{Kind: ProbeSearch, Candidates: []Candidate{}}}, Now: now}); got.State != "" {
		t.Errorf("an empty search settled the undo: %s (%s)", got.State, got.Reason)
	}
}
