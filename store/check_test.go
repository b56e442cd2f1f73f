package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCheckAtAPersonsWord: a case whose recommendation is a look at the
// destination ("Check again") is acted on by asking it (a check). What it
// answers is recorded as the reconciler records a round's answers, and
// the case recommends again from all the evidence — here, to confirm
// the resource the search found — while the operation stays in review
// for a person to decide. Audited in the same transaction, by the person.
// Refused, before anything is sent and again when the answers are
// recorded: a moment after the last look, while another holds the case,
// outside the person's tenants, once the case is decided.
func TestCheckAtAPersonsWord(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, cfg := searchable(t, e, "files")
		op := b.register(t, intention("doc-check", review.RiskCompensableWrite, "files"))
		b.start(t, op)
		wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
		// The search found a resource naming another operation: nothing
		// settles it, and nobody asks again.
		foreign := mine(op, "file-0")
		foreign.OperationID = "op_other"
		op = b.escalate(t, op, found(foreign))
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || cs[0].RecommendedAction != review.RecommendReconcileAgain {
			t.Fatalf("the case before the check: %+v, %v; want one recommending a look", cs, err)
		}
		c := cs[0]
		sara := review.Principal{Name: "sara@example.com"}

		if _, err := b.s.CheckCase(b.ctx, c.ID, sara, nil); !errors.Is(err, review.ErrConflict) {
			t.Errorf("a check just after the reconciler's search: %v", err)
		}
		b.clk.Advance(review.CheckInterval)
		got, err := b.s.CheckCase(b.ctx, c.ID, sara, []string{tenantA})
		if err != nil || got.ID != op.ID {
			t.Fatalf("CheckCase: %+v, %v", got, err)
		}
		evs := review.CheckEvidence(got, cfg.Destination("files"), []review.ProbeResult{found(mine(op, "file-1"))}, b.clk.Now())
		if err := b.s.RecordCheck(b.ctx, c.ID, sara, []string{tenantA}, review.CheckAnswers{Evidence: evs}); err != nil {
			t.Fatal(err)
		}
		op = b.get(t, op)
		wantState(t, op, review.NeedsReview)
		if n := len(op.Evidence); n == 0 || op.Evidence[n-1].Source != review.SourceMetadataSearch || op.Evidence[n-1].Candidates[0].Ref != "file-1" {
			t.Fatalf("the check's answer is not the newest evidence: %+v", op.Evidence)
		}
		after, err := b.s.GetCase(b.ctx, c.ID, nil)
		if err != nil || after.Status != store.CaseOpen || after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != "file-1" {
			t.Fatalf("the case after the check: %+v, %v; want it open, recommending to confirm file-1", after, err)
		}
		hist := b.history(t, op.ID)
		if last := hist[len(hist)-1]; last.Action != "evidence.recorded" || last.Actor != sara.Name || !strings.Contains(string(last.Detail), `"check":true`) {
			t.Errorf("the check's audit event: %+v", last)
		}

		// A moment later: the destination was just asked.
		if _, err := b.s.CheckCase(b.ctx, c.ID, sara, nil); !errors.Is(err, review.ErrConflict) || !strings.Contains(err.Error(), "less than 10 seconds ago") {
			t.Errorf("a second check at once: %v", err)
		}
		if err := b.s.RecordCheck(b.ctx, c.ID, sara, nil, review.CheckAnswers{Evidence: evs}); !errors.Is(err, review.ErrConflict) {
			t.Errorf("a second check's answers recorded at once: %v", err)
		}
		b.clk.Advance(review.CheckInterval)
		if _, err := b.s.CheckCase(b.ctx, c.ID, review.Principal{Name: "rita@example.com"}, []string{tenantB}); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("a check from outside the tenant: %v", err)
		}
		if _, err := b.s.ClaimCase(b.ctx, c.ID, sara, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.CheckCase(b.ctx, c.ID, review.Principal{Name: "rita@example.com"}, nil); errAs[*review.ClaimHeldError](t, err).By != sara.Name {
			t.Errorf("a check of a case sara holds, by rita: %v", err)
		}
		errAs[*review.ClaimHeldError](t, b.s.RecordCheck(b.ctx, c.ID, review.Principal{Name: "rita@example.com"}, nil, review.CheckAnswers{Evidence: evs})) // rita's answers on sara's case
		if _, err := b.s.CheckCase(b.ctx, c.ID, sara, nil); err != nil {
			t.Errorf("the holder's check: %v", err)
		}
		req := store.DecisionRequest{CaseID: c.ID, Action: review.DecideConfirm, Ref: "file-1", Actor: sara.Name, Reason: "the search found it"}
		if _, err := b.s.Decide(b.ctx, req); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Confirmed)
		errAs[*review.AlreadyDecidedError](t, b.s.RecordCheck(b.ctx, c.ID, sara, nil, review.CheckAnswers{Evidence: evs})) // answers on a decided case
		if n := len(b.get(t, op).Evidence); n != len(op.Evidence)+1 {                                                      // the decision's own
			t.Errorf("evidence after the refusals: %d rows, want %d", n, len(op.Evidence)+1)
		}
	})
}

