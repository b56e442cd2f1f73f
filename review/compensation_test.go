package review

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanCompensation(t *testing.T) {
	parent := testOp(RiskCompensableWrite, FlagFinancial)
	parent.Key = DeriveKey(parent.Tenant, parent.SourceRef, parent.Action, parent.LogicalVersion)
	p, err := PlanCompensation(parent, "fld-2", "delete the duplicate folder", "dec-1", "rita", classifyNow)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Registration
	if r.Action != "compensate:upload" || r.Risk != RiskCompensableWrite || r.Tenant != parent.Tenant || r.Destination != parent.Destination ||
		!IsCompensation(r.Action) || p.State != Pending || len(r.Flags) != 1 {
		t.Errorf("registration %+v", r)
	}
	if r.Key != CompensationKey(parent.Key, "fld-2", "dec-1") || r.Key == parent.Key || r.Key == CompensationKey(parent.Key, "fld-3", "dec-1") {
		t.Errorf("key %s is not derived from the parent, the resource and the decision", r.Key)
	}
	if !strings.Contains(string(r.Payload), `"compensates":"op-1"`) || !strings.Contains(string(r.Payload), `"resource":"fld-2"`) {
		t.Errorf("payload %s does not link the parent and the resource", r.Payload)
	}
	for _, tt := range []struct {
		child State
		keep  string
		want  State
	}{
		{Confirmed, "", Compensated}, {Confirmed, "fld-1", Confirmed}, {Failed, "", NeedsReview},
		{Ambiguous, "fld-1", Compensating}, {NeedsReview, "", Compensating}, {InFlight, "", ""}, {RetryWait, "", ""},
	} {
		if got, _, _ := CompensationSettles(tt.child, tt.keep); got != tt.want {
			t.Errorf("child %s (keep %q): parent %q, want %q", tt.child, tt.keep, got, tt.want)
		}
	}
}

// TestSettlesByHand: a reviewer's word on an undo cancels the
// compensations not yet attempted and is refused while one may be having
// its effect; other decisions leave them be.
func TestSettlesByHand(t *testing.T) {
	kids := func(states ...State) []ChildCompensation {
		var out []ChildCompensation
		for i, s := range states {
			out = append(out, ChildCompensation{ID: fmt.Sprintf("op_%d", i), State: s})
		}
		return out
	}
	for _, a := range []string{DecideCompensationDone, DecideCompensationFailed} {
		got, err := SettlesByHand(a, "", kids(Pending, RetryWait, Confirmed, Failed))
		if err != nil || !slices.Equal(got, []string{"op_0", "op_1"}) {
			t.Errorf("%s over pending ones: %v, %v", a, got, err)
		}
		for _, s := range []State{InFlight, Accepted, Ambiguous, NeedsReview} {
			if _, err := SettlesByHand(a, "", kids(Pending, s)); !errors.Is(err, ErrInvalidTransition) {
				t.Errorf("%s while one is %s: %v, want refused", a, s, err)
			}
		}
	}
	// compensation_done covers the undos of the resource it names only:
	// another's, pending or running, is not the reviewer's to call off.
	named := []ChildCompensation{{ID: "op_a", State: Pending, Ref: "fld-2"}, {ID: "op_b", State: Pending, Ref: "fld-3"}, {ID: "op_c", State: InFlight, Ref: "fld-4"}}
	if got, err := SettlesByHand(DecideCompensationDone, "fld-2", named); err != nil || !slices.Equal(got, []string{"op_a"}) {
		t.Errorf("compensation_done of fld-2: %v, %v; want only fld-2's undo canceled", got, err)
	}
	if _, err := SettlesByHand(DecideCompensationDone, "fld-4", named); !errors.Is(err, ErrInvalidTransition) {
		t.Errorf("compensation_done of fld-4, whose undo is in flight: %v, want refused", err)
	}
	if got, err := SettlesByHand(DecideCompensate, "", kids(InFlight, Pending)); got != nil || err != nil {
		t.Errorf("compensate: %v, %v; want nothing canceled", got, err)
	}
}

