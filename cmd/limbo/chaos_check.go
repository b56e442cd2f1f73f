package main

// The checks at the end of `limbo chaos`: the ledger (through the store's
// API, no SQL here) against the sandbox's ground truth and against itself,
// one check per invariant of RELIABILITY.md.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
)

// sweepSlack is how much later than its interval a sweep round may start
// (a busy scheduler, a slow round before it) before I4 counts the sweeper
// as stalled.
const sweepSlack = time.Second

// maxViolations bounds the examples kept per invariant.
const maxViolations = 5

// chaosSummary is what `limbo chaos` prints.
type chaosSummary struct {
	Operations int                  `json:"operations"`
	States     map[review.State]int `json:"states"`
	// DuplicateEffectsOutsideOpenCase counts effects beyond the first for
	// one operation and version (irreversible, idempotent and compensable
	// writes) whose operation has no open case.
	DuplicateEffectsOutsideOpenCase int `json:"duplicate_effects_outside_open_case"`
	// Lost counts acknowledged operations missing from the database.
	Lost int `json:"lost"`
	// SettledWithoutPerson is the share of operations that ended terminal
	// without any reviewer's decision.
	SettledWithoutPerson float64         `json:"settled_without_person"`
	Invariants           map[string]bool `json:"invariants"`
	DB                   string          `json:"db"`

	Effects       int            `json:"effects"`
	Attempts      int            `json:"attempts"`
	Registrations int            `json:"registrations"`
	Kills         int            `json:"kills"`
	OpenCases     int            `json:"open_cases"`
	CaseReasons   map[string]int `json:"case_reasons,omitempty"`
	// LedgerVsTruth compares final states with the destination's effects
	// for writes: a failed operation whose effect exists, a confirmed one
	// whose effect does not.
	LedgerVsTruth struct {
		FailedWithEffect       int `json:"failed_with_effect"`
		ConfirmedWithoutEffect int `json:"confirmed_without_effect"`
	} `json:"ledger_vs_truth"`
	// MaxSweepLateness is the longest an expired attempt stayed open past
	// its lease.
	MaxSweepLateness string `json:"max_sweep_lateness"`
	SettledInTime    bool   `json:"settled_in_time"`
	Seed             int64  `json:"seed"`
	Elapsed          string `json:"elapsed"`
	// Violations gives a few examples per broken invariant or discrepancy.
	Violations map[string][]string `json:"violations,omitempty"`
}

// Holds reports whether every invariant held.
func (s *chaosSummary) Holds() bool {
	for _, ok := range s.Invariants {
		if !ok {
			return false
		}
	}
	return len(s.Invariants) > 0
}

func (s *chaosSummary) violate(inv, format string, args ...any) {
	if _, ok := s.Invariants[inv]; ok {
		s.Invariants[inv] = false
	}
	if s.Violations == nil {
		s.Violations = map[string][]string{}
	}
	if len(s.Violations[inv]) < maxViolations {
		s.Violations[inv] = append(s.Violations[inv], fmt.Sprintf(format, args...))
	}
}

// ledger is everything the checks read from the store.
type ledger struct {
	ops       []*review.Operation
	byID      map[string]*review.Operation
	events    []store.AuditEvent
	openCases map[string]store.Case
	// decided: operations with a reviewer's decision in their trail.
	decided map[string]bool
}

