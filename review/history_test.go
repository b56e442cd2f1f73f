package review

import (
	"strings"
	"testing"
)

// A history read says whether the operation's own version existed at the
// resource found at a later one: confirmed at its version, its entries at
// another version (for a person), or none at all.
func TestHistoryEvidence(t *testing.T) {
	op := &Operation{ID: "op-a", LogicalVersion: "7"}
	found := []Candidate{{Ref: "file-1", Kind: "file", Version: "8", OperationID: "op-a"}}
	hist := func(entries ...Candidate) ProbeResult {
		return ProbeResult{Kind: ProbeHistory, Ref: "file-1", Candidates: entries}
	}
	v1 := Candidate{Ref: "file-1@1", Version: "6", OperationID: "op-create"}
	v3 := Candidate{Ref: "file-1@3", Version: "8", OperationID: "op-b"}

	ev, mine := HistoryEvidence(op, hist(v1, Candidate{Ref: "file-1@2", Version: "7", OperationID: "op-a"}, v3), found)
	if !mine || ev.Verdict != VerdictConfirms || ev.Source != SourceStatusLookup || len(ev.Candidates) != 1 ||
		ev.Candidates[0] != (Candidate{Ref: "file-1", Kind: "file", Version: "7", OperationID: "op-a"}) {
		t.Fatalf("own version existed: mine %t, %+v", mine, ev)
	}
	ref, versions, means, ok := HistoryOf(ev)
	if !ok || ref != "file-1" || len(versions) != 3 || versions[1] != "file-1@2: version 7 by op-a" || !strings.Contains(means, "existed") {
		t.Errorf("HistoryOf = %q %q %q %t", ref, versions, means, ok)
	}

	ev, mine = HistoryEvidence(op, hist(v1, Candidate{Ref: "file-1@2", Version: "5", OperationID: "op-a"}, v3), found)
	if mine || ev.Verdict != VerdictInconclusive || len(ev.Candidates) != 1 || ev.Candidates[0].Version != "5" {
		t.Fatalf("own entry at another version: mine %t, %+v", mine, ev)
	}
	ev, mine = HistoryEvidence(op, hist(v1, v3), found)
	if mine || ev.Authoritative || len(ev.Candidates) != 0 || !strings.Contains(ev.Note, "no version by this operation") {
		t.Fatalf("no entry of this operation: mine %t, %+v", mine, ev)
	}
	if _, versions, _, ok := HistoryOf(Evidence{Note: HistoryNote + "file-1: no versions"}); !ok || versions != nil {
		t.Errorf("an empty history: %q %t", versions, ok)
	}
	if _, _, _, ok := HistoryOf(Evidence{Note: "search found file-1"}); ok {
		t.Error("other evidence read as a history")
	}
}
