package reconcile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// Probe faults (issue 13): the destination's answer to a probe is a 5xx, a
// hang past the probe's timeout, or garbage with 200. None of them is
// evidence: no operation is confirmed, retried, failed or sent to a person
// on one, and once the faults end every operation settles as the truth
// says.

// faultedProbeTimeout is the probes' timeout here: short, so that the
// sandbox's hangs (longer) cost little.
const faultedProbeTimeout = 300 * time.Millisecond

// chaosDestination probes the sandbox at base the way `limbo chaos` does:
// the status lookup asks for the resource or else the job, the search is
// paged, and the job probe polls accepted operations.
func chaosDestination(base string) review.Destination {
	probe := func(path, candidates string) *review.Probe {
		return &review.Probe{Method: "GET", URL: base + path, Candidates: candidates, Timeout: faultedProbeTimeout}
	}
	search := probe("/search?operation_id={{.ID}}&limit=2", "items")
	search.Next, search.CursorParam = "$.next", "cursor"
	return review.Destination{
		Lease: time.Minute, SearchLag: searchLag, ProbeConcurrency: 8, AllowInternal: loopbackV4,
		Probes: review.Probes{
			Status: probe("/resources/{{if .ResourceRef}}{{.ResourceRef}}{{else}}{{.JobRef}}{{end}}", ""),
			Search: search,
			Job:    probe("/jobs/{{.JobRef}}", ""),
		},
	}
}

// createJob starts a transformation job at the sandbox for op and returns its ref.
func (b *testBundle) createJob(t *testing.T, op *review.Operation) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input_ref": "file-" + op.SourceRef, "format": "pdf",
		"metadata": map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}})
	req, _ := http.NewRequest(http.MethodPost, b.url+"/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", op.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /jobs: %v", err)
	}
	defer resp.Body.Close()
	var v struct {
		Ref string `json:"ref"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusAccepted || v.Ref == "" {
		t.Fatalf("POST /jobs: %d, %+v, %v", resp.StatusCode, v, err)
	}
	return v.Ref
}

// acceptedJob registers a job-producing operation whose first attempt
// really started a job at the sandbox, answered 202: the operation is
// accepted, and its job finishes on its own.
func (b *testBundle) acceptedJob(t *testing.T, ref string) (*review.Operation, string) {
	t.Helper()
	payload, err := review.Canonicalize([]byte(`{"input":"` + ref + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := b.st.Register(b.ctx, review.Registration{Tenant: tenant, SourceRef: ref, LogicalVersion: "v1",
		Action: "convert_pdf", Destination: "sandbox", Risk: review.RiskCompensableWrite, Payload: payload, Actor: "test"})
	if err != nil {
		t.Fatalf("Register(%s): %v", ref, err)
	}
	g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatalf("StartAttempt(%s): %v", ref, err)
	}
	jobRef := b.createJob(t, op)
	res, err := b.st.RecordOutcome(b.ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
		HTTPStatus: http.StatusAccepted, Job: &review.JobRef{Ref: jobRef, Status: string(review.JobQueued)}}, "test")
	if err != nil {
		t.Fatalf("RecordOutcome(%s): %v", ref, err)
	}
	if res.Operation.State != review.Accepted {
		t.Fatalf("%s is %s after a queued job, want accepted", ref, res.Operation.State)
	}
	return res.Operation, jobRef
}

// probeEvidence is the operation's evidence from probes (not, say, the
// response that accepted a job).
func probeEvidence(op *review.Operation) []review.Evidence {
	var out []review.Evidence
	for _, ev := range op.Evidence {
		if ev.Source == review.SourceStatusLookup || ev.Source == review.SourceMetadataSearch {
			out = append(out, ev)
		}
	}
	return out
}

