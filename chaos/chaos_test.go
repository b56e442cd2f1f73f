package chaos

// The fault test (issue 3): the same code as `limbo chaos`, on both
// engines, with 30 % of answers lost after commit, 10 % 429 with
// Retry-After, 5 % 503, 5 % 500 after commit, a 2 s search lag, and every
// integration killed and restarted twice. Short by default; the issue's
// 1,000 operations with LIMBO_CHAOS_LONG=1. LIMBO_CHAOS_SEED replays a
// run's fault draws (its seed is logged).
//
// TestChaosLyingLag: the same faults on a destination without keys whose
// search lags longer than Limbo is told (hole 16): the confirm window must
// catch every late first write next to its retry's.

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/internal/limbobin"
	"github.com/limbo-dev/limbo/internal/testlog"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func TestChaos(t *testing.T) {
	ops, minShare, budget := 150, 0.80, 2*time.Minute
	if os.Getenv("LIMBO_CHAOS_LONG") == "1" {
		ops, minShare, budget = 1000, 0.95, 8*time.Minute
	} else if testing.Short() {
		ops = 60
	}
	seed := chaosSeed(t)
	for _, engine := range storetest.Engines(t) {
		t.Run(string(engine), func(t *testing.T) {
			o := Options{
				Sandbox: sandbox.Options{Loss: 0.30, RateLimited: 0.10, Unavailable: 0.05, ErrorAfterCommit: 0.05,
					SearchLag: 2 * time.Second, JobFailures: 0.4, Seed: seed},
				Ops: ops, Integrators: 4, Workers: 8, Kills: 2,
				DB: storetest.URL(t, engine), Settle: budget / 2,
			}
			sum, logs := runChaosChecked(t, o, budget)
			t.Logf("settled without a person: %.1f %% (target ≥ 95 %%; asserted ≥ %.0f %%); %d jobs failed", 100*sum.SettledWithoutPerson, 100*minShare, sum.FailedJobs)
			if sum.SettledWithoutPerson < minShare {
				t.Errorf("settled without a person: %.3f, want ≥ %.2f", sum.SettledWithoutPerson, minShare)
			}
			wantFailedJobs(t, sum)
			if t.Failed() {
				t.Logf("logs:\n%s", tail(logs, 40))
			}
		})
	}
}

// TestChaosLyingLag: a destination without keys (a retry really creates
// another resource) whose search lags 3 s although Limbo is told 1 s. An
// empty search after 1 s is then no proof of absence: Limbo grants a
// retry, and the first write shows up later next to the retry's. The
// confirm window (default 10 × the configured lag) must catch each such
// duplicate in a case (or settle the operation on the late write before
// it is retried), and absence must fail nothing before the window has
// passed. The same invariants as TestChaos hold; the share settled without
// a person is not asserted (a lying destination needs people). The run
// must show the scenario happened: some operation got several effects.
func TestChaosLyingLag(t *testing.T) {
	// Settle outlasts the retry budget's window (a minute): with a lost
	// write in three and a 429 in ten, a tenant's retries can use its
	// budget up near the end, and a retry then waits, by design, until
	// the window has moved on. One run in CI ended with an operation
	// still in retry_wait 47 s after its retry was due, under a 50 s
	// settle; that is the likely cause, not proven.
	ops, budget := 60, 130*time.Second
	settle := review.DefaultRetryWindow + 10*time.Second
	if testing.Short() {
		ops = 32
	}
	seed := chaosSeed(t)
	for _, engine := range storetest.Engines(t) {
		t.Run(string(engine), func(t *testing.T) {
			// Whether a lie bites depends on timing (a lost write has to
			// land after the search that missed it), which load shifts: a
			// run in which it never bit proved nothing and is run again,
			// from the next seed, up to three times. Every run's checks
			// (runChaosChecked) must pass.
			for run := int64(0); run < 3; run++ {
				o := Options{
					// No job fails here (--job-failures): at a destination
					// without keys whose search lies, a failed operation's
					// second job, found while queued, gets a case
					// recommending its undo, and the case still says so
					// once that job fails, since nobody looks again. That
					// is open; TestChaos and TestChaosAttacksLimbo walk
					// failed jobs where keys are honoured.
					Sandbox: sandbox.Options{Loss: 0.30, RateLimited: 0.10, Unavailable: 0.05, ErrorAfterCommit: 0.05,
						SearchLag: 3 * time.Second, NoKeySupport: true, Seed: seed + run},
					ConfiguredLag: time.Second,
					Ops:           ops, Integrators: 4, Workers: 8, Kills: 2,
					DB: storetest.URL(t, engine), Settle: settle,
				}
				sum, logs := runChaosChecked(t, o, budget)
				t.Logf("lying lag (real %s, configured %s, seed %d): %d operations with several effects, %d late duplicates caught by the confirm window, %d open cases %v, %d undone by the reviewer (compensations %v), settled without a person %.1f %%",
					o.Sandbox.SearchLag, o.ConfiguredLag, o.Sandbox.Seed, sum.SeveralEffects, sum.LateDuplicatesCaught, sum.OpenCases, sum.CaseReasons,
					sum.ReviewerDecisions, sum.Compensations, 100*sum.SettledWithoutPerson)
				// Each caught duplicate is in an open case or was undone by
				// the reviewer, whose undos the check holds to the truth.
				if sum.LateDuplicatesCaught > 0 && sum.CaseReasons[string(review.ReasonMultipleCands)] == 0 && sum.ReviewerDecisions == 0 {
					t.Errorf("%d late duplicates caught, but no open multiple_candidates case and no undo", sum.LateDuplicatesCaught)
				}
				if sum.SeveralEffects > 0 && sum.ReviewerDecisions > 0 && sum.Compensations[string(review.Confirmed)] == 0 {
					t.Errorf("the reviewer decided %d undos and none was confirmed: %v", sum.ReviewerDecisions, sum.Compensations)
				}
				if t.Failed() {
					t.Logf("logs:\n%s", tail(logs, 40))
					return
				}
				if sum.SeveralEffects > 0 || sum.LateDuplicatesCaught > 0 {
					return
				}
			}
			t.Errorf("in three runs (seeds %d to %d) no operation got a second effect and the confirm window caught nothing: the lying lag never bit, so they prove nothing", seed, seed+2)
		})
	}
}

