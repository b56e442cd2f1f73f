package review

import (
	"testing"
	"time"
)

// A check is offered for an operation in review, or settled (its case
// open), whose destination has a status lookup or a search, and not for
// an undo; the last look is the newest status lookup's or search's
// evidence, whoever sent it.
func TestCheckable(t *testing.T) {
	search := Destination{Probes: Probes{Search: &Probe{URL: "http://127.0.0.1:9/s"}}}
	status := Destination{Probes: Probes{Status: &Probe{URL: "http://127.0.0.1:9/r"}}}
	jobOnly := Destination{Probes: Probes{Job: &Probe{URL: "http://127.0.0.1:9/j"}}}
	for _, c := range []struct {
		name string
		op   Operation
		d    Destination
		want bool
	}{
		{"in review, a search", Operation{State: NeedsReview, Action: "upload"}, search, true},
		{"in review, a status lookup", Operation{State: NeedsReview, Action: "upload"}, status, true},
		{"in review, only a job probe", Operation{State: NeedsReview, Action: "upload"}, jobOnly, false},
		{"in review, no probes", Operation{State: NeedsReview, Action: "upload"}, Destination{}, false},
		{"ambiguous: the reconciler asks", Operation{State: Ambiguous, Action: "upload"}, search, false},
		{"confirmed, its case open", Operation{State: Confirmed, Action: "upload"}, search, true},
		{"failed, its case open", Operation{State: Failed, Action: "upload"}, status, true},
		{"awaiting approval: nothing was sent", Operation{State: AwaitingApproval, Action: "upload"}, search, false},
		{"being undone: the undo settles it", Operation{State: Compensating, Action: "upload"}, search, false},
		{"an undo in review", Operation{State: NeedsReview, Action: CompensationPrefix + "upload"}, status, false},
	} {
		if got := Checkable(&c.op, c.d); got != c.want {
			t.Errorf("%s: Checkable = %t, want %t", c.name, got, c.want)
		}
	}
	at := time.Date(2030, 3, 4, 9, 0, 0, 0, time.UTC)
	op := &Operation{Evidence: []Evidence{
		{Source: SourceStatusLookup, ObservedAt: at},
		{Source: SourceMetadataSearch, ObservedAt: at.Add(time.Minute)},
		{Source: SourceWebhook, ObservedAt: at.Add(2 * time.Minute)},
		{Source: SourceResponse, ObservedAt: at.Add(3 * time.Minute)},
		{Source: SourceReviewer, ObservedAt: at.Add(4 * time.Minute)},
	}}
	if got := LastAsked(op); !got.Equal(at.Add(time.Minute)) {
		t.Errorf("LastAsked = %s, want the search's %s", got, at.Add(time.Minute))
	}
	if got := LastAsked(&Operation{}); !got.IsZero() {
		t.Errorf("LastAsked of an operation never asked about = %s", got)
	}
	// What it answered then: the looks of that moment, in the order recorded.
	op.Evidence = append(op.Evidence, Evidence{Source: SourceStatusLookup, ObservedAt: at.Add(time.Minute), Note: "lookup"})
	if got := LastAnswers(op); len(got) != 2 || got[0].Source != SourceMetadataSearch || got[1].Note != "lookup" {
		t.Errorf("LastAnswers = %+v, want the search and the lookup of %s", got, at.Add(time.Minute))
	}
	if got := LastAnswers(&Operation{}); len(got) != 0 {
		t.Errorf("LastAnswers of an operation never asked about = %+v", got)
	}
}
