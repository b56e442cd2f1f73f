package review

import (
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
