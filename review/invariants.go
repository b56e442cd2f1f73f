package review

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// docs/RELIABILITY.md's invariants, stated once. CheckInvariants reads what
// Limbo holds (a Ledger) against what really happened at the destination
// (a Truth) and names every broken invariant. The fault harness (`limbo
// chaos`), the crash test and the stateful property test all call it, so
// they cannot disagree on what I1–I7 mean.

// Invariant names, as RELIABILITY.md numbers them.
const (
	// InvDurable, I1: every acknowledged operation exists durably.
	InvDurable = "I1"
	// InvOneEffect, I2: at most one effect per operation and version for
	// irreversible and idempotent writes; every extra effect of a
	// compensable write compensated or in an open case.
	InvOneEffect = "I2"
	// InvNoBlindAttempt, I3: no attempt granted while the operation is
	// ambiguous, in review or terminal.
	InvNoBlindAttempt = "I3"
	// InvLeases, I4: no attempt open past its lease plus one sweep; every
	// operation ends terminal or in review within its deadline.
	InvLeases = "I4"
	// InvTrail, I5: exactly one audit event per transition, and the chain
	// verifies.
	InvTrail = "I5"
	// InvSameOperation, I6: re-registration returns the same operation,
	// never a second row.
	InvSameOperation = "I6"
	// InvEvidence, I7: no operation confirmed without persisted evidence
	// that confirms it.
	InvEvidence = "I7"
	// LedgerVsTruth is not one of I1–I7 but follows from the guiding rule
	// (state follows from the evidence): a write failed although the
	// destination holds its effect, or confirmed although it holds none.
	LedgerVsTruth = "ledger_vs_truth"
)

// Invariants lists I1–I7 in order.
func Invariants() []string {
	return []string{InvDurable, InvOneEffect, InvNoBlindAttempt, InvLeases, InvTrail, InvSameOperation, InvEvidence}
}

// Ledger is what Limbo holds, as the invariants read it.
type Ledger struct {
	// Operations with their attempts, evidence and jobs.
	Operations []*Operation
	// Trail is the audit events about these operations, in sequence order
	// (events about other operations are ignored).
	Trail []TrailEvent
	// OpenCases names the operations with an open case;
	// Recommendations holds what each of those cases recommends.
	OpenCases       map[string]bool
	Recommendations map[string]Recommendation
	// Acks are the registrations Limbo acknowledged (answered 200 or 201):
	// each names the operation, key and payload hash it was answered with.
	Acks []Ack
	// AuditProblem is what verifying the audit chain found; "" when it
	// holds or was not verified.
	AuditProblem string
}

// TrailEvent is one audit event about an operation.
type TrailEvent struct {
	Seq         int64
	OperationID string
	Action      string
	FromState   State
	ToState     State
	// N is the attempt number an attempt.started event grants (its detail's
	// "n"; 0 when the detail does not say, which I3 counts as wrong).
	N int
}

// Ack is one acknowledged registration.
type Ack struct {
	// Intention names the business intention the caller registered (any
	// string the caller uses for it): every ack of one intention must name
	// the same operation, key and payload hash.
	Intention   string
	ID          string
	Key         string
	PayloadHash string
}

// TrueEffect is one effect the destination really performed.
type TrueEffect struct {
	OperationID    string
	LogicalVersion string
	Ref            string
	// Compensated: the effect was undone (it no longer counts).
	Compensated bool
}

// SweepRound is one round of the lease sweeper.
type SweepRound struct{ Start, End time.Time }

// Outage is a time Limbo was down on purpose (a fault run killed it or
// its database): no sweep round is due inside one.
type Outage struct{ From, To time.Time }

// Truth is what really happened: the destination's effects, and the
// conditions the ledger is judged under.
type Truth struct {
	Effects []TrueEffect
	// Config says how each destination treats keys, which decides I2's
	// class for each operation.
	Config *Config
	// Sweeps are the lease-sweep rounds that ran, in order (I4).
	Sweeps []SweepRound
	// SweepEvery, when not zero, is the sweeper's interval: a round that
	// starts more than SweepSlack after it was due means the sweeper
	// stalled (I4).
	SweepEvery, SweepSlack time.Duration
	// Slop is how far clock reads around a sweep round may be apart.
	Slop time.Duration
	// Outages are the times Limbo was down; a gap between sweep rounds
	// that spans one is no stall.
	Outages []Outage
	// DeadlineSweep, when not zero, is when the deadline sweeper last ran:
	// an operation past its deadline by then may not still wait in a state
	// that sweeper ends (pending, awaiting_approval, retry_wait, accepted).
	DeadlineSweep time.Time
	// Settled: the run is over and everything had time to settle, so every
	// operation must be terminal or in needs_review (I4).
	Settled bool
	// StoppedAt is when the run stopped (for an attempt still open, the
	// lateness figure counts up to it).
	StoppedAt time.Time
}

