package review

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestPlanDecision: what a reviewer's decision writes is decided in
// review; the store persists the plan (its tests drive the same rules
// through the database).
func TestPlanDecision(t *testing.T) {
	now := classifyNow
	inReview := func(flags ...Flag) *Operation {
		op := testOp(RiskCompensableWrite, flags...)
		op.State, op.PayloadHash, op.Key, op.AttemptCount, op.MaxAttempts = NeedsReview, "sha256:p", "key-1", 3, 3
		return op
	}
	in := func(op *Operation, action string) DecisionInput {
		return DecisionInput{Op: op, CaseID: "case-1", DecisionID: "dec-1", Action: action, Ref: "fld-1", Reason: "checked", Actor: "rita", Now: now}
	}

	t.Run("confirm rests on the reviewer's evidence", func(t *testing.T) {
		p, err := PlanDecision(in(inReview(), DecideConfirm))
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != DecisionApplied || p.To != Confirmed || !p.ResolveCase || !p.Announce || p.Move == nil || p.Move.To != Confirmed {
			t.Errorf("plan %+v, want applied, confirmed, resolved, announced", p)
		}
		if p.Evidence == nil || p.Evidence.Source != SourceReviewer || p.Evidence.Verdict != VerdictConfirms || p.Resource == nil || p.Resource.Ref != "fld-1" {
			t.Errorf("evidence %+v, resource %+v: want the reviewer's confirmation of fld-1", p.Evidence, p.Resource)
		}
		if len(p.Events) != 1 || p.Events[0].Action != "case.resolved" || p.Events[0].Detail["decision_id"] != "dec-1" {
			t.Errorf("events %+v, want case.resolved", p.Events)
		}
	})

	t.Run("an irreversible retry needs two different reviewers, for the same payload", func(t *testing.T) {
		op := inReview(FlagIrreversible)
		p, err := PlanDecision(in(op, DecideApproveRetry))
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != DecisionFirstApproval || p.To != NeedsReview || p.ResolveCase || p.Announce || p.Move != nil ||
			len(p.Events) != 1 || p.Events[0].Action != "decision.first_approval" {
			t.Errorf("first approval plans %+v", p)
		}
		second := in(op, DecideApproveRetry)
		second.Approvals = []PriorDecision{{Seq: 7, Action: DecideApproveRetry, Actor: "rita", PayloadHash: op.PayloadHash, Key: op.Key}}
		if _, err := PlanDecision(second); !errors.Is(err, ErrSecondApprover) {
			t.Errorf("the same reviewer twice: %v, want ErrSecondApprover", err)
		}
		second.Actor = "marco"
		p, err = PlanDecision(second)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != DecisionApplied || p.To != RetryWait || len(p.Void) != 0 || p.Retry == nil ||
			p.Retry.MaxAttempts != 4 || !p.Retry.Deadline.Equal(op.Deadline) || !p.Retry.NextAttemptAt.Equal(now) {
			t.Errorf("second approval plans %+v (retry %+v), want retry_wait with one more attempt", p, p.Retry)
		}
		second.Approvals[0].Revoked = "the approver's account is disabled"
		if p, _ = PlanDecision(second); p.Status != DecisionFirstApproval || !slices.Equal(p.Void, []int64{7}) || len(p.Events) != 2 ||
			p.Events[0].Action != "decision.approval_voided" || p.Events[0].Detail["why"] != second.Approvals[0].Revoked ||
			p.Events[0].Detail["approver"] != "rita" || p.Events[1].Action != "decision.first_approval" {
			t.Errorf("after an approval from who may no longer decide: %+v, want it void, audited why, and this one first", p)
		}
		second.Approvals[0].Revoked = ""
		second.Approvals[0].PayloadHash = "sha256:other"
		if p, _ = PlanDecision(second); p.Status != DecisionFirstApproval || !slices.Equal(p.Void, []int64{7}) || len(p.Events) != 2 ||
			p.Events[0].Action != "decision.approval_voided" || p.Events[0].Detail["why"] != WhyApprovalOtherPayload ||
			p.Events[0].Detail["payload_hash"] != "sha256:other" || p.Events[1].Action != "decision.first_approval" {
			t.Errorf("an approval of another payload: %+v, want it void, audited why, and this one first", p)
		}
		late := in(inReview(), DecideApproveRetry)
		late.Op.Deadline = now.Add(-time.Minute)
		if p, _ = PlanDecision(late); p.Retry == nil || !p.Retry.Deadline.Equal(now.Add(time.Hour)) {
			t.Errorf("a retry approved after the deadline: %+v, want an hour to run", p.Retry)
		}
	})

	t.Run("compensation done names what compensate said", func(t *testing.T) {
		op := inReview()
		op.State = Compensating
		done := in(op, DecideCompensationDone)
		done.Ref = ""
		done.LastApplied = &PriorDecision{Action: DecideCompensate, ResourceRef: "fld-2", Compensation: "deleted it"}
		p, err := PlanDecision(done)
		if err != nil {
			t.Fatal(err)
		}
		if p.To != Compensated || p.ResourceRef != "fld-2" || p.Compensation != "deleted it" ||
			p.Evidence == nil || p.Evidence.Verdict != VerdictRefutes || p.Evidence.Note != "compensation done of fld-2 (deleted it) — rita: checked" {
			t.Errorf("plan %+v, evidence %+v", p, p.Evidence)
		}
	})

	t.Run("compensate keeps the case open", func(t *testing.T) {
		c := in(inReview(), DecideCompensate)
		c.Compensation = "delete it"
		p, err := PlanDecision(c)
		if err != nil {
			t.Fatal(err)
		}
		if p.To != Compensating || p.ResolveCase || len(p.Events) != 0 || p.Move.Detail["compensation"] != "delete it" {
			t.Errorf("plan %+v", p)
		}
	})

	t.Run("a verdict on a refused payload moves nothing", func(t *testing.T) {
		op := inReview()
		op.State = Pending
		v := in(op, DecideFail)
		v.CaseReasons = []Reason{ReasonPayloadMismatch}
		p, err := PlanDecision(v)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != DecisionRefusedPayload || p.To != Pending || p.Move != nil || p.Announce || !p.ResolveCase ||
			len(p.Events) != 2 || p.Events[0].Action != "decision.refused_payload" || p.Events[1].Action != "case.resolved" {
			t.Errorf("plan %+v", p)
		}
		v.Action = DecideConfirm
		if _, err := PlanDecision(v); !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("confirm on a refused payload: %v, want ErrInvalidTransition", err)
		}
	})
}
