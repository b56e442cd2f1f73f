package review

// BulkRecommended is the bulk action that applies each case's own
// recommendation.
const BulkRecommended = "recommended"

// BulkReasonSuffix ends the reason each decision of a bulk decision
// records, so its case and audit trail say it was one.
const BulkReasonSuffix = " (bulk)"

// MaxBulkReasonLen is the longest reason (in characters) a bulk decision
// takes: with BulkReasonSuffix after it, it is MaxReasonLen, which every
// decision checks.
const MaxBulkReasonLen = MaxReasonLen - len(BulkReasonSuffix)

// BulkItem is what a bulk decision does to one case: the decision and the
// resource it names, or why the case is skipped.
type BulkItem struct {
	Action, Ref string
	// Skip, when set, says why no decision is recorded on the case.
	Skip string
}

// PlanBulk is what the bulk action (fail, confirm, compensate, or
// BulkRecommended) does to a case recommending rec. confirm and compensate
// name the resource the recommendation names for them (ConfirmRef,
// UndoRef), and a case where it names none is skipped: a bulk decision
// never records a confirm or a compensate without its resource. Retries
// and approvals are decided one case at a time.
func PlanBulk(action string, rec Recommendation) BulkItem {
	if action == BulkRecommended {
		switch rec.Action {
		case RecommendConfirm, RecommendCompensate, RecommendFail:
			action = rec.Action
		case RecommendApproveRetry:
			return BulkItem{Skip: "its recommendation, approve_retry, is decided one case at a time"}
		default:
			return BulkItem{Skip: "its recommendation (" + rec.Action + ") is not a decision yet"}
		}
	}
	switch action {
	case DecideFail:
		return BulkItem{Action: DecideFail}
	case DecideConfirm:
		if ref := rec.ConfirmRef(); ref != "" {
			return BulkItem{Action: DecideConfirm, Ref: ref}
		}
		return BulkItem{Skip: "no single resource is recommended to confirm"}
	case DecideCompensate:
		if ref := rec.UndoRef(); ref != "" {
			return BulkItem{Action: DecideCompensate, Ref: ref}
		}
		return BulkItem{Skip: "no resource is recommended to undo"}
	}
	return BulkItem{Skip: action + " is decided one case at a time"}
}
