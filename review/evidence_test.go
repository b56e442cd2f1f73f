package review

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func judgeOp(state State) *Operation {
	op := testOp(RiskCompensableWrite)
	op.State = state
	return op
}

func TestJudge(t *testing.T) {
	match := Candidate{Ref: "file-1", Kind: "file", Version: "v7", OperationID: "op-1"}
	unversioned := Candidate{Ref: "file-2", OperationID: "op-1"}
	otherVersion := Candidate{Ref: "file-3", Version: "v6", OperationID: "op-1"}
	otherOp := Candidate{Ref: "file-4", Version: "v7", OperationID: "op-2"}
	noOp := Candidate{Ref: "file-5", Version: "v7"}
	ev := func(src EvidenceSource, auth bool, cs ...Candidate) Evidence {
		return Evidence{Source: src, Authoritative: auth, Candidates: cs}
	}
	tests := []struct {
		name        string
		state       State
		ev          Evidence
		wantVerdict Verdict
		wantState   State
		wantReasons []Reason
		wantText    string // fragment of the explanation
	}{
		// Step 3 of the reconciliation hierarchy, on an ambiguous operation.
		{"status lookup finds exactly one match", Ambiguous, ev(SourceStatusLookup, true, match), VerdictConfirms, Confirmed, nil, "file-1"},
		{"search finds exactly one match", Ambiguous, ev(SourceMetadataSearch, true, match), VerdictConfirms, Confirmed, nil, "exactly one"},
		{"unversioned match confirms", Ambiguous, ev(SourceMetadataSearch, true, unversioned), VerdictConfirms, Confirmed, nil, "file-2"},
		{"reviewer evidence confirms", Ambiguous, ev(SourceReviewer, true, match), VerdictConfirms, Confirmed, nil, "reviewer"},
		{"response evidence confirms", Ambiguous, ev(SourceResponse, true, match), VerdictConfirms, Confirmed, nil, "response"},
		{"authoritative absence", Ambiguous, ev(SourceStatusLookup, true), VerdictRefutes, RetryWait, nil, "same key"},
		{"authoritative absence, empty slice", Ambiguous, Evidence{Source: SourceMetadataSearch, Authoritative: true, Candidates: []Candidate{}}, VerdictRefutes, RetryWait, nil, "no effect"},
		{"two matches", Ambiguous, ev(SourceMetadataSearch, true, match, unversioned), VerdictInconclusive, NeedsReview, []Reason{ReasonMultipleCands}, "2 candidates"},
		{"a match and another", Ambiguous, ev(SourceMetadataSearch, true, match, otherOp), VerdictInconclusive, NeedsReview, []Reason{ReasonMultipleCands}, "2 candidates"},
		{"two non-matches", Ambiguous, ev(SourceMetadataSearch, true, otherVersion, otherOp), VerdictInconclusive, NeedsReview, []Reason{ReasonMultipleCands}, "2 candidates"},
		{"one candidate of another version", Ambiguous, ev(SourceMetadataSearch, true, otherVersion), VerdictInconclusive, NeedsReview, []Reason{ReasonVersionMismatch}, "file-3"},
		{"one candidate of another operation", Ambiguous, ev(SourceStatusLookup, true, otherOp), VerdictInconclusive, NeedsReview, []Reason{ReasonNoDedupEvidence}, "file-4"},
		{"one candidate naming no operation", Ambiguous, ev(SourceMetadataSearch, true, noOp), VerdictInconclusive, NeedsReview, []Reason{ReasonNoDedupEvidence}, "file-5"},
		// Evidence that never settles anything.
		{"non-authoritative match", Ambiguous, ev(SourceMetadataSearch, false, match), VerdictConfirms, "", nil, "recorded"},
		{"non-authoritative absence proves nothing", Ambiguous, ev(SourceMetadataSearch, false), VerdictInconclusive, "", nil, "recorded"},
		{"non-authoritative several", Ambiguous, ev(SourceMetadataSearch, false, match, otherOp), VerdictInconclusive, "", nil, "recorded"},
		{"webhook alone never confirms", Ambiguous, ev(SourceWebhook, true, match), VerdictConfirms, "", nil, "recorded"},
		{"webhook alone never refutes", Ambiguous, ev(SourceWebhook, true), VerdictRefutes, "", nil, "recorded"},
		{"webhook with a mismatch", Ambiguous, ev(SourceWebhook, true, otherVersion), VerdictInconclusive, "", nil, "recorded"},
		// Only an ambiguous operation is settled by evidence.
		{"in_flight", InFlight, ev(SourceStatusLookup, true, match), VerdictConfirms, "", nil, "recorded"},
		{"retry_wait", RetryWait, ev(SourceStatusLookup, true), VerdictRefutes, "", nil, "recorded"},
		{"accepted", Accepted, ev(SourceStatusLookup, true, match), VerdictConfirms, "", nil, "recorded"},
		{"needs_review", NeedsReview, ev(SourceStatusLookup, true, otherVersion), VerdictInconclusive, "", nil, "recorded"},
		{"confirmed", Confirmed, ev(SourceStatusLookup, true, match, otherOp), VerdictInconclusive, "", nil, "recorded"},
		{"failed", Failed, ev(SourceStatusLookup, true, match), VerdictConfirms, "", nil, "recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := judgeOp(tt.state)
			verdict, state, reasons, text := Judge(op, tt.ev)
			if verdict != tt.wantVerdict {
				t.Errorf("verdict = %s, want %s", verdict, tt.wantVerdict)
			}
			if state != tt.wantState {
				t.Errorf("state = %q, want %q", state, tt.wantState)
			}
			if !slices.Equal(reasons, tt.wantReasons) {
				t.Errorf("reasons = %v, want %v", reasons, tt.wantReasons)
			}
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("explanation %q does not mention %q", text, tt.wantText)
			}
			if state != "" {
				if err := CheckTransition(op.State, state); err != nil {
					t.Errorf("Judge moves %s → %s: %v", op.State, state, err)
				}
			}
		})
	}
}

