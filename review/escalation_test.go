package review

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// caseOp is an operation in review, created an hour before settleNow, one
// attempt spent of five, its deadline a day away.
func caseOp(risk Risk, flags ...Flag) *Operation {
	op := ambiguousOp(risk, flags...)
	op.State = NeedsReview
	return op
}

// Evidence as the reconciler and integrators record it.
func evRefutes() Evidence {
	return Evidence{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes, Candidates: []Candidate{}}
}

func evFound(src EvidenceSource, cs ...Candidate) Evidence {
	v := VerdictInconclusive
	if len(cs) == 1 && cs[0].OperationID == "op-9" && cs[0].Version == "v3" {
		v = VerdictConfirms
	}
	return Evidence{Source: src, Authoritative: true, Verdict: v, Candidates: cs}
}

// withEv returns op with evidence appended and f applied.
func withEv(op *Operation, f func(*Operation), evs ...Evidence) *Operation {
	op.Evidence = append(op.Evidence, evs...)
	if f != nil {
		f(op)
	}
	return op
}

// assessCase is one operation and what Assess should make of it.
type assessCase struct {
	name  string
	op    *Operation
	extra []Reason
	// want lists the reasons exactly (sorted, as Assess returns them).
	want       []Reason
	wantAction string
	wantRef    string
	// rationale must mention each of these.
	rationale []string
}