// Violation is one broken invariant.
type Violation struct {
	// Invariant is I1…I7 or LedgerVsTruth.
	Invariant   string
	OperationID string
	Detail      string
	// AwaitsCase marks I2's compensable extra effect that no open case
	// holds yet: the one violation a case opened later can still mend, so
	// a caller judging between steps may tell it apart without reading
	// Detail.
	AwaitsCase bool
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// InvariantReport is what CheckInvariants found.
type InvariantReport struct {
	Violations []Violation
	// DuplicateEffectsOutsideOpenCase counts live effects beyond the first
	// for one operation and version (writes) whose operation has no open
	// case.
	DuplicateEffectsOutsideOpenCase int
	// Lost counts acknowledged operations missing from the ledger.
	Lost int
	// FailedWithEffect and ConfirmedWithoutEffect count writes whose final
	// state the destination contradicts.
	FailedWithEffect, ConfirmedWithoutEffect int
	// MaxSweepLateness is the longest an expired attempt stayed open past
	// its lease.
	MaxSweepLateness time.Duration
}

// Holds reports whether no invariant (nor the ledger against the truth)
// is broken.
func (r *InvariantReport) Holds() bool { return len(r.Violations) == 0 }

// Broken lists the violations of one invariant.
func (r *InvariantReport) Broken(inv string) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Invariant == inv {
			out = append(out, v)
		}
	}
	return out
}

func (r *InvariantReport) violate(inv, opID, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Invariant: inv, OperationID: opID, Detail: fmt.Sprintf(format, args...)})
}

// CheckInvariants checks I1–I7 (and the ledger against the truth) on l
// against t. It is pure: the same ledger and truth give the same report.
func CheckInvariants(l Ledger, t Truth) InvariantReport {
	var r InvariantReport
	byID := make(map[string]*Operation, len(l.Operations))
	for _, op := range l.Operations {
		byID[op.ID] = op
	}
	if l.AuditProblem != "" {
		r.violate(InvTrail, "", "audit verify: %s", l.AuditProblem)
	}
	checkAcks(&r, l, byID)
	checkKeys(&r, l)
	checkEffects(&r, l, t, byID)
	checkTrail(&r, l, byID)
	checkLeases(&r, l, t)
	checkConfirmations(&r, l)
	return r
}

// checkAcks: I1, every acknowledged operation is in the ledger with the
// key and hash it was acknowledged with; I6, every ack of one intention
// named the same operation.
func checkAcks(r *InvariantReport, l Ledger, byID map[string]*Operation) {
	first := map[string]Ack{}
	lost := map[string]bool{}
	for _, a := range l.Acks {
		if f, ok := first[a.Intention]; !ok {
			first[a.Intention] = a
		} else if a.ID != f.ID || a.Key != f.Key || a.PayloadHash != f.PayloadHash {
			r.violate(InvSameOperation, a.ID, "re-registration of %s answered %s/%s/%s, first answer %s/%s/%s",
				a.Intention, a.ID, a.Key, a.PayloadHash, f.ID, f.Key, f.PayloadHash)
		}
		op, ok := byID[a.ID]
		switch {
		case !ok:
			if !lost[a.ID] {
				lost[a.ID] = true
				r.Lost++
				r.violate(InvDurable, a.ID, "acknowledged operation %s (%s) is not in the database", a.ID, a.Intention)
			}
		case op.Key != a.Key || op.PayloadHash != a.PayloadHash:
			r.violate(InvSameOperation, op.ID, "operation %s: stored key/hash %s/%s, acknowledged %s/%s", op.ID, op.Key, op.PayloadHash, a.Key, a.PayloadHash)
		}
	}
}

// checkKeys: I6, no key of a tenant has two rows.
func checkKeys(r *InvariantReport, l Ledger) {
	seen := map[[2]string]string{}
	for _, op := range l.Operations {
		k := [2]string{op.Tenant, op.Key}
		if other, dup := seen[k]; dup {
			r.violate(InvSameOperation, op.ID, "key %s of tenant %s has two operations: %s and %s", op.Key, op.Tenant, other, op.ID)
		}
		seen[k] = op.ID
	}
}