// TestSandboxProbeFaultsAreNoEvidence: against the sandbox with every
// probe answer faulted (--probe-errors 1), rounds of reconciliation settle
// nothing — no confirmation, no retry on absence, no case — and record only
// inconclusive evidence; once the faults end, every operation settles as
// the sandbox's truth says.
func TestSandboxProbeFaultsAreNoEvidence(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag, ProbeErrors: 1, ProbeHang: 2 * time.Second,
			JobDuration: 10 * time.Millisecond, Seed: 1313}, nil)
		b.cfg.Destinations["sandbox"] = chaosDestination(b.url)

		type flavour struct {
			op *review.Operation
			// was is the state faulted rounds leave it in; want, the state
			// once the faults end, and ref the effect it is confirmed with.
			was, want review.State
			ref       string
		}
		var ops []*flavour
		const each = 6
		for i := range each {
			// Created, the answer lost: the search finds it.
			var ref string
			op := b.ambiguous(t, fmt.Sprintf("created-%d", i), "sandbox", func(op *review.Operation) { ref = b.createFolder(t, op) })
			ops = append(ops, &flavour{op: op, was: review.Ambiguous, want: review.Confirmed, ref: ref})
			// Never created: absence, after the lag, allows a retry.
			ops = append(ops, &flavour{op: b.ambiguous(t, fmt.Sprintf("absent-%d", i), "sandbox", nil),
				was: review.Ambiguous, want: review.RetryWait})
			// A job started, and the answer naming it lost after it said
			// so: the status lookup asks for the job.
			timeout := &review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}
			var jobRef string
			op = b.ambiguousWith(t, fmt.Sprintf("job-lost-%d", i), "sandbox", func(op *review.Operation) {
				jobRef = b.createJob(t, op)
				timeout.Job = &review.JobRef{Ref: jobRef, Status: string(review.JobQueued)}
			}, timeout, nil)
			ops = append(ops, &flavour{op: op, was: review.Ambiguous, want: review.Confirmed})
			// Accepted: the job is polled.
			op, _ = b.acceptedJob(t, fmt.Sprintf("job-%d", i))
			ops = append(ops, &flavour{op: op, was: review.Accepted, want: review.Confirmed})
		}
		truth := b.sb.Truth()

		const faultedRounds = 4
		for round := 1; round <= faultedRounds; round++ {
			b.clk.Advance(review.ProbeBackoffCap + time.Second)
			b.runOnce(t, len(ops))
			for _, f := range ops {
				got := b.get(t, f.op)
				if got.State != f.was {
					cs, _ := b.st.CasesForOperation(b.ctx, got.ID)
					t.Errorf("%s, faulted round %d: %s (%s), cases %+v; want %s: a faulted probe answer is no evidence",
						got.SourceRef, round, got.State, got.StateReason, cs, f.was)
					continue
				}
				for _, ev := range probeEvidence(got) {
					if ev.Verdict != review.VerdictInconclusive {
						t.Errorf("%s, faulted round %d: evidence %+v from a faulted answer", got.SourceRef, round, ev)
					}
				}
			}
			if t.Failed() {
				t.FailNow()
			}
		}
		st := b.sb.ProbeStats()
		t.Logf("faulted rounds: %+v", st)
		if st.Errors == 0 || st.Hangs == 0 || st.Garbage == 0 || st.Faulted() != st.Probes {
			t.Errorf("probe stats %+v: want every answer faulted, of every kind", st)
		}

		// The faults end: everything settles as the truth says.
		if err := b.sb.SetProbeErrors(0); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			b.clk.Advance(review.ProbeBackoffCap + time.Second)
			if _, err := b.rec.RunOnce(b.ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range ops {
			got := b.get(t, f.op)
			if got.State != f.want {
				t.Errorf("%s, faults ended: %s (%s), want %s", got.SourceRef, got.State, got.StateReason, f.want)
				continue
			}
			if f.ref != "" && (got.Resource == nil || got.Resource.Ref != f.ref) {
				t.Errorf("%s: confirmed as %+v, want %s", got.SourceRef, got.Resource, f.ref)
			}
		}
		if after := b.sb.Truth(); len(after) != len(truth) {
			t.Errorf("the truth went from %d to %d effects: probes changed it", len(truth), len(after))
		}
		sealed(t, b.st)
	})
}

// faultedAnswer is one way the sandbox faults a probe's answer, given
// the true answer's body (sandbox/probefaults.go).
type faultedAnswer struct {
	name string
	// hang holds the answer until the prober gives up.
	hang   bool
	status int
	body   func(truth string) string
}

