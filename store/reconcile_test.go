package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// probeLease is the claim lease the reconciliation tests use.
const probeLease = 30 * time.Second

// claim claims due ambiguous operations for owner.
func (b *bundle) claim(t testing.TB, owner string) []store.ProbeClaim {
	t.Helper()
	cs, err := b.s.ClaimAmbiguous(b.ctx, owner, 100, probeLease)
	if err != nil {
		t.Fatalf("ClaimAmbiguous(%s): %v", owner, err)
	}
	return cs
}

// claimOne claims for owner and requires exactly op.
func (b *bundle) claimOne(t testing.TB, owner string, op *review.Operation) store.ProbeClaim {
	t.Helper()
	cs := b.claim(t, owner)
	if len(cs) != 1 || cs[0].Op.ID != op.ID {
		t.Fatalf("ClaimAmbiguous(%s) = %s, want exactly %s", owner, claimedIDs(cs), op.ID)
	}
	return cs[0]
}

func claimedIDs(cs []store.ProbeClaim) []string {
	ids := []string{}
	for _, c := range cs {
		ids = append(ids, c.Op.ID)
	}
	slices.Sort(ids)
	return ids
}

// settleClaim runs review.Settle on what the claim knows, as the reconciler does.
func (b *bundle) settleClaim(c store.ProbeClaim, results ...review.ProbeResult) review.Settlement {
	return review.Settle(review.SettleInput{Op: c.Op, Destination: b.s.Config().Destination(c.Op.Destination),
		LastWrite: c.LastWrite, Results: results, Round: c.Round, Now: b.s.Now()})
}

// escalate claims op (the only due ambiguous operation), settles it on
// results and applies the settlement, which must go to needs_review.
func (b *bundle) escalate(t testing.TB, op *review.Operation, results ...review.ProbeResult) *review.Operation {
	t.Helper()
	c := b.claimOne(t, "escalator", op)
	st := b.settleClaim(c, results...)
	if st.State != review.NeedsReview {
		t.Fatalf("settlement = %s (%s), want needs_review", st.State, st.Reason)
	}
	if err := b.s.ApplySettlement(b.ctx, c, st); err != nil {
		t.Fatalf("ApplySettlement: %v", err)
	}
	got := b.get(t, op)
	wantState(t, got, review.NeedsReview)
	return got
}

func found(cs ...review.Candidate) review.ProbeResult {
	return review.ProbeResult{Kind: review.ProbeSearch, Candidates: cs}
}

func mine(op *review.Operation, ref string) review.Candidate {
	return review.Candidate{Ref: ref, Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID}
}

func failedProbe(why string) review.ProbeResult {
	return review.ProbeResult{Kind: review.ProbeSearch, Err: why}
}

// countActions counts audit events by action.
func countActions(evs []store.AuditEvent) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.Action]++
	}
	return m
}