// EffectClass is how I2 treats an operation's effects: a financial,
// irreversible or regulated flag makes any write irreversible; an idempotent write at a
// destination that does not honour keys is compensable.
func EffectClass(op *Operation, d Destination) Risk {
	if RetryNeedsReviewer(op) {
		return RiskIrreversible
	}
	return EffectiveRisk(op.Risk, d, time.Time{}, time.Time{})
}

// checkEffects: I2 against the destination's effects, and the ledger's
// states against them.
func checkEffects(r *InvariantReport, l Ledger, t Truth, byID map[string]*Operation) {
	type group struct{ live int }
	groups := map[[2]string]*group{}
	live := map[string]int{}
	for _, e := range t.Effects {
		op, ok := byID[e.OperationID]
		if !ok {
			r.violate(InvOneEffect, e.OperationID, "effect %s names operation %q, which Limbo does not know", e.Ref, e.OperationID)
			continue
		}
		if e.LogicalVersion != op.LogicalVersion {
			r.violate(InvOneEffect, op.ID, "effect %s of operation %s is for version %s, the operation's is %s", e.Ref, op.ID, e.LogicalVersion, op.LogicalVersion)
		}
		k := [2]string{e.OperationID, e.LogicalVersion}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		if !e.Compensated {
			g.live++
			live[e.OperationID]++
		}
	}
	keys := make([][2]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		g, op := groups[k], byID[k[0]]
		class := EffectClass(op, t.Config.Destination(op.Destination))
		extra := g.live - 1
		if extra <= 0 || class == RiskRead || class == RiskGenerate {
			continue
		}
		inCase := l.OpenCases[op.ID]
		if !inCase {
			r.DuplicateEffectsOutsideOpenCase += extra
		}
		switch {
		case class == RiskIrreversible || class == RiskIdempotentWrite:
			r.violate(InvOneEffect, op.ID, "%s operation %s (%s) has %d live effects for version %s", class, op.ID, op.Action, g.live, k[1])
		case !inCase:
			r.violate(InvOneEffect, op.ID, "compensable operation %s (%s) has %d live effects for version %s and no open case", op.ID, op.Action, g.live, k[1])
			r.Violations[len(r.Violations)-1].AwaitsCase = true
		}
	}
	undone := map[string]bool{}
	for _, e := range t.Effects {
		if e.Compensated {
			undone[e.Ref] = true
		}
	}
	for _, op := range l.Operations {
		if op.Risk == RiskRead || op.Risk == RiskGenerate {
			continue
		}
		if ref := CompensationResource(op); ref != "" {
			// A compensation's effect is the undo of another's resource.
			if op.State == Confirmed && !undone[ref] {
				r.ConfirmedWithoutEffect++
				r.violate(LedgerVsTruth, op.ID, "compensation %s is confirmed, but %s is still live at the destination", op.ID, ref)
			}
			continue
		}
		switch {
		case op.State == Failed && live[op.ID] > 0:
			r.FailedWithEffect++
			r.violate(LedgerVsTruth, op.ID, "operation %s (%s) is failed (%s), but the destination holds its effect", op.ID, op.Action, op.StateReason)
		case op.State == Confirmed && live[op.ID] == 0:
			r.ConfirmedWithoutEffect++
			r.violate(LedgerVsTruth, op.ID, "operation %s (%s) is confirmed, but the destination holds no effect of it", op.ID, op.Action)
		}
	}
}

