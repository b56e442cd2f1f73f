package review

import "testing"

func TestPlanBulk(t *testing.T) {
	confirm := Recommendation{Action: RecommendConfirm, Ref: "fld-1"}
	undo := Recommendation{Action: RecommendCompensate, Ref: "fld-2", Keep: "fld-1"}
	undoOther := Recommendation{Action: RecommendCompensate, Ref: "fld-9"} // another version: nothing to keep
	again := Recommendation{Action: RecommendReconcileAgain}
	tests := []struct {
		name   string
		action string
		rec    Recommendation
		want   BulkItem
	}{
		{"fail", DecideFail, again, BulkItem{Action: DecideFail}},
		{"confirm the recommended resource", DecideConfirm, confirm, BulkItem{Action: DecideConfirm, Ref: "fld-1"}},
		{"confirm keeps a duplicate's keeper, never its undo", DecideConfirm, undo, BulkItem{Action: DecideConfirm, Ref: "fld-1"}},
		{"confirm with nothing to confirm", DecideConfirm, undoOther, BulkItem{Skip: "no single resource is recommended to confirm"}},
		{"compensate names what to undo", DecideCompensate, undo, BulkItem{Action: DecideCompensate, Ref: "fld-2"}},
		{"compensate never without a resource", DecideCompensate, confirm, BulkItem{Skip: "no resource is recommended to undo"}},
		{"each case's recommendation", BulkRecommended, undo, BulkItem{Action: DecideCompensate, Ref: "fld-2"}},
		{"a recommendation to probe again", BulkRecommended, again, BulkItem{Skip: "its recommendation (reconcile_again) is not a decision yet"}},
		{"a recommended retry", BulkRecommended, Recommendation{Action: RecommendApproveRetry}, BulkItem{Skip: "its recommendation, approve_retry, is decided one case at a time"}},
		{"approve_retry in bulk", DecideApproveRetry, confirm, BulkItem{Skip: "approve_retry is decided one case at a time"}},
	}
	for _, tt := range tests {
		if got := PlanBulk(tt.action, tt.rec); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