// TestCheckASettledOperation: a confirmed operation whose case is about a
// duplicate only a webhook named (no look has shown it) is checked at a
// person's word. The search shows both resources: the case now says the
// destination holds the duplicate, as any evidence naming it would
// (evidence.extra_effect, by the person); the operation stays confirmed.
func TestCheckASettledOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, cfg := searchable(t, e, "plain")
		op := b.newOp(t, "doc-check-dup", review.RiskCompensableWrite, "plain")
		b.start(t, op)
		wantState(t, b.report(t, op, 1, success("file-1")).Operation, review.Confirmed)
		ev := webhookFor(op, "evt-dup")
		ev.Candidates = []review.Candidate{{Ref: "file-2", Version: op.LogicalVersion, OperationID: op.ID}}
		if _, err := b.s.Inbound(b.ctx, ev); err != nil {
			t.Fatal(err)
		}
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || cs[0].Rationale != fmt.Sprintf(review.RationaleClaimedDuplicate, "file-2", "file-1") {
			t.Fatalf("the case before the check: %+v, %v; want one about the claimed file-2", cs, err)
		}
		sara := review.Principal{Name: "sara@example.com"}
		got, err := b.s.CheckCase(b.ctx, cs[0].ID, sara, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs := review.CheckEvidence(got, cfg.Destination("plain"), []review.ProbeResult{found(mine(op, "file-1"), mine(op, "file-2"))}, b.clk.Now())
		if err := b.s.RecordCheck(b.ctx, cs[0].ID, sara, nil, review.CheckAnswers{Evidence: evs}); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Confirmed)
		after, err := b.s.GetCase(b.ctx, cs[0].ID, nil)
		if err != nil || after.Status != store.CaseOpen || after.RecommendedAction != review.RecommendCompensate || after.RecommendedRef != "file-2" ||
			after.Rationale == cs[0].Rationale {
			t.Errorf("the case after the check: %+v, %v; want it to recommend undoing file-2, no longer on the webhook's word alone", after, err)
		}
		hist := b.history(t, op.ID)
		var audited bool
		for _, h := range hist {
			audited = audited || h.Action == "evidence.extra_effect" && h.Actor == sara.Name && strings.Contains(string(h.Detail), `"check":true`)
		}
		if !audited {
			t.Errorf("no evidence.extra_effect by the person for the check")
		}
	})
}