// TestClaimAmbiguousClaimsOnlyDue: only ambiguous operations whose next
// probe is due are claimed, and a claimed one is not claimed again until
// its lease expires.
func TestClaimAmbiguousClaimsOnlyDue(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		// later is ambiguous but its next probe is a minute away.
		later := b.ambiguous(t, "later")
		c := b.claimOne(t, "r0", later)
		st := b.settleClaim(c, failedProbe("HTTP 503"))
		if st.State != "" {
			t.Fatalf("settlement = %s, want another round", st.State)
		}
		st.NextProbe = b.clk.Now().Add(time.Minute)
		if err := b.s.ApplySettlement(b.ctx, c, st); err != nil {
			t.Fatal(err)
		}

		due := b.ambiguous(t, "due")
		b.newOp(t, "pending", review.RiskCompensableWrite, "plain")
		b.start(t, b.newOp(t, "in-flight", review.RiskCompensableWrite, "plain"))
		retry := b.newOp(t, "retry", review.RiskCompensableWrite, "plain")
		b.start(t, retry)
		wantState(t, b.report(t, retry, 1, connBeforeSend).Operation, review.RetryWait)
		confirmed := b.newOp(t, "confirmed", review.RiskCompensableWrite, "plain")
		b.start(t, confirmed)
		wantState(t, b.report(t, confirmed, 1, success("file-9")).Operation, review.Confirmed)
		failed := b.newOp(t, "failed", review.RiskCompensableWrite, "plain")
		b.start(t, failed)
		wantState(t, b.report(t, failed, 1, httpError(400)).Operation, review.Failed)

		c1 := b.claimOne(t, "r1", due)
		if c1.Owner != "r1" || c1.Op.State != review.Ambiguous || c1.Round != 0 || c1.Generation < 1 ||
			!c1.LastWrite.Equal(t0) || c1.Op.Key != due.Key {
			t.Errorf("claim = %+v (op %s), want owner r1, round 0, a generation, last send %v", c1, c1.Op.State, t0)
		}
		if cs := b.claim(t, "r2"); len(cs) != 0 {
			t.Fatalf("second claim while the first holds = %v, want none", claimedIDs(cs))
		}

		// Past the lease and the next probe: both are due again, the one
		// whose round was settled has round 1.
		b.clk.Advance(time.Minute + time.Second)
		cs := b.claim(t, "r2")
		if got, want := claimedIDs(cs), claimedIDs([]store.ProbeClaim{{Op: due}, {Op: later}}); !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want %v", got, want)
		}
		for _, c := range cs {
			wantRound := map[string]int{due.ID: 0, later.ID: 1}[c.Op.ID]
			if c.Round != wantRound || c.Owner != "r2" {
				t.Errorf("claim of %s: round %d owner %s, want round %d owner r2", c.Op.SourceRef, c.Round, c.Owner, wantRound)
			}
			if c.Op.ID == due.ID && c.Generation != c1.Generation+1 {
				t.Errorf("re-claim generation %d, want %d", c.Generation, c1.Generation+1)
			}
		}

		// A batch limit is honoured.
		b.clk.Advance(time.Minute)
		if cs, err := b.s.ClaimAmbiguous(b.ctx, "r3", 1, probeLease); err != nil || len(cs) != 1 {
			t.Fatalf("ClaimAmbiguous(n=1) = %d claims, %v; want 1", len(cs), err)
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestARoundInsideTheLagIsNotCounted: a round whose search came inside
// the destination's search lag proved nothing, as review.Settle says, and
// counts toward neither the round limit nor the backoff of the rounds
// after it. Before, the store counted it all the same: a destination with
// a long lag reached the limit, and waited longer between rounds, one
// round early for each look inside it.
func TestARoundInsideTheLagIsNotCounted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		probe := &review.Probe{URL: "http://127.0.0.1:9/never-sent"}
		cfg := &review.Config{Destinations: map[string]review.Destination{
			"plain": {SearchLag: time.Minute, Probes: review.Probes{Search: probe}}}}
		b := setup(t, e, cfg)
		op := b.ambiguous(t, "doc-lag")
		round := func(want int, results ...review.ProbeResult) review.Settlement {
			t.Helper()
			c := b.claimOne(t, "r1", op)
			if c.Round != want {
				t.Fatalf("claimed at round %d, want %d", c.Round, want)
			}
			st := b.settleClaim(c, results...)
			if st.State != "" {
				t.Fatalf("settlement = %s (%s), want another round", st.State, st.Reason)
			}
			if err := b.s.ApplySettlement(b.ctx, c, st); err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(st.NextProbe.Sub(b.clk.Now()))
			return st
		}
		if st := round(0, found()); !st.Uncounted {
			t.Fatalf("a search inside the lag: %+v, want uncounted", st)
		}
		round(0, failedProbe("HTTP 503")) // past the lag: counted
		round(1, failedProbe("HTTP 503"))
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestReconcilersRaceFencing: two reconcilers on one operation. The first
// claim's lease expires, the second claims it (newer generation); the
// first reconciler, waking late, is fenced and writes nothing; the second
// settles it, once.
func TestReconcilersRaceFencing(t *testing.T) {
	t.Parallel()
	for _, owners := range [][2]string{{"r1", "r2"}, {"r1", "r1"}} {
		name := owners[0] + "-" + owners[1]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, e store.Engine) {
				b := setup(t, e, nil)
				op := b.ambiguous(t, "doc-1")
				events := len(b.history(t, op.ID))

				first := b.claimOne(t, owners[0], op)
				if cs := b.claim(t, owners[1]); len(cs) != 0 {
					t.Fatalf("claimed while the first lease holds: %v", claimedIDs(cs))
				}
				b.clk.Advance(probeLease + time.Second)
				second := b.claimOne(t, owners[1], op)
				if second.Generation <= first.Generation {
					t.Fatalf("generations %d then %d, want increasing", first.Generation, second.Generation)
				}

				// The late reconciler found the folder; the current one
				// found nothing. Only the current one may write.
				late := b.settleClaim(first, found(mine(op, "fld-1")))
				if late.State != review.Confirmed {
					t.Fatalf("late settlement = %s", late.State)
				}
				err := b.s.ApplySettlement(b.ctx, first, late)
				if !errors.Is(err, store.ErrFenced) {
					t.Fatalf("late ApplySettlement = %v, want ErrFenced", err)
				}
				got := b.get(t, op)
				wantState(t, got, review.Ambiguous)
				if len(got.Evidence) != 0 || got.Resource != nil || got.Version != op.Version || len(b.history(t, op.ID)) != events {
					t.Fatalf("fenced settlement wrote: %d evidence, resource %+v, version %d → %d", len(got.Evidence), got.Resource, op.Version, got.Version)
				}

				current := b.settleClaim(second, found())
				if current.State != review.RetryWait {
					t.Fatalf("current settlement = %s (%s)", current.State, current.Reason)
				}
				if err := b.s.ApplySettlement(b.ctx, second, current); err != nil {
					t.Fatalf("current ApplySettlement: %v", err)
				}
				// Neither claim applies twice.
				for _, c := range []store.ProbeClaim{second, first} {
					if err := b.s.ApplySettlement(b.ctx, c, current); !errors.Is(err, store.ErrFenced) {
						t.Errorf("ApplySettlement again (generation %d) = %v, want ErrFenced", c.Generation, err)
					}
				}
				got = b.get(t, op)
				wantState(t, got, review.RetryWait)
				if len(got.Evidence) != 1 || got.Evidence[0].Verdict != review.VerdictRefutes {
					t.Errorf("evidence = %+v, want the one refutation of the current round", got.Evidence)
				}
				if n := countActions(b.history(t, op.ID))["reconcile.settled"]; n != 1 {
					t.Errorf("%d reconcile.settled events, want 1", n)
				}
				if g, err := b.tryStart(op, "", ""); err != nil || g.N != 2 || g.Key != op.Key {
					t.Errorf("attempt after proven absence = %+v, %v; want attempt 2 with the same key", g, err)
				}
				if !storetest.Sealed(t, b.s).OK {
					t.Error("audit trail does not verify")
				}
			})
		})
	}
}