// TestChaosAttacksLimbo: the fault run against Limbo itself. Limbo runs
// as a `limbo serve` child process, killed with SIGKILL at random moments
// and restarted on the same database, under the faults of TestChaos, and
// a tenth of the probe answers are a 5xx, a hang or garbage. The long
// variant (LIMBO_CHAOS_LONG=1, CI) runs 2,000 operations on each engine,
// with a destination whose search lags 6 s
// although Limbo is told 3 s, and — with LIMBO_CHAOS_DB_RESTARTS=1, which
// stops the PostgreSQL cluster, so only where nothing else uses it — a
// database restart on PostgreSQL; it asserts the targets: nothing
// lost, no duplicate outside an open case, ≥ 97 % settled without a
// person, every recommendation correct.
func TestChaosAttacksLimbo(t *testing.T) {
	ops, kills, minShare, budget := 120, 2, 0.80, 3*time.Minute
	long := os.Getenv("LIMBO_CHAOS_LONG") == "1"
	if long {
		ops, kills, minShare, budget = 2000, 3, 0.97, 12*time.Minute
	} else if testing.Short() {
		ops, kills = 60, 1
	}
	bin := limbobin.Path(t)
	seed := chaosSeed(t)
	for _, engine := range storetest.Engines(t) {
		t.Run(string(engine), func(t *testing.T) {
			o := Options{
				Sandbox: sandbox.Options{Loss: 0.30, RateLimited: 0.10, Unavailable: 0.05, ErrorAfterCommit: 0.05,
					SearchLag: 2 * time.Second, ProbeErrors: 0.10, JobFailures: 0.4, Seed: seed},
				Ops: ops, Integrators: 4, Workers: 8, Kills: 2, ServerBinary: bin, ServerKills: kills,
				DB: storetest.URL(t, engine), Settle: budget / 2,
			}
			if long {
				o.Sandbox.SearchLag, o.ConfiguredLag = 6*time.Second, 3*time.Second
				if engine == store.Postgres && os.Getenv("LIMBO_CHAOS_DB_RESTARTS") == "1" {
					o.DBRestarts = 1
				}
			}
			sum, logs := runChaosChecked(t, o, budget)
			t.Logf("%d server kills, %d database restarts: settled without a person %.1f %% (asserted ≥ %.0f %%), recommendations correct %.1f %% of %d (%d undecided), max sweep lateness %s, %d jobs failed",
				sum.ServerKills, sum.DBRestarts, 100*sum.SettledWithoutPerson, 100*minShare, 100*sum.RecommendationsCorrect,
				sum.RecommendationsScored, sum.RecommendationsUndecided, sum.MaxSweepLateness, sum.FailedJobs)
			if sum.SettledWithoutPerson < minShare {
				t.Errorf("settled without a person: %.3f, want ≥ %.2f", sum.SettledWithoutPerson, minShare)
			}
			wantFailedJobs(t, sum)
			if sum.ProbeAnswersFaulted == 0 {
				t.Errorf("none of %d probe answers was faulted", sum.ProbeAnswers)
			}
			if !slices.Equal(sum.Loops, []string{app.LoopReconcile, app.LoopOutbox, app.LoopUndo, app.LoopSweep, app.LoopSeal, app.LoopPurge}) {
				t.Errorf("the child server ran the loops %v", sum.Loops)
			}
			if t.Failed() {
				t.Logf("logs:\n%s", tail(logs, 40))
			}
		})
	}
}