func assessCases() []assessCase {
	expired := func(op *Operation) { op.Deadline = settleNow.Add(-time.Minute) }
	deadlineNow := func(op *Operation) { op.Deadline = settleNow }
	attemptsSpent := func(op *Operation) { op.AttemptCount = op.MaxAttempts }
	costSpent := func(op *Operation) { b := 1.0; op.CostBudget, op.CostSpent = &b, 1.0 }
	failed := func(op *Operation) { op.State = Failed }
	compensated := func(op *Operation) { op.State = Compensated }
	pending := func(op *Operation) { op.State, op.AttemptCount = Pending, 0 }
	otherVersion := Candidate{Ref: "fld-2", Kind: "folder", Version: "v2", OperationID: "op-9"}
	foreign := Candidate{Ref: "fld-3", Kind: "folder", Version: "v3", OperationID: "op-other"}
	queuedJob := Job{Ref: "job-1", Status: JobQueued, InputVersion: "v3", Attempt: 1}

	return []assessCase{
		{name: "financial, absence proven",
			op:   withEv(caseOp(RiskCompensableWrite, FlagFinancial), nil, evRefutes()),
			want: []Reason{ReasonFinancial}, wantAction: RecommendApproveRetry, rationale: []string{"same key"}},
		{name: "irreversible flag, absence proven",
			op:   withEv(caseOp(RiskCompensableWrite, FlagIrreversible), nil, evRefutes()),
			want: []Reason{ReasonIrreversible}, wantAction: RecommendApproveRetry},
		{name: "irreversible risk, absence proven",
			op:   withEv(caseOp(RiskIrreversible), nil, evRefutes()),
			want: []Reason{ReasonIrreversible}, wantAction: RecommendApproveRetry},
		{name: "financial and irreversible",
			op:   withEv(caseOp(RiskIrreversible, FlagFinancial, FlagIrreversible), nil, evRefutes()),
			want: []Reason{ReasonFinancial, ReasonIrreversible}, wantAction: RecommendApproveRetry},
		{name: "regulated, exactly one match",
			op:   withEv(caseOp(RiskCompensableWrite, FlagRegulated), nil, evFound(SourceMetadataSearch, ours("fld-1"))),
			want: []Reason{ReasonRegulated}, wantAction: RecommendConfirm, wantRef: "fld-1", rationale: []string{"fld-1", "v3"}},
		{name: "status lookup confirms, search refutes",
			op: withEv(caseOp(RiskCompensableWrite), nil,
				evFound(SourceStatusLookup, ours("fld-1")), evRefutes()),
			want: []Reason{ReasonSourcesDisagree}, wantAction: RecommendReconcileAgain, rationale: []string{"disagree"}},
		{name: "a webhook does not make sources disagree",
			op: withEv(caseOp(RiskCompensableWrite), nil, evRefutes(),
				Evidence{Source: SourceWebhook, Authoritative: true, Verdict: VerdictConfirms}),
			want: nil, wantAction: RecommendApproveRetry},
		{name: "deadline passed, nothing known",
			op:   withEv(caseOp(RiskCompensableWrite), expired),
			want: []Reason{ReasonDeadlineExpired, ReasonNoDedupEvidence}, wantAction: RecommendReconcileAgain, rationale: []string{"deadline"}},
		{name: "deadline is now",
			op:   withEv(caseOp(RiskCompensableWrite), deadlineNow, evFound(SourceMetadataSearch, foreign)),
			want: []Reason{ReasonDeadlineExpired, ReasonNoDedupEvidence}, wantAction: RecommendReconcileAgain},
		{name: "deadline passed, absence proven",
			op:   withEv(caseOp(RiskCompensableWrite), expired, evRefutes()),
			want: []Reason{ReasonDeadlineExpired}, wantAction: RecommendFail, rationale: []string{"no effect"}},
		{name: "a resource that does not name the operation",
			op:   withEv(caseOp(RiskCompensableWrite), nil, evFound(SourceMetadataSearch, foreign)),
			want: []Reason{ReasonNoDedupEvidence}, wantAction: RecommendReconcileAgain},
		{name: "no evidence at all",
			op:   caseOp(RiskCompensableWrite),
			want: []Reason{ReasonNoDedupEvidence}, wantAction: RecommendReconcileAgain},
		{name: "same key, different payload",
			op: withEv(caseOp(RiskCompensableWrite), pending), extra: []Reason{ReasonPayloadMismatch},
			// Never attempted: nothing can exist at the destination to
			// dedup, and the case is the refused payload's alone, whose
			// one decision is fail (it recommended reconcile_again, which
			// the case does not take).
			want: []Reason{ReasonPayloadMismatch}, wantAction: RecommendFail, rationale: []string{"new key"}},
		{name: "two resources name the operation and version",
			op:   withEv(caseOp(RiskCompensableWrite), nil, evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"))),
			want: []Reason{ReasonMultipleCands}, wantAction: RecommendCompensate, wantRef: "fld-2", rationale: []string{"keep fld-1", "fld-2"}},
		{name: "two resources, the duplicate's undo under way (keep_and_undo decided)",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) { op.State, op.Undoing = Compensating, []string{"fld-2"} },
				evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"))),
			want: []Reason{ReasonMultipleCands}, wantAction: RecommendReconcileAgain, rationale: []string{"undo of fld-2 is under way"}},
		{name: "confirmed, the extra resource's undo under way",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) {
				op.State, op.Resource, op.Undoing = Confirmed, &ResourceRef{Ref: "fld-1"}, []string{"fld-2"}
			}, evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"))),
			want: []Reason{ReasonMultipleCands}, wantAction: RecommendReconcileAgain, rationale: []string{"fld-2"}},
		{name: "three resources, one undo under way: the third is still to undo",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) { op.Undoing = []string{"fld-2"} },
				evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"), ours("fld-3"))),
			want: []Reason{ReasonMultipleCands}, wantAction: RecommendCompensate, wantRef: "fld-3", rationale: []string{"keep fld-1"}},
		{name: "two resources over two rounds",
			op: withEv(caseOp(RiskCompensableWrite), nil,
				evFound(SourceStatusLookup, ours("fld-1")), evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-5"))),
			want: []Reason{ReasonMultipleCands}, wantAction: RecommendCompensate, wantRef: "fld-5"},
		{name: "the same resource seen twice is one candidate",
			op: withEv(caseOp(RiskCompensableWrite), nil,
				evFound(SourceStatusLookup, ours("fld-1")), evFound(SourceMetadataSearch, ours("fld-1"))),
			want: nil, wantAction: RecommendConfirm, wantRef: "fld-1"},
		{name: "a result for another logical version",
			op:   withEv(caseOp(RiskCompensableWrite), nil, evFound(SourceMetadataSearch, otherVersion)),
			want: []Reason{ReasonVersionMismatch}, wantAction: RecommendCompensate, wantRef: "fld-2", rationale: []string{"fld-2", "v3"}},
		{name: "a job that completed for another version",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) {
				op.Jobs = []Job{{Ref: "job-1", Status: JobSucceeded, InputVersion: "v2", OutputRef: "file-out"}}
			}),
			want: []Reason{ReasonVersionMismatch}, wantAction: RecommendCompensate, wantRef: "file-out"},
		{name: "a job for our version is no mismatch",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) {
				op.Jobs = []Job{{Ref: "job-1", Status: JobSucceeded, InputVersion: "v3", OutputRef: "file-out"}}
			}, evFound(SourceStatusLookup, ours("file-out"))),
			want: nil, wantAction: RecommendConfirm, wantRef: "file-out"},
		// A failed operation cannot be confirmed (its integrator was told
		// it did not happen): the effect found is to undo.
		{name: "failed in the ledger, present at the destination",
			op:   withEv(caseOp(RiskCompensableWrite), failed, evFound(SourceMetadataSearch, ours("fld-1"))),
			want: []Reason{ReasonStateConflict}, wantAction: RecommendCompensate, wantRef: "fld-1", rationale: []string{"which failed"}},
		{name: "failed in the ledger, a webhook names a resource",
			op:    withEv(caseOp(RiskCompensableWrite), failed, Evidence{Source: SourceWebhook, Candidates: []Candidate{ours("fld-1")}}),
			extra: []Reason{ReasonStateConflict},
			want:  []Reason{ReasonNoDedupEvidence, ReasonStateConflict}, wantAction: RecommendCompensate, wantRef: "fld-1", rationale: []string{"which failed"}},
		{name: "compensated in the ledger, another present at the destination",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) { compensated(op); op.Undone = []string{"fld-1"} },
				evFound(SourceMetadataSearch, ours("fld-1")), evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"))),
			extra: []Reason{ReasonMultipleCands},
			want:  []Reason{ReasonMultipleCands, ReasonStateConflict}, wantAction: RecommendCompensate, wantRef: "fld-2", rationale: []string{"after its effect was undone"}},
		{name: "compensated in the ledger, two present at the destination",
			op:   withEv(caseOp(RiskCompensableWrite), compensated, evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"))),
			want: []Reason{ReasonMultipleCands, ReasonStateConflict}, wantAction: RecommendCompensate, wantRef: "fld-2"},
		{name: "attempts spent, absence proven",
			op:   withEv(caseOp(RiskCompensableWrite), attemptsSpent, evRefutes()),
			want: []Reason{ReasonBudgetExhausted}, wantAction: RecommendFail},
		{name: "cost spent, absence proven",
			op:   withEv(caseOp(RiskCompensableWrite), costSpent, evRefutes()),
			want: []Reason{ReasonBudgetExhausted}, wantAction: RecommendFail},
		{name: "dependency failed before any attempt",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) { op.AttemptCount = 0 }), extra: []Reason{ReasonDependencyFailed},
			// Nothing was sent: nothing to probe for, confirm or undo.
			want: []Reason{ReasonDependencyFailed}, wantAction: RecommendFail, rationale: []string{"no attempt was sent"}},
		// A job the destination accepted, not known to have ended, may yet make
		// the effect: not failed on a search that finds nothing yet (its
		// output may not exist), not retried, and the job itself is no
		// effect to confirm.
		{name: "deadline passed beside a queued job, absence proven",
			op:   withEv(caseOp(RiskCompensableWrite), func(op *Operation) { expired(op); op.Jobs = []Job{queuedJob} }, evRefutes()),
			want: []Reason{ReasonDeadlineExpired}, wantAction: RecommendReconcileAgain, rationale: []string{"job job-1 is not known to have ended"}},
		{name: "absence proven beside a running job",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) {
				op.Jobs = []Job{{Ref: "job-0", Status: JobFailed}, {Ref: "job-1", Status: JobRunning}}
			}, evRefutes()),
			want: nil, wantAction: RecommendReconcileAgain, rationale: []string{"job job-1", "second effect"}},
		{name: "the evidence names the queued job",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) { op.Jobs = []Job{queuedJob} },
				evFound(SourceResponse, Candidate{Ref: "job-1", Kind: "job", Version: "v3", OperationID: "op-9"})),
			want: nil, wantAction: RecommendReconcileAgain, rationale: []string{"job job-1"}},
		{name: "a resource found beside a queued job is confirmed",
			op:   withEv(caseOp(RiskCompensableWrite), func(op *Operation) { op.Jobs = []Job{queuedJob} }, evFound(SourceMetadataSearch, ours("fld-1"))),
			want: nil, wantAction: RecommendConfirm, wantRef: "fld-1"},
		{name: "the destination no longer finds the queued job",
			op:    withEv(caseOp(RiskCompensableWrite), func(op *Operation) { op.Jobs = []Job{queuedJob} }),
			extra: []Reason{ReasonStateConflict},
			want:  []Reason{ReasonNoDedupEvidence, ReasonStateConflict}, wantAction: RecommendReconcileAgain, rationale: []string{"no evidence settles"}},
		{name: "an ended job asks nobody to wait",
			op: withEv(caseOp(RiskCompensableWrite), func(op *Operation) {
				expired(op)
				op.Jobs = []Job{{Ref: "job-1", Status: JobCanceled}}
			}, evRefutes()),
			want: []Reason{ReasonDeadlineExpired}, wantAction: RecommendFail},
		{name: "trigger reasons are kept",
			op: withEv(caseOp(RiskCompensableWrite), nil, evRefutes()), extra: []Reason{ReasonBudgetExhausted, ReasonBudgetExhausted},
			want: []Reason{ReasonBudgetExhausted}, wantAction: RecommendFail},
	}
}

