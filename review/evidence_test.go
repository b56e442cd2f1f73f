package review

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWeighOneEvidence: one piece of evidence on an operation after one
// attempt — step 3 of the reconciliation hierarchy, as the API and the
// reconciler apply it — and the verdict stored with it.
func TestWeighOneEvidence(t *testing.T) {
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
		{"status lookup finds exactly one match", Ambiguous, ev(SourceStatusLookup, true, match), VerdictConfirms, Confirmed, nil, "file-1"},
		{"search finds exactly one match", Ambiguous, ev(SourceMetadataSearch, true, match), VerdictConfirms, Confirmed, nil, "exactly one"},
		{"unversioned match confirms", Ambiguous, ev(SourceMetadataSearch, true, unversioned), VerdictConfirms, Confirmed, nil, "file-2"},
		{"response evidence confirms", Ambiguous, ev(SourceResponse, true, match), VerdictConfirms, Confirmed, nil, "file-1"},
		{"the same ref twice is one candidate", Ambiguous, ev(SourceMetadataSearch, true, match, match), VerdictConfirms, Confirmed, nil, "file-1"},
		{"authoritative absence", Ambiguous, ev(SourceStatusLookup, true), VerdictRefutes, RetryWait, nil, "same key"},
		{"authoritative absence, empty slice", Ambiguous, Evidence{Source: SourceMetadataSearch, Authoritative: true, Candidates: []Candidate{}}, VerdictRefutes, RetryWait, nil, "no effect"},
		{"an error answer is no absence", Ambiguous, ev(SourceResponse, true), VerdictRefutes, "", nil, ""},
		{"two matches", Ambiguous, ev(SourceMetadataSearch, true, match, unversioned), VerdictInconclusive, NeedsReview, []Reason{ReasonMultipleCands}, "several"},
		{"a match and another operation's: that one is not ours", Ambiguous, ev(SourceMetadataSearch, true, match, otherOp), VerdictConfirms, Confirmed, nil, "file-1"},
		{"a match and one naming no operation proves nothing", Ambiguous, ev(SourceMetadataSearch, true, match, noOp), VerdictInconclusive, "", nil, ""},
		{"a match and another version", Ambiguous, ev(SourceMetadataSearch, true, match, otherVersion), VerdictInconclusive, NeedsReview, []Reason{ReasonMultipleCands}, "several"},
		{"one ref listed twice, differently", Ambiguous, ev(SourceMetadataSearch, true, match, Candidate{Ref: "file-1", Version: "v6", OperationID: "op-1"}), VerdictInconclusive, "", nil, ""},
		{"another version and another operation's", Ambiguous, ev(SourceMetadataSearch, true, otherVersion, otherOp), VerdictInconclusive, NeedsReview, []Reason{ReasonVersionMismatch}, "file-3"},
		{"one candidate of another version", Ambiguous, ev(SourceMetadataSearch, true, otherVersion), VerdictInconclusive, NeedsReview, []Reason{ReasonVersionMismatch}, "file-3"},
		{"one candidate of another operation", Ambiguous, ev(SourceStatusLookup, true, otherOp), VerdictInconclusive, NeedsReview, []Reason{ReasonNoDedupEvidence}, "file-4"},
		{"one candidate naming no operation proves nothing", Ambiguous, ev(SourceMetadataSearch, true, noOp), VerdictInconclusive, "", nil, ""},
		// Evidence that settles nothing on its own.
		{"non-authoritative match", Ambiguous, ev(SourceMetadataSearch, false, match), VerdictConfirms, "", nil, ""},
		{"non-authoritative absence proves nothing", Ambiguous, ev(SourceMetadataSearch, false), VerdictInconclusive, "", nil, ""},
		{"non-authoritative several", Ambiguous, ev(SourceMetadataSearch, false, match, unversioned), VerdictInconclusive, "", nil, ""},
		{"webhook alone never confirms", Ambiguous, ev(SourceWebhook, true, match), VerdictConfirms, "", nil, ""},
		{"webhook alone never refutes", Ambiguous, ev(SourceWebhook, true), VerdictRefutes, "", nil, ""},
		{"webhook with a mismatch", Ambiguous, ev(SourceWebhook, true, otherVersion), VerdictInconclusive, "", nil, ""},
		// Confirming evidence stops attempts wherever nobody answers for
		// the effect yet (issue 12: it used to settle only ambiguous).
		{"retry_wait, one match", RetryWait, ev(SourceStatusLookup, true, match), VerdictConfirms, Confirmed, nil, "file-1"},
		{"pending, one match", Pending, ev(SourceStatusLookup, true, match), VerdictConfirms, Confirmed, nil, "file-1"},
		{"retry_wait, two matches", RetryWait, ev(SourceMetadataSearch, true, match, unversioned), VerdictInconclusive, NeedsReview, []Reason{ReasonMultipleCands}, "several"},
		{"retry_wait, a webhook's claim", RetryWait, ev(SourceWebhook, false, match), VerdictConfirms, Ambiguous, nil, "webhook"},
		{"retry_wait, absence changes nothing", RetryWait, ev(SourceStatusLookup, true), VerdictRefutes, "", nil, ""},
		{"retry_wait, another operation's", RetryWait, ev(SourceStatusLookup, true, otherOp), VerdictInconclusive, "", nil, ""},
		// Where somebody answers for the effect, evidence is recorded only.
		{"in_flight", InFlight, ev(SourceStatusLookup, true, match), VerdictConfirms, "", nil, ""},
		{"accepted", Accepted, ev(SourceStatusLookup, true, match), VerdictConfirms, "", nil, ""},
		{"needs_review", NeedsReview, ev(SourceStatusLookup, true, otherVersion), VerdictInconclusive, "", nil, ""},
		{"confirmed", Confirmed, ev(SourceStatusLookup, true, match, unversioned), VerdictInconclusive, "", nil, ""},
		{"failed", Failed, ev(SourceStatusLookup, true, match), VerdictConfirms, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := weighOp(tt.state)
			tt.ev.ObservedAt = classifyNow
			if v := EvidenceVerdict(op, tt.ev); v != tt.wantVerdict {
				t.Errorf("verdict = %s, want %s", v, tt.wantVerdict)
			}
			tt.ev.Verdict = EvidenceVerdict(op, tt.ev) // as the store records it
			op.Evidence = []Evidence{tt.ev}
			w := Weigh(op, Destination{}, classifyNow)
			if w.State != tt.wantState {
				t.Errorf("state = %q (%s), want %q", w.State, w.Reason, tt.wantState)
			}
			if !slices.Equal(w.Reasons, tt.wantReasons) {
				t.Errorf("reasons = %v, want %v", w.Reasons, tt.wantReasons)
			}
			if !strings.Contains(w.Reason, tt.wantText) {
				t.Errorf("explanation %q does not mention %q", w.Reason, tt.wantText)
			}
			if w.State != "" {
				if err := CheckTransition(op.State, w.State); err != nil {
					t.Errorf("Weigh moves %s → %s: %v", op.State, w.State, err)
				}
			}
		})
	}
}