// TestCheckAnswersADisagreement: a check that shows the effect settles
// what the case asked a look for. An irreversible write in review on an
// empty search (a retry recommended), then a check that finds its
// resource: the case recommends confirming it, not sources disagreeing —
// the absence was before the effect showed — and a form read before is
// stale; a look that then finds nothing says what a person does if the
// resource was removed. A compensable write whose late success arrived while a retry
// was due (sources_disagree, look again), then a check that finds the
// reported resource: confirm it. Before, both recommended looking again
// for ever, whatever every look found.
func TestCheckAnswersADisagreement(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		probe := &review.Probe{URL: "http://127.0.0.1:9/never-sent"}
		cfg := &review.Config{Destinations: map[string]review.Destination{"plain": {Probes: review.Probes{Status: probe, Search: probe}}}}
		b := setup(t, e, cfg)
		t.Run("nothing, then the effect", func(t *testing.T) {
			op, c := b.inReview(t, intention("doc-appeared", review.RiskIrreversible, "plain"), true)
			if c.RecommendedAction != review.RecommendApproveRetry {
				t.Fatalf("the case before the check: %+v; want a retry recommended", c)
			}
			for range 2 { // the same answer again says the same
				after := b.checked(t, cfg, c.ID, "fld-1")
				if after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != "fld-1" || slices.Contains(after.Reasons, review.ReasonSourcesDisagree) {
					t.Fatalf("the case after the check: %+v; want confirm fld-1, no disagreement", after)
				}
			}
			if _, err := b.s.Decide(b.ctx, seen(decideReq(c, review.DecideApproveRetry, "sara@example.com"), c)); !errors.Is(err, review.ErrStale) {
				t.Errorf("a retry approved on the form read before the check: %v, want it refused as stale", err)
			}
			wantState(t, b.get(t, op), review.NeedsReview)
			// Then a look finds nothing: the resource may have been
			// removed; the case says what a person does. A look that
			// shows it again: confirm it.
			gone := fmt.Sprintf(review.RationaleEffectGone, "fld-1")
			if after := b.checked(t, cfg, c.ID); after.RecommendedAction != review.RecommendReconcileAgain || after.Rationale != gone {
				t.Errorf("after a look that no longer finds fld-1: %s (%s); want a look, then a person's", after.RecommendedAction, after.Rationale)
			}
			if after := b.checked(t, cfg, c.ID, "fld-1"); after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != "fld-1" {
				t.Errorf("after a look that finds fld-1 again: %s %s; want to confirm it", after.RecommendedAction, after.RecommendedRef)
			}
		})

		t.Run("a late success while a retry was due, then a look", func(t *testing.T) {
			_, c := b.lateSuccessCase(t, "doc-late-look", "fld-late")
			if c.RecommendedAction != review.RecommendReconcileAgain {
				t.Fatalf("the case: %+v; want it asking for a look", c)
			}
			disagreeing := func() (listed bool, counted int) {
				t.Helper()
				q, err := b.s.Queue(b.ctx, store.QueueFilter{Reason: string(review.ReasonSourcesDisagree)}, 50)
				if err != nil {
					t.Fatal(err)
				}
				return slices.ContainsFunc(q.Cases, func(q store.Case) bool { return q.ID == c.ID }), q.Counts[string(review.ReasonSourcesDisagree)]
			}
			listed, before := disagreeing()
			if !listed {
				t.Fatal("the queue filtered by sources_disagree does not list the case before the look")
			}
			after := b.checked(t, cfg, c.ID, "fld-late")
			if after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != "fld-late" {
				t.Errorf("the case after a look found the reported resource: %+v; want confirm fld-late", after)
			}
			// The look answered the disagreement: the case no longer says
			// the sources disagree (its badge, the queue's filter and
			// count, its priority); its history keeps why it was opened.
			if slices.Contains(after.Reasons, review.ReasonSourcesDisagree) || after.Priority >= c.Priority {
				t.Errorf("the case after the look: reasons %v, priority %d (was %d); want no sources_disagree, a lower priority", after.Reasons, after.Priority, c.Priority)
			}
			if listed, now := disagreeing(); listed || now != before-1 {
				t.Errorf("the queue filtered by sources_disagree after the look: listed %v, counted %d (was %d)", listed, now, before)
			}
		})

		t.Run("a late success, then checks split between the lookup and the search", func(t *testing.T) {
			_, c := b.lateSuccessCase(t, "doc-split", "fld-split")
			// The status lookup finds fld-split, the search nothing, in
			// one check and in the next: the case says what a person does
			// when they keep disagreeing, not only to look again.
			split := func(op *review.Operation) []review.ProbeResult {
				return []review.ProbeResult{{Kind: review.ProbeStatus, Ref: "fld-split", Candidates: []review.Candidate{mine(op, "fld-split")}}, found()}
			}
			want := fmt.Sprintf(review.RationaleLooksSplit, "fld-split")
			for i := range 2 {
				after := b.checkedWith(t, cfg, c.ID, split)
				if after.RecommendedAction != review.RecommendReconcileAgain || after.Rationale != want ||
					!slices.Contains(after.Reasons, review.ReasonSourcesDisagree) {
					t.Fatalf("after split check %d: %s (%s) %v; want a look, then a person's, sources_disagree", i+1, after.RecommendedAction, after.Rationale, after.Reasons)
				}
			}
			after := b.checkedWith(t, cfg, c.ID, func(op *review.Operation) []review.ProbeResult {
				return []review.ProbeResult{{Kind: review.ProbeStatus, Ref: "fld-split", Candidates: []review.Candidate{mine(op, "fld-split")}}, found(mine(op, "fld-split"))}
			})
			if after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != "fld-split" || slices.Contains(after.Reasons, review.ReasonSourcesDisagree) {
				t.Errorf("after a check where both find fld-split: %s %s %v; want to confirm it, no disagreement", after.RecommendedAction, after.RecommendedRef, after.Reasons)
			}
		})
	})
}