func TestAssessReasons(t *testing.T) {
	t.Parallel()
	for _, tt := range assessCases() {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.op
			got := Assess(tt.op, tt.extra, settleNow)
			if !slices.Equal(got.Reasons, tt.want) {
				t.Errorf("reasons = %v, want %v", got.Reasons, tt.want)
			}
			if !slices.IsSorted(got.Reasons) {
				t.Errorf("reasons %v are not sorted", got.Reasons)
			}
			rec := got.Recommendation
			if rec.Action != tt.wantAction || rec.Ref != tt.wantRef {
				t.Errorf("recommendation = %q (%s), want %q", rec.String(), rec.Rationale, strings.TrimSpace(tt.wantAction+" "+tt.wantRef))
			}
			if rec.Rationale == "" || strings.Contains(rec.Rationale, "\n") {
				t.Errorf("rationale %q, want one line", rec.Rationale)
			}
			for _, w := range tt.rationale {
				if !strings.Contains(rec.Rationale, w) {
					t.Errorf("rationale %q does not mention %q", rec.Rationale, w)
				}
			}
			if got.Priority <= 0 {
				t.Errorf("priority %d, want positive", got.Priority)
			}
			// Pure: the same input gives the same answer and is not modified.
			again := Assess(tt.op, tt.extra, settleNow)
			if !slices.Equal(again.Reasons, got.Reasons) || again.Priority != got.Priority || again.Recommendation != got.Recommendation {
				t.Errorf("Assess is not deterministic: %+v then %+v", got, again)
			}
			if tt.op.State != before.State || len(tt.op.Evidence) != len(before.Evidence) {
				t.Errorf("Assess modified the operation")
			}
		})
	}
}