// TestReconcilersRaceConcurrently: the late and the current reconciler
// apply at the same moment, over many rounds; only the current one wins.
func TestReconcilersRaceConcurrently(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for round := range 10 {
			op := b.ambiguous(t, fmt.Sprintf("doc-%d", round))
			first := b.claimOne(t, "r1", op)
			b.clk.Advance(probeLease + time.Second)
			second := b.claimOne(t, "r2", op)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, c := range []store.ProbeClaim{first, second} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = b.s.ApplySettlement(b.ctx, c, b.settleClaim(c, found(mine(op, fmt.Sprintf("fld-%d", i)))))
				}()
			}
			wg.Wait()
			if !errors.Is(errs[0], store.ErrFenced) || errs[1] != nil {
				t.Fatalf("round %d: late → %v, current → %v; want ErrFenced and nil", round, errs[0], errs[1])
			}
			got := b.get(t, op)
			wantState(t, got, review.Confirmed)
			if got.Resource == nil || got.Resource.Ref != "fld-1" || len(got.Evidence) != 1 {
				t.Fatalf("round %d: resource %+v, %d evidence rows; want the current reconciler's fld-1 alone", round, got.Resource, len(got.Evidence))
			}
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestStaleClaimFencedAfterNewAttempt: a reconciler claims an ambiguous
// operation, and while its probe is out the operation is settled by other
// evidence, retried and becomes ambiguous again — all within the claim's
// lease. The old round probed before the new attempt was sent; its verdict
// must not apply to the new ambiguity (it would allow a blind retry).
func TestStaleClaimFencedAfterNewAttempt(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.ambiguous(t, "doc-1")
		stale := b.claimOne(t, "r1", op)
		staleVerdict := b.settleClaim(stale, found()) // nothing there, before attempt 2
		if staleVerdict.State != review.RetryWait {
			t.Fatalf("stale settlement = %s", staleVerdict.State)
		}

		// Meanwhile: the integrator proves absence, retries, times out again.
		got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.RetryWait)
		b.start(t, op)
		wantState(t, b.report(t, op, 2, timeoutAfterSend).Operation, review.Ambiguous)

		err = b.s.ApplySettlement(b.ctx, stale, staleVerdict)
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("a settlement probed before attempt 2 applied to attempt 2's ambiguity: err = %v, state now %s; want ErrFenced",
				err, b.get(t, op).State)
		}
		wantState(t, b.get(t, op), review.Ambiguous)
	})
}

