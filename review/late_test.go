package review

import (
	"strings"
	"testing"
)

func TestLateEvidence(t *testing.T) {
	t.Parallel()
	op := &Operation{ID: "op_1", LogicalVersion: "v1"}
	res := func(ref, version string) *ResourceRef { return &ResourceRef{Ref: ref, Kind: "file", Version: version} }
	tests := []struct {
		name          string
		o             Outcome
		authoritative bool
		verdict       Verdict
		cands         int
	}{
		{"success with its resource", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: res("f-1", "v1")}, true, VerdictConfirms, 1},
		{"success, unversioned", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: res("f-1", "")}, true, VerdictConfirms, 1},
		{"a job accepted", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-1"}}, true, VerdictInconclusive, 1},
		{"a job queued", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-1", Status: "queued"}}, true, VerdictInconclusive, 1},
		{"a job ended, its output named", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Job: &JobRef{Ref: "job-1", Status: "succeeded"},
			Resource: res("f-1", "v1")}, true, VerdictConfirms, 1},
		{"success for another version", Outcome{Result: ResultSuccess, Phase: PhaseAfterSend, Resource: res("f-0", "v0")}, true, VerdictInconclusive, 1},
		{"error", Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 500}, false, VerdictInconclusive, 0},
		{"before send", Outcome{Result: ResultConnectionError, Phase: PhaseBeforeSend}, false, VerdictInconclusive, 0},
		{"timeout", Outcome{Result: ResultTimeout, Phase: PhaseAfterSend, Resource: res("f-2", "v1")}, false, VerdictInconclusive, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := LateEvidence(op, 2, tt.o, "after it was closed")
			if ev.Source != SourceResponse || ev.Authoritative != tt.authoritative || ev.Verdict != tt.verdict || len(ev.Candidates) != tt.cands {
				t.Errorf("LateEvidence = %+v", ev)
			}
			if !strings.Contains(ev.Note, "attempt 2 after it was closed") || !strings.Contains(ev.Note, string(tt.o.Result)) {
				t.Errorf("note %q does not say which attempt, how late and what it said", ev.Note)
			}
			for _, c := range ev.Candidates {
				if c.OperationID != op.ID {
					t.Errorf("candidate %+v does not name the operation", c)
				}
			}
		})
	}
}

func TestLateSuccessNeedsReview(t *testing.T) {
	t.Parallel()
	op := func(state State, attempts int, flags ...Flag) *Operation {
		return &Operation{State: state, AttemptCount: attempts, Flags: flags}
	}
	tests := []struct {
		name string
		op   *Operation
		n    int
		risk Risk
		want bool
	}{
		{"retry due, none sent yet: Weigh confirms instead", op(RetryWait, 1), 1, RiskCompensableWrite, false},
		{"retry due after attempt 2", op(RetryWait, 2), 1, RiskCompensableWrite, true},
		{"attempt 2 in flight", op(InFlight, 2), 1, RiskCompensableWrite, true},
		{"attempt 2 accepted", op(Accepted, 2), 1, RiskIrreversible, true},
		{"financial read", op(RetryWait, 2, FlagFinancial), 1, RiskRead, true},
		{"read: duplicates are harmless", op(RetryWait, 2), 1, RiskRead, false},
		{"idempotent write the destination deduplicates", op(InFlight, 2), 1, RiskIdempotentWrite, false},
		{"in flight with this very attempt", op(InFlight, 1), 1, RiskCompensableWrite, false},
		{"accepted by this attempt", op(Accepted, 1), 1, RiskCompensableWrite, false},
		{"ambiguous: reconciliation's", op(Ambiguous, 2), 1, RiskCompensableWrite, false},
		{"in review: its case's", op(NeedsReview, 2), 1, RiskCompensableWrite, false},
		{"confirmed: cannot move", op(Confirmed, 2), 1, RiskCompensableWrite, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LateSuccessNeedsReview(tt.op, tt.n, tt.risk); got != tt.want {
				t.Errorf("LateSuccessNeedsReview = %v, want %v", got, tt.want)
			}
		})
	}
}