// weighOp is an operation after one attempt, sent a minute before
// classifyNow.
func weighOp(state State) *Operation {
	op := testOp(RiskCompensableWrite)
	op.State, op.AttemptCount = state, 1
	op.Attempts = []Attempt{{OperationID: op.ID, N: 1, StartedAt: classifyNow.Add(-time.Minute)}}
	return op
}

// TestWeighAllEvidence: the issue 12 sequences where the newest piece of
// evidence alone gave the wrong answer. Each row is the operation's whole
// record, oldest first.
func TestWeighAllEvidence(t *testing.T) {
	sent := classifyNow.Add(-time.Minute)
	at := func(d time.Duration) time.Time { return sent.Add(d) }
	match := Candidate{Ref: "file-1", Version: "v7", OperationID: "op-1"}
	other := Candidate{Ref: "file-9", Version: "v7", OperationID: "op-1"}
	search := func(t time.Time, cs ...Candidate) Evidence {
		return Evidence{Source: SourceMetadataSearch, Authoritative: true, Candidates: cs, ObservedAt: t}
	}
	lookup := func(t time.Time, cs ...Candidate) Evidence {
		return Evidence{Source: SourceStatusLookup, Authoritative: true, Candidates: cs, ObservedAt: t}
	}
	lag := Destination{SearchLag: 30 * time.Second}
	tests := []struct {
		name     string
		state    State
		d        Destination
		evidence []Evidence
		want     State
		reasons  []Reason
	}{
		{"hole 1: absence, then a lookup finds the effect", RetryWait, Destination{},
			[]Evidence{search(at(time.Second)), lookup(at(2*time.Second), match)}, NeedsReview, []Reason{ReasonSourcesDisagree}},
		{"an effect found before a later attempt is still an effect", RetryWait, Destination{},
			[]Evidence{lookup(at(-time.Hour), match)}, Confirmed, nil},
		{"absence before the last send is stale", RetryWait, Destination{},
			[]Evidence{search(at(-time.Hour)), lookup(at(time.Second), match)}, Confirmed, nil},
		{"hole 2: an empty search inside the search lag proves nothing", Ambiguous, lag,
			[]Evidence{search(at(time.Second))}, "", nil},
		{"an empty search after the search lag is absence", Ambiguous, lag,
			[]Evidence{search(at(31 * time.Second))}, RetryWait, nil},
		{"hole 9: a response naming the effect outweighs a later empty search", Ambiguous, Destination{},
			[]Evidence{{Source: SourceResponse, Authoritative: true, Candidates: []Candidate{match}, ObservedAt: at(time.Second)}, search(at(2 * time.Second))},
			NeedsReview, []Reason{ReasonSourcesDisagree}},
		{"a webhook's claim and a later empty search disagree", Ambiguous, Destination{},
			[]Evidence{{Source: SourceWebhook, Candidates: []Candidate{match}, ObservedAt: at(time.Second)}, search(at(2 * time.Second))},
			NeedsReview, []Reason{ReasonSourcesDisagree}},
		{"two pieces naming two resources", Ambiguous, Destination{},
			[]Evidence{lookup(at(time.Second), match), search(at(2*time.Second), other)}, NeedsReview, []Reason{ReasonMultipleCands}},
		{"hole 16: absence inside the confirm window, then the effect: the search lagged, confirmed", RetryWait, lag,
			[]Evidence{search(at(31 * time.Second)), search(at(50*time.Second), match)}, Confirmed, nil},
		{"absence past the confirm window, then the effect: sources disagree", RetryWait, Destination{SearchLag: time.Second},
			[]Evidence{search(at(20 * time.Second)), search(at(25*time.Second), match)}, NeedsReview, []Reason{ReasonSourcesDisagree}},
		{"the effect, then absence inside the window: the search lags, confirmed", Ambiguous, lag,
			[]Evidence{lookup(at(time.Second), match), search(at(40 * time.Second))}, Confirmed, nil},
		{"the effect, then absence past the window: sources disagree", Ambiguous, Destination{SearchLag: time.Second},
			[]Evidence{lookup(at(time.Second), match), search(at(40 * time.Second))}, NeedsReview, []Reason{ReasonSourcesDisagree}},
		{"a webhook's claim and an empty search inside the window: wait, no retry", Ambiguous, lag,
			[]Evidence{{Source: SourceWebhook, Candidates: []Candidate{match}, ObservedAt: at(time.Second)}, search(at(40 * time.Second))},
			"", nil},
		{"two pieces naming one resource", Ambiguous, Destination{},
			[]Evidence{lookup(at(time.Second), match), search(at(2*time.Second), match)}, Confirmed, nil},
		{"a reviewer's decision settles what came before it", RetryWait, Destination{},
			[]Evidence{lookup(at(time.Second), match), search(at(2*time.Second), other), {Source: SourceReviewer, Authoritative: true, ObservedAt: at(3 * time.Second)}},
			"", nil},
		{"what was recorded before a decision at the same instant was weighed", RetryWait, Destination{},
			[]Evidence{lookup(at(time.Second), match), search(at(time.Second), other), {Source: SourceReviewer, ObservedAt: at(time.Second)}},
			"", nil},
		{"what was recorded after a decision counts, whenever it was observed", RetryWait, Destination{},
			[]Evidence{{Source: SourceReviewer, ObservedAt: at(3 * time.Second)}, lookup(at(time.Second), match)},
			Confirmed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := weighOp(tt.state)
			for _, ev := range tt.evidence {
				ev.Verdict = EvidenceVerdict(op, ev) // as the store records it
				op.Evidence = append(op.Evidence, ev)
			}
			w := Weigh(op, tt.d, classifyNow)
			if w.State != tt.want || !slices.Equal(w.Reasons, tt.reasons) {
				t.Fatalf("Weigh = %q %v (%s), want %q %v", w.State, w.Reasons, w.Reason, tt.want, tt.reasons)
			}
			if w.State == Confirmed && (w.Resource == nil || w.Resource.Ref != "file-1") {
				t.Errorf("resource = %+v, want file-1", w.Resource)
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
			op := weighOp(Ambiguous)
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
