package review_test

import (
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// TestCheckInvariantsCatchViolations feeds the invariants' one statement
// ledgers that break each invariant, so a green chaos or property run
// means the invariants held, not that the checks could not fail.
func TestCheckInvariantsCatchViolations(t *testing.T) {
	t.Parallel()
	const dest = "files"
	cfg := &review.Config{Destinations: map[string]review.Destination{dest: {HonoursKeys: true}}}
	noKeys := &review.Config{Destinations: map[string]review.Destination{dest: {}}}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// op is an operation in state; a confirmed one rests on a response.
	op := func(id string, risk review.Risk, state review.State, flags ...review.Flag) *review.Operation {
		o := &review.Operation{ID: id, Tenant: "t", Key: id + "-key", PayloadHash: id + "-hash", LogicalVersion: "1",
			Destination: dest, Risk: risk, Flags: flags, State: state, Action: "act"}
		if state == review.Confirmed {
			o.Evidence = []review.Evidence{{Source: review.SourceResponse, Authoritative: true, Verdict: review.VerdictConfirms}}
		}
		return o
	}
	// ledgerOf holds ops with a trail that agrees with them: registered,
	// then one move to the state each is in.
	ledgerOf := func(ops ...*review.Operation) review.Ledger {
		l := review.Ledger{Operations: ops, OpenCases: map[string]bool{}}
		for _, o := range ops {
			l.Trail = append(l.Trail, review.TrailEvent{OperationID: o.ID, Action: "operation.registered", ToState: review.Pending})
			if o.State != review.Pending {
				l.Trail = append(l.Trail, review.TrailEvent{OperationID: o.ID, Action: "evidence.settled", FromState: review.Pending, ToState: o.State})
			}
		}
		return l
	}
	effect := func(id, ref string, compensated bool) review.TrueEffect {
		return review.TrueEffect{OperationID: id, LogicalVersion: "1", Ref: ref, Compensated: compensated}
	}
	// only fails unless exactly the invariants named are broken.
	only := func(t *testing.T, rep review.InvariantReport, invs ...string) {
		t.Helper()
		want := map[string]bool{}
		for _, inv := range invs {
			want[inv] = true
			if len(rep.Broken(inv)) == 0 {
				t.Errorf("%s holds, want it broken (violations: %v)", inv, rep.Violations)
			}
		}
		for _, v := range rep.Violations {
			if !want[v.Invariant] {
				t.Errorf("unexpected violation %s", v)
			}
		}
	}

	t.Run("I2 duplicate of an irreversible effect", func(t *testing.T) {
		rep := review.CheckInvariants(ledgerOf(op("a", review.RiskIrreversible, review.Confirmed)),
			review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "eml-1", false), effect("a", "eml-2", false)}})
		only(t, rep, review.InvOneEffect)
		if rep.Broken(review.InvOneEffect)[0].AwaitsCase {
			t.Fatal("an irreversible duplicate awaits no case: no case mends it")
		}
		if rep.DuplicateEffectsOutsideOpenCase != 1 {
			t.Fatalf("duplicates = %d, want 1", rep.DuplicateEffectsOutsideOpenCase)
		}
	})
	t.Run("I2 financial flag counts as irreversible", func(t *testing.T) {
		l := ledgerOf(op("a", review.RiskCompensableWrite, review.NeedsReview, review.FlagFinancial))
		l.OpenCases["a"] = true
		rep := review.CheckInvariants(l, review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "chg-1", false), effect("a", "chg-2", false)}})
		only(t, rep, review.InvOneEffect)
	})
	t.Run("I2 compensable duplicates: compensated or in an open case", func(t *testing.T) {
		l := ledgerOf(op("a", review.RiskCompensableWrite, review.Confirmed), op("b", review.RiskCompensableWrite, review.NeedsReview),
			op("c", review.RiskCompensableWrite, review.Confirmed), op("g", review.RiskGenerate, review.Confirmed))
		l.OpenCases["b"] = true
		truth := review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "f-1", false), effect("a", "f-2", true), effect("b", "f-3", false),
			effect("b", "f-4", false), effect("g", "f-5", false), effect("g", "f-6", false), effect("c", "f-7", false)}}
		rep := review.CheckInvariants(l, truth)
		only(t, rep)
		if rep.DuplicateEffectsOutsideOpenCase != 0 {
			t.Fatalf("duplicates = %d, want 0", rep.DuplicateEffectsOutsideOpenCase)
		}
		delete(l.OpenCases, "b")
		rep = review.CheckInvariants(l, truth)
		only(t, rep, review.InvOneEffect)
		// A case opened later mends it: the violation says so.
		if v := rep.Broken(review.InvOneEffect); len(v) != 1 || !v[0].AwaitsCase || v[0].OperationID != "b" {
			t.Fatalf("I2 violations %+v, want one on b awaiting a case", v)
		}
	})
	t.Run("I2 idempotent write without key support is compensable", func(t *testing.T) {
		l := ledgerOf(op("a", review.RiskIdempotentWrite, review.NeedsReview))
		l.OpenCases["a"] = true
		effects := []review.TrueEffect{effect("a", "fld-1", false), effect("a", "fld-2", false)}
		only(t, review.CheckInvariants(l, review.Truth{Config: noKeys, Effects: effects}))
		only(t, review.CheckInvariants(l, review.Truth{Config: cfg, Effects: effects}), review.InvOneEffect)
	})
	t.Run("I2 an effect of an unknown operation or another version", func(t *testing.T) {
		other := effect("a", "f-2", false)
		other.LogicalVersion = "2"
		rep := review.CheckInvariants(ledgerOf(op("a", review.RiskCompensableWrite, review.NeedsReview)),
			review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("ghost", "f-1", false), other}})
		only(t, rep, review.InvOneEffect)
		if n := len(rep.Broken(review.InvOneEffect)); n != 2 {
			t.Fatalf("I2 violations %v, want 2", rep.Violations)
		}
	})
	t.Run("ledger against truth", func(t *testing.T) {
		rep := review.CheckInvariants(ledgerOf(op("a", review.RiskIdempotentWrite, review.Failed), op("b", review.RiskCompensableWrite, review.Confirmed)),
			review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "fld-1", false)}})
		if rep.FailedWithEffect != 1 || rep.ConfirmedWithoutEffect != 1 {
			t.Fatalf("ledger vs truth = %d failed with effect, %d confirmed without", rep.FailedWithEffect, rep.ConfirmedWithoutEffect)
		}
		only(t, rep, review.LedgerVsTruth)
	})
	t.Run("ledger against truth: a compensation confirmed while its resource lives", func(t *testing.T) {
		undo := func(id, ref string) *review.Operation {
			o := op(id, review.RiskCompensableWrite, review.Confirmed)
			o.Action, o.Payload = review.CompensationPrefix+"act", []byte(`{"compensates":"a","resource":"`+ref+`"}`)
			return o
		}
		l := ledgerOf(op("a", review.RiskCompensableWrite, review.Confirmed), undo("u1", "fld-2"), undo("u2", "fld-3"))
		truth := review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "fld-1", false), effect("a", "fld-2", true), effect("a", "fld-3", true)}}
		only(t, review.CheckInvariants(l, truth)) // a compensation makes no effect of its own: that is no violation
		truth.Effects[2].Compensated = false
		rep := review.CheckInvariants(l, truth)
		only(t, rep, review.LedgerVsTruth, review.InvOneEffect)
		if rep.ConfirmedWithoutEffect != 1 {
			t.Fatalf("confirmed without effect = %d, want the undo of fld-3", rep.ConfirmedWithoutEffect)
		}
	})

	ev := func(seq int64, id, action string, from, to review.State, n int) review.TrailEvent {
		return review.TrailEvent{Seq: seq, OperationID: id, Action: action, FromState: from, ToState: to, N: n}
	}
	t.Run("I3 attempt granted while ambiguous", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.InFlight)
		o.Attempts = []review.Attempt{{N: 1, FinishedAt: &t0}, {N: 2}}
		l := ledgerOf(o)
		l.Trail = []review.TrailEvent{ev(1, "a", "operation.registered", "", review.Pending, 0),
			ev(2, "a", "attempt.started", review.Pending, review.InFlight, 1),
			ev(3, "a", "attempt.outcome", review.InFlight, review.Ambiguous, 0),
			ev(4, "a", "attempt.started", review.Ambiguous, review.InFlight, 2)}
		only(t, review.CheckInvariants(l, review.Truth{Config: cfg}), review.InvNoBlindAttempt)
	})
	t.Run("I3 attempts numbered out of order", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.InFlight)
		o.Attempts = []review.Attempt{{N: 1}}
		l := ledgerOf(o)
		l.Trail = []review.TrailEvent{ev(1, "a", "operation.registered", "", review.Pending, 0),
			ev(2, "a", "attempt.started", review.Pending, review.InFlight, 2)}
		only(t, review.CheckInvariants(l, review.Truth{Config: cfg}), review.InvNoBlindAttempt)
	})
	t.Run("I5 one event per transition", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.Confirmed)
		o.Attempts = []review.Attempt{{N: 1, FinishedAt: &t0}}
		o.Evidence = []review.Evidence{{Source: review.SourceResponse, Authoritative: true, Verdict: review.VerdictConfirms}}
		l := ledgerOf(o)
		l.Trail = []review.TrailEvent{ev(1, "a", "operation.registered", "", review.Pending, 0),
			ev(2, "a", "attempt.started", review.Pending, review.InFlight, 1),
			ev(3, "a", "attempt.outcome", review.InFlight, review.Confirmed, 0)}
		truth := review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "f-1", false)}}
		only(t, review.CheckInvariants(l, truth))
		l.Trail = l.Trail[:2] // the outcome's event is missing
		only(t, review.CheckInvariants(l, truth), review.InvTrail)
		l = ledgerOf()
		l.AuditProblem = "broken at seq 3"
		only(t, review.CheckInvariants(l, review.Truth{}), review.InvTrail)
	})

	t.Run("I5 an attempt closed without a report", func(t *testing.T) {
		// Attempt 1's success came late, after attempt 2 was granted:
		// attempt 2 is closed as unknown (attempt.closed, no report) and
		// the operation goes to review. The property test found I5
		// counting only attempt.outcome.
		o := op("a", review.RiskCompensableWrite, review.NeedsReview)
		o.Attempts = []review.Attempt{{N: 1, FinishedAt: &t0, Result: review.ResultUnknown}, {N: 2, FinishedAt: &t0, Result: review.ResultUnknown}}
		l := ledgerOf(o)
		l.OpenCases["a"] = true
		l.Trail = []review.TrailEvent{ev(1, "a", "operation.registered", "", review.Pending, 0),
			ev(2, "a", "attempt.started", review.Pending, review.InFlight, 1),
			ev(3, "a", "attempt.outcome", review.InFlight, review.RetryWait, 0),
			ev(4, "a", "attempt.started", review.RetryWait, review.InFlight, 2),
			ev(5, "a", "attempt.closed", "", "", 0),
			ev(6, "a", "operation.escalated", review.InFlight, review.NeedsReview, 0)}
		truth := review.Truth{Config: noKeys, Effects: []review.TrueEffect{effect("a", "f-1", false)}}
		only(t, review.CheckInvariants(l, truth))
		l.Trail = append(l.Trail[:4], l.Trail[5]) // attempt 2 finished with no event
		only(t, review.CheckInvariants(l, truth), review.InvTrail)
	})

	t.Run("I4 an expired attempt left open by a sweep round", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.Ambiguous)
		swept := t0.Add(1500 * time.Millisecond)
		o.Attempts = []review.Attempt{{N: 1, LeaseExpiresAt: t0, FinishedAt: &swept, Result: review.ResultUnknown}}
		rounds := []review.SweepRound{{Start: t0.Add(time.Second), End: t0.Add(1100 * time.Millisecond)},
			{Start: t0.Add(2 * time.Second), End: t0.Add(2100 * time.Millisecond)}}
		truth := review.Truth{Config: cfg, Sweeps: rounds, SweepEvery: time.Second, SweepSlack: time.Second,
			Slop: 5 * time.Millisecond, Settled: true, StoppedAt: t0.Add(3 * time.Second)}
		l := ledgerOf(o)
		rep := checkLeasesOnly(l, truth)
		if len(rep) != 2 { // ambiguous at the end, and swept a round late
			t.Fatalf("I4 violations: %v", rep)
		}
		o.State = review.NeedsReview
		onTime := t0.Add(1050 * time.Millisecond)
		o.Attempts[0].FinishedAt = &onTime
		if rep := checkLeasesOnly(l, truth); len(rep) != 0 {
			t.Fatalf("I4 violations: %v", rep)
		}
		o.Attempts = append(o.Attempts, review.Attempt{N: 2, LeaseExpiresAt: t0.Add(1500 * time.Millisecond)})
		if rep := checkLeasesOnly(l, truth); len(rep) != 1 {
			t.Fatalf("I4 violations: %v", rep)
		}
	})
	t.Run("I4 a parent waits in compensating only while its undo is in review", func(t *testing.T) {
		parent := op("p", review.RiskCompensableWrite, review.Compensating)
		undo := op("u", review.RiskCompensableWrite, review.NeedsReview)
		undo.Action, undo.Payload = review.CompensationPrefix+"act", []byte(`{"compensates":"p","resource":"f-2"}`)
		truth := review.Truth{Config: cfg, Settled: true}
		if rep := checkLeasesOnly(ledgerOf(parent, undo), truth); len(rep) != 0 {
			t.Errorf("I4 violations with the undo in review: %v", rep)
		}
		undo.State = review.Ambiguous
		if rep := checkLeasesOnly(ledgerOf(parent, undo), truth); len(rep) != 2 {
			t.Errorf("I4 violations with the undo ambiguous at the end: %v, want the parent's and the undo's", rep)
		}
	})
	t.Run("I4 an operation left unsettled names what it waited on", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.Ambiguous)
		o.UpdatedAt = t0
		o.Attempts = []review.Attempt{{N: 1}, {N: 2}}
		o.Jobs = []review.Job{{Ref: "job-1", Attempt: 1, Status: review.JobFailed}}
		o.Evidence = []review.Evidence{{Source: review.SourceMetadataSearch, Verdict: review.VerdictInconclusive,
			Note: "search inside the lag", ObservedAt: t0.Add(time.Second)}}
		l := ledgerOf(o)
		l.Trail = []review.TrailEvent{{OperationID: "a", Action: "reconcile.inconclusive"},
			{OperationID: "a", Action: "reconcile.inconclusive"}, {OperationID: "b", Action: "reconcile.inconclusive"}}
		rep := checkLeasesOnly(l, review.Truth{Config: cfg, Settled: true})
		if len(rep) != 1 {
			t.Fatalf("I4 violations: %v", rep)
		}
		for _, want := range []string{"since " + t0.Format(time.RFC3339Nano), "2 attempts", "2 inconclusive rounds",
			"job job-1 of attempt 1 failed", "1 evidence rows, the latest metadata_search inconclusive at", "search inside the lag"} {
			if !strings.Contains(rep[0].Detail, want) {
				t.Errorf("violation %q does not say %q", rep[0].Detail, want)
			}
		}
	})
	t.Run("I4 a stalled sweeper", func(t *testing.T) {
		truth := review.Truth{Sweeps: []review.SweepRound{{Start: t0, End: t0.Add(10 * time.Millisecond)},
			{Start: t0.Add(5 * time.Second), End: t0.Add(5010 * time.Millisecond)}}, SweepEvery: time.Second, SweepSlack: time.Second}
		only(t, review.CheckInvariants(ledgerOf(), truth), review.InvLeases)
		// The gap spans an outage (the fault run killed Limbo): no stall.
		truth.Outages = []review.Outage{{From: t0.Add(2 * time.Second), To: t0.Add(4 * time.Second)}}
		only(t, review.CheckInvariants(ledgerOf(), truth))
		truth.Outages = []review.Outage{{From: t0.Add(6 * time.Second), To: t0.Add(7 * time.Second)}}
		only(t, review.CheckInvariants(ledgerOf(), truth), review.InvLeases)
		truth.Outages = nil
		truth.SweepEvery = 0 // a fake clock's explicit rounds have no interval
		only(t, review.CheckInvariants(ledgerOf(), truth))
	})
	t.Run("I4 waiting past the deadline after the deadline sweep", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.RetryWait)
		o.Deadline = t0
		truth := review.Truth{Config: cfg, DeadlineSweep: t0.Add(-time.Second)}
		if rep := checkLeasesOnly(ledgerOf(o), truth); len(rep) != 0 {
			t.Fatalf("a sweep before the deadline: %v", rep)
		}
		truth.DeadlineSweep = t0
		if rep := checkLeasesOnly(ledgerOf(o), truth); len(rep) != 1 {
			t.Fatalf("retry_wait past its deadline after the sweep: %v", rep)
		}
		o.State = review.Ambiguous // the reconciler's, not the deadline sweeper's
		if rep := checkLeasesOnly(ledgerOf(o), truth); len(rep) != 0 {
			t.Fatalf("ambiguous: %v", rep)
		}
	})
	t.Run("I7 confirmed without confirming evidence", func(t *testing.T) {
		o := op("a", review.RiskCompensableWrite, review.Confirmed)
		o.Evidence = []review.Evidence{{Source: review.SourceWebhook, Verdict: review.VerdictConfirms},
			{Source: review.SourceMetadataSearch, Verdict: review.VerdictConfirms}} // not authoritative
		truth := review.Truth{Config: cfg, Effects: []review.TrueEffect{effect("a", "f-1", false)}}
		only(t, review.CheckInvariants(ledgerOf(o), truth), review.InvEvidence)
		o.Evidence = append(o.Evidence, review.Evidence{Source: review.SourceReviewer, Verdict: review.VerdictConfirms})
		if rep := review.CheckInvariants(ledgerOf(o), truth); len(rep.Broken(review.InvEvidence)) != 0 {
			t.Fatalf("a reviewer's confirmation: %v", rep.Violations)
		}
	})
	t.Run("I6 two rows for one key", func(t *testing.T) {
		a, b := op("a", review.RiskRead, review.Confirmed), op("b", review.RiskRead, review.Confirmed)
		b.Key = a.Key
		only(t, review.CheckInvariants(ledgerOf(a, b), review.Truth{}), review.InvSameOperation)
	})
	t.Run("I1 an acknowledged operation missing", func(t *testing.T) {
		l := ledgerOf()
		l.Acks = []review.Ack{{Intention: "doc-1", ID: "gone", Key: "k", PayloadHash: "h"}, {Intention: "doc-1", ID: "gone", Key: "k", PayloadHash: "h"}}
		rep := review.CheckInvariants(l, review.Truth{})
		only(t, rep, review.InvDurable)
		if rep.Lost != 1 {
			t.Fatalf("lost = %d, want 1", rep.Lost)
		}
	})
	t.Run("I6 a re-registration answered with another operation", func(t *testing.T) {
		a := op("a", review.RiskRead, review.Pending)
		b := op("b", review.RiskRead, review.Pending)
		l := ledgerOf(a, b)
		l.Acks = []review.Ack{{Intention: "doc-1", ID: "a", Key: a.Key, PayloadHash: a.PayloadHash}}
		only(t, review.CheckInvariants(l, review.Truth{}))
		l.Acks = append(l.Acks, review.Ack{Intention: "doc-1", ID: "b", Key: b.Key, PayloadHash: b.PayloadHash})
		only(t, review.CheckInvariants(l, review.Truth{}), review.InvSameOperation)
		l.Acks = l.Acks[:1]
		l.Acks[0].PayloadHash = "other"
		only(t, review.CheckInvariants(l, review.Truth{}), review.InvSameOperation)
	})
}

// checkLeasesOnly returns the I4 violations for l under truth.
func checkLeasesOnly(l review.Ledger, truth review.Truth) []review.Violation {
	rep := review.CheckInvariants(l, truth)
	return rep.Broken(review.InvLeases)
}
