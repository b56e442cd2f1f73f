package review

import (
	"slices"
	"testing"
	"time"
)

// TestJobEndSettles: a job's end settles the operation following it only
// when no attempt was sent after the one the job belongs to.
func TestJobEndSettles(t *testing.T) {
	for _, tt := range []struct {
		job, attempts int
		want          bool
	}{
		{1, 1, true},  // the latest attempt's job
		{2, 2, true},  // a retry's own job
		{1, 2, false}, // attempt 2, sent after job 1's, may have an effect of its own
		{0, 3, true},  // recorded before jobs kept their attempt: as before
	} {
		if got := JobEndSettles(Job{Ref: "job-1", Status: JobFailed, Attempt: tt.job}, tt.attempts); got != tt.want {
			t.Errorf("a job of attempt %d, %d attempts: %v, want %v", tt.job, tt.attempts, got, tt.want)
		}
	}
}

// TestJobFailureSettles: a job's failure fails the operation by its word
// alone unless a look found the job after an attempt that may have had an
// effect of its own before the latest: the job may be that one's, and the
// latest's still unseen. A job an answer named, or found when every
// earlier attempt was refused before it did anything, settles as before.
func TestJobFailureSettles(t *testing.T) {
	lost := Attempt{N: 1, Result: ResultTimeout, Phase: PhaseAfterSend}
	refused := Attempt{N: 1, Result: ResultConnectionError, Phase: PhaseBeforeSend}
	for _, a := range []*Attempt{&lost, &refused} {
		at := classifyNow.Add(-time.Minute)
		a.FinishedAt = &at
	}
	latest := Attempt{N: 2, Result: ResultTimeout, Phase: PhaseAfterSend}
	for _, tt := range []struct {
		name     string
		attempts []Attempt
		found    bool
		want     bool
	}{
		{"named by the latest answer, an earlier attempt lost", []Attempt{lost, latest}, false, true},
		{"found, an earlier attempt lost", []Attempt{lost, latest}, true, false},
		{"found, the earlier attempt refused before it did anything", []Attempt{refused, latest}, true, true},
		{"found after the only attempt", []Attempt{{N: 1, Result: ResultTimeout, Phase: PhaseAfterSend}}, true, true},
	} {
		op := &Operation{ID: "op-1", Action: "transform", Risk: RiskCompensableWrite, Attempts: tt.attempts, AttemptCount: len(tt.attempts)}
		j := Job{Ref: "job-1", Status: JobFailed, Attempt: len(tt.attempts), Found: tt.found}
		if got := JobFailureSettles(op, j, Destination{}, classifyNow); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestWeighLeavesEndedJobs: evidence naming a job the ledger knows ended
// without an effect neither confirms the operation nor has it follow the
// job (accepted) again. The property test found an ambiguous operation
// following its first attempt's job, already failed at the destination,
// after a retry: the job's failure then failed it, though the retry's job
// was live. A job still running is followed, as before.
func TestWeighLeavesEndedJobs(t *testing.T) {
	sent := classifyNow.Add(-time.Minute)
	job := Candidate{Ref: "job-2", Kind: "job", Version: "v7", OperationID: "op-1"}
	for _, tt := range []struct {
		status JobStatus
		want   State
	}{
		{JobFailed, ""},
		{JobCanceled, ""},
		{JobQueued, Accepted},
		{JobRunning, Accepted},
	} {
		op := weighOp(Ambiguous)
		op.Jobs = []Job{{Ref: "job-2", Status: tt.status, Attempt: 1}}
		ev := Evidence{Source: SourceResponse, Authoritative: true, Candidates: []Candidate{job}, ObservedAt: sent.Add(-time.Hour)}
		ev.Verdict = EvidenceVerdict(op, ev)
		op.Evidence = append(op.Evidence, ev)
		if w := Weigh(op, Destination{}, classifyNow); w.State != tt.want {
			t.Errorf("a job %s: Weigh = %q (%s), want %q", tt.status, w.State, w.Reason, tt.want)
		}
	}
	// A sure absence from a search beside a live job: what a search shows
	// is the job's output, not there before the job ends; the job is
	// followed, not a disagreement.
	op := weighOp(Ambiguous)
	op.Jobs = []Job{{Ref: "job-2", Status: JobQueued, Attempt: 1}}
	op.Evidence = append(op.Evidence,
		Evidence{Source: SourceResponse, Authoritative: true, Verdict: VerdictInconclusive, Candidates: []Candidate{job}, ObservedAt: classifyNow},
		Evidence{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes, Candidates: []Candidate{}, ObservedAt: classifyNow})
	if w := Weigh(op, Destination{}, classifyNow); w.State != Accepted {
		t.Errorf("a job beside an empty search: Weigh = %q (%s), want accepted", w.State, w.Reason)
	}
}

// TestJobsBesideARetry: a retry let go while the first attempt's job was
// still queued leaves two jobs. In review the poll asks about the one the
// case waits on, not the newest; the live one beside the followed job is
// found; no job is left only once both ended without output and the
// newest is the last attempt's.
func TestJobsBesideARetry(t *testing.T) {
	j1 := Job{Ref: "J1", Status: JobQueued, Attempt: 1}
	j2 := Job{Ref: "J2", Status: JobFailed, Attempt: 2}
	op := &Operation{State: NeedsReview, AttemptCount: 2, Jobs: []Job{j1, j2}}
	if got, ok := JobToPoll(op); !ok || got.Ref != "J1" {
		t.Errorf("in review: polls %+v, want J1 (the case waits on it)", got)
	}
	if got, ok := LiveJobBeside(op, "J2"); !ok || got.Ref != "J1" {
		t.Errorf("beside J2: %+v %v, want J1", got, ok)
	}
	if NoJobLeft(op) {
		t.Error("no job left while J1 is queued")
	}
	op.State = Accepted
	op.Jobs[1].Status = JobQueued
	if got, _ := JobToPoll(op); got.Ref != "J2" {
		t.Errorf("accepted: polls %s, want J2, the job it follows", got.Ref)
	}
	op.State, op.Jobs[0].Status, op.Jobs[1].Status = NeedsReview, JobFailed, JobCanceled
	if _, ok := LiveJobBeside(op, "J2"); ok || !NoJobLeft(op) {
		t.Errorf("both ended: live %v, no job left %v; want none live, none left", ok, NoJobLeft(op))
	}
	op.Jobs[0].Status = JobSucceeded
	if NoJobLeft(op) {
		t.Error("no job left though J1 made an output")
	}
	op.Jobs[0].Status, op.AttemptCount = JobFailed, 3
	if NoJobLeft(op) {
		t.Error("no job left though attempt 3 was sent after J2's")
	}
}

// TestAJobThatFailedShowsNoEffect: a job the ledger knows failed is no
// effect to look for or to weigh. The status lookup asks about the newest
// job still live, or about none; a look listing only failed jobs refutes
// as an empty one does; and a response that named the job while it was
// queued no longer says an effect is there, so an empty search beside it
// is no disagreement. Before, a search listing an earlier attempt's
// failed job left every reconciliation round inconclusive until the
// rounds ran out, and the case read "Sources disagree".
func TestAJobThatFailedShowsNoEffect(t *testing.T) {
	j1 := Candidate{Ref: "J1", Kind: "job", Version: "v7", OperationID: "op-1"}
	op := weighOp(Ambiguous)
	op.Jobs = []Job{{Ref: "J1", Status: JobQueued, Attempt: 1}, {Ref: "J2", Status: JobFailed, Attempt: 2}}
	if ref, job := LookupRef(op); ref != "J1" || !job {
		t.Errorf("LookupRef = %q %v, want J1, the newest job still live", ref, job)
	}
	op.Jobs[0].Status = JobCanceled
	if ref, _ := LookupRef(op); ref != "" {
		t.Errorf("LookupRef = %q with every job ended, want none", ref)
	}

	op = weighOp(NeedsReview)
	op.Jobs = []Job{{Ref: "J1", Status: JobFailed, Attempt: 1}}
	search := Evidence{Source: SourceMetadataSearch, Authoritative: true, Candidates: []Candidate{j1}, ObservedAt: classifyNow}
	if v := EvidenceVerdict(op, search); v != VerdictRefutes {
		t.Errorf("a search listing only J1, failed: %s, want refutes", v)
	}
	search.Verdict = VerdictRefutes
	named := Evidence{Source: SourceResponse, Authoritative: true, Verdict: VerdictConfirms, Candidates: []Candidate{j1},
		ObservedAt: classifyNow.Add(-2 * time.Minute)}
	// A look an integrator submitted, which named J1 beside another
	// operation's resource, confirmed only J1.
	submitted := Evidence{Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictConfirms,
		Candidates: []Candidate{j1, {Ref: "J9", Kind: "job", Version: "v7", OperationID: "op-9"}}, ObservedAt: classifyNow.Add(-time.Minute)}
	for _, look := range []Evidence{search, {Source: SourceMetadataSearch, Authoritative: true, Verdict: VerdictRefutes,
		Candidates: []Candidate{}, ObservedAt: classifyNow}} {
		op.Evidence = []Evidence{named, submitted, look}
		a := Assess(op, nil, classifyNow)
		if slices.Contains(a.Reasons, ReasonSourcesDisagree) || a.Recommendation.Action != RecommendApproveRetry {
			t.Errorf("J1 named, then failed, then a look with %d candidates: %v, %s; want no disagreement, approve a retry",
				len(look.Candidates), a.Reasons, a.Recommendation)
		}
	}
	// A job still queued, named by the response, and an empty search
	// after the lag do disagree, as before.
	op.Jobs[0].Status = JobQueued
	if a := Assess(op, nil, classifyNow); !slices.Contains(a.Reasons, ReasonSourcesDisagree) {
		t.Errorf("J1 queued, named, and an empty search: %v, want sources_disagree", a.Reasons)
	}
}
