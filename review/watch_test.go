package review

import (
	"slices"
	"testing"
	"time"
)

// TestAbsenceFailsOnlyPastTheWindow: with the attempt budget spent, a
// proof of absence inside the confirm window leaves the operation where it
// is (Weigh) or probes again at the window's end (Settle); past it, the
// operation fails. A retry on absence is not held, but watched.
func TestAbsenceFailsOnlyPastTheWindow(t *testing.T) {
	d := Destination{SearchLag: 10 * time.Second} // window 100 s
	sent := classifyNow.Add(-time.Minute)
	spent := func() *Operation {
		op := weighOp(Ambiguous)
		op.MaxAttempts = 1
		return op
	}
	empty := Evidence{Source: SourceMetadataSearch, Authoritative: true, Candidates: []Candidate{}, Verdict: VerdictRefutes}

	op := spent()
	ev := empty
	ev.ObservedAt = classifyNow
	op.Evidence = []Evidence{ev}
	if w := Weigh(op, d, classifyNow); w.State != "" {
		t.Errorf("Weigh inside the window = %q (%s), want no move", w.State, w.Reason)
	}
	search := ProbeResult{Kind: ProbeSearch, Candidates: []Candidate{}, At: classifyNow}
	st := Settle(SettleInput{Op: spent(), Destination: d, LastWrite: sent, Results: []ProbeResult{search}, Now: classifyNow})
	if st.State != "" || !st.NextProbe.Equal(sent.Add(d.Window()).Add(10*time.Millisecond)) {
		t.Errorf("Settle inside the window = %q next %s (%s), want no move, next at the window's end", st.State, st.NextProbe, st.Reason)
	}

	later := sent.Add(d.Window())
	ev.ObservedAt = later
	op.Evidence = []Evidence{ev}
	if w := Weigh(op, d, later); w.State != Failed {
		t.Errorf("Weigh past the window = %q, want failed", w.State)
	}
	search.At = later
	if st := Settle(SettleInput{Op: spent(), Destination: d, LastWrite: sent, Results: []ProbeResult{search}, Now: later}); st.State != Failed {
		t.Errorf("Settle past the window = %q (%s), want failed", st.State, st.Reason)
	}

	// Budget left: the retry is not held, and the window is watched.
	st = Settle(SettleInput{Op: weighOp(Ambiguous), Destination: d, LastWrite: sent, Results: []ProbeResult{search}, Now: later})
	if st.State != RetryWait || !st.Watch {
		t.Errorf("Settle with budget left = %q watch %v, want retry_wait, watched", st.State, st.Watch)
	}
	// No search lag: nothing to wait for, nothing to watch.
	st = Settle(SettleInput{Op: weighOp(Ambiguous), Destination: Destination{}, LastWrite: sent, Results: []ProbeResult{search}, Now: classifyNow})
	if st.State != RetryWait || st.Watch {
		t.Errorf("Settle without a lag = %q watch %v, want retry_wait, not watched", st.State, st.Watch)
	}
}