var faultedAnswers = []faultedAnswer{
	{name: "500", status: 500, body: func(string) string { return `{"error":"unavailable","detail":"probe fault"}` }},
	{name: "502", status: 502, body: func(string) string { return `{"error":"unavailable","detail":"probe fault"}` }},
	{name: "503", status: 503, body: func(string) string { return `{"error":"unavailable","detail":"probe fault"}` }},
	{name: "hang", hang: true},
	{name: "truncated", status: 200, body: func(truth string) string { return truth[:len(truth)/2] }},
	{name: "html", status: 200, body: func(string) string { return "<html><body><h1>502 Bad Gateway</h1></body></html>" }},
	{name: "empty", status: 200, body: func(string) string { return "" }},
	{name: "trailing", status: 200, body: func(truth string) string { return truth + "<!-- cache -->" }},
	{name: "{}", status: 200, body: func(string) string { return `{}` }},
	{name: "null", status: 200, body: func(string) string { return `null` }},
	{name: "string", status: 200, body: func(string) string { return `"ok"` }},
	{name: "envelope", status: 200, body: func(truth string) string { return `{"data":` + truth + `}` }},
	{name: "[]", status: 200, body: func(string) string { return `[]` }},
}

// answerFaulted writes a's answer.
func answerFaulted(a faultedAnswer, r *http.Request, truth string) (int, string) {
	if a.hang {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return http.StatusGatewayTimeout, `{"error":"timeout"}`
	}
	return a.status, a.body(truth)
}

// TestFaultedAnswersAreNoEvidence: each way the sandbox faults a probe, on
// each probe — the status lookup of the job the ledger holds, the search,
// the poll of an accepted operation's job — leaves the operation where it
// was: no confirmation on a garbled "found", no absence on a garbled
// "nothing", no contradiction of the ledger.
func TestFaultedAnswersAreNoEvidence(t *testing.T) {
	t.Parallel()
	withJob := &review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend,
		Job: &review.JobRef{Ref: "J1", Status: string(review.JobQueued)}}
	job := func(opID string) string {
		return `{"ref":"J1","kind":"job","status":"queued","operation_id":"` + opID + `","logical_version":"v1"}`
	}
	unmoved := func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		t.Helper()
		if got.State != review.Ambiguous {
			cs, _ := b.st.CasesForOperation(b.ctx, got.ID)
			t.Fatalf("%s (%s), cases %+v; want ambiguous: a faulted answer is no evidence", got.State, got.StateReason, cs)
		}
		for _, ev := range probeEvidence(got) {
			if ev.Verdict != review.VerdictInconclusive {
				t.Errorf("evidence %+v from a faulted answer", ev)
			}
		}
	}
	var cases []scriptCase
	for _, a := range faultedAnswers {
		// The status lookup of J1 is faulted; the search (which, lagging,
		// does not show the job yet) finds nothing.
		cases = append(cases, scriptCase{name: "status lookup " + a.name, timeout: withJob,
			script: func(r *http.Request, opID string) (int, string) {
				switch r.URL.Path {
				case "/lookup/J1":
					return answerFaulted(a, r, job(opID))
				case "/search":
					return http.StatusOK, `{"results":[]}`
				}
				return http.StatusNotFound, `{"error":"not_found"}`
			},
			check: unmoved})
		// The search is faulted; the truth is one folder for the operation.
		cases = append(cases, scriptCase{name: "search " + a.name,
			script: func(r *http.Request, opID string) (int, string) {
				if r.URL.Path != "/search" {
					return http.StatusNotFound, `{"error":"not_found"}`
				}
				return answerFaulted(a, r, `{"results":[`+candidate("fld-1", opID, "v1")+`]}`)
			},
			check: unmoved})
	}
	runCases(t, cases)

	// The poll of an accepted operation's job is faulted; the truth is the
	// job succeeded.
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		extra := map[string]review.Destination{}
		for i, a := range faultedAnswers {
			s := newScripted(t, func(r *http.Request, _ string) (int, string) {
				if r.URL.Path != "/jobs/J1" {
					return http.StatusNotFound, `{"error":"not_found"}`
				}
				return answerFaulted(a, r, `{"ref":"J1","status":"succeeded","output_ref":"out-1"}`)
			})
			extra[fmt.Sprintf("jobs-%d", i)] = scriptedConfig(t, fmt.Sprintf("jobs-%d", i), s.url, "", "", "")
		}
		b := setup(t, e, sandbox.Options{}, extra)
		ops := make([]*review.Operation, len(faultedAnswers))
		for i := range faultedAnswers {
			ops[i] = b.accepted(t, fmt.Sprintf("job-%d", i), fmt.Sprintf("jobs-%d", i), "J1")
		}
		b.runOnce(t, len(ops))
		for i, a := range faultedAnswers {
			if got := b.get(t, ops[i]); got.State != review.Accepted {
				t.Errorf("job poll %s: %s (%s), want accepted: a faulted answer is no evidence", a.name, got.State, got.StateReason)
			}
		}
		sealed(t, b.st)
	})
}

