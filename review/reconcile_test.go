package review

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// settleNow is the reconciliation tests' "now".
var settleNow = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// ambiguousOp is an operation left ambiguous by its first attempt.
func ambiguousOp(risk Risk, flags ...Flag) *Operation {
	return &Operation{
		ID: "op-9", Tenant: "acme", SourceRef: "contract-9", LogicalVersion: "v3",
		Action: "create_folder", Destination: "files", Risk: risk, Flags: flags, State: Ambiguous,
		Deadline: settleNow.Add(24 * time.Hour), MaxAttempts: 5, AttemptCount: 1,
		CreatedAt: settleNow.Add(-time.Hour),
	}
}

// Probe results used throughout; the candidates name op-9 (version v3)
// unless they say otherwise.
func searchFound(cs ...Candidate) ProbeResult {
	return ProbeResult{Kind: ProbeSearch, Candidates: cs, At: settleNow}
}

func statusFound(cs ...Candidate) ProbeResult {
	return ProbeResult{Kind: ProbeStatus, Candidates: cs, At: settleNow}
}

func probeFailed(kind ProbeKind, why string) ProbeResult {
	return ProbeResult{Kind: kind, Err: why, At: settleNow}
}

func ours(ref string) Candidate {
	return Candidate{Ref: ref, Kind: "folder", Version: "v3", OperationID: "op-9"}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	lag := 2 * time.Second
	withDeadline := func(op *Operation, d time.Time) *Operation { op.Deadline = d; return op }
	spent := func(op *Operation) *Operation { op.AttemptCount = op.MaxAttempts; return op }
	otherVersion := Candidate{Ref: "fld-2", Kind: "folder", Version: "v2", OperationID: "op-9"}
	foreign := Candidate{Ref: "fld-3", Kind: "folder", Version: "v3", OperationID: "op-someone-else"}
	unversioned := Candidate{Ref: "fld-4", OperationID: "op-9"}
	anonymous := Candidate{Ref: "fld-5", Kind: "folder", Version: "v3"}
	// The ledger knows a resource or a job of the operation; the status
	// lookup asks about it.
	withResource := func(op *Operation) *Operation { op.Resource = &ResourceRef{Ref: "fld-1"}; return op }
	withJob := func(op *Operation) *Operation { op.Jobs = []Job{{Ref: "job-1", Status: JobQueued}}; return op }
	lookup := func(ref string, cs ...Candidate) ProbeResult {
		return ProbeResult{Kind: ProbeStatus, Ref: ref, Candidates: cs, At: settleNow}
	}
	gone := func(ref string) ProbeResult {
		return ProbeResult{Kind: ProbeStatus, Ref: ref, NotFound: true, At: settleNow}
	}
	lookupFailed := func(ref, why string) ProbeResult { r := probeFailed(ProbeStatus, why); r.Ref = ref; return r }
	ourJob := Candidate{Ref: "job-1", Kind: "job", Version: "v3", OperationID: "op-9"}
	// The ledger knows job-1 of attempt 1 failed; attempt 2's outcome was
	// lost. A search listing job-1 shows nothing of attempt 2.
	withFailedJob := func(op *Operation) *Operation {
		op.AttemptCount, op.Jobs = 2, []Job{{Ref: "job-1", Status: JobFailed, Attempt: 1}}
		return op
	}
	liveJob := Candidate{Ref: "job-2", Kind: "job", Version: "v3", OperationID: "op-9"}

	tests := []struct {
		name    string
		op      *Operation
		lag     time.Duration
		sentAgo time.Duration // LastWrite = now - sentAgo (the attempt ended then)
		results []ProbeResult
		round   int

		want         State // "" stays ambiguous
		wantReasons  []Reason
		wantResource string
		wantVerdicts []Verdict
		// wantNextFrom: when it stays ambiguous, the next probe is not before this.
		wantNextFrom time.Time
	}{
		{name: "one matching candidate confirms", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-1"))},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms}},
		{name: "one matching candidate inside the lag still confirms", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Second,
			results: []ProbeResult{searchFound(ours("fld-1"))},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms}},
		{name: "an unversioned candidate naming the operation confirms", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(unversioned)},
			want:    Confirmed, wantResource: "fld-4", wantVerdicts: []Verdict{VerdictConfirms}},
		{name: "status lookup and search name the same resource", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{statusFound(ours("fld-1")), searchFound(ours("fld-1"))},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms, VerdictConfirms}},
		{name: "status lookup confirms while the search fails", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{statusFound(ours("fld-1")), probeFailed(ProbeSearch, "HTTP 503")},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms, VerdictInconclusive}},
		{name: "two matching candidates", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-1"), ours("fld-2"))},
			want:    NeedsReview, wantReasons: []Reason{ReasonMultipleCands}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "status and search find different matching resources", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{statusFound(ours("fld-1")), searchFound(ours("fld-2"))},
			want:    NeedsReview, wantReasons: []Reason{ReasonMultipleCands}, wantVerdicts: []Verdict{VerdictConfirms, VerdictConfirms}},
		{name: "candidate for another logical version", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(otherVersion)},
			want:    NeedsReview, wantReasons: []Reason{ReasonVersionMismatch}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "our version next to another version", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-1"), otherVersion)},
			want:    NeedsReview, wantReasons: []Reason{ReasonVersionMismatch}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "foreign candidate", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(foreign)},
			want:    NeedsReview, wantReasons: []Reason{ReasonNoDedupEvidence}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "status lookup finds it, fresh search finds nothing", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{statusFound(ours("fld-1")), searchFound()},
			want:    NeedsReview, wantReasons: []Reason{ReasonSourcesDisagree}, wantVerdicts: []Verdict{VerdictConfirms, VerdictRefutes}},
		{name: "authoritative absence after the lag", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: lag,
			results: []ProbeResult{searchFound()},
			want:    RetryWait, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "absence after the lag with the attempt budget spent", op: spent(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    Failed, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "absence after the deadline", op: withDeadline(ambiguousOp(RiskCompensableWrite), settleNow), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    Failed, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "absence on a destination without search lag", op: ambiguousOp(RiskCompensableWrite), lag: 0, sentAgo: time.Millisecond,
			results: []ProbeResult{searchFound()},
			want:    RetryWait, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "empty search inside the lag is not absence", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Second,
			results: []ProbeResult{searchFound()},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}, wantNextFrom: settleNow.Add(time.Second)},
		{name: "empty search one nanosecond before the lag ends", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: lag - time.Nanosecond,
			results: []ProbeResult{searchFound()},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}, wantNextFrom: settleNow.Add(time.Nanosecond)},
		{name: "empty search inside a lag longer than the first backoff", op: ambiguousOp(RiskCompensableWrite), lag: 30 * time.Second, sentAgo: time.Second,
			results: []ProbeResult{searchFound()},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}, wantNextFrom: settleNow.Add(29 * time.Second)},
		{name: "financial absence needs a reviewer", op: ambiguousOp(RiskCompensableWrite, FlagFinancial), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    NeedsReview, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "irreversible-flagged absence needs a reviewer", op: ambiguousOp(RiskCompensableWrite, FlagIrreversible), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    NeedsReview, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "irreversible risk absence needs a reviewer", op: ambiguousOp(RiskIrreversible), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    NeedsReview, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "regulated absence needs a reviewer", op: ambiguousOp(RiskCompensableWrite, FlagRegulated), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    NeedsReview, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "search timed out", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{probeFailed(ProbeSearch, "context deadline exceeded")},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "status 500 and search 503", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{probeFailed(ProbeStatus, "HTTP 500"), probeFailed(ProbeSearch, "HTTP 503")},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		{name: "garbage answer", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{probeFailed(ProbeSearch, "answer: not JSON: invalid character '<'")},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "failed financial probe is not absence either", op: ambiguousOp(RiskIrreversible, FlagFinancial), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{probeFailed(ProbeSearch, "connection refused")},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "status lookup says not found, search failed", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{{Kind: ProbeStatus, NotFound: true, At: settleNow}, probeFailed(ProbeSearch, "HTTP 502")},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		// Exactly one candidate (issue 12, hole 10).
		{name: "a match and a candidate naming no operation", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-1"), anonymous)},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "only a candidate naming no operation", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(anonymous)},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "the same match twice is one, confirmed by its evidence", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-1"), ours("fld-1"))},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms}},
		{name: "one ref listed for two versions", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-2"), otherVersion)},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "a match beside another operation's resource", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ours("fld-1"), foreign)},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms}},
		// A ref the ledger knows (hole 15).
		{name: "the known resource is gone", op: withResource(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{gone("fld-1"), searchFound()},
			want:    NeedsReview, wantReasons: []Reason{ReasonStateConflict}, wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		{name: "the known job is gone", op: withJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{gone("job-1"), searchFound()},
			want:    NeedsReview, wantReasons: []Reason{ReasonStateConflict}, wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		{name: "the known job's lookup answers another ref", op: withJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{lookup("job-1", Candidate{Ref: "job-2", Kind: "job", OperationID: "op-9"}), searchFound()},
			want:    NeedsReview, wantReasons: []Reason{ReasonStateConflict}, wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		{name: "the known job's lookup fails: the empty search is no absence", op: withJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{lookupFailed("job-1", "HTTP 500"), searchFound()},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		{name: "no lookup of the known job: the empty search is no absence", op: withJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound()},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "the known resource found naming no operation: the empty search is no absence", op: withResource(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{lookup("fld-1", Candidate{Ref: "fld-1", Kind: "folder"}), searchFound()},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive, VerdictInconclusive}},
		{name: "the known job found: accepted", op: withJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{lookup("job-1", ourJob), searchFound(ourJob)},
			want:    Accepted, wantVerdicts: []Verdict{VerdictConfirms, VerdictConfirms}},
		{name: "a search listing only a job that failed is absence", op: withFailedJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ourJob)},
			want:    RetryWait, wantVerdicts: []Verdict{VerdictRefutes}},
		{name: "a search listing only a job that failed, inside the lag, is no absence", op: withFailedJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Second,
			results: []ProbeResult{searchFound(ourJob)},
			want:    "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "a job that failed beside a live one: the live one is followed", op: withFailedJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ourJob, liveJob)},
			want:    Accepted, wantVerdicts: []Verdict{VerdictConfirms}},
		{name: "a job that failed beside a foreign resource", op: withFailedJob(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{searchFound(ourJob, foreign)},
			want:    NeedsReview, wantReasons: []Reason{ReasonNoDedupEvidence}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "the known resource found, named by the search too", op: withResource(ambiguousOp(RiskCompensableWrite)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{lookup("fld-1", ours("fld-1")), searchFound(ours("fld-1"))},
			want:    Confirmed, wantResource: "fld-1", wantVerdicts: []Verdict{VerdictConfirms, VerdictConfirms}},
		{name: "one round before the limit probes again", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Hour,
			results: []ProbeResult{probeFailed(ProbeSearch, "HTTP 500")}, round: MaxProbeRounds - 2,
			want: "", wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "rounds spent", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Hour,
			results: []ProbeResult{probeFailed(ProbeSearch, "HTTP 500")}, round: MaxProbeRounds - 1,
			want: NeedsReview, wantReasons: []Reason{ReasonNoDedupEvidence}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "rounds long past the limit", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: time.Hour,
			results: []ProbeResult{probeFailed(ProbeSearch, "HTTP 500")}, round: 3 * MaxProbeRounds,
			want: NeedsReview, wantReasons: []Reason{ReasonNoDedupEvidence}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "deadline before the next probe", op: withDeadline(ambiguousOp(RiskCompensableWrite), settleNow.Add(time.Second)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{probeFailed(ProbeSearch, "HTTP 500")},
			want:    NeedsReview, wantReasons: []Reason{ReasonDeadlineExpired}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "deadline already passed", op: withDeadline(ambiguousOp(RiskCompensableWrite), settleNow.Add(-time.Second)), lag: lag, sentAgo: time.Minute,
			results: []ProbeResult{probeFailed(ProbeSearch, "HTTP 500")},
			want:    NeedsReview, wantReasons: []Reason{ReasonDeadlineExpired}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "deadline before next probe while inside the lag", op: withDeadline(ambiguousOp(RiskCompensableWrite), settleNow.Add(500*time.Millisecond)), lag: lag, sentAgo: time.Second,
			results: []ProbeResult{searchFound()},
			want:    NeedsReview, wantReasons: []Reason{ReasonDeadlineExpired}, wantVerdicts: []Verdict{VerdictInconclusive}},
		{name: "no probes: waits for evidence", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: EvidenceWait - time.Second,
			results: nil,
			want:    ""},
		{name: "no probes: escalates after the evidence wait", op: ambiguousOp(RiskCompensableWrite), lag: lag, sentAgo: EvidenceWait,
			results: nil,
			want:    NeedsReview, wantReasons: []Reason{ReasonNoDedupEvidence}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := SettleInput{Op: tt.op, Destination: Destination{SearchLag: tt.lag}, LastWrite: settleNow.Add(-tt.sentAgo),
				Results: tt.results, Round: tt.round, Now: settleNow}
			got := Settle(in)
			checkSettlement(t, in, got)
			if got.State != tt.want {
				t.Fatalf("state = %q (%s), want %q", got.State, got.Reason, tt.want)
			}
			if !slices.Equal(got.Reasons, tt.wantReasons) {
				t.Errorf("reasons = %v, want %v", got.Reasons, tt.wantReasons)
			}
			switch {
			case tt.wantResource == "" && got.Resource != nil:
				t.Errorf("resource = %+v, want none", got.Resource)
			case tt.wantResource != "" && (got.Resource == nil || got.Resource.Ref != tt.wantResource):
				t.Errorf("resource = %+v, want %s", got.Resource, tt.wantResource)
			}
			var verdicts []Verdict
			for _, e := range got.Evidence {
				verdicts = append(verdicts, e.Verdict)
			}
			if !slices.Equal(verdicts, tt.wantVerdicts) {
				t.Errorf("verdicts = %v, want %v", verdicts, tt.wantVerdicts)
			}
			if got.State == "" && !tt.wantNextFrom.IsZero() && got.NextProbe.Before(tt.wantNextFrom) {
				t.Errorf("next probe at now+%s, want not before now+%s (the end of the search lag): a probe before then cannot prove absence",
					got.NextProbe.Sub(settleNow), tt.wantNextFrom.Sub(settleNow))
			}
		})
	}
}

// checkSettlement asserts what every settlement keeps: one evidence row per
// probe; a failed probe is never authoritative; a confirmation rests on
// confirming evidence and names the resource; a move on absence rests on an
// authoritative refutation; an operation left ambiguous is probed again
// later; a settled one is not scheduled.
func checkSettlement(t *testing.T, in SettleInput, got Settlement) {
	t.Helper()
	if len(got.Evidence) != len(in.Results) {
		t.Fatalf("%d evidence rows for %d probes", len(got.Evidence), len(in.Results))
	}
	if got.Reason == "" {
		t.Error("settlement has no reason")
	}
	if got.State != "" {
		if err := CheckTransition(Ambiguous, got.State); err != nil {
			t.Errorf("settlement: %v", err)
		}
	}
	refuted, confirmed := false, false
	for i, e := range got.Evidence {
		r := in.Results[i]
		wantSrc := SourceMetadataSearch
		if r.Kind == ProbeStatus {
			wantSrc = SourceStatusLookup
		}
		if e.Source != wantSrc || e.Note == "" || e.Candidates == nil {
			t.Errorf("evidence %d = %+v, want source %s, a note and a (possibly empty) candidate list", i, e, wantSrc)
		}
		if r.Err != "" && (e.Authoritative || e.Verdict != VerdictInconclusive) {
			t.Errorf("failed probe %q recorded as %+v; a failed probe proves nothing", r.Err, e)
		}
		if r.Err != "" && !strings.Contains(e.Note, r.Err) {
			t.Errorf("evidence note %q does not say why the probe failed (%s)", e.Note, r.Err)
		}
		refuted = refuted || (e.Verdict == VerdictRefutes && e.Authoritative)
		confirmed = confirmed || (e.Verdict == VerdictConfirms && e.Authoritative)
	}
	switch got.State {
	case "":
		if !got.NextProbe.After(in.Now) {
			t.Errorf("stays ambiguous with next probe %v, want after now %v", got.NextProbe, in.Now)
		}
		if got.Resource != nil {
			t.Errorf("stays ambiguous with a resource %+v", got.Resource)
		}
	case Confirmed:
		if !confirmed || got.Resource == nil {
			t.Errorf("confirmed without confirming evidence or a resource: %+v", got)
		}
	case RetryWait, Failed:
		if !refuted {
			t.Errorf("moved to %s without authoritative proof of absence: %+v", got.State, got.Evidence)
		}
	}
	if got.State != "" && !got.NextProbe.IsZero() {
		t.Errorf("settled to %s but scheduled another probe at %v", got.State, got.NextProbe)
	}
}

// TestSettleSearchDuringLagNeverCountsAsAbsence sweeps search lags, send
// ages, rounds and risks: an empty search younger than the lag never moves
// the operation towards a retry or a failure, and is never recorded as a
// refutation.
func TestSettleSearchDuringLagNeverCountsAsAbsence(t *testing.T) {
	t.Parallel()
	lags := []time.Duration{time.Millisecond, time.Second, 2 * time.Second, 30 * time.Second, 5 * time.Minute, time.Hour}
	for _, lag := range lags {
		for _, frac := range []float64{0, 0.01, 0.5, 0.99} {
			for _, round := range []int{0, 1, MaxProbeRounds / 2} {
				for _, op := range []*Operation{ambiguousOp(RiskCompensableWrite), ambiguousOp(RiskIdempotentWrite), ambiguousOp(RiskIrreversible, FlagFinancial)} {
					age := time.Duration(float64(lag) * frac)
					in := SettleInput{Op: op, Destination: Destination{SearchLag: lag}, LastWrite: settleNow.Add(-age),
						Results: []ProbeResult{searchFound()}, Round: round, Now: settleNow}
					got := Settle(in)
					what := fmt.Sprintf("lag %s, sent %s ago, round %d, %s %v", lag, age, round, op.Risk, op.Flags)
					if got.State == RetryWait || got.State == Failed || got.State == Confirmed {
						t.Errorf("%s: settled to %s (%s); a search inside the lag proves nothing", what, got.State, got.Reason)
					}
					for _, e := range got.Evidence {
						if e.Verdict != VerdictInconclusive || e.Authoritative {
							t.Errorf("%s: evidence %+v, want inconclusive and not authoritative", what, e)
						}
					}
					if got.State == "" && !got.Uncounted {
						t.Errorf("%s: the round counts toward the limit and the backoff", what)
					}
				}
			}
		}
	}
}

// TestSettleLongLagDoesNotEscalate follows an operation whose create never
// happened on a destination with a search lag longer than the first probe
// rounds add up to: probed whenever NextProbe says, it must reach the end
// of the lag and settle on proven absence — not be handed to a person
// because rounds spent inside the lag (which can prove nothing) ran out.
func TestSettleLongLagDoesNotEscalate(t *testing.T) {
	t.Parallel()
	for _, lag := range []time.Duration{2 * time.Second, 30 * time.Second, 5 * time.Minute, 10 * time.Minute} {
		t.Run(lag.String(), func(t *testing.T) {
			op := ambiguousOp(RiskCompensableWrite)
			sent := settleNow
			now := sent.Add(100 * time.Millisecond)
			for round := 0; ; round++ {
				got := Settle(SettleInput{Op: op, Destination: Destination{SearchLag: lag}, LastWrite: sent,
					Results: []ProbeResult{searchFound()}, Round: round, Now: now})
				if got.State == "" {
					if round > 50 {
						t.Fatalf("still ambiguous after %d rounds", round)
					}
					now = got.NextProbe
					continue
				}
				if got.State != RetryWait {
					t.Fatalf("round %d at send+%s (lag %s): settled to %s (%s %v), want retry_wait once the lag has passed",
						round, now.Sub(sent), lag, got.State, got.Reason, got.Reasons)
				}
				if now.Sub(sent) < lag {
					t.Fatalf("settled to retry_wait at send+%s, inside the %s lag", now.Sub(sent), lag)
				}
				return
			}
		})
	}
}

// TestSettleBackoff: rounds that settle nothing are spaced further and
// further apart, up to the cap.
func TestSettleBackoff(t *testing.T) {
	t.Parallel()
	prev := time.Duration(0)
	for round := 0; round < MaxProbeRounds-1; round++ {
		got := Settle(SettleInput{Op: ambiguousOp(RiskCompensableWrite), Destination: Destination{}, LastWrite: settleNow.Add(-time.Hour),
			Results: []ProbeResult{probeFailed(ProbeSearch, "HTTP 500")}, Round: round, Now: settleNow})
		if got.State != "" || got.Uncounted {
			t.Fatalf("round %d: %s (%s), uncounted %v; want another round, counted", round, got.State, got.Reason, got.Uncounted)
		}
		wait := got.NextProbe.Sub(settleNow)
		if wait < prev || wait > ProbeBackoffCap || wait < ProbeBackoffBase {
			t.Errorf("round %d waits %s (previous %s), want growing within [%s, %s]", round, wait, prev, ProbeBackoffBase, ProbeBackoffCap)
		}
		prev = wait
	}
}

// TestSettleWeighsEarlierEvidence: a round's empty search does not
// outweigh an effect the ledger already holds, and a round's one resource
// is not the only one when earlier evidence named another (issue 12,
// hole 9: a response or a webhook naming R1, then an empty search, sent
// the operation to retry_wait).
func TestSettleWeighsEarlierEvidence(t *testing.T) {
	t.Parallel()
	r1 := Candidate{Ref: "fld-1", Kind: "folder", Version: "v3", OperationID: "op-9"}
	r2 := Candidate{Ref: "fld-2", Kind: "folder", Version: "v3", OperationID: "op-9"}
	earlier := func(src EvidenceSource, auth bool, cs ...Candidate) Evidence {
		return Evidence{Source: src, Authoritative: auth, Candidates: cs, Verdict: VerdictConfirms, ObservedAt: settleNow.Add(-time.Minute)}
	}
	for _, tt := range []struct {
		name    string
		prior   []Evidence
		results []ProbeResult
		want    State
		reason  Reason
	}{
		{"a response named R1, the search is empty", []Evidence{earlier(SourceResponse, true, r1)}, []ProbeResult{searchFound()}, NeedsReview, ReasonSourcesDisagree},
		{"a webhook named R1, the search is empty", []Evidence{earlier(SourceWebhook, false, r1)}, []ProbeResult{searchFound()}, NeedsReview, ReasonSourcesDisagree},
		{"a response named R1, the search finds R2", []Evidence{earlier(SourceResponse, true, r1)}, []ProbeResult{searchFound(r2)}, NeedsReview, ReasonMultipleCands},
		{"a response named R1, the search finds R1", []Evidence{earlier(SourceResponse, true, r1)}, []ProbeResult{searchFound(r1)}, Confirmed, ""},
		{"nothing earlier, the search is empty", nil, []ProbeResult{searchFound()}, RetryWait, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			op := ambiguousOp(RiskCompensableWrite)
			op.Attempts = []Attempt{{N: 1, StartedAt: settleNow.Add(-2 * time.Minute)}}
			op.Evidence = tt.prior
			got := Settle(SettleInput{Op: op, LastWrite: settleNow.Add(-2 * time.Minute), Results: tt.results, Now: settleNow})
			if got.State != tt.want || (tt.reason != "" && !slices.Contains(got.Reasons, tt.reason)) {
				t.Fatalf("Settle = %s %v (%s), want %s %s", got.State, got.Reasons, got.Reason, tt.want, tt.reason)
			}
			if got.State == NeedsReview && (got.Resource != nil || got.Job != nil) {
				t.Errorf("an escalation carries a resource or job: %+v %+v", got.Resource, got.Job)
			}
		})
	}
}