// TestAssessEveryReasonAndAction: the cases above make every escalation
// reason and every recommended action of SPEC arise.
func TestAssessEveryReasonAndAction(t *testing.T) {
	t.Parallel()
	reasons, actions := map[Reason]bool{}, map[string]bool{}
	for _, tt := range assessCases() {
		a := Assess(tt.op, tt.extra, settleNow)
		for _, r := range a.Reasons {
			reasons[r] = true
		}
		actions[a.Recommendation.Action] = true
	}
	for _, r := range []Reason{ReasonFinancial, ReasonIrreversible, ReasonRegulated, ReasonSourcesDisagree, ReasonDeadlineExpired,
		ReasonNoDedupEvidence, ReasonPayloadMismatch, ReasonMultipleCands, ReasonVersionMismatch, ReasonStateConflict,
		ReasonBudgetExhausted} {
		if !reasons[r] {
			t.Errorf("no case makes reason %s arise", r)
		}
	}
	for _, a := range []string{RecommendConfirm, RecommendCompensate, RecommendApproveRetry, RecommendReconcileAgain, RecommendFail} {
		if !actions[a] {
			t.Errorf("no case recommends %s", a)
		}
	}
	for rec, want := range map[Recommendation]string{
		{Action: RecommendConfirm, Ref: "fld-1"}: "confirm fld-1", {Action: RecommendCompensate, Ref: "fld-2"}: "compensate fld-2",
		{Action: RecommendApproveRetry}: "approve_retry", {Action: RecommendReconcileAgain}: "reconcile_again", {Action: RecommendFail}: "fail",
	} {
		if rec.String() != want {
			t.Errorf("Recommendation%+v.String() = %q, want %q", rec, rec.String(), want)
		}
	}
}

func TestAssessPriority(t *testing.T) {
	t.Parallel()
	refuted := func(op *Operation) *Operation { return withEv(op, nil, evRefutes()) }
	deadlineIn := func(d time.Duration) func(*Operation) {
		return func(op *Operation) { op.Deadline = settleNow.Add(d) }
	}
	createdAgo := func(d time.Duration) func(*Operation) {
		return func(op *Operation) { op.CreatedAt = settleNow.Add(-d) }
	}
	tests := []struct {
		name          string
		higher, lower *Operation
	}{
		{"financial above plain", refuted(caseOp(RiskCompensableWrite, FlagFinancial)), refuted(caseOp(RiskCompensableWrite))},
		{"irreversible above plain", refuted(caseOp(RiskIrreversible)), refuted(caseOp(RiskCompensableWrite))},
		{"regulated above plain", refuted(caseOp(RiskCompensableWrite, FlagRegulated)), refuted(caseOp(RiskCompensableWrite))},
		{"financial above irreversible", refuted(caseOp(RiskCompensableWrite, FlagFinancial)), refuted(caseOp(RiskIrreversible))},
		{"financial far deadline above plain near deadline",
			withEv(caseOp(RiskCompensableWrite, FlagFinancial), deadlineIn(48*time.Hour), evRefutes()),
			withEv(caseOp(RiskCompensableWrite), deadlineIn(30*time.Minute), evRefutes())},
		{"deadline in 30 minutes above deadline in 48 hours",
			withEv(caseOp(RiskCompensableWrite), deadlineIn(30*time.Minute), evRefutes()),
			withEv(caseOp(RiskCompensableWrite), deadlineIn(48*time.Hour), evRefutes())},
		{"deadline in 3 hours above deadline in 48 hours",
			withEv(caseOp(RiskCompensableWrite), deadlineIn(3*time.Hour), evRefutes()),
			withEv(caseOp(RiskCompensableWrite), deadlineIn(48*time.Hour), evRefutes())},
		{"deadline in 30 minutes above deadline in 3 hours",
			withEv(caseOp(RiskCompensableWrite), deadlineIn(30*time.Minute), evRefutes()),
			withEv(caseOp(RiskCompensableWrite), deadlineIn(3*time.Hour), evRefutes())},
		{"deadline passed above deadline near",
			withEv(caseOp(RiskCompensableWrite), deadlineIn(-time.Minute), evRefutes()),
			withEv(caseOp(RiskCompensableWrite), deadlineIn(30*time.Minute), evRefutes())},
		{"duplicates above a plain case",
			withEv(caseOp(RiskCompensableWrite), nil, evFound(SourceMetadataSearch, ours("fld-1"), ours("fld-2"))),
			refuted(caseOp(RiskCompensableWrite))},
		{"waiting five hours above waiting one",
			withEv(caseOp(RiskCompensableWrite), createdAgo(5*time.Hour), evRefutes()),
			withEv(caseOp(RiskCompensableWrite), createdAgo(time.Hour), evRefutes())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hi, lo := Assess(tt.higher, nil, settleNow).Priority, Assess(tt.lower, nil, settleNow).Priority
			if hi <= lo {
				t.Errorf("priority %d, want above %d", hi, lo)
			}
		})
	}
	// Age counts, but never outweighs a flag: a plain case waiting for days
	// stays below a fresh financial one.
	old := withEv(caseOp(RiskCompensableWrite), createdAgo(30*24*time.Hour), evRefutes())
	fresh := withEv(caseOp(RiskCompensableWrite, FlagFinancial), createdAgo(0), evRefutes())
	if o, f := Assess(old, nil, settleNow).Priority, Assess(fresh, nil, settleNow).Priority; o >= f {
		t.Errorf("a month-old plain case has priority %d, a fresh financial one %d", o, f)
	}
}