// TestPanickingProbeIsAFailedProbe: a probe that panics (a bug reading an
// odd answer) is a failed probe for its operation alone — logged with its
// stack, recorded as inconclusive evidence, a job poll a failed poll (the
// job stays accepted) —
// and the process goes on (unrecovered, the panic in a probe's goroutine
// ended it): the other operation of the same round is probed and
// confirmed, and a later round probes the others again.
func TestPanickingProbeIsAFailedProbe(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag, JobDuration: time.Hour}, nil) // the job stays queued
		b.cfg.Destinations["sandbox"] = chaosDestination(b.url)
		var logs bytes.Buffer // written only inside RunOnce, read after it
		b.rec = reconcile.New(b.st, b.cfg, "reconciler-1", slog.New(slog.NewTextHandler(&logs, nil)))

		var refA, refB string
		a := b.ambiguous(t, "panics", "sandbox", func(op *review.Operation) { refA = b.createFolder(t, op) })
		other := b.ambiguous(t, "probed", "sandbox", func(op *review.Operation) { refB = b.createFolder(t, op) })
		job, _ := b.acceptedJob(t, "job-panics")

		b.rec.Prober.PanicProbing(a.ID, job.ID)
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, 3)
		wantState(t, b.get(t, other), review.Confirmed)
		got := b.get(t, a)
		wantState(t, got, review.Ambiguous)
		ev := probeEvidence(got)
		if len(ev) == 0 {
			t.Fatal("no evidence of the failed probe")
		}
		for _, e := range ev {
			if e.Verdict != review.VerdictInconclusive || e.Authoritative || !strings.Contains(e.Note, "internal error") {
				t.Errorf("evidence of a panicking probe: %+v", e)
			}
		}
		wantState(t, b.get(t, job), review.Accepted)
		for _, want := range []string{"reconcile probe of " + a.ID + " panicked", "reconcile job probe of " + job.ID + " panicked",
			"injected: probing", "goroutine "} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}

		// Mended: the next rounds probe them again, and they settle.
		b.rec.Prober.PanicProbing()
		for range 3 {
			b.clk.Advance(review.ProbeBackoffCap + time.Second)
			if _, err := b.rec.RunOnce(b.ctx); err != nil {
				t.Fatal(err)
			}
		}
		got = b.get(t, a)
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != refA || b.get(t, other).Resource.Ref != refB {
			t.Errorf("confirmed as %+v", got.Resource)
		}
	})
}

// TestPoisonClaimSkipped: an operation whose claim fails every time (a
// trigger refuses to update its row) is skipped, named in the round's
// error, and the other operations due are claimed and reconciled in the
// same round: the batch's claim used to fail whole, every round, and
// nothing was reconciled. Once it can be claimed, it is reconciled too.
func TestPoisonClaimSkipped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag}, nil)
		poison := b.ambiguous(t, "poison", "sandbox", func(op *review.Operation) { b.createFolder(t, op) })
		other := b.ambiguous(t, "other", "sandbox", func(op *review.Operation) { b.createFolder(t, op) })
		mend := storetest.FailOn(t, b.st, "UPDATE", "operations", "NEW.id = '"+poison.ID+"'")
		b.clk.Advance(searchLag + time.Second)

		n, err := b.rec.RunOnce(b.ctx)
		var sk *store.SkippedRows
		if n != 1 || !errors.As(err, &sk) || len(sk.Rows) != 1 || sk.Rows[0].ID != poison.ID {
			t.Fatalf("RunOnce = %d, %v; want 1 claim and %s skipped", n, err, poison.ID)
		}
		wantState(t, b.get(t, other), review.Confirmed)

		mend()
		b.runOnce(t, 1)
		wantState(t, b.get(t, poison), review.Confirmed)
	})
}