// TestCheckAnswersNoDedupEvidence: a write whose attempt timed out, its
// search finding only another operation's resource: the case says
// nothing shows whether the effect is there. A check whose
// search finds the operation's own resource answers that: the case
// recommends confirming it and no longer says there is no evidence (its
// badge, the queue's filter and count). Before, "No way to check for
// duplicates" stayed beside "Confirm fld-1".
func TestCheckAnswersNoDedupEvidence(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b, cfg := searchable(t, e, "plain")
		op := b.ambiguous(t, "doc-nodedup")
		b.escalate(t, op, found(review.Candidate{Ref: "fld-other", Kind: "folder", Version: "v1", OperationID: "op-other"}))
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonNoDedupEvidence) {
			t.Fatalf("cases = %+v, %v; want one for no_dedup_evidence", cs, err)
		}
		listed := func() (bool, int) {
			t.Helper()
			q, err := b.s.Queue(b.ctx, store.QueueFilter{Reason: string(review.ReasonNoDedupEvidence)}, 50)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(q.Cases, func(q store.Case) bool { return q.ID == cs[0].ID }), q.Counts[string(review.ReasonNoDedupEvidence)]
		}
		in, before := listed()
		if !in {
			t.Fatal("the queue filtered by no_dedup_evidence does not list the case before the check")
		}
		after := b.checked(t, cfg, cs[0].ID, "fld-1")
		if after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != "fld-1" || slices.Contains(after.Reasons, review.ReasonNoDedupEvidence) {
			t.Errorf("the case after a check found fld-1: %s %s %v; want confirm fld-1, no no_dedup_evidence", after.RecommendedAction, after.RecommendedRef, after.Reasons)
		}
		if in, now := listed(); in || now != before-1 {
			t.Errorf("the queue filtered by no_dedup_evidence after the check: listed %v, counted %d (was %d)", in, now, before)
		}
	})
}

// TestAWebhookClaimNoLookShowed: an irreversible write whose attempt timed
// out, a signed webhook saying it made file-7, a search past the search
// lag (but inside the confirm window) finding nothing, then the deadline.
// The case recommends neither failing it nor a retry — either could be
// wrong if file-7 is there — but a look, and what a person does when
// looks keep finding nothing; a check that finds nothing says the same,
// one that finds file-7 recommends confirming it. Before, the case
// recommended failing the operation, preselected.
func TestAWebhookClaimNoLookShowed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		probe := &review.Probe{URL: "http://127.0.0.1:9/never-sent"}
		cfg := &review.Config{Destinations: map[string]review.Destination{"plain": {SearchLag: time.Minute, Probes: review.Probes{Search: probe}}}}
		b := setup(t, e, cfg)
		r := intention("doc-claim", review.RiskIrreversible, "plain")
		deadline := b.clk.Now().Add(2 * time.Minute)
		r.Deadline = &deadline
		op := b.register(t, r)
		b.start(t, op)
		wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
		if _, err := b.s.Inbound(b.ctx, webhookFor(op, "evt-claim")); err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(deadline.Sub(b.clk.Now()) + time.Second)
		wantState(t, b.escalate(t, op, found()), review.NeedsReview)
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases = %+v, %v; want one", cs, err)
		}
		byHand := fmt.Sprintf(review.RationaleClaimUnseen, "file-7")
		if c := cs[0]; c.RecommendedAction != review.RecommendReconcileAgain || c.Rationale != byHand {
			t.Fatalf("the case: %s (%s); want a look, then a person's, for file-7", c.RecommendedAction, c.Rationale)
		}
		if c := b.checked(t, cfg, cs[0].ID); c.RecommendedAction != review.RecommendReconcileAgain || c.Rationale != byHand {
			t.Errorf("after a check that found nothing: %s (%s); want the same", c.RecommendedAction, c.Rationale)
		}
		if c := b.checked(t, cfg, cs[0].ID, "file-7"); c.RecommendedAction != review.RecommendConfirm || c.RecommendedRef != "file-7" {
			t.Errorf("after a check that found file-7: %s %s (%s); want to confirm it", c.RecommendedAction, c.RecommendedRef, c.Rationale)
		}
	})
}

// lateSuccessCase is the case of a compensable write whose search found
// nothing, a retry due, when attempt 1's success naming ref arrived late:
// the sources disagree.
func (b *bundle) lateSuccessCase(t *testing.T, source, ref string) (*review.Operation, *store.Case) {
	t.Helper()
	op := b.retrying(t, source)
	if _, err := b.s.RecordOutcome(b.ctx, tenantA, op.ID, 1, success(ref), "integrator"); err == nil {
		t.Fatal("the late report was taken as on time")
	}
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil || len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonSourcesDisagree) {
		t.Fatalf("cases = %+v, %v; want one for sources_disagree", cs, err)
	}
	return op, &cs[0]
}