func TestAfterAbsence(t *testing.T) {
	now := classifyNow
	clock := func() time.Time { return now }
	cost := func(v float64) *float64 { return &v }
	tests := []struct {
		name      string
		max       int
		count     int
		deadline  time.Time
		budget    *float64
		spent     float64
		wantState State
		wantText  string
	}{
		{"budgets left", 5, 2, now.Add(time.Hour), cost(10), 1, RetryWait, "same key"},
		{"no deadline, no cost budget", 5, 4, time.Time{}, nil, 1e9, RetryWait, "same key"},
		{"attempts exhausted", 5, 5, now.Add(time.Hour), nil, 0, Failed, "attempt budget"},
		{"attempts beyond max", 3, 4, now.Add(time.Hour), nil, 0, Failed, "attempt budget"},
		{"default max, 4 used", 0, 4, now.Add(time.Hour), nil, 0, RetryWait, "same key"},
		{"default max, 5 used", 0, DefaultMaxAttempts, now.Add(time.Hour), nil, 0, Failed, "attempt budget"},
		{"deadline passed", 5, 1, now.Add(-time.Second), nil, 0, Failed, "deadline"},
		{"deadline is now", 5, 1, now, nil, 0, Failed, "deadline"},
		{"deadline just ahead", 5, 1, now.Add(time.Nanosecond), nil, 0, RetryWait, "same key"},
		{"cost budget spent", 5, 1, now.Add(time.Hour), cost(1), 1, Failed, "cost budget"},
		{"cost budget overspent", 5, 1, now.Add(time.Hour), cost(1), 2, Failed, "cost budget"},
		{"cost budget nearly spent", 5, 1, now.Add(time.Hour), cost(1), 0.99, RetryWait, "same key"},
		{"attempts checked before the deadline", 1, 1, now.Add(-time.Hour), cost(1), 5, Failed, "attempt budget"},
		{"deadline checked before cost", 5, 1, now.Add(-time.Hour), cost(1), 5, Failed, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := judgeOp(Ambiguous)
			op.MaxAttempts, op.AttemptCount, op.Deadline, op.CostBudget, op.CostSpent = tt.max, tt.count, tt.deadline, tt.budget, tt.spent
			state, text := AfterAbsence(op, clock)
			if state != tt.wantState {
				t.Errorf("AfterAbsence = %s (%s), want %s", state, text, tt.wantState)
			}
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("explanation %q does not mention %q", text, tt.wantText)
			}
			if err := CheckTransition(Ambiguous, state); err != nil {
				t.Errorf("ambiguous → %s: %v", state, err)
			}
		})
	}
}