// TestWatch: what one look inside the confirm window concludes.
func TestWatch(t *testing.T) {
	d := Destination{SearchLag: 2 * time.Second}
	until := classifyNow.Add(time.Minute)
	mine := func(ref string) Candidate { return Candidate{Ref: ref, Version: "v7", OperationID: "op-1"} }
	confirmed := func() *Operation {
		op := weighOp(Confirmed)
		op.Resource = &ResourceRef{Ref: "file-2", Version: "v7"}
		return op
	}
	search := func(cs ...Candidate) []ProbeResult {
		return []ProbeResult{{Kind: ProbeSearch, Candidates: append([]Candidate{}, cs...), At: classifyNow}}
	}
	tests := []struct {
		name    string
		op      *Operation
		results []ProbeResult
		now     time.Time
		extra   []string
		more    bool // another look is scheduled
	}{
		{"the confirmed resource only", confirmed(), search(mine("file-2")), classifyNow, nil, true},
		{"nothing shows yet", confirmed(), search(), classifyNow, nil, true},
		{"a late first write next to the retry's", confirmed(), search(mine("file-1"), mine("file-2")), classifyNow, []string{"file-1"}, false},
		{"the late one alone", confirmed(), search(mine("file-1")), classifyNow, []string{"file-1"}, false},
		{"listed twice is one", confirmed(), search(mine("file-1"), mine("file-1"), mine("file-2")), classifyNow, []string{"file-1"}, false},
		{"another operation's resource is not a duplicate", confirmed(), search(Candidate{Ref: "x", Version: "v7", OperationID: "op-9"}), classifyNow, nil, true},
		{"another version is not a duplicate of this one", confirmed(), search(Candidate{Ref: "x", Version: "v8", OperationID: "op-1"}), classifyNow, nil, true},
		{"a failed probe proves nothing", confirmed(), []ProbeResult{{Kind: ProbeSearch, Err: "timeout", At: classifyNow}}, classifyNow, nil, true},
		{"the window has closed", confirmed(), search(mine("file-2")), until, nil, false},
		{"still retrying: keep looking (Weigh reads the evidence)", weighOp(RetryWait), search(mine("file-1")), classifyNow, nil, true},
		{"a person has it", weighOp(NeedsReview), search(mine("file-1")), classifyNow, nil, false},
		// Failed or compensated, any effect found is one nobody answers
		// for (ExtraEffects): a person looks.
		{"failed, and the first write shows", weighOp(Failed), search(mine("file-1")), classifyNow, []string{"file-1"}, false},
		{"compensated, and another shows", weighOp(Compensated), search(mine("file-3")), classifyNow, []string{"file-3"}, false},
		{"failed, nothing shows", weighOp(Failed), search(), classifyNow, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := Watch(tt.op, d, tt.results, until, tt.now)
			var extra []string
			for _, c := range w.Extra {
				extra = append(extra, c.Ref)
			}
			if len(extra) != len(tt.extra) || (len(extra) > 0 && extra[0] != tt.extra[0]) {
				t.Errorf("extra = %v, want %v", extra, tt.extra)
			}
			if more := !w.Next.IsZero(); more != tt.more {
				t.Errorf("next look at %s, want another: %v", w.Next, tt.more)
			}
			if !w.Next.IsZero() && w.Next.After(until) {
				t.Errorf("next look %s after the window closes at %s", w.Next, until)
			}
		})
	}
}

// TestWatchReadsAFailedJobAsNoEffect: a look in the confirm window that
// lists only a job the ledger knows failed records no confirmation of
// the effect, as a reconciliation round reads it (noEffectShown). Before,
// it was recorded as confirming, and the console showed it so.
func TestWatchReadsAFailedJobAsNoEffect(t *testing.T) {
	d := Destination{SearchLag: 2 * time.Second}
	op := weighOp(RetryWait)
	op.Jobs = []Job{{Ref: "job-1", Status: JobFailed, Attempt: 1}}
	job := Candidate{Ref: "job-1", Kind: "job", Version: "v7", OperationID: "op-1"}
	w := Watch(op, d, []ProbeResult{{Kind: ProbeSearch, Candidates: []Candidate{job}, At: classifyNow}}, classifyNow.Add(time.Minute), classifyNow)
	if len(w.Evidence) != 1 || w.Evidence[0].Verdict != VerdictInconclusive || len(w.Extra) != 0 {
		t.Errorf("evidence %+v, extra %v; want one inconclusive row, nothing extra", w.Evidence, w.Extra)
	}
}

// TestSettleWaitsOutAClaim: a webhook claimed an effect; the round's
// search, past the configured lag but inside the confirm window, shows
// nothing. That is a lagging search, not absence: no retry, no case —
// probe again at the window's end. Past the window they disagree. An
// effect the ledger holds confirms the operation instead.
func TestSettleWaitsOutAClaim(t *testing.T) {
	d := Destination{SearchLag: 2 * time.Second} // window 20 s
	sent := classifyNow.Add(-5 * time.Second)
	match := Candidate{Ref: "file-1", Version: "v7", OperationID: "op-1"}
	with := func(ev Evidence) *Operation {
		op := weighOp(Ambiguous)
		op.Attempts[0].FinishedAt = &sent // the attempt ended (timed out) then
		op.Evidence = []Evidence{ev}
		return op
	}
	claim := Evidence{Source: SourceWebhook, Candidates: []Candidate{match}, Verdict: VerdictInconclusive, ObservedAt: sent.Add(time.Second)}
	response := Evidence{Source: SourceResponse, Authoritative: true, Candidates: []Candidate{match}, Verdict: VerdictConfirms, ObservedAt: sent.Add(time.Second)}
	search := func(at time.Time) []ProbeResult {
		return []ProbeResult{{Kind: ProbeSearch, Candidates: []Candidate{}, At: at}}
	}

	st := Settle(SettleInput{Op: with(claim), Destination: d, LastWrite: sent, Results: search(classifyNow), Now: classifyNow})
	if st.State != "" || !st.NextProbe.Equal(sent.Add(d.Window())) {
		t.Errorf("claim, search inside the window: %q next %s (%s); want no move, next at %s", st.State, st.NextProbe, st.Reason, sent.Add(d.Window()))
	}
	late := sent.Add(d.Window() + time.Second)
	st = Settle(SettleInput{Op: with(claim), Destination: d, LastWrite: sent, Results: search(late), Now: late})
	if st.State != NeedsReview || len(st.Reasons) == 0 || st.Reasons[0] != ReasonSourcesDisagree {
		t.Errorf("claim, search past the window: %q %v; want needs_review, sources_disagree", st.State, st.Reasons)
	}
	st = Settle(SettleInput{Op: with(response), Destination: d, LastWrite: sent, Results: search(classifyNow), Now: classifyNow})
	if st.State != Confirmed || st.Resource == nil || st.Resource.Ref != "file-1" || st.Watch {
		t.Errorf("response, search inside the window: %q %+v watch %v; want confirmed with file-1, unwatched", st.State, st.Resource, st.Watch)
	}
}

