package chaos

// The checks at the end of `limbo chaos`: the ledger (through the store's
// API, no SQL here) against the sandbox's ground truth and against itself,
// one check per invariant of RELIABILITY.md.

import (
	"context"
	"fmt"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
)

// sweepSlack is how much later than its interval a sweep round may start
// (a busy scheduler, a slow round before it) before I4 counts the sweeper
// as stalled.
const sweepSlack = time.Second

// sweepSlop is how far apart the clock reads around a sweep round may be.
const sweepSlop = 5 * time.Millisecond

// maxViolations bounds the examples kept per invariant.
const maxViolations = 5

// Summary is what `limbo chaos` prints.
type Summary struct {
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

	Effects int `json:"effects"`
	// FailedJobs counts the transformation jobs that ended failed
	// (--job-failures): effects that made nothing.
	FailedJobs    int            `json:"failed_jobs"`
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
	// SeveralEffects counts write operations (neither read nor generate)
	// whose destination holds more than one effect, live or undone, for
	// their version: duplicates, wherever they were caught.
	SeveralEffects int `json:"operations_with_several_effects"`
	// LateDuplicatesCaught counts operations for which the confirm window
	// found an extra resource after confirmation and opened a case
	// (watch.extra_effect in the trail): a destination that lags longer
	// than it says, caught.
	LateDuplicatesCaught int `json:"late_duplicates_caught"`
	// RecommendationsCorrect is the share of open cases whose decisive
	// recommendation (confirm X, compensate Y, approve_retry, fail) the
	// sandbox's truth supports, out of RecommendationsScored; those that
	// recommend another look (reconcile_again) are counted apart, and
	// WrongRecommendations lists the others.
	RecommendationsCorrect   float64  `json:"recommendations_correct"`
	RecommendationsScored    int      `json:"recommendations_scored"`
	RecommendationsUndecided int      `json:"recommendations_undecided"`
	WrongRecommendations     []string `json:"wrong_recommendations,omitempty"`
	// ReviewerDecisions counts the duplicates the run's reviewer resolved
	// as recommended (keep one, undo the other; compensate an extra), and
	// Compensations the compensation operations by final state: their
	// undos ran against the faulty sandbox through Limbo's undo worker.
	ReviewerDecisions int            `json:"reviewer_decisions"`
	Compensations     map[string]int `json:"compensations,omitempty"`
	// ServerKills and DBRestarts count the faults done to Limbo itself.
	ServerKills int `json:"server_kills"`
	DBRestarts  int `json:"db_restarts"`
	// ProbeAnswers counts the sandbox's answers to probes, and
	// ProbeAnswersFaulted those --probe-errors turned into a 5xx, a hang or
	// garbage.
	ProbeAnswers        int64 `json:"probe_answers"`
	ProbeAnswersFaulted int64 `json:"probe_answers_faulted"`
	// Loops are the background loops the Limbo under test ran.
	Loops []string `json:"loops"`
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
func (s *Summary) Holds() bool {
	for _, ok := range s.Invariants {
		if !ok {
			return false
		}
	}
	return len(s.Invariants) > 0 && len(s.WrongRecommendations) == 0
}

func (s *Summary) violate(inv, format string, args ...any) {
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

// checkChaos seals the audit trail and checks I1–I7 with the invariants'
// one statement (review.CheckInvariants): the ledger as the store reads it
// (store.Ledger), the integrators' acknowledgements, and the sandbox's
// effects as the truth.
func checkChaos(ctx context.Context, st *store.Store, anchors *anchor.Writer, igs []*integrator, truth []sandbox.Effect, cfg *review.Config, lim *limbo, stoppedAt time.Time) (*Summary, error) {
	rep, err := sealAndVerify(ctx, st, anchors)
	if err != nil {
		return nil, err
	}
	var tenants []string
	for _, ig := range igs {
		tenants = append(tenants, ig.name)
	}
	l, err := st.Ledger(ctx, tenants)
	if err != nil {
		return nil, err
	}
	switch {
	case !rep.OK:
		l.AuditProblem = fmt.Sprintf("broken at seq %d: %s", rep.BrokenSeq, rep.Problem)
	case rep.Unsealed > 0:
		l.AuditProblem = fmt.Sprintf("%d events still unsealed", rep.Unsealed)
	}
	registrations := 0
	for _, ig := range igs {
		for _, it := range ig.work {
			acks, n := it.acknowledged()
			registrations += n
			l.Acks = append(l.Acks, acks...)
		}
	}
	t := review.Truth{Config: cfg, SweepEvery: app.SweepEvery, SweepSlack: sweepSlack, Slop: sweepSlop,
		Settled: true, StoppedAt: stoppedAt, Sweeps: lim.sweeps.all(), Outages: lim.outages.all()}
	failed := map[string]bool{}
	for _, e := range truth {
		failed[e.ResourceRef] = e.Failed
		// A job that failed made nothing: like an undone effect, it no
		// longer counts.
		t.Effects = append(t.Effects, review.TrueEffect{OperationID: e.OperationID, LogicalVersion: e.LogicalVersion,
			Ref: e.ResourceRef, Compensated: e.Compensated || e.Failed})
	}
	sum := summarise(*l, review.CheckInvariants(*l, t))
	countDuplicates(sum, *l, t, failed)
	score := review.ScoreRecommendations(*l, l.Recommendations, t)
	sum.RecommendationsCorrect, sum.RecommendationsScored = score.Share(), score.Scored
	sum.RecommendationsUndecided, sum.WrongRecommendations = score.Undecided, score.Wrong
	sum.Registrations = registrations
	sum.Effects = len(truth)
	for _, f := range failed {
		if f {
			sum.FailedJobs++
		}
	}
	cases, err := st.OpenCases(ctx, 1<<30)
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		if l.OpenCases[c.OperationID] {
			for _, r := range c.Reasons {
				sum.CaseReasons[string(r)]++
			}
		}
	}
	return sum, nil
}

// summarise turns the invariants' report into the chaos summary.
func summarise(l review.Ledger, rep review.InvariantReport) *Summary {
	sum := &Summary{States: map[review.State]int{}, CaseReasons: map[string]int{}, Invariants: map[string]bool{}}
	for _, inv := range review.Invariants() {
		sum.Invariants[inv] = true
	}
	for _, v := range rep.Violations {
		sum.violate(v.Invariant, "%s", v.Detail)
	}
	sum.DuplicateEffectsOutsideOpenCase = rep.DuplicateEffectsOutsideOpenCase
	sum.Lost = rep.Lost
	sum.LedgerVsTruth.FailedWithEffect = rep.FailedWithEffect
	sum.LedgerVsTruth.ConfirmedWithoutEffect = rep.ConfirmedWithoutEffect
	sum.MaxSweepLateness = rep.MaxSweepLateness.Round(time.Millisecond).String()
	sum.Operations = len(l.Operations)
	sum.OpenCases = len(l.OpenCases)
	decided := map[string]bool{}
	for _, e := range l.Trail {
		if e.Action == "case.resolved" {
			decided[e.OperationID] = true
		}
	}
	settled, ops := 0, 0
	for _, op := range l.Operations {
		if review.IsCompensation(op.Action) {
			// A reviewer's undo, not one of the integrations' operations.
			if sum.Compensations == nil {
				sum.Compensations = map[string]int{}
			}
			sum.Compensations[string(op.State)]++
			sum.Attempts += len(op.Attempts)
			continue
		}
		ops++
		sum.States[op.State]++
		sum.Attempts += len(op.Attempts)
		if op.State.Terminal() && !decided[op.ID] {
			settled++
		}
	}
	sum.Operations = ops
	sum.SettledWithoutPerson = 1
	if ops > 0 {
		sum.SettledWithoutPerson = float64(settled) / float64(ops)
	}
	return sum
}

// countDuplicates fills the summary's duplicate figures from the truth
// (several effects for one write's version, a job that failed not among
// them: it made nothing) and the trail (the confirm window's cases).
func countDuplicates(sum *Summary, l review.Ledger, t review.Truth, failed map[string]bool) {
	byID := map[string]*review.Operation{}
	for _, op := range l.Operations {
		byID[op.ID] = op
	}
	effects := map[[2]string]int{}
	for _, e := range t.Effects {
		if !failed[e.Ref] {
			effects[[2]string{e.OperationID, e.LogicalVersion}]++
		}
	}
	for k, n := range effects {
		op := byID[k[0]]
		if op == nil || n < 2 {
			continue
		}
		switch review.EffectClass(op, t.Config.Destination(op.Destination)) {
		case review.RiskRead, review.RiskGenerate:
		default:
			sum.SeveralEffects++
		}
	}
	caught := map[string]bool{}
	for _, e := range l.Trail {
		if e.Action == "watch.extra_effect" {
			caught[e.OperationID] = true
		}
	}
	sum.LateDuplicatesCaught = len(caught)
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
		if !simulate.Pause(ctx, 50*time.Millisecond) {
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
