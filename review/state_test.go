package review

import (
	"errors"
	"testing"
)

// legalTransitions is SPEC "Operation states" written out independently of
// the table in state.go, so that a change to either shows up here.
var legalTransitions = map[State][]State{
	// approve → pending, refuse → failed.
	AwaitingApproval: {Pending, Failed},
	// An attempt; evidence naming an effect (confirmed) or the operation's
	// job (accepted), several or a contradiction (review), a webhook's
	// claim (reconcile first); budget ends.
	Pending: {InFlight, Confirmed, Accepted, Ambiguous, NeedsReview, Failed},
	// An outcome: done, async job, retryable, unknown, version mismatch, rejected.
	InFlight: {Confirmed, Accepted, RetryWait, Ambiguous, NeedsReview, Failed},
	// Another attempt; evidence as from pending; escalation (e.g. payload
	// mismatch); budget ends.
	RetryWait: {InFlight, Confirmed, Accepted, Ambiguous, NeedsReview, Failed},
	// Reconciliation: exactly one match, proof of absence, anything else.
	Ambiguous: {Confirmed, Accepted, RetryWait, NeedsReview, Failed},
	// The job completes, its lease or status becomes unknown, disagrees, fails.
	Accepted: {Confirmed, Ambiguous, NeedsReview, Failed},
	// Reviewer decisions: confirm, compensate (→ compensating), approve_retry, fail.
	NeedsReview: {Confirmed, Compensating, RetryWait, Failed},
	// The undo is confirmed, or it failed or became ambiguous: back to review.
	// keep_and_undo: confirmed with the kept resource once the undo is.
	Compensating: {Compensated, Confirmed, NeedsReview},
	Confirmed:    nil,
	Compensated:  nil,
	Failed:       nil,
}

func isLegal(from, to State) bool {
	for _, s := range legalTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

func TestAllStatesMatchesSpec(t *testing.T) {
	all := AllStates()
	if len(all) != len(legalTransitions) {
		t.Fatalf("AllStates() has %d states, SPEC has %d", len(all), len(legalTransitions))
	}
	seen := map[State]bool{}
	for _, s := range all {
		if seen[s] {
			t.Errorf("AllStates() lists %s twice", s)
		}
		seen[s] = true
		if _, ok := legalTransitions[s]; !ok {
			t.Errorf("AllStates() lists %s, which SPEC does not name", s)
		}
		if !s.Valid() {
			t.Errorf("%s.Valid() = false", s)
		}
	}
	for _, s := range []State{"", "done", "PENDING", "in-flight", "retrying"} {
		if s.Valid() {
			t.Errorf("State(%q).Valid() = true", s)
		}
	}
}

// TestTransitionsAllPairs checks every ordered pair of states, including a
// state to itself: the legal ones pass, every other one is an error wrapping
// ErrInvalidTransition.
func TestTransitionsAllPairs(t *testing.T) {
	var legal, illegal int
	for _, from := range AllStates() {
		for _, to := range AllStates() {
			want := isLegal(from, to)
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			err := CheckTransition(from, to)
			if want {
				legal++
				if err != nil {
					t.Errorf("CheckTransition(%s, %s) = %v, want nil", from, to, err)
				}
				continue
			}
			illegal++
			if !errors.Is(err, ErrInvalidTransition) {
				t.Errorf("CheckTransition(%s, %s) = %v, want an error wrapping ErrInvalidTransition", from, to, err)
			}
		}
	}
	n := len(AllStates())
	if legal+illegal != n*n {
		t.Fatalf("checked %d pairs, want %d", legal+illegal, n*n)
	}
	want := 0
	for _, to := range legalTransitions {
		want += len(to)
	}
	if legal != want {
		t.Errorf("%d legal transitions, want %d", legal, want)
	}
}

func TestTransitionsUnknownStates(t *testing.T) {
	tests := []struct {
		name     string
		from, to State
	}{
		{"unknown from", "bogus", Pending},
		{"unknown to", Pending, "bogus"},
		{"empty from", "", InFlight},
		{"empty to", InFlight, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if CanTransition(tt.from, tt.to) {
				t.Errorf("CanTransition(%q, %q) = true", tt.from, tt.to)
			}
			if err := CheckTransition(tt.from, tt.to); !errors.Is(err, ErrInvalidTransition) {
				t.Errorf("CheckTransition(%q, %q) = %v", tt.from, tt.to, err)
			}
		})
	}
}

func TestTerminalStatesHaveNoExits(t *testing.T) {
	for _, s := range AllStates() {
		want := s == Confirmed || s == Compensated || s == Failed
		t.Run(string(s), func(t *testing.T) {
			if got := s.Terminal(); got != want {
				t.Errorf("Terminal() = %v, want %v", got, want)
			}
			exits := 0
			for _, to := range AllStates() {
				if CanTransition(s, to) {
					exits++
				}
			}
			if want && exits != 0 {
				t.Errorf("terminal state has %d exits", exits)
			}
			if !want && exits == 0 {
				t.Errorf("non-terminal state has no exit")
			}
			// SPEC: any non-terminal → failed — except compensating: its
			// effect happened, so it ends compensated or goes back to review.
			if !want && s != Compensating && !CanTransition(s, Failed) {
				t.Errorf("non-terminal state cannot fail")
			}
		})
	}
}

func TestAttemptable(t *testing.T) {
	tests := []struct {
		name State
		want bool
	}{
		{AwaitingApproval, false},
		{Pending, true},
		{InFlight, false},
		{RetryWait, true},
		{Ambiguous, false},
		{Accepted, false},
		{NeedsReview, false},
		{Compensating, false},
		{Confirmed, false},
		{Compensated, false},
		{Failed, false},
	}
	if len(tests) != len(AllStates()) {
		t.Fatalf("table covers %d states, AllStates has %d", len(tests), len(AllStates()))
	}
	for _, tt := range tests {
		t.Run(string(tt.name), func(t *testing.T) {
			if got := tt.name.Attemptable(); got != tt.want {
				t.Errorf("Attemptable() = %v, want %v", got, tt.want)
			}
			// An attempt moves the operation to in_flight.
			if tt.want && !CanTransition(tt.name, InFlight) {
				t.Errorf("attemptable but cannot move to in_flight")
			}
		})
	}
}

// TestAllReasonsOrderIsStored: the store keeps a case's reasons as bits in
// AllReasons' order, so the order written here is the stored one and may
// only grow at its end.
func TestAllReasonsOrderIsStored(t *testing.T) {
	stored := []Reason{"financial", "irreversible", "regulated", "sources_disagree", "deadline_expired", "no_dedup_evidence",
		"payload_mismatch", "multiple_candidates", "version_mismatch", "state_conflict", "budget_exhausted", "compensation_failed"}
	all := AllReasons()
	if len(all) < len(stored) {
		t.Fatalf("AllReasons lost reasons: %v", all)
	}
	for i, r := range stored {
		if all[i] != r {
			t.Errorf("AllReasons()[%d] = %s, stored cases read bit %d as %s", i, all[i], i, r)
		}
	}
}