// TestExtraEffectsSince: what an undo's parent holds beside what was
// undone, from the evidence recorded after the undo was decided only; a
// compensated operation does not stand on a job's output, a confirmed one
// does.
func TestExtraEffectsSince(t *testing.T) {
	decided := classifyNow
	seen := func(at time.Time, refs ...string) Evidence {
		ev := Evidence{Source: SourceMetadataSearch, Authoritative: true, ObservedAt: at}
		for _, r := range refs {
			ev.Candidates = append(ev.Candidates, Candidate{Ref: r, OperationID: "op_1", Version: "v1"})
		}
		return ev
	}
	later := decided.Add(time.Second)
	op := &Operation{ID: "op_1", LogicalVersion: "v1", State: Compensated, Undone: []string{"fld-1"},
		Jobs: []Job{{Ref: "job-1", Status: JobSucceeded, OutputRef: "out-1"}},
		Evidence: []Evidence{
			seen(decided, "fld-9"),                         // before the decision: the reviewer's to weigh
			seen(later, "fld-1", "out-1"),                  // undone; a job's output beside it
			seen(later, "fld-9", "fld-3"),                  // known to the reviewer; a resource nobody answers for
			seen(later.Add(time.Second), "fld-3", "out-1"), // the same again
		}}
	var got []string
	for _, c := range ExtraEffectsSince(op, decided) {
		got = append(got, c.Ref)
	}
	if want := []string{"out-1", "fld-3"}; !slices.Equal(got, want) {
		t.Errorf("compensated: extra %v, want %v", got, want)
	}
	op.State, op.Undone, op.Resource = Confirmed, []string{"fld-1", "fld-3"}, &ResourceRef{Ref: "out-1"}
	if extra := ExtraEffectsSince(op, decided); len(extra) != 0 {
		t.Errorf("confirmed with the job's output, fld-3 undone: extra %+v, want none", extra)
	}
}

// TestJobsBesideTheConfirmedOne: a confirmed operation stands on its
// resource and the job it came out of only. Another job of it that
// succeeded (an earlier attempt's, reported late) made an effect beside
// it: its output, which stands for the job — the job itself is no second
// thing to undo. A job that failed made nothing.
func TestJobsBesideTheConfirmedOne(t *testing.T) {
	op := &Operation{ID: "op_1", LogicalVersion: "v1", State: Confirmed, Resource: &ResourceRef{Ref: "out-2"},
		Jobs: []Job{
			{Ref: "job-1", Status: JobSucceeded, OutputRef: "out-1", Attempt: 1},
			{Ref: "job-2", Status: JobSucceeded, OutputRef: "out-2", Attempt: 2},
			{Ref: "job-3", Status: JobFailed, Attempt: 1},
		}}
	ev := Evidence{Source: SourceStatusLookup, Authoritative: true}
	for _, r := range []string{"job-1", "out-1", "job-2", "out-2", "job-3"} {
		ev.Candidates = append(ev.Candidates, Candidate{Ref: r, OperationID: "op_1", Version: "v1"})
	}
	var got []string
	for _, c := range ExtraEffects(op, ev) {
		got = append(got, c.Ref)
	}
	if want := []string{"out-1"}; !slices.Equal(got, want) {
		t.Errorf("extra %v, want %v", got, want)
	}
	op.Evidence = []Evidence{ev}
	if f := weigh(op); !slices.Equal(f.matching, []string{"out-1", "out-2"}) {
		t.Errorf("the case weighs %v, want the two outputs", f.matching)
	}
}