// checked is a check of case id by sara, a check interval after the last
// look, whose search finds refs (each naming the operation and its
// version) — asked of cfg's destination "plain" — recorded; it returns
// the case after it.
func (b *bundle) checked(t *testing.T, cfg *review.Config, id string, refs ...string) *store.Case {
	t.Helper()
	return b.checkedWith(t, cfg, id, func(op *review.Operation) []review.ProbeResult {
		var cands []review.Candidate
		for _, ref := range refs {
			cands = append(cands, mine(op, ref))
		}
		return []review.ProbeResult{found(cands...)}
	})
}

// checkedWith is checked with the probes' answers answers makes for the
// operation.
func (b *bundle) checkedWith(t *testing.T, cfg *review.Config, id string, answers func(*review.Operation) []review.ProbeResult) *store.Case {
	t.Helper()
	sara := review.Principal{Name: "sara@example.com"}
	b.clk.Advance(review.CheckInterval)
	op, err := b.s.CheckCase(b.ctx, id, sara, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := review.CheckEvidence(op, cfg.Destination("plain"), answers(op), b.clk.Now())
	if err := b.s.RecordCheck(b.ctx, id, sara, nil, review.CheckAnswers{Evidence: evs}); err != nil {
		t.Fatal(err)
	}
	after, err := b.s.GetCase(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return after
}

// TestACheckIsOneInstant: on a clock that moves with every reading, as a
// real one does, what one check's probes answered is recorded at one
// instant: the check panel lists every answer (review.LastAnswers), and a
// status lookup that finds the resource beside a search that does not is
// read as the split it is. Before, each row took the clock as it was
// written: the panel showed the newest answer alone, and which probe was
// written last decided what the case recommended.
func TestACheckIsOneInstant(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		probe := &review.Probe{URL: "http://127.0.0.1:9/never-sent"}
		cfg := &review.Config{Destinations: map[string]review.Destination{"plain": {Probes: review.Probes{Status: probe, Search: probe}},
			"transform": {Probes: review.Probes{Search: probe, Job: probe}}}}
		clk := storetest.NewClock(t0)
		ticking := func() time.Time {
			clk.Advance(time.Millisecond)
			return clk.Now()
		}
		b := &bundle{ctx: context.Background(), s: storetest.Open(t, e, store.Options{Config: cfg, Clock: ticking, Rand: fixedRand(0.5)}), clk: clk}
		op, c := b.lateSuccessCase(t, "doc-instant", "fld-instant")
		after := b.checkedWith(t, cfg, c.ID, func(op *review.Operation) []review.ProbeResult {
			return []review.ProbeResult{{Kind: review.ProbeStatus, Ref: "fld-instant", Candidates: []review.Candidate{mine(op, "fld-instant")}}, found()}
		})
		if answers := review.LastAnswers(b.get(t, op)); len(answers) != 2 {
			t.Errorf("the check's answers as the panel lists them: %+v; want the lookup's and the search's", answers)
		}
		if want := fmt.Sprintf(review.RationaleLooksSplit, "fld-instant"); after.Rationale != want {
			t.Errorf("after a check split between lookup and search: %s (%s); want %q", after.RecommendedAction, after.Rationale, want)
		}
		// A reconciler's round likewise.
		round := b.ambiguous(t, "doc-round")
		got := b.escalate(t, round, found(mine(round, "fld-a")), found(mine(round, "fld-b")))
		if answers := review.LastAnswers(got); len(answers) != 2 {
			t.Errorf("a round's answers: %+v; want both searches'", answers)
		}
		// A check that takes the end of the job a case waits on: the
		// job's end is of that instant too.
		jobOp, jc := deadlinePassedBesideJob(t, b, "doc-instant-job", "job-9", nil)
		b.clk.Advance(review.CheckInterval)
		sara := review.Principal{Name: "sara@example.com"}
		if _, err := b.s.CheckCase(b.ctx, jc.ID, sara, nil); err != nil {
			t.Fatal(err)
		}
		evs := review.CheckEvidence(jobOp, cfg.Destination("transform"), []review.ProbeResult{found(mine(jobOp, "file-out"))}, b.clk.Now())
		ended := &review.Job{Ref: "job-9", Status: review.JobSucceeded, OutputRef: "file-out"}
		if err := b.s.RecordCheck(b.ctx, jc.ID, sara, nil, review.CheckAnswers{Evidence: evs, Job: ended}); err != nil {
			t.Fatal(err)
		}
		if answers := review.LastAnswers(b.get(t, jobOp)); len(answers) != 2 {
			t.Errorf("the answers of a check that took the job's end: %+v; want the search's and the job's end", answers)
		}
	})
}