// TestAssessIgnoresUnvouchedCandidates: a second "resource" that only a
// non-authoritative answer names is no finding. On a confirmed operation
// with a payload_mismatch case it must not add multiple_candidates —
// which would turn the case into one about an extra effect and offer to
// undo the operation's only real effect (the property test found it).
func TestAssessIgnoresUnvouchedCandidates(t *testing.T) {
	op := testOp(RiskCompensableWrite)
	op.State = Confirmed
	op.Resource = &ResourceRef{Ref: "file-1", Version: op.LogicalVersion}
	op.Evidence = []Evidence{
		{Source: SourceResponse, Authoritative: true, Verdict: VerdictConfirms,
			Candidates: []Candidate{{Ref: "file-1", Version: op.LogicalVersion, OperationID: op.ID}}},
		{Source: SourceResponse, Authoritative: false, Verdict: VerdictInconclusive,
			Candidates: []Candidate{{Ref: "made-up", Version: op.LogicalVersion, OperationID: op.ID}}},
	}
	a := Assess(op, []Reason{ReasonPayloadMismatch}, classifyNow)
	if slices.Contains(a.Reasons, ReasonMultipleCands) {
		t.Fatalf("reasons %v: an unvouched candidate made it multiple_candidates", a.Reasons)
	}
	if on := DecidesOn(op.State, a.Reasons); on != OnRefusedPayload {
		t.Errorf("decisions act on %q, want %q", on, OnRefusedPayload)
	}
	// Vouched for, a second resource is a finding.
	op.Evidence[1].Authoritative = true
	if a := Assess(op, nil, classifyNow); !slices.Contains(a.Reasons, ReasonMultipleCands) {
		t.Errorf("reasons %v: two authoritative resources, want multiple_candidates", a.Reasons)
	}
}

// TestAssessAbsenceBeforeAJobEnded: a look that found nothing, taken
// before a job of the operation was known to have succeeded, does not
// contradict what the job made (it may not have existed yet); one taken
// since does.
func TestAssessAbsenceBeforeAJobEnded(t *testing.T) {
	op := testOp(RiskIrreversible)
	op.State = NeedsReview
	op.AttemptCount = 1
	searched, ended := classifyNow.Add(-2*time.Minute), classifyNow.Add(-time.Minute)
	op.Jobs = []Job{{Ref: "job-1", Status: JobSucceeded, OutputRef: "rcpt-9", InputVersion: op.LogicalVersion, Attempt: 1, UpdatedAt: ended}}
	op.Evidence = []Evidence{
		{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes, ObservedAt: searched, Candidates: []Candidate{}},
		{Source: SourceStatusLookup, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: ended,
			Candidates: []Candidate{{Ref: "rcpt-9", Kind: "job_output", Version: op.LogicalVersion, OperationID: op.ID}}},
	}
	a := Assess(op, nil, classifyNow)
	if slices.Contains(a.Reasons, ReasonSourcesDisagree) || a.Recommendation.Action != RecommendConfirm || a.Recommendation.Ref != "rcpt-9" {
		t.Errorf("an empty search before the job ended: %v, %s; want confirm rcpt-9, no disagreement", a.Reasons, a.Recommendation)
	}
	op.Evidence = append(op.Evidence, Evidence{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes,
		ObservedAt: classifyNow, Candidates: []Candidate{}})
	if a := Assess(op, nil, classifyNow); !slices.Contains(a.Reasons, ReasonSourcesDisagree) {
		t.Errorf("an empty search since the job ended: %v, want sources_disagree", a.Reasons)
	}
}