// checkTrail replays each operation's audit trail: I5, exactly one event
// per transition (the registration, then each change from the state the
// trail says it was in, ending in the stored state; one attempt.started per
// attempt, one attempt.outcome or attempt.closed per finished attempt); I3, every attempt was
// granted from pending or retry_wait — never while ambiguous, in review or
// terminal — and numbered in order.
func checkTrail(r *InvariantReport, l Ledger, byID map[string]*Operation) {
	state := map[string]State{}
	started, outcomes := map[string]int{}, map[string]int{}
	for _, e := range l.Trail {
		if e.OperationID == "" || byID[e.OperationID] == nil {
			continue
		}
		cur, seen := state[e.OperationID]
		switch {
		case e.Action == "operation.registered":
			if seen {
				r.violate(InvTrail, e.OperationID, "operation %s has a second operation.registered event (seq %d)", e.OperationID, e.Seq)
			}
			state[e.OperationID] = e.ToState
			continue
		case !seen:
			r.violate(InvTrail, e.OperationID, "operation %s: event %s (seq %d) before its registration", e.OperationID, e.Action, e.Seq)
			continue
		}
		switch e.Action {
		case "attempt.started":
			started[e.OperationID]++
			if !cur.Attemptable() || e.FromState != cur {
				r.violate(InvNoBlindAttempt, e.OperationID, "operation %s: attempt granted at seq %d while %s (event says from %s)", e.OperationID, e.Seq, cur, e.FromState)
			}
			if e.N != started[e.OperationID] {
				r.violate(InvNoBlindAttempt, e.OperationID, "operation %s: attempt.started at seq %d grants n=%d, the trail counts %d", e.OperationID, e.Seq, e.N, started[e.OperationID])
			}
		case "attempt.outcome", "attempt.closed":
			// attempt.closed: closed as unknown without a report (superseded,
			// or in review after an earlier attempt's late success).
			outcomes[e.OperationID]++
		}
		if e.ToState != "" {
			if e.FromState != cur {
				r.violate(InvTrail, e.OperationID, "operation %s: %s at seq %d moves from %s, but the trail says it was %s", e.OperationID, e.Action, e.Seq, e.FromState, cur)
			}
			state[e.OperationID] = e.ToState
		}
	}
	for _, op := range l.Operations {
		got, ok := state[op.ID]
		switch {
		case !ok:
			r.violate(InvTrail, op.ID, "operation %s has no operation.registered event", op.ID)
		case got != op.State:
			r.violate(InvTrail, op.ID, "operation %s is %s, but its audit trail ends in %s", op.ID, op.State, got)
		}
		finished := 0
		for _, a := range op.Attempts {
			if a.FinishedAt != nil {
				finished++
			}
		}
		if started[op.ID] != len(op.Attempts) {
			r.violate(InvTrail, op.ID, "operation %s: %d attempt.started events for %d attempts", op.ID, started[op.ID], len(op.Attempts))
		}
		if outcomes[op.ID] != finished {
			r.violate(InvTrail, op.ID, "operation %s: %d attempt.outcome and attempt.closed events for %d finished attempts", op.ID, outcomes[op.ID], finished)
		}
	}
}

// deadlineOwned are the states the deadline sweeper ends (ExpireDeadlines);
// ambiguous operations are the reconciler's, in-flight ones the lease
// sweeper's.
func deadlineOwned(s State) bool {
	return s == Pending || s == AwaitingApproval || s == RetryWait || s == Accepted
}

// unsettled says what an operation left unsettled at the end of a run
// was waiting on, so that a failed fault run can be read without a
// replay (which takes other timings): when it last moved, its attempts
// and jobs, how many reconciliation rounds settled nothing, and what its
// latest evidence says.
func unsettled(op *Operation, trail []TrailEvent) string {
	rounds := 0
	for _, e := range trail {
		if e.OperationID == op.ID && e.Action == "reconcile.inconclusive" {
			rounds++
		}
	}
	parts := []string{fmt.Sprintf("since %s", op.UpdatedAt.UTC().Format(time.RFC3339Nano)),
		fmt.Sprintf("%d attempts", len(op.Attempts)), fmt.Sprintf("%d inconclusive rounds", rounds)}
	for _, j := range op.Jobs {
		parts = append(parts, fmt.Sprintf("job %s of attempt %d %s", j.Ref, j.Attempt, j.Status))
	}
	if n := len(op.Evidence); n > 0 {
		ev := op.Evidence[n-1]
		parts = append(parts, fmt.Sprintf("%d evidence rows, the latest %s %s at %s: %s", n, ev.Source, ev.Verdict,
			ev.ObservedAt.UTC().Format(time.RFC3339Nano), ev.Note))
	}
	return strings.Join(parts, "; ")
}

