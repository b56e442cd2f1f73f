package review

import (
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
}