// TestAssessALookAnswersADisagreement: the sources disagreeing is for a
// look at the destination to settle, and once a look has shown the effect
// the case recommends from all the evidence. An empty search before the
// effect was shown contradicts nothing (resources appear, they do not
// vanish); one after it still does, until a later look shows the effect
// again — and the case says what a person does if looks keep finding
// nothing (the resource may have been removed there). A case opened because sources disagreed (the reason kept with
// it) asks for a look until one shows the effect after every other kind
// of word — a look that finds nothing does not answer it, nor does a
// webhook. A webhook's claim no look has shown is outweighed by no
// absence: the case says what a person does when looks keep finding
// nothing, and recommends neither a retry nor failing. Before, an absence
// and any later look that found the effect, or the reason alone,
// recommended looking again for ever, and a claim beside an empty search
// once the deadline passed recommended failing.
func TestAssessALookAnswersADisagreement(t *testing.T) {
	at := func(m int) time.Time { return classifyNow.Add(time.Duration(m-10) * time.Minute) }
	look := func(m int, src EvidenceSource, refs ...string) Evidence {
		ev := Evidence{Source: src, Authoritative: true, Verdict: VerdictRefutes, ObservedAt: at(m), Candidates: []Candidate{}}
		for _, ref := range refs {
			ev.Verdict = VerdictConfirms
			ev.Candidates = append(ev.Candidates, Candidate{Ref: ref, Version: "v7", OperationID: "op-1"})
		}
		return ev
	}
	inReview := func(evs ...Evidence) *Operation {
		op := testOp(RiskIrreversible)
		op.State, op.AttemptCount, op.Evidence = NeedsReview, 1, evs
		return op
	}
	confirm := Recommendation{Action: RecommendConfirm, Ref: "file-1", Rationale: fmt.Sprintf(RationaleOneResource, "file-1", "v7")}
	again := Recommendation{Action: RecommendReconcileAgain, Rationale: RationaleDisagree}
	// A webhook's claim no look has shown: neither a retry nor failing,
	// whatever the looks found, and what a person does when they keep
	// finding nothing.
	hook := func(m int) Evidence {
		return Evidence{Source: SourceWebhook, Verdict: VerdictConfirms, ObservedAt: at(m), Candidates: []Candidate{{Ref: "file-1", Version: "v7", OperationID: "op-1"}}}
	}
	// The effect shown, then looks that find nothing: a person's, once
	// looking again does not settle it.
	gone := Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleEffectGone, "file-1")}
	// A look split between a lookup that finds it and a search that does
	// not, as a person's check records them: the same way out.
	split := Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleLooksSplit, "file-1")}
	byHand := Recommendation{Action: RecommendReconcileAgain, Rationale: fmt.Sprintf(RationaleClaimUnseen, "file-1")}
	for _, tc := range []struct {
		name     string
		extra    []Reason
		evidence []Evidence
		want     Recommendation
		disagree bool // sources_disagree among the reasons: a look that answered it takes it away
	}{
		{"nothing, then the effect", nil, []Evidence{look(1, SourceMetadataSearch), look(2, SourceMetadataSearch, "file-1")}, confirm, false},
		{"nothing and the effect at once", nil, []Evidence{look(2, SourceMetadataSearch), look(2, SourceStatusLookup, "file-1")}, split, true},
		{"the effect and nothing at once, twice", nil, []Evidence{look(2, SourceStatusLookup, "file-1"), look(2, SourceMetadataSearch),
			look(3, SourceStatusLookup, "file-1"), look(3, SourceMetadataSearch)}, split, true},
		{"the effect and nothing at once, then the effect alone", nil, []Evidence{look(2, SourceStatusLookup, "file-1"), look(2, SourceMetadataSearch),
			look(3, SourceStatusLookup, "file-1"), look(3, SourceMetadataSearch, "file-1")}, confirm, false},
		{"the effect, then nothing", nil, []Evidence{look(1, SourceStatusLookup, "file-1"), look(2, SourceMetadataSearch)}, gone, true},
		{"the effect, then nothing twice", nil,
			[]Evidence{look(1, SourceStatusLookup, "file-1"), look(2, SourceMetadataSearch), look(3, SourceStatusLookup)}, gone, true},
		{"the effect, nothing, the effect again", nil,
			[]Evidence{look(1, SourceStatusLookup, "file-1"), look(2, SourceMetadataSearch), look(3, SourceMetadataSearch, "file-1")}, confirm, false},
		{"opened on a disagreement, no look since the late report", []Reason{ReasonSourcesDisagree},
			[]Evidence{look(1, SourceMetadataSearch, "file-1"), look(2, SourceResponse, "file-1")}, again, true},
		{"opened on a disagreement, a look since found the effect", []Reason{ReasonSourcesDisagree},
			[]Evidence{look(1, SourceResponse, "file-1"), look(2, SourceMetadataSearch, "file-1")}, confirm, false},
		{"opened on a disagreement, a look since found nothing", []Reason{ReasonSourcesDisagree},
			[]Evidence{look(1, SourceResponse, "file-1"), look(2, SourceMetadataSearch)}, gone, true},
		{"opened on a webhook's claim, every look found nothing", []Reason{ReasonSourcesDisagree},
			[]Evidence{look(1, SourceMetadataSearch), hook(2), look(3, SourceMetadataSearch)}, byHand, true},
		{"a webhook's claim, the deadline spent, a look found nothing", []Reason{ReasonDeadlineExpired},
			[]Evidence{hook(1), look(2, SourceMetadataSearch)}, byHand, false},
		{"a webhook's claim, then a look found it", []Reason{ReasonSourcesDisagree},
			[]Evidence{look(1, SourceMetadataSearch), hook(2), look(3, SourceMetadataSearch, "file-1")}, confirm, false},
	} {
		a := Assess(inReview(tc.evidence...), tc.extra, classifyNow)
		if a.Recommendation != tc.want || slices.Contains(a.Reasons, ReasonSourcesDisagree) != tc.disagree {
			t.Errorf("%s: %v, %s; want %s, sources_disagree %v", tc.name, a.Reasons, a.Recommendation, tc.want, tc.disagree)
		}
	}
}