func readLedger(ctx context.Context, st *store.Store, tenants []string) (*ledger, error) {
	l := &ledger{byID: map[string]*review.Operation{}, openCases: map[string]store.Case{}, decided: map[string]bool{}}
	for _, tenant := range tenants {
		cursor := ""
		for {
			ops, next, err := st.ListOperations(ctx, tenant, "", cursor, 500)
			if err != nil {
				return nil, err
			}
			for _, op := range ops {
				l.ops = append(l.ops, op)
				l.byID[op.ID] = op
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	for after := int64(0); ; {
		evs, err := st.AuditEvents(ctx, after, 5000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		l.events = append(l.events, evs...)
		after = evs[len(evs)-1].Seq
	}
	for _, e := range l.events {
		if e.Action == "case.resolved" {
			l.decided[e.OperationID] = true
		}
	}
	cases, err := st.OpenCases(ctx, 1<<30)
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		l.openCases[c.OperationID] = c
	}
	return l, nil
}

// checkChaos seals the audit trail and checks I1–I7.
func checkChaos(ctx context.Context, st *store.Store, anchors *anchor.Writer, igs []*integrator, truth []sandbox.Effect, cfg *review.Config, sweeps []sweepRound, stoppedAt time.Time) (*chaosSummary, error) {
	sum := &chaosSummary{States: map[review.State]int{}, CaseReasons: map[string]int{}, Invariants: map[string]bool{}}
	for i := 1; i <= 7; i++ {
		sum.Invariants[fmt.Sprintf("I%d", i)] = true
	}
	rep, err := sealAndVerify(ctx, st, anchors)
	if err != nil {
		return nil, err
	}
	if !rep.OK {
		sum.violate("I5", "audit verify: broken at seq %d: %s", rep.BrokenSeq, rep.Problem)
	}
	if rep.Unsealed > 0 {
		sum.violate("I5", "audit verify: %d events still unsealed", rep.Unsealed)
	}
	var tenants []string
	for _, ig := range igs {
		tenants = append(tenants, ig.name)
	}
	l, err := readLedger(ctx, st, tenants)
	if err != nil {
		return nil, err
	}
	sum.Operations = len(l.ops)
	sum.Effects = len(truth)
	sum.OpenCases = len(l.openCases)
	for _, c := range l.openCases {
		for _, r := range c.Reasons {
			sum.CaseReasons[string(r)]++
		}
	}
	checkAcks(sum, l, igs)
	checkKeys(sum, l)
	checkTruth(sum, l, truth, cfg)
	checkTrail(sum, l)
	checkLeases(sum, l, sweeps, stoppedAt)
	checkConfirmations(sum, l)

	settled := 0
	for _, op := range l.ops {
		sum.States[op.State]++
		sum.Attempts += len(op.Attempts)
		if op.State.Terminal() && !l.decided[op.ID] {
			settled++
		}
	}
	sum.SettledWithoutPerson = 1
	if len(l.ops) > 0 {
		sum.SettledWithoutPerson = float64(settled) / float64(len(l.ops))
	}
	return sum, nil
}

// sealAndVerify seals until every committed event is in a checkpoint (on
// PostgreSQL a checkpoint waits for older running transactions), anchors
// the checkpoints, and verifies the chain against the anchors, with the
// age check (the sealer has just run).
func sealAndVerify(ctx context.Context, st *store.Store, anchors *anchor.Writer) (*store.VerifyReport, error) {
	deadline := time.Now().Add(20 * time.Second)
	opt := store.VerifyOptions{PublicKey: st.AuditPublicKey(), SkipAge: true}
	for {
		if err := st.SealAll(ctx); err != nil {
			return nil, err
		}
		rep, err := st.VerifyAudit(ctx, opt)
		if err != nil {
			return nil, err
		}
		if !rep.OK || time.Now().After(deadline) {
			return rep, nil
		}
		if rep.Unsealed == 0 {
			break
		}
		if !pause(ctx, 50*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	if err := anchors.CatchUp(ctx); err != nil {
		return nil, err
	}
	var err error
	if opt.Anchors, err = anchor.Read(anchors.Dir()); err != nil {
		return nil, err
	}
	opt.SkipAge = false
	return st.VerifyAudit(ctx, opt)
}

// checkAcks: I1, every acknowledged operation is in the database as
// acknowledged; I6, every re-registration named the same operation.
func checkAcks(sum *chaosSummary, l *ledger, igs []*integrator) {
	for _, ig := range igs {
		for _, it := range ig.work {
			it.mu.Lock()
			ack, mismatch, n := it.ack, it.mismatch, it.registers
			it.mu.Unlock()
			sum.Registrations += n
			if mismatch != "" {
				sum.violate("I6", "%s", mismatch)
			}
			if ack == nil {
				continue
			}
			op, ok := l.byID[ack.ID]
			switch {
			case !ok:
				sum.Lost++
				sum.violate("I1", "acknowledged operation %s (%s %s) is not in the database", ack.ID, it.reg.SourceRef, it.reg.Action)
			case op.Key != ack.Key || op.PayloadHash != ack.PayloadHash:
				sum.violate("I6", "operation %s: stored key/hash %s/%s, acknowledged %s/%s", op.ID, op.Key, op.PayloadHash, ack.Key, ack.PayloadHash)
			}
		}
	}
}

// checkKeys: I6, no key has two rows.
func checkKeys(sum *chaosSummary, l *ledger) {
	seen := map[[2]string]string{}
	for _, op := range l.ops {
		k := [2]string{op.Tenant, op.Key}
		if other, dup := seen[k]; dup {
			sum.violate("I6", "key %s of tenant %s has two operations: %s and %s", op.Key, op.Tenant, other, op.ID)
		}
		seen[k] = op.ID
	}
}

// effectClass is how I2 treats an operation's effects.
func effectClass(op *review.Operation, d review.Destination) review.Risk {
	if op.HasFlag(review.FlagFinancial) || op.HasFlag(review.FlagIrreversible) {
		return review.RiskIrreversible
	}
	return review.EffectiveRisk(op.Risk, d, time.Time{}, time.Time{})
}

// checkTruth: I2 against the sandbox's effects, and the ledger's final
// states against them.
func checkTruth(sum *chaosSummary, l *ledger, truth []sandbox.Effect, cfg *review.Config) {
	type group struct{ live, all int }
	groups := map[[2]string]*group{}
	live := map[string]int{}
	for _, e := range truth {
		op, ok := l.byID[e.OperationID]
		if !ok {
			sum.violate("I2", "effect %s names operation %q, which Limbo does not know", e.ResourceRef, e.OperationID)
			continue
		}
		if e.LogicalVersion != op.LogicalVersion {
			sum.violate("I2", "effect %s of operation %s is for version %s, the operation's is %s", e.ResourceRef, op.ID, e.LogicalVersion, op.LogicalVersion)
		}
		k := [2]string{e.OperationID, e.LogicalVersion}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		g.all++
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
		g, op := groups[k], l.byID[k[0]]
		class := effectClass(op, cfg.Destination(op.Destination))
		extra := g.live - 1
		if extra <= 0 || class == review.RiskRead || class == review.RiskGenerate {
			continue
		}
		_, inCase := l.openCases[op.ID]
		if !inCase {
			sum.DuplicateEffectsOutsideOpenCase += extra
		}
		switch {
		case class == review.RiskIrreversible || class == review.RiskIdempotentWrite:
			sum.violate("I2", "%s operation %s (%s) has %d live effects for version %s", class, op.ID, op.Action, g.live, k[1])
		case !inCase:
			sum.violate("I2", "compensable operation %s (%s) has %d live effects for version %s and no open case", op.ID, op.Action, g.live, k[1])
		}
	}
	for _, op := range l.ops {
		if op.Risk == review.RiskRead || op.Risk == review.RiskGenerate {
			continue
		}
		switch {
		case op.State == review.Failed && live[op.ID] > 0:
			sum.LedgerVsTruth.FailedWithEffect++
			sum.violate("ledger_vs_truth", "operation %s (%s) is failed (%s), but the destination holds its effect", op.ID, op.Action, op.StateReason)
		case op.State == review.Confirmed && live[op.ID] == 0:
			sum.LedgerVsTruth.ConfirmedWithoutEffect++
			sum.violate("ledger_vs_truth", "operation %s (%s) is confirmed, but the destination holds no effect of it", op.ID, op.Action)
		}
	}
}

// checkTrail replays each operation's audit trail: I5, exactly one event
// per transition (the registration, then each change from the state the
// trail says it was in, ending in the stored state; one attempt.started per
// attempt, one attempt.outcome per finished attempt); I3, every attempt was
// granted from pending or retry_wait — never while ambiguous, in review or
// terminal.
func checkTrail(sum *chaosSummary, l *ledger) {
	state := map[string]review.State{}
	started, outcomes := map[string]int{}, map[string]int{}
	for _, e := range l.events {
		if e.OperationID == "" {
			continue
		}
		if _, ours := l.byID[e.OperationID]; !ours {
			continue
		}
		cur, seen := state[e.OperationID]
		switch {
		case e.Action == "operation.registered":
			if seen {
				sum.violate("I5", "operation %s has a second operation.registered event (seq %d)", e.OperationID, e.Seq)
			}
			state[e.OperationID] = review.State(e.ToState)
			continue
		case !seen:
			sum.violate("I5", "operation %s: event %s (seq %d) before its registration", e.OperationID, e.Action, e.Seq)
			continue
		}
		switch e.Action {
		case "attempt.started":
			started[e.OperationID]++
			if !cur.Attemptable() || review.State(e.FromState) != cur {
				sum.violate("I3", "operation %s: attempt granted at seq %d while %s (event says from %s)", e.OperationID, e.Seq, cur, e.FromState)
			}
			var d struct {
				N int `json:"n"`
			}
			if json.Unmarshal([]byte(e.Detail), &d) == nil && d.N != started[e.OperationID] {
				sum.violate("I3", "operation %s: attempt.started at seq %d grants n=%d, the trail counts %d", e.OperationID, e.Seq, d.N, started[e.OperationID])
			}
		case "attempt.outcome":
			outcomes[e.OperationID]++
		}
		if e.ToState != "" {
			if review.State(e.FromState) != cur {
				sum.violate("I5", "operation %s: %s at seq %d moves from %s, but the trail says it was %s", e.OperationID, e.Action, e.Seq, e.FromState, cur)
			}
			state[e.OperationID] = review.State(e.ToState)
		}
	}
	for _, op := range l.ops {
		got, ok := state[op.ID]
		switch {
		case !ok:
			sum.violate("I5", "operation %s has no operation.registered event", op.ID)
		case got != op.State:
			sum.violate("I5", "operation %s is %s, but its audit trail ends in %s", op.ID, op.State, got)
		}
		finished := 0
		for _, a := range op.Attempts {
			if a.FinishedAt != nil {
				finished++
			}
		}
		if started[op.ID] != len(op.Attempts) {
			sum.violate("I5", "operation %s: %d attempt.started events for %d attempts", op.ID, started[op.ID], len(op.Attempts))
		}
		if outcomes[op.ID] != finished {
			sum.violate("I5", "operation %s: %d attempt.outcome events for %d finished attempts", op.ID, outcomes[op.ID], finished)
		}
	}
}

// checkLeases: I4, no attempt stays open past its lease plus one sweep,
// and every operation ends terminal or in review. "One sweep" is exact:
// the first sweep round that starts after an attempt's lease expired must
// close it, and rounds must come at the sweep interval (or right after a
// round that outlasted it).
func checkLeases(sum *chaosSummary, l *ledger, sweeps []sweepRound, stoppedAt time.Time) {
	for i := 1; i < len(sweeps); i++ {
		due := sweeps[i-1].start.Add(sweepEvery)
		if sweeps[i-1].end.After(due) {
			due = sweeps[i-1].end
		}
		if late := sweeps[i].start.Sub(due); late > sweepSlack {
			sum.violate("I4", "the lease sweeper stalled: a round started %s late at %s", late.Round(time.Millisecond), sweeps[i].start.Format(time.RFC3339Nano))
		}
	}
	// firstAfter is the first completed round that started after t.
	firstAfter := func(t time.Time) (sweepRound, bool) {
		i := sort.Search(len(sweeps), func(i int) bool { return !sweeps[i].start.Before(t) })
		if i == len(sweeps) {
			return sweepRound{}, false
		}
		return sweeps[i], true
	}
	const epsilon = 5 * time.Millisecond // clock reads around the round
	var worst time.Duration
	for _, op := range l.ops {
		if !op.State.Terminal() && op.State != review.NeedsReview {
			sum.violate("I4", "operation %s (%s %s) ended %s: %s", op.ID, op.Risk, op.Action, op.State, op.StateReason)
		}
		for _, a := range op.Attempts {
			switch {
			case a.FinishedAt == nil:
				if r, ok := firstAfter(a.LeaseExpiresAt.Add(epsilon)); ok {
					sum.violate("I4", "operation %s attempt %d: lease expired at %s, still open after the sweep round of %s",
						op.ID, a.N, a.LeaseExpiresAt.Format(time.RFC3339Nano), r.start.Format(time.RFC3339Nano))
				}
				worst = max(worst, stoppedAt.Sub(a.LeaseExpiresAt))
			case a.Result == review.ResultUnknown: // closed by the sweeper
				worst = max(worst, a.FinishedAt.Sub(a.LeaseExpiresAt))
				if r, ok := firstAfter(a.LeaseExpiresAt.Add(epsilon)); ok && a.FinishedAt.After(r.end.Add(epsilon)) {
					sum.violate("I4", "operation %s attempt %d: lease expired at %s, closed at %s, after the sweep round of %s–%s",
						op.ID, a.N, a.LeaseExpiresAt.Format(time.RFC3339Nano), a.FinishedAt.Format(time.RFC3339Nano),
						r.start.Format(time.RFC3339Nano), r.end.Format(time.RFC3339Nano))
				}
			}
		}
	}
	sum.MaxSweepLateness = worst.Round(time.Millisecond).String()
}

// checkConfirmations: I7, every confirmed operation has evidence that
// confirms it from an authoritative source or a reviewer.
func checkConfirmations(sum *chaosSummary, l *ledger) {
	for _, op := range l.ops {
		if op.State != review.Confirmed {
			continue
		}
		ok := false
		for _, ev := range op.Evidence {
			if ev.Verdict == review.VerdictConfirms && (ev.Authoritative || ev.Source == review.SourceReviewer) {
				ok = true
				break
			}
		}
		if !ok {
			sum.violate("I7", "operation %s (%s) is confirmed without confirming evidence", op.ID, op.Action)
		}
	}
}