func TestMain(m *testing.M) { limbobin.Main(m) }

// wantFailedJobs fails t when no transformation job of the run failed:
// the run then walked none of the ways a failed job takes (the
// operation failed or retried, its dependent share stopped, a search
// listing the failed job read as no effect) and proved nothing of them.
// With a share of 0.4 and a dozen jobs or more in a run, none failing
// is under one run in a thousand; a short run has fewer, and is spared.
func wantFailedJobs(t *testing.T, sum *Summary) {
	t.Helper()
	if sum.FailedJobs == 0 && !testing.Short() {
		t.Errorf("no transformation job failed (--job-failures): the run walked no failed job")
	}
}

// chaosSeed is a fresh seed for the sandbox's fault draws, or
// LIMBO_CHAOS_SEED's.
func chaosSeed(t *testing.T) int64 {
	t.Helper()
	seed := rand.Int64N(1<<62) + 1
	if s := os.Getenv("LIMBO_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("LIMBO_CHAOS_SEED: %v", err)
		}
	}
	return seed
}

// runChaosChecked runs o within budget and checks what every chaos run
// must show: I1–I7, no duplicate outside an open case, nothing lost,
// every operation terminal or in review and settled in time, the kills
// done, the ledger agreeing with the destination, the truth file written.
// It returns the summary and the run's logs (for the caller to show once
// the test has failed).
func runChaosChecked(t *testing.T, o Options, budget time.Duration) (*Summary, string) {
	t.Helper()
	var logs testlog.Buffer
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	o.TruthOut = truthFile
	o.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	seed := o.Sandbox.Seed
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	began := time.Now()
	sum, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run (seed %d): %v\n%s", seed, err, tail(logs.String(), 40))
	}
	out, _ := json.MarshalIndent(sum, "", "  ")
	t.Logf("seed %d, %s:\n%s", seed, time.Since(began).Round(time.Millisecond), out)
	// The summary is printed and kept: the database's password is not in it.
	if u, err := url.Parse(o.DB); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(sum.DB, ":"+pw+"@") {
			t.Errorf("the summary's db %q holds the database's password", sum.DB)
		}
	}

	for inv, ok := range sum.Invariants {
		if !ok {
			t.Errorf("%s does not hold: %s", inv, strings.Join(sum.Violations[inv], "; "))
		}
	}
	if len(sum.Invariants) != 7 {
		t.Errorf("%d invariants checked, want I1–I7", len(sum.Invariants))
	}
	if sum.Operations != o.Ops {
		t.Errorf("%d operations in the ledger, want %d", sum.Operations, o.Ops)
	}
	if sum.DuplicateEffectsOutsideOpenCase != 0 {
		t.Errorf("%d duplicate effects outside an open case", sum.DuplicateEffectsOutsideOpenCase)
	}
	// The reviewer's undos ran to the end: each compensation confirmed
	// (its resource undone at the sandbox, or LedgerVsTruth fails),
	// failed, or in review (its parent back in an open case either way).
	for st, n := range sum.Compensations {
		if s := review.State(st); !s.Terminal() && s != review.NeedsReview {
			t.Errorf("%d compensations ended %s: want confirmed, failed or needs_review", n, st)
		}
	}
	if sum.Lost != 0 {
		t.Errorf("%d acknowledged operations lost", sum.Lost)
	}
	for st, n := range sum.States {
		if !st.Terminal() && st != review.NeedsReview {
			t.Errorf("%d operations ended %s: want terminal or needs_review", n, st)
		}
	}
	if !sum.SettledInTime {
		t.Errorf("not every operation settled within --settle %s", o.Settle)
	}
	if want := o.Integrators * o.Kills; sum.Kills != want {
		t.Errorf("%d kills, want %d", sum.Kills, want)
	}
	// An operation whose earlier attempt may have had its effect is
	// reconciled when its budget ends, never declared failed.
	if n := sum.LedgerVsTruth.FailedWithEffect; n > 0 {
		t.Errorf("%d operations failed although the destination holds their effect: %s", n, strings.Join(sum.Violations["ledger_vs_truth"], "; "))
	}
	if n := sum.LedgerVsTruth.ConfirmedWithoutEffect; n > 0 {
		t.Errorf("%d operations confirmed without an effect at the destination", n)
	}
	if len(sum.WrongRecommendations) > 0 || sum.RecommendationsCorrect != 1 {
		t.Errorf("recommendations correct %.3f of %d: %s", sum.RecommendationsCorrect, sum.RecommendationsScored, strings.Join(sum.WrongRecommendations, "; "))
	}
	if sum.ServerKills != o.ServerKills || sum.DBRestarts != o.DBRestarts {
		t.Errorf("%d server kills and %d database restarts, want %d and %d", sum.ServerKills, sum.DBRestarts, o.ServerKills, o.DBRestarts)
	}
	checkTruthFile(t, truthFile, sum.Effects)
	return sum, logs.String()
}