// TestSettlementToReviewOpensOneCase: a settlement to needs_review opens
// exactly one case carrying the reasons and a recommendation.
func TestSettlementToReviewOpensOneCase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		flags      []review.Flag
		results    func(op *review.Operation) []review.ProbeResult
		wantReason review.Reason
		wantAction string
		wantRef    string
	}{
		{"two candidates", nil,
			func(op *review.Operation) []review.ProbeResult {
				return []review.ProbeResult{found(mine(op, "fld-1"), mine(op, "fld-2"))}
			},
			review.ReasonMultipleCands, review.RecommendCompensate, "fld-2"},
		{"another version", nil,
			func(op *review.Operation) []review.ProbeResult {
				c := mine(op, "fld-1")
				c.Version = "v0"
				return []review.ProbeResult{found(c)}
			},
			review.ReasonVersionMismatch, review.RecommendCompensate, "fld-1"},
		{"foreign candidate", nil,
			func(op *review.Operation) []review.ProbeResult {
				c := mine(op, "fld-1")
				c.OperationID = "op_other"
				return []review.ProbeResult{found(c)}
			},
			review.ReasonNoDedupEvidence, review.RecommendReconcileAgain, ""},
		{"financial absence", []review.Flag{review.FlagFinancial},
			func(op *review.Operation) []review.ProbeResult { return []review.ProbeResult{found()} },
			review.ReasonFinancial, review.RecommendApproveRetry, ""},
		{"irreversible absence", []review.Flag{review.FlagIrreversible},
			func(op *review.Operation) []review.ProbeResult { return []review.ProbeResult{found()} },
			review.ReasonIrreversible, review.RecommendApproveRetry, ""},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := intention(fmt.Sprintf("doc-%d", i), review.RiskCompensableWrite, "plain")
				r.Flags = tt.flags
				op := b.register(t, r)
				b.start(t, op)
				wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
				b.escalate(t, op, tt.results(op)...)

				cs, err := b.s.CasesForOperation(b.ctx, op.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(cs) != 1 {
					t.Fatalf("%d cases, want 1: %+v", len(cs), cs)
				}
				c := cs[0]
				if c.Status != store.CaseOpen || c.Tenant != tenantA || c.OperationID != op.ID || c.Destination != "plain" ||
					c.Priority <= 0 || c.Rationale == "" || c.Version < 1 || c.ResolvedAt != nil {
					t.Errorf("case = %+v", c)
				}
				if !slices.Contains(c.Reasons, tt.wantReason) {
					t.Errorf("reasons = %v, want %s among them", c.Reasons, tt.wantReason)
				}
				if c.RecommendedAction != tt.wantAction || c.RecommendedRef != tt.wantRef {
					t.Errorf("recommendation = %s %s (%s), want %s %s", c.RecommendedAction, c.RecommendedRef, c.Rationale, tt.wantAction, tt.wantRef)
				}
				if got, err := b.s.GetCase(b.ctx, c.ID, []string{tenantA}); err != nil || got.ID != c.ID {
					t.Errorf("GetCase in scope = %v, %v", got, err)
				}
				if _, err := b.s.GetCase(b.ctx, c.ID, []string{tenantB}); !errors.Is(err, review.ErrNotFound) {
					t.Errorf("GetCase out of scope = %v, want ErrNotFound", err)
				}
				acts := countActions(b.history(t, op.ID))
				if acts["case.opened"] != 1 || acts["reconcile.settled"] != 1 {
					t.Errorf("audit = %v, want one reconcile.settled and one case.opened", acts)
				}
				// In review: not claimed for probing, no attempt granted.
				if cs := b.claim(t, "r9"); len(cs) != 0 {
					t.Errorf("claimed an operation in review: %v", claimedIDs(cs))
				}
				_, err = b.tryStart(op, "", "")
				errAs[*review.NotAttemptableError](t, err)
			})
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestPayloadMismatchOpensCase: the same key with a different payload is
// refused and opens a payload_mismatch case; a repeat joins that case; a
// later escalation of the same operation joins it too.
func TestPayloadMismatchOpensCase(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-1", review.RiskCompensableWrite, "plain")
		changed := intention("doc-1", review.RiskCompensableWrite, "plain")
		changed.Payload = []byte(`{"source":"doc-1","pages":2}`)
		for range 2 {
			_, _, err := b.s.Register(b.ctx, changed)
			mm := errAs[*review.PayloadMismatchError](t, err)
			if mm.Operation.ID != op.ID {
				t.Fatalf("mismatch names %s, want %s", mm.Operation.ID, op.ID)
			}
		}
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Status != store.CaseOpen || !slices.Contains(cs[0].Reasons, review.ReasonPayloadMismatch) ||
			cs[0].RecommendedAction != review.RecommendFail {
			// Fail: the case is the refused payload's alone, and fail
			// its one decision.
			t.Fatalf("cases = %+v, want one open payload_mismatch case recommending fail", cs)
		}
		wantState(t, b.get(t, op), review.Pending)

		// The operation goes on, ends ambiguous and is escalated: the open
		// case gathers the new reasons rather than a second case opening.
		b.start(t, op)
		wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
		b.escalate(t, op, found(mine(op, "fld-1"), mine(op, "fld-2")))
		cs, err = b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 {
			t.Fatalf("%d cases, want 1: %+v", len(cs), cs)
		}
		for _, r := range []review.Reason{review.ReasonPayloadMismatch, review.ReasonMultipleCands} {
			if !slices.Contains(cs[0].Reasons, r) {
				t.Errorf("reasons = %v, want %s among them", cs[0].Reasons, r)
			}
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestARefusedPayloadsCaseKeepsToIt: a refused payload's case, its
// operation going its own way, says the same whichever order things came
// in: a payload refused before the operation's attempt, or while it is in
// flight. Both cases are the refused payload's alone: [payload_mismatch],
// fail recommended, the same priority, and they stay so once the
// operations are confirmed. Before, the payload refused in flight opened
// its case with no_dedup_evidence (nothing yet showed the attempt's
// effect), and the one refused before the attempt never had it.
func TestARefusedPayloadsCaseKeepsToIt(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		refuse := func(op *review.Operation) {
			t.Helper()
			changed := intention(op.SourceRef, review.RiskCompensableWrite, "plain")
			changed.Payload = []byte(`{"source":"` + op.SourceRef + `","pages":2}`)
			if _, _, err := b.s.Register(b.ctx, changed); err == nil {
				t.Fatal("the changed payload was taken")
			}
		}
		caseOf := func(op *review.Operation) store.Case {
			t.Helper()
			cs, err := b.s.CasesForOperation(b.ctx, op.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases = %+v, %v; want one", cs, err)
			}
			return cs[0]
		}
		before := b.newOp(t, "doc-refused-before", review.RiskCompensableWrite, "plain")
		refuse(before)
		b.start(t, before)
		inFlight := b.newOp(t, "doc-refused-in-flight", review.RiskCompensableWrite, "plain")
		b.start(t, inFlight)
		refuse(inFlight)
		want := func(when string) {
			t.Helper()
			a, c := caseOf(before), caseOf(inFlight)
			for _, c := range []store.Case{a, c} {
				if !slices.Equal(c.Reasons, []review.Reason{review.ReasonPayloadMismatch}) || c.RecommendedAction != review.RecommendFail {
					t.Errorf("%s, the case of %s: %v, %s; want [payload_mismatch], fail", when, c.OperationID, c.Reasons, c.RecommendedAction)
				}
			}
			if a.Priority != c.Priority {
				t.Errorf("%s: priorities %d and %d; want the same", when, a.Priority, c.Priority)
			}
		}
		want("in flight")
		wantState(t, b.report(t, before, 1, success("fld-1")).Operation, review.Confirmed)
		wantState(t, b.report(t, inFlight, 1, success("fld-2")).Operation, review.Confirmed)
		refuse(before) // a repeat assesses the case again
		refuse(inFlight)
		want("confirmed")
	})
}