// TestAssessSaysWhenTheClockChangesIt: an irreversible write in review
// whose search found nothing, its deadline eight hours ahead. Its
// assessment says when the clock alone next changes it — when the
// operation has waited an hour, six hours before the deadline, at four
// hours' wait, one hour before the deadline, at the deadline, at twelve
// hours' wait and at a day — and each of those instants changes it: the
// priority rises (deadline_expired turning the recommended retry into
// failing it at the deadline), and nothing changes between them. After a
// day, nothing is ahead. Before, age counted only when something else
// assessed the case, so one nobody touched kept the rank it came in with.
func TestAssessSaysWhenTheClockChangesIt(t *testing.T) {
	op := testOp(RiskIrreversible)
	op.State, op.AttemptCount, op.CreatedAt = NeedsReview, 1, classifyNow
	op.Evidence = []Evidence{{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes, ObservedAt: classifyNow, Candidates: []Candidate{}}}
	op.Deadline = classifyNow.Add(8 * time.Hour)
	now := classifyNow
	a := Assess(op, nil, now)
	for _, step := range []struct {
		after  time.Duration // since the operation was created
		action string
	}{{time.Hour, RecommendApproveRetry}, {2 * time.Hour, RecommendApproveRetry}, {4 * time.Hour, RecommendApproveRetry},
		{7 * time.Hour, RecommendApproveRetry}, {8 * time.Hour, RecommendFail}, {12 * time.Hour, RecommendFail}, {24 * time.Hour, RecommendFail}} {
		at := classifyNow.Add(step.after)
		if !a.ChangesAt.Equal(at) {
			t.Fatalf("at %s: changes at %s, want %s", now, a.ChangesAt, at)
		}
		if before := Assess(op, nil, at.Add(-time.Nanosecond)); before.Priority != a.Priority || before.Recommendation != a.Recommendation {
			t.Errorf("just before %s: priority %d → %d, %s → %s; want nothing moved", at, a.Priority, before.Priority, a.Recommendation, before.Recommendation)
		}
		prev := a
		now, a = at, Assess(op, nil, at)
		if a.Priority <= prev.Priority || a.Recommendation.Action != step.action {
			t.Errorf("at %s: priority %d (before %d), %s; want it higher, %s", now, a.Priority, prev.Priority, a.Recommendation.Action, step.action)
		}
	}
	if !slices.Contains(a.Reasons, ReasonDeadlineExpired) || !a.ChangesAt.IsZero() {
		t.Errorf("after a day: %v, changes at %s; want deadline_expired, nothing ahead", a.Reasons, a.ChangesAt)
	}
}

// TestAssessCountsTheDeadlineItWasOpenedFor: the reconciler names
// deadline_expired ahead of the deadline (a confirm window ending after
// it). The deadline passing still ranks the case higher, and the case is
// assessed again then. The property test found one ranked as "within
// the hour" past its deadline.
func TestAssessCountsTheDeadlineItWasOpenedFor(t *testing.T) {
	op := testOp(RiskIrreversible)
	op.State, op.AttemptCount, op.CreatedAt = NeedsReview, 1, classifyNow
	op.Deadline = classifyNow.Add(30 * time.Minute)
	a := Assess(op, []Reason{ReasonDeadlineExpired}, classifyNow)
	if !a.ChangesAt.Equal(op.Deadline) {
		t.Fatalf("changes at %s, want the deadline %s", a.ChangesAt, op.Deadline)
	}
	if after := Assess(op, []Reason{ReasonDeadlineExpired}, op.Deadline); after.Priority <= a.Priority {
		t.Errorf("priority %d before the deadline, %d after; want it higher", a.Priority, after.Priority)
	}
}