// TestSettleUndo: an ambiguous compensation is settled by looking up the
// resource it undoes — gone or shown undone confirms it, shown live sends
// it again — never by a search, which cannot show an undo.
func TestSettleUndo(t *testing.T) {
	now := classifyNow
	op := &Operation{ID: "op-u", Action: CompensationPrefix + "upload", Risk: RiskCompensableWrite, State: Ambiguous, AttemptCount: 1,
		MaxAttempts: 5, Deadline: now.Add(time.Hour), Payload: []byte(`{"compensates":"op-1","resource":"fld-2"}`)}
	if ref, _ := LookupRef(op); ref != "fld-2" {
		t.Fatalf("LookupRef = %q, want the resource undone", ref)
	}
	status := func(r ProbeResult) Settlement {
		r.Kind, r.Ref = ProbeStatus, "fld-2"
		return Settle(SettleInput{Op: op, Results: []ProbeResult{r, {Kind: ProbeSearch, Candidates: []Candidate{}}}, Now: now})
	}
	for _, tt := range []struct {
		name string
		r    ProbeResult
		want State
	}{
		{"gone", ProbeResult{NotFound: true}, Confirmed},
		{"shown compensated", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", OperationID: "op-1", Status: "compensated"}}}, Confirmed},
		{"shown deleted", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", Status: "Deleted"}}}, Confirmed},
		{"shown active", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", OperationID: "op-1", Status: "active"}}}, RetryWait},
		{"no status", ProbeResult{Candidates: []Candidate{{Ref: "fld-2", OperationID: "op-1"}}}, ""},
		{"lookup failed", ProbeResult{Err: "timeout"}, ""},
	} {
		if got := status(tt.r); got.State != tt.want {
			t.Errorf("%s: %q (%s), want %q", tt.name, got.State, got.Reason, tt.want)
		}
	}
	// An empty search alone proves nothing about an undo.
	if got := Settle(SettleInput{Op: op, Results: []ProbeResult{{Kind: ProbeSearch, Candidates: []Candidate{}}}, Now: now}); got.State != "" {
		t.Errorf("an empty search settled the undo: %s (%s)", got.State, got.Reason)
	}
}

// TestSettleUndoInProgress: only a status that shows the resource still
// live, read once the confirm window has passed since the undo was sent,
// sends the undo again. An undo still in progress at the destination
// (refund_pending, deleting…), any status Limbo does not know, a live
// status read too soon after the undo, or a lookup that lists the
// resource twice with different statuses proves nothing: the undo is
// probed again, never sent again — a second undo may refund twice.
// (Found by a review: each of these sent the undo again.)
func TestSettleUndoInProgress(t *testing.T) {
	now := classifyNow
	op := &Operation{ID: "op-u", Action: CompensationPrefix + "charge", Risk: RiskCompensableWrite, State: Ambiguous, AttemptCount: 1,
		MaxAttempts: 5, Deadline: now.Add(time.Hour), Payload: []byte(`{"compensates":"op-1","resource":"ch-2"}`),
		Attempts: []Attempt{{N: 1, StartedAt: now.Add(-time.Second), LeaseExpiresAt: now.Add(time.Minute)}}}
	d := Destination{SearchLag: time.Minute}
	sent := now.Add(-time.Millisecond)
	run := func(at time.Time, cands ...Candidate) Settlement {
		return Settle(SettleInput{Op: op, LastWrite: sent, Destination: d,
			Results: []ProbeResult{{Kind: ProbeStatus, Ref: "ch-2", Candidates: cands}}, Now: at})
	}
	late := sent.Add(d.Window())
	for _, s := range []string{"refund_pending", "deleting", "pending_deletion", "cancelling", "processing", "succeeded", "queued"} {
		for _, at := range []time.Time{now, late} {
			if got := run(at, Candidate{Ref: "ch-2", OperationID: "op-1", Status: s}); got.State != "" || got.NextProbe.IsZero() {
				t.Errorf("status %q at %s: %q (%s), want probed again", s, at.Sub(sent), got.State, got.Reason)
			}
		}
	}
	// A live status read inside the confirm window: looked up again once
	// it has passed, not sent again.
	got := run(now, Candidate{Ref: "ch-2", OperationID: "op-1", Status: "Active"})
	if got.State != "" || !got.NextProbe.Equal(late.Add(10*time.Millisecond)) {
		t.Errorf("active inside the window: %q (%s), next %s; want probed again at %s", got.State, got.Reason, got.NextProbe, late)
	}
	if got := run(late, Candidate{Ref: "ch-2", OperationID: "op-1", Status: "active"}); got.State != RetryWait {
		t.Errorf("active past the window: %q (%s), want retry_wait", got.State, got.Reason)
	}
	// Undone shows at once: the lag holds back absence, not presence.
	if got := run(now, Candidate{Ref: "ch-2", Status: "refunded"}); got.State != Confirmed {
		t.Errorf("refunded inside the window: %q (%s), want confirmed", got.State, got.Reason)
	}
	for _, at := range []time.Time{now, late} {
		a := run(at, Candidate{Ref: "ch-2", Status: "active"}, Candidate{Ref: "ch-2", Status: "refunded"})
		b := run(at, Candidate{Ref: "ch-2", Status: "refunded"}, Candidate{Ref: "ch-2", Status: "active"})
		if a.State != "" || b.State != "" {
			t.Errorf("a self-contradicting lookup settled the undo: %q / %q", a.State, b.State)
		}
	}
	// Two lookups that disagree prove nothing either, whichever comes first.
	two := func(first, second string) Settlement {
		return Settle(SettleInput{Op: op, LastWrite: sent, Destination: d, Now: late, Results: []ProbeResult{
			{Kind: ProbeStatus, Ref: "ch-2", Candidates: []Candidate{{Ref: "ch-2", Status: first}}},
			{Kind: ProbeStatus, Ref: "ch-2", Candidates: []Candidate{{Ref: "ch-2", Status: second}}}}})
	}
	if a, b := two("active", "refunded"), two("refunded", "active"); a.State != "" || b.State != "" {
		t.Errorf("two disagreeing lookups settled the undo: %q / %q", a.State, b.State)
	}
}

// TestFinancialUndoNotResentWithoutReviewer: the undo of a financial,
// irreversible or regulated action (a refund) that the destination shows
// did not happen goes to a person, never back to retry_wait, where Limbo's
// undo worker would send it again on its own; inside the confirm window
// it is looked up again first, and its reason says a reviewer decides.
// (Found by a review: a refund's lost answer, the charge still shown
// active, sent the refund again with no one asked.)
func TestFinancialUndoNotResentWithoutReviewer(t *testing.T) {
	now := classifyNow
	d := Destination{SearchLag: time.Minute}
	sent := now.Add(-time.Millisecond)
	late := sent.Add(d.Window())
	for _, tt := range []struct {
		name  string
		flags []Flag
	}{
		{"financial", []Flag{FlagFinancial}},
		{"irreversible", []Flag{FlagIrreversible}},
		{"regulated", []Flag{FlagRegulated}},
	} {
		op := &Operation{ID: "op-r", Action: CompensationPrefix + "charge", Risk: RiskCompensableWrite, Flags: tt.flags, State: Ambiguous, AttemptCount: 1,
			MaxAttempts: 5, Deadline: now.Add(time.Hour), Payload: []byte(`{"compensates":"op-1","resource":"ch-2"}`)}
		run := func(at time.Time) Settlement {
			return Settle(SettleInput{Op: op, LastWrite: sent, Destination: d, Now: at,
				Results: []ProbeResult{{Kind: ProbeStatus, Ref: "ch-2", Candidates: []Candidate{{Ref: "ch-2", OperationID: "op-1", Status: "active"}}}}})
		}
		got := run(late)
		if got.State != NeedsReview || !strings.Contains(got.Reason, WhyUndoNeedsReviewer) {
			t.Errorf("%s undo shown active past the window: %q (%s), want needs_review", tt.name, got.State, got.Reason)
		}
		got = run(now)
		if got.State != "" || got.NextProbe.IsZero() || !strings.Contains(got.Reason, "a reviewer is asked") {
			t.Errorf("%s undo shown active inside the window: %q (%s), want probed again", tt.name, got.State, got.Reason)
		}
	}
}

// TestCheckUndoRef: where Limbo sends the undo itself, only a resource
// the operation is known to have is undone, and never "." or "..", which
// an integrator's evidence may name and which would address the undo
// URL's collection; where the integrator runs it, the ref passes.
func TestCheckUndoRef(t *testing.T) {
	op := &Operation{ID: "op-1", Resource: &ResourceRef{Ref: "fld-1"},
		Evidence: []Evidence{{Candidates: []Candidate{{Ref: "fld-2"}, {Ref: ".."}, {Ref: "."}}}},
		Jobs:     []Job{{Ref: "job-1", OutputRef: "file-1"}}}
	undo := Destination{Undo: &Undo{Method: "DELETE", URL: "http://127.0.0.1:9/resources/{{.Ref}}"}}
	for _, ref := range []string{"fld-1", "fld-2", "job-1", "file-1"} {
		if err := CheckUndoRef(op, undo, ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	for _, ref := range []string{"", ".", "..", "fld-9"} {
		if err := CheckUndoRef(op, undo, ref); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want refused", ref, err)
		}
		if err := CheckUndoRef(op, Destination{}, ref); err != nil {
			t.Errorf("%q where the integrator runs the undo: %v", ref, err)
		}
	}
}

// TestSettleUndoOfAJob: the undo of a job (a cancel) is looked up with the
// job probe and read as the job's status: canceled or failed, no effect
// of it remains — the cancel is done; succeeded, the job ran through and
// its effect stands: cancelling again would change nothing, so a person
// decides at once (no confirm window can show a finished job canceled
// late); queued or running, the cancel may be under way: probed again.
// Before, an undo was looked up as a resource only, and a destination
// whose only probe is the job probe could settle none.
func TestSettleUndoOfAJob(t *testing.T) {
	now := classifyNow
	parent := testOp(RiskCompensableWrite)
	parent.Jobs = []Job{{Ref: "job-7", Status: JobRunning}}
	parent.Evidence = []Evidence{{Source: SourceMetadataSearch, Authoritative: true, Candidates: []Candidate{{Ref: "job-8", Kind: "job"}, {Ref: "fld-2"}}}}
	for ref, want := range map[string]bool{"job-7": true, "job-8": true, "fld-2": false} {
		p, err := PlanCompensation(parent, ref, "cancel it", "dec-1", "rita", now)
		if err != nil {
			t.Fatal(err)
		}
		op := &Operation{ID: "op-u", Action: p.Registration.Action, Payload: p.Registration.Payload}
		if got := CompensationUndoesJob(op); got != want {
			t.Errorf("the undo of %s undoes a job: %v, want %v (payload %s)", ref, got, want, p.Registration.Payload)
		}
		if got, job := LookupRef(op); got != ref || job != want {
			t.Errorf("the undo of %s is looked up as %q (job %v), want %q (job %v)", ref, got, job, ref, want)
		}
	}
	op := &Operation{ID: "op-u", Action: CompensationPrefix + "convert", Risk: RiskCompensableWrite, State: Ambiguous, AttemptCount: 1,
		MaxAttempts: 5, Deadline: now.Add(time.Hour), Payload: []byte(`{"compensates":"op-1","kind":"job","resource":"job-7"}`)}
	d := Destination{SearchLag: time.Minute}
	for _, tt := range []struct {
		status string
		want   State
	}{
		{"canceled", Confirmed}, {"failed", Confirmed}, {"succeeded", NeedsReview}, {"running", ""}, {"queued", ""},
	} {
		got := Settle(SettleInput{Op: op, Destination: d, LastWrite: now.Add(-time.Millisecond), Now: now,
			Results: []ProbeResult{{Kind: ProbeStatus, Ref: "job-7", Candidates: []Candidate{{Ref: "job-7", Kind: "job", OperationID: "op-1", Status: tt.status}}}}})
		if got.State != tt.want || (tt.want == "" && got.NextProbe.IsZero()) {
			t.Errorf("job %s: %q (%s), want %q", tt.status, got.State, got.Reason, tt.want)
		}
		if tt.status == "succeeded" && got.Reason != fmt.Sprintf(WhyUndoJobRanThrough, "job-7") {
			t.Errorf("job succeeded: the reason %q does not say the job ran through", got.Reason)
		}
	}
}