// checkTruthFile: --truth-out is a JSON array of every effect.
func checkTruthFile(t *testing.T, path string, effects int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("truth file: %v", err)
	}
	var items []map[string]any
	if err := json.Unmarshal(data, &items); err != nil {
		t.Fatalf("truth file is not a JSON array: %v", err)
	}
	if len(items) != effects {
		t.Errorf("truth file has %d effects, the summary %d", len(items), effects)
	}
	for i, it := range items {
		for _, k := range []string{"operation_id", "logical_version", "resource_ref"} {
			if s, _ := it[k].(string); s == "" {
				t.Fatalf("truth effect %d has no %s: %v", i, k, it)
			}
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestChaosSummaryOfViolations: the summary reports what the invariants'
// one statement (review.CheckInvariants, tested case by case in review)
// found — each broken invariant false with its examples, the counts — so
// a green chaos run means the invariants held.
func TestChaosSummaryOfViolations(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{sandbox.DestinationName: {HonoursKeys: true}}}
	op := &review.Operation{ID: "a", Tenant: "t", Key: "k", PayloadHash: "h", LogicalVersion: "1", Destination: sandbox.DestinationName,
		Risk: review.RiskIrreversible, State: review.Failed, Action: "send_email"}
	l := review.Ledger{Operations: []*review.Operation{op}, OpenCases: map[string]bool{},
		Trail: []review.TrailEvent{{OperationID: "a", Action: "operation.registered", ToState: review.Pending},
			{OperationID: "a", Action: "operation.failed", FromState: review.Pending, ToState: review.Failed}},
		Acks: []review.Ack{{Intention: "doc-1", ID: "a", Key: "k", PayloadHash: "h"}, {Intention: "doc-2", ID: "gone", Key: "k2", PayloadHash: "h2"}}}
	truth := review.Truth{Config: cfg, Effects: []review.TrueEffect{{OperationID: "a", LogicalVersion: "1", Ref: "eml-1"},
		{OperationID: "a", LogicalVersion: "1", Ref: "eml-2"}}}
	sum := summarise(l, review.CheckInvariants(l, truth))
	want := map[string]bool{"I1": false, "I2": false, "I3": true, "I4": true, "I5": true, "I6": true, "I7": true}
	if len(sum.Invariants) != 7 {
		t.Fatalf("invariants %v, want I1–I7", sum.Invariants)
	}
	for inv, ok := range want {
		if sum.Invariants[inv] != ok {
			t.Errorf("%s = %v, want %v (violations %v)", inv, sum.Invariants[inv], ok, sum.Violations)
		}
	}
	if sum.Holds() {
		t.Error("the summary holds with I1 and I2 broken")
	}
	if sum.Lost != 1 || sum.DuplicateEffectsOutsideOpenCase != 1 || sum.LedgerVsTruth.FailedWithEffect != 1 {
		t.Errorf("lost %d, duplicates %d, failed with effect %d; want 1, 1, 1", sum.Lost, sum.DuplicateEffectsOutsideOpenCase, sum.LedgerVsTruth.FailedWithEffect)
	}
	if len(sum.Violations["ledger_vs_truth"]) != 1 || sum.Operations != 1 || sum.States[review.Failed] != 1 || sum.SettledWithoutPerson != 1 {
		t.Errorf("summary %+v", sum)
	}
}

// TestChaosRefusesUsedDatabase: a database holding Limbo data (here a
// user and its audit event) is refused before the run writes anything:
// no checkpoint signed with the run's key, no tenant, no operation.
func TestChaosRefusesUsedDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		st, err := app.OpenStore(ctx, db, store.Options{MaxConns: storetest.MaxConns}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.AddUser(ctx, review.Operator("cli:test"), store.NewUser{Email: "ops@example.com", Password: "correct horse battery",
			Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err = Run(ctx, Options{Ops: 4, Integrators: 1, Workers: 1, DB: db, Settle: 10 * time.Second,
			Log: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "already holds Limbo data") || !strings.Contains(err.Error(), "users") {
			t.Fatalf("chaos on a database in use: %v", err)
		}
		for _, table := range []string{"audit_checkpoints", "operations", "tenants"} {
			var n int
			if err := st.DB().Get(&n, `SELECT COUNT(*) FROM `+table); err != nil || n != 0 {
				t.Errorf("after the refusal, %s holds %d rows (%v)", table, n, err)
			}
		}
	})
}
