package handlers_test

// Holes the property test (property_test.go) found, each shrunk to the
// sequence that shows it and kept as an ordinary test: the API and
// console calls spelled out, the destination's truth written down, and
// RELIABILITY's invariants checked with their one statement. A hole a
// colleague is fixing on another branch is skipped here, naming the
// branch: unskip it after the merge (and lift the matching constraint in
// the property test's generator).

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// wantInvariants fails t with every invariant the ledger of b's tenant
// "acme" breaks against the destination's effects.
func wantInvariants(t *testing.T, b *testBundle, cfg *review.Config, effects ...review.TrueEffect) {
	t.Helper()
	l, err := b.store.Ledger(context.Background(), []string{"acme"})
	if err != nil {
		t.Fatal(err)
	}
	rep := review.CheckInvariants(*l, review.Truth{Effects: effects, Config: cfg})
	for _, v := range rep.Violations {
		t.Errorf("%s", v)
	}
}

// effect is the destination's effect ref for op.
func effect(op *review.Operation, ref string) review.TrueEffect {
	return review.TrueEffect{OperationID: op.ID, LogicalVersion: op.LogicalVersion, Ref: ref}
}

// jobConfig: "plain" does not honour keys, has no probes.
func jobConfig() *review.Config {
	return &review.Config{Destinations: map[string]review.Destination{"plain": {Lease: propLease, SearchLag: plainLag}}}
}

// TestPropertyHole6ForeignJob: a job update for a ref the operation never
// reported (another operation's job) settles an accepted operation —
// failed, with its own job then succeeding (failed with its effect at the
// destination), or confirmed with the other operation's output. The
// property test found the second (shrunk: two transform operations
// accepted with jobs job-0 and job-1, job-1 succeeds, PUT a's
// …/jobs/job-1 succeeded).
func TestPropertyHole6ForeignJob(t *testing.T) {
	t.Parallel()
	t.Skip("issue 12 hole 6: fixed on branch decide")
	for _, status := range []string{"failed", "succeeded"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, e store.Engine) {
				cfg := jobConfig()
				b := setup(t, e, cfg)
				a := b.registerAt(t, "doc-a", "plain", review.RiskCompensableWrite)
				other := b.registerAt(t, "doc-b", "plain", review.RiskCompensableWrite)
				for i, op := range []*review.Operation{a, other} {
					g := b.attempt(t, op.ID)
					b.outcome(t, op.ID, g.N, fmt.Sprintf(`{"result":"success","phase":"after_send","http_status":202,"job":{"ref":"job-%d","status":"queued"}}`, i))
				}
				// job-1 (the other operation's) ended; the integrator
				// reports it under a, then a's own job-0 succeeds.
				b.put("/api/v1/operations/"+a.ID+"/jobs/job-1", `{"status":"`+status+`","input_version":"v1","output_ref":"out-1"}`)
				b.put("/api/v1/operations/"+a.ID+"/jobs/job-0", `{"status":"succeeded","input_version":"v1","output_ref":"out-0"}`)
				wantInvariants(t, b, cfg, effect(a, "job-0"), effect(other, "job-1"))
				if got := b.get("/api/v1/operations/" + a.ID).op(t); got.Resource != nil && got.Resource.Ref == "out-1" {
					t.Errorf("operation a is confirmed with the other operation's output out-1")
				}
			})
		})
	}
}

// TestPropertyHoleJobCandidateConfirms (a hole no branch owns yet): an
// authoritative answer naming the operation's job — a search or lookup
// that finds the job, kind "job" — confirms the operation through
// review.Weigh as if the job were the effect, though the job may still be
// queued or running and then fail. The reconciler's Settle follows the
// same answer as accepted (confirmed when the job completes). The property
// test found it (shrunk: a transform times out after the destination
// queued job-1; an authoritative search shows job-1; job-1 fails).
func TestPropertyHoleJobCandidateConfirms(t *testing.T) {
	t.Parallel()
	t.Skip("issue 12, new hole: review.Weigh confirms on a job's candidate; not fixed on any branch yet")
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		cfg := jobConfig()
		b := setup(t, e, cfg)
		op := b.registerAt(t, "doc-1", "plain", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		b.outcome(t, op.ID, g.N, `{"result":"timeout","phase":"after_send"}`)
		b.clock.Advance(plainLag + time.Second)
		got := b.post("/api/v1/operations/"+op.ID+"/evidence", fmt.Sprintf(`{"source":"metadata_search","authoritative":true,
			"candidates":[{"ref":"job-1","kind":"job","version":"v1","operation_id":%q}]}`, op.ID)).want(t, http.StatusOK).op(t)
		if got.State == review.Confirmed {
			t.Errorf("a queued job's candidate confirmed the operation; want accepted (follow the job)")
		}
		b.put("/api/v1/operations/"+op.ID+"/jobs/job-1", `{"status":"failed","input_version":"v1"}`)
		dead := effect(op, "job-1")
		dead.Compensated = true // a failed job left nothing behind
		wantInvariants(t, b, cfg, dead)
	})
}