// TestFinancialAbsenceNeedsReviewer: proven absence for a financial or
// irreversible operation never retries on its own — whether the
// reconciler proved it or the integrator submitted the evidence.
func TestFinancialAbsenceNeedsReviewer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		risk  review.Risk
		flags []review.Flag
	}{
		{"financial", review.RiskCompensableWrite, []review.Flag{review.FlagFinancial}},
		{"irreversible flag", review.RiskCompensableWrite, []review.Flag{review.FlagIrreversible}},
		{"irreversible risk", review.RiskIrreversible, nil},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			for _, path := range []string{"reconciler", "integrator"} {
				t.Run(tt.name+"/"+path, func(t *testing.T) {
					r := intention(fmt.Sprintf("charge-%d-%s", i, path), tt.risk, "plain")
					r.Flags = tt.flags
					op := b.register(t, r)
					b.start(t, op)
					wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
					var got *review.Operation
					if path == "reconciler" {
						got = b.escalate(t, op, found())
					} else {
						var err error
						got, err = b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "integrator")
						if err != nil {
							t.Fatal(err)
						}
					}
					if got.State != review.NeedsReview {
						t.Errorf("after proven absence the operation is %s (%s), want needs_review: a %s operation is never retried without a reviewer",
							got.State, got.StateReason, tt.name)
					}
					if _, err := b.tryStart(op, "", ""); err == nil {
						t.Errorf("an attempt was granted without a reviewer")
					}
				})
			}
		}
	})
}