// TestAssessEvidenceAnswersNoDedupEvidence: a case opened because nothing
// showed whether the effect is there (no_dedup_evidence, kept with it)
// stops saying so once the destination names a resource for the
// operation and its version, and recommends confirming it. A resource of
// another operation answers nothing, and while an undo is under way the
// reason is the undo's: a look finding the resource does not answer it.
// Before, the case read "No way to check for duplicates" beside "Confirm
// file-1".
func TestAssessEvidenceAnswersNoDedupEvidence(t *testing.T) {
	look := func(cands ...Candidate) Evidence {
		return Evidence{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: classifyNow, Candidates: cands}
	}
	ours := Candidate{Ref: "file-1", Version: "v7", OperationID: "op-1"}
	theirs := Candidate{Ref: "file-9", Version: "v2", OperationID: "op-other"}
	for _, tc := range []struct {
		name    string
		setup   func(op *Operation)
		ev      []Evidence
		kept    bool
		action  string
		confirm string
	}{
		{"a look finds the operation's resource", nil, []Evidence{look(ours)}, false, RecommendConfirm, "file-1"},
		{"a look finds another operation's resource", nil, []Evidence{look(theirs)}, true, RecommendReconcileAgain, ""},
		{"a look finds both", nil, []Evidence{look(theirs), look(ours)}, false, RecommendConfirm, "file-1"},
		{"a look finds the resource an undo is under way for", func(op *Operation) { op.State, op.Undoing = Compensating, []string{"file-1"} },
			[]Evidence{look(ours)}, true, RecommendReconcileAgain, ""},
	} {
		op := testOp(RiskIrreversible)
		op.State, op.AttemptCount, op.Evidence = NeedsReview, 1, tc.ev
		if tc.setup != nil {
			tc.setup(op)
		}
		a := Assess(op, []Reason{ReasonNoDedupEvidence}, classifyNow)
		if slices.Contains(a.Reasons, ReasonNoDedupEvidence) != tc.kept || a.Recommendation.Action != tc.action || a.Recommendation.Ref != tc.confirm {
			t.Errorf("%s: %v, %s; want no_dedup_evidence %v, %s %s", tc.name, a.Reasons, a.Recommendation, tc.kept, tc.action, tc.confirm)
		}
	}
}

// TestAssessARefusedPayloadsCaseKeepsToIt: a case about a refused payload
// alone (its operation going its own way) carries the refused payload's
// reasons — payload_mismatch, the action's flags and risk — and none drawn
// from what the operation's attempts and the destination said, whatever
// evidence has come in: those change on paths that do not assess the case
// again (an attempt, an outcome), so a case read "No way to check for
// duplicates" or not depending on the path. Once the operation itself is
// in review, the case is the operation's and says what its evidence says.
func TestAssessARefusedPayloadsCaseKeepsToIt(t *testing.T) {
	refused := []Reason{ReasonPayloadMismatch}
	ours := func(ref string) Candidate { return Candidate{Ref: ref, Version: "v7", OperationID: "op-1"} }
	for _, tc := range []struct {
		name  string
		setup func(op *Operation)
		want  []Reason
		on    DecisionScope
	}{
		{"in flight, nothing known", func(op *Operation) { op.State = InFlight }, []Reason{ReasonIrreversible, ReasonPayloadMismatch}, OnRefusedPayload},
		{"waiting for a retry, its attempts spent", func(op *Operation) { op.State, op.MaxAttempts = RetryWait, 1 },
			[]Reason{ReasonIrreversible, ReasonPayloadMismatch}, OnRefusedPayload},
		{"confirmed, a search past it found nothing", func(op *Operation) {
			op.State, op.Resource = Confirmed, &ResourceRef{Ref: "file-1", Version: "v7"}
			op.Evidence = []Evidence{{Source: SourceResponse, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: classifyNow.Add(-time.Minute), Candidates: []Candidate{ours("file-1")}},
				{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes, ObservedAt: classifyNow, Candidates: []Candidate{}}}
		}, []Reason{ReasonIrreversible, ReasonPayloadMismatch}, OnRefusedPayload},
		{"confirmed, two resources: an extra effect's case", func(op *Operation) {
			op.State, op.Resource = Confirmed, &ResourceRef{Ref: "file-1", Version: "v7"}
			op.Evidence = []Evidence{{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictConfirms, ObservedAt: classifyNow, Candidates: []Candidate{ours("file-1"), ours("file-2")}}}
		}, []Reason{ReasonIrreversible, ReasonMultipleCands, ReasonPayloadMismatch}, OnExtraEffect},
		{"in review: the operation's case", func(op *Operation) { op.State = NeedsReview },
			[]Reason{ReasonIrreversible, ReasonNoDedupEvidence, ReasonPayloadMismatch}, OnOperation},
	} {
		op := testOp(RiskIrreversible)
		op.AttemptCount = 1
		tc.setup(op)
		a := Assess(op, refused, classifyNow)
		if !slices.Equal(a.Reasons, tc.want) || DecidesOn(op.State, a.Reasons) != tc.on {
			t.Errorf("%s: %v, deciding on %q; want %v, on %q", tc.name, a.Reasons, DecidesOn(op.State, a.Reasons), tc.want, tc.on)
		}
		if tc.on == OnRefusedPayload && a.Recommendation.Action != RecommendFail {
			t.Errorf("%s: recommends %s, want fail (the refused payload's one decision)", tc.name, a.Recommendation)
		}
	}
}
