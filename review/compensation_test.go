package review

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
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
		{Ambiguous, "fld-1", NeedsReview}, {InFlight, "", ""}, {RetryWait, "", ""},
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