// checkLeases: I4, no attempt stays open past its lease plus one sweep —
// the first sweep round that starts after an attempt's lease expired must
// close it, and rounds come at the sweep interval (or right after a round
// that outlasted it) —, nothing waits past its deadline once the deadline
// sweeper has run, and at the end every operation is terminal or in review.
func checkLeases(r *InvariantReport, l Ledger, t Truth) {
	sweeps := t.Sweeps
	if t.SweepEvery > 0 {
		for i := 1; i < len(sweeps); i++ {
			due := sweeps[i-1].Start.Add(t.SweepEvery)
			if sweeps[i-1].End.After(due) {
				due = sweeps[i-1].End
			}
			if late := sweeps[i].Start.Sub(due); late > t.SweepSlack && !t.downBetween(sweeps[i-1].Start, sweeps[i].Start) {
				r.violate(InvLeases, "", "the lease sweeper stalled: a round started %s late at %s", late.Round(time.Millisecond), sweeps[i].Start.Format(time.RFC3339Nano))
			}
		}
	}
	// firstAfter is the first completed round that started at or after t.
	firstAfter := func(at time.Time) (SweepRound, bool) {
		i := sort.Search(len(sweeps), func(i int) bool { return !sweeps[i].Start.Before(at) })
		if i == len(sweeps) {
			return SweepRound{}, false
		}
		return sweeps[i], true
	}
	// A parent waits in compensating while its undo is in review: a
	// person decides that on the compensation's case, and the parent
	// follows (CompensationSettles).
	undoInReview := map[string]bool{}
	for _, op := range l.Operations {
		if p := CompensationParent(op); p != "" && op.State == NeedsReview {
			undoInReview[p] = true
		}
	}
	var worst time.Duration
	for _, op := range l.Operations {
		switch {
		case t.Settled && !op.State.Terminal() && op.State != NeedsReview && !(op.State == Compensating && undoInReview[op.ID]):
			r.violate(InvLeases, op.ID, "operation %s (%s %s) ended %s: %s (%s)", op.ID, op.Risk, op.Action, op.State, op.StateReason, unsettled(op, l.Trail))
		case !t.DeadlineSweep.IsZero() && deadlineOwned(op.State) && !op.Deadline.IsZero() && !op.Deadline.After(t.DeadlineSweep):
			r.violate(InvLeases, op.ID, "operation %s (%s %s) is still %s after the deadline sweep of %s, its deadline %s",
				op.ID, op.Risk, op.Action, op.State, t.DeadlineSweep.Format(time.RFC3339Nano), op.Deadline.Format(time.RFC3339Nano))
		}
		for _, a := range op.Attempts {
			switch {
			case a.FinishedAt == nil:
				if rd, ok := firstAfter(a.LeaseExpiresAt.Add(t.Slop)); ok {
					r.violate(InvLeases, op.ID, "operation %s attempt %d: lease expired at %s, still open after the sweep round of %s",
						op.ID, a.N, a.LeaseExpiresAt.Format(time.RFC3339Nano), rd.Start.Format(time.RFC3339Nano))
				}
				if !t.StoppedAt.IsZero() {
					worst = max(worst, t.StoppedAt.Sub(a.LeaseExpiresAt))
				}
			case a.Result == ResultUnknown: // closed by the sweeper
				worst = max(worst, a.FinishedAt.Sub(a.LeaseExpiresAt))
				if rd, ok := firstAfter(a.LeaseExpiresAt.Add(t.Slop)); ok && a.FinishedAt.After(rd.End.Add(t.Slop)) {
					r.violate(InvLeases, op.ID, "operation %s attempt %d: lease expired at %s, closed at %s, after the sweep round of %s–%s",
						op.ID, a.N, a.LeaseExpiresAt.Format(time.RFC3339Nano), a.FinishedAt.Format(time.RFC3339Nano),
						rd.Start.Format(time.RFC3339Nano), rd.End.Format(time.RFC3339Nano))
				}
			}
		}
	}
	r.MaxSweepLateness = worst
}

// downBetween reports whether an outage overlaps the time from a to b.
func (t Truth) downBetween(a, b time.Time) bool {
	for _, o := range t.Outages {
		if o.From.Before(b) && o.To.After(a) {
			return true
		}
	}
	return false
}

// checkConfirmations: I7, every confirmed operation has evidence that
// confirms it from an authoritative source or a reviewer.
func checkConfirmations(r *InvariantReport, l Ledger) {
	for _, op := range l.Operations {
		if op.State != Confirmed {
			continue
		}
		ok := false
		for _, ev := range op.Evidence {
			if ev.Verdict == VerdictConfirms && (ev.Authoritative || ev.Source == SourceReviewer) {
				ok = true
				break
			}
		}
		if !ok {
			r.violate(InvEvidence, op.ID, "operation %s (%s) is confirmed without confirming evidence", op.ID, op.Action)
		}
	}
}
