package chaos

// `limbo chaos`: the whole fault scenario in one process. Limbo (API and
// background workers) and the sandbox destination run in process on
// loopback listeners; simulated integrations built on client/ run
// operations of every risk class against the faulty sandbox, and are killed
// and restarted at random points. At the end the ledger is checked against
// the sandbox's ground truth (RELIABILITY.md I1–I7).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

const Usage = `Usage: limbo chaos [fault flags] [--ops N] [--integrators N] [--kills K] [--db URL]
                   [--truth-out FILE] [--settle D] [--configured-lag D] [--confirm-window D]

Runs the whole fault scenario in one process: Limbo (on --db, by default a
fresh SQLite file in a temporary directory, left in place) and the sandbox
destination with the fault flags; --integrators simulated integrations
built on client/ run --ops operations across every risk class and flag,
and each is killed at a random point and restarted --kills times. At the
end it waits up to --settle for every operation to settle, checks the
ledger against the sandbox's ground truth, writes that truth to
--truth-out, and prints a JSON summary. Exit status 0 when invariants
I1–I7 hold, 1 when one does not, 2 on errors. Each run uses tenants of its
own (chaos-<run>-<n>), but signs the audit trail with a key of its own and
I5 verifies the whole trail: give each run a fresh database. One holding
Limbo data (operations, audit events, users, tokens, tenants) is refused
before anything is written to it.
The sandbox's --webhook-url and --webhook-secret are set by chaos itself.

--search-lag is the sandbox's real search lag; Limbo is configured with it,
unless --configured-lag tells Limbo another one: shorter, the destination
lies about its lag, an empty search after it is no proof of absence, and
the confirm window (--confirm-window, by default 10 × the configured lag)
must catch the late first write next to the retry's. When it lies, chaos
waits for every confirm window still open to close before the check.

Flags:
`

// chaosLease is the attempt lease of the chaos destination: long enough for
// any send (destSendTimeout), short enough that a killed integration's
// open attempt is swept within seconds.
const (
	chaosLease      = 5 * time.Second
	destSendTimeout = 3 * time.Second
)

// Options configure one chaos run.
type Options struct {
	Sandbox     sandbox.Options
	Ops         int
	Integrators int
	// Workers is how many operations each integration runs at once.
	Workers  int
	Kills    int
	DB       string
	TruthOut string
	Settle   time.Duration
	// RetryRatio is the retry budget's ratio for the sandbox destination.
	RetryRatio float64
	// ConfiguredLag is the search lag Limbo is told the destination has;
	// zero: the sandbox's real one (Sandbox.SearchLag). Shorter than the
	// real lag, the destination lies about it: an empty search after it is
	// no proof of absence, and only the confirm window catches the late
	// first write.
	ConfiguredLag time.Duration
	// ConfirmWindow is the destination's confirm_window; zero: the default
	// (review.ConfirmWindowFactor × the configured lag).
	ConfirmWindow time.Duration
	// ServerBinary, when set, is a limbo binary: Limbo then runs as its
	// `serve` child process, which ServerKills times is killed with
	// SIGKILL at a random moment and started again on the same database.
	// Empty: Limbo runs in this process and is not killed.
	ServerBinary string
	ServerKills  int
	// DBRestarts times, at random moments, the database is stopped at
	// once (DBStop, e.g. pg_ctlcluster 15 main stop -m immediate) and
	// started again (DBStart). PostgreSQL only.
	DBRestarts      int
	DBStop, DBStart []string
	// DBMaxConns bounds each database pool the run opens (0: 4).
	DBMaxConns int
	// Log receives Limbo's, the sandbox's and the integrations' logs.
	Log *slog.Logger
}

// RegisterFlags adds chaos's flags to fs, the sandbox's fault flags
// among them. --search-lag is what Limbo is told; --real-search-lag, when
// longer, is the lag the sandbox really has (see Usage); Resolve folds
// them into the options.
func (o *Options) RegisterFlags(fs *flag.FlagSet) *time.Duration {
	o.Sandbox.RegisterFlags(fs)
	fs.IntVar(&o.Ops, "ops", 1000, "operations to run")
	fs.IntVar(&o.Integrators, "integrators", 4, "simulated integrations (each one tenant, killed and restarted --kills times)")
	fs.IntVar(&o.Workers, "workers", 8, "operations each integration runs at once")
	fs.IntVar(&o.Kills, "kills", 2, "how often each integration is killed at a random point and restarted")
	// Not LIMBO_DB: a run writes thousands of synthetic operations, and an
	// exported production URL must not receive them by accident.
	fs.StringVar(&o.DB, "db", "", "database URL (sqlite:PATH or postgres://…); default: a fresh SQLite file in a temporary directory. LIMBO_DB is not read")
	fs.StringVar(&o.TruthOut, "truth-out", "", "write the sandbox's ground truth here, as a JSON array of effects")
	fs.DurationVar(&o.Settle, "settle", 60*time.Second, "how long to wait, once every operation has started, for all of them to settle")
	fs.Float64Var(&o.RetryRatio, "retry-ratio", 1, "retry budget for the sandbox: retries per first attempt over a minute, 0–1 (the product default, 0.1, throttles this scenario's fault rates for minutes)")
	real := fs.Duration("real-search-lag", 0, "the sandbox's real search lag, when longer than the --search-lag Limbo is told: the destination lies, and the confirm window must catch the late writes")
	fs.DurationVar(&o.ConfirmWindow, "confirm-window", 0, "the destination's confirm_window: how long after a proof of absence Limbo keeps searching for a late write (0: 10 × --search-lag)")
	fs.IntVar(&o.ServerKills, "server-kills", 0, "kill the Limbo server (a \"limbo serve\" child process) with SIGKILL this many times at random moments, restarting it on the same database")
	fs.IntVar(&o.DBRestarts, "db-restarts", 0, "stop PostgreSQL at once (--db-stop) this many times at random moments and start it again (--db-start)")
	fs.Func("db-stop", "the `command` that stops the database at once (default: pg_ctlcluster 15 main stop -m immediate)", func(v string) error {
		o.DBStop = strings.Fields(v)
		return nil
	})
	fs.Func("db-start", "the `command` that starts the database again (default: pg_ctlcluster 15 main start)", func(v string) error {
		o.DBStart = strings.Fields(v)
		return nil
	})
	fs.IntVar(&o.DBMaxConns, "db-max-conns", 4, "most connections each of the run's database pools opens")
	return real
}

// Resolve folds --real-search-lag in: the sandbox lags that long, and
// Limbo is told --search-lag.
func (o *Options) Resolve(realLag time.Duration) {
	if realLag > 0 {
		o.ConfiguredLag, o.Sandbox.SearchLag = o.Sandbox.SearchLag, realLag
	}
}

func (o *Options) validate() error {
	switch {
	case o.Ops < 1:
		return errors.New("chaos: --ops must be at least 1")
	case o.Integrators < 1:
		return errors.New("chaos: --integrators must be at least 1")
	case o.Workers < 1:
		return errors.New("chaos: --workers must be at least 1")
	case o.Kills < 0 || o.ServerKills < 0 || o.DBRestarts < 0:
		return errors.New("chaos: --kills, --server-kills and --db-restarts must not be negative")
	case o.Settle <= 0:
		return errors.New("chaos: --settle must be positive")
	case !(o.RetryRatio > 0 && o.RetryRatio <= 1):
		return errors.New("chaos: --retry-ratio must lie in (0, 1]")
	case o.ConfiguredLag < 0:
		return errors.New("chaos: --search-lag must not be negative")
	case o.ConfirmWindow < 0:
		return errors.New("chaos: --confirm-window must not be negative")
	case o.ServerKills > 0 && o.ServerBinary == "":
		return errors.New("chaos: --server-kills needs the limbo binary to run as a child process")
	case o.DBRestarts > 0 && !strings.HasPrefix(o.DB, "postgres"):
		return errors.New("chaos: --db-restarts needs a PostgreSQL --db")
	case o.DBMaxConns < 1:
		return errors.New("chaos: --db-max-conns must be at least 1")
	}
	return o.Sandbox.Validate()
}

func (o *Options) defaults() error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Workers = cmp.Or(o.Workers, 8)
	o.RetryRatio = cmp.Or(o.RetryRatio, 1)
	o.DBMaxConns = cmp.Or(o.DBMaxConns, 4)
	if len(o.DBStop) == 0 {
		o.DBStop = []string{"pg_ctlcluster", "15", "main", "stop", "-m", "immediate"}
	}
	if len(o.DBStart) == 0 {
		o.DBStart = []string{"pg_ctlcluster", "15", "main", "start"}
	}
	if o.DB == "" {
		dir, err := os.MkdirTemp("", "limbo-chaos-")
		if err != nil {
			return err
		}
		o.DB = "sqlite:" + filepath.Join(dir, "limbo.db")
	}
	return o.validate()
}

// Run runs the scenario and checks it. The database is left in place.
func Run(ctx context.Context, o Options) (*Summary, error) {
	began := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	// Before anything starts: the run signs the trail with a key of its own.
	if err := app.CheckUnused(ctx, o.DB); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	sc, err := newScene(o)
	if err != nil {
		return nil, err
	}
	defer sc.close()
	rng := rand.New(rand.NewPCG(uint64(sc.sb.Seed()), 0x5eed))
	igs, err := newIntegrators(ctx, sc.app, o, sc.limboURL, sc.sbURL, rng)
	if err != nil {
		return nil, err
	}
	lim, err := newLimbo(ctx, o.ServerBinary, sc.dir, sc.limboLn, sc.app)
	if err != nil {
		return nil, err
	}
	defer lim.stop()
	o.Log.Info("chaos: running", "ops", o.Ops, "integrators", o.Integrators, "kills", o.Kills, "server_kills", o.ServerKills,
		"db_restarts", o.DBRestarts, "db", store.RedactURL(o.DB), "limbo", sc.limboURL, "sandbox", sc.sbURL, "seed", sc.sb.Seed())

	f := newFaults(o, lim, rng)
	settled := runIntegrators(ctx, igs, o.Settle, o.Log, f)
	if err := f.wait(); err != nil {
		return nil, err
	}
	sum, err := judge(ctx, o, sc, lim, igs, settled)
	if err != nil {
		return nil, err
	}
	sum.DB, sum.Seed, sum.SettledInTime = store.RedactURL(o.DB), sc.sb.Seed(), settled
	sum.ServerKills, sum.DBRestarts = f.done()
	sum.Elapsed = time.Since(began).Round(time.Millisecond).String()
	for _, ig := range igs {
		sum.Kills += int(ig.kills.Load())
	}
	return sum, nil
}

// scene is what a run plays on: the listeners, the sandbox destination
// (serving), Limbo's configuration, a directory of the run's own.
type scene struct {
	sbLn, limboLn   net.Listener
	sbURL, limboURL string
	// lag is the search lag Limbo is told.
	lag time.Duration
	app app.Config
	sb  *sandbox.Sandbox
	srv *http.Server
	dir string
}

func newScene(o Options) (sc *scene, err error) {
	sc = &scene{}
	defer func() {
		if err != nil {
			sc.close()
		}
	}()
	// Listeners first: the configuration names the sandbox's address, and
	// the sandbox names Limbo's for its webhooks.
	if sc.sbLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if sc.limboLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	sc.sbURL, sc.limboURL = "http://"+sc.sbLn.Addr().String(), "http://"+sc.limboLn.Addr().String()
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	// The lag Limbo is told: the sandbox's real one, unless the
	// destination lies about it.
	sc.lag = cmp.Or(o.ConfiguredLag, o.Sandbox.SearchLag)
	cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: sc.sbURL, HonoursKeys: !o.Sandbox.NoKeySupport,
		SearchLag: sc.lag, ConfirmWindow: o.ConfirmWindow, Lease: chaosLease, WebhookSecret: secret, RetryRatio: o.RetryRatio,
		// As many attempts at once as the integrations run operations:
		// every grant is counted under the destination's lock (the fast
		// path's attempt_limited plan), and the limit bites only when a
		// killed integration's attempts still hold their leases.
		Concurrency: o.Integrators * o.Workers})
	if err != nil {
		return nil, err
	}
	if sc.dir, err = os.MkdirTemp("", "limbo-chaos-run-"); err != nil {
		return nil, err
	}
	// A key of the run's own, and an anchor directory, so I5 checks the
	// trail as `limbo audit verify --anchor` would.
	sc.app = app.Config{DB: o.DB, MaxConns: o.DBMaxConns, Destinations: cfg, AuditKey: auditkey.New(),
		AnchorDir: filepath.Join(sc.dir, "anchors"), Owner: "chaos", Log: o.Log}
	if err := os.Mkdir(sc.app.AnchorDir, 0o700); err != nil {
		return nil, err
	}
	opts := o.Sandbox
	opts.WebhookURL, opts.WebhookSecret, opts.Logger = sc.limboURL+"/api/v1/inbound/"+sandbox.DestinationName, secret, o.Log
	sc.sb = sandbox.New(opts)
	sc.srv = &http.Server{Handler: sc.sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go sc.srv.Serve(sc.sbLn)
	return sc, nil
}

func (sc *scene) close() {
	if sc.srv != nil {
		sc.srv.Close()
		sc.sb.Close()
	}
	for _, ln := range []net.Listener{sc.sbLn, sc.limboLn} {
		if ln != nil {
			ln.Close()
		}
	}
	if sc.dir != "" {
		os.RemoveAll(sc.dir)
	}
}

// judge freezes the ledger — once the confirm windows a lying destination
// keeps open have closed — and checks it against the sandbox's truth.
func judge(ctx context.Context, o Options, sc *scene, lim *limbo, igs []*integrator, settled bool) (*Summary, error) {
	cfg := sc.app.Destinations
	st, err := app.OpenStore(ctx, o.DB, store.Options{Config: cfg, AuditKey: sc.app.AuditKey, MaxConns: o.DBMaxConns}, nil)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if settled && sc.lag < o.Sandbox.SearchLag {
		// A destination that lies about its lag shows first writes late:
		// the confirm windows still open are Limbo's work in progress, so
		// judge the ledger once they have closed. (With the real lag there
		// is nothing late for a window to find.)
		if err := awaitWindows(ctx, st, igs, cfg.Destination(sandbox.DestinationName), o.Log); err != nil {
			return nil, err
		}
	}
	// A person resolves the duplicates left in review, as recommended;
	// Limbo's undo worker runs the undos against the faulty sandbox.
	decisions := 0
	if settled {
		if decisions, err = reviewDuplicates(ctx, st, igs, cfg.Destination(sandbox.DestinationName), o.Settle, o.Log); err != nil {
			return nil, err
		}
	}
	// Freeze the ledger: stop Limbo's workers and API, then the sandbox.
	stoppedAt := time.Now()
	loops := lim.loops()
	lim.stop()
	sc.sb.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	truth := sc.sb.Truth()
	probes := sc.sb.ProbeStats()
	if o.TruthOut != "" {
		if err := writeTruth(o.TruthOut, truth); err != nil {
			return nil, err
		}
	}
	anchors, err := anchor.NewWriter(sc.app.AnchorDir, st, o.Log)
	if err != nil {
		return nil, err
	}
	sum, err := checkChaos(ctx, st, anchors, igs, truth, cfg, lim, stoppedAt)
	if err != nil {
		return nil, err
	}
	sum.Loops, sum.ProbeAnswers, sum.ProbeAnswersFaulted = loops, probes.Probes, probes.Faulted()
	sum.ReviewerDecisions = decisions
	return sum, nil
}

// truthItem is one effect in --truth-out.
type truthItem struct {
	OperationID    string `json:"operation_id"`
	LogicalVersion string `json:"logical_version"`
	ResourceRef    string `json:"resource_ref"`
	Kind           string `json:"kind"`
	Compensated    bool   `json:"compensated"`
	Failed         bool   `json:"failed,omitempty"`
}

func writeTruth(path string, truth []sandbox.Effect) error {
	items := make([]truthItem, len(truth))
	for i, e := range truth {
		items[i] = truthItem{OperationID: e.OperationID, LogicalVersion: e.LogicalVersion, ResourceRef: e.ResourceRef, Kind: e.Kind, Compensated: e.Compensated, Failed: e.Failed}
	}
	data, err := json.MarshalIndent(items, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// awaitWindows waits until every confirm window the run opened has
// closed, so a late write the watch is still looking for is judged with
// the watch's conclusion, not before it. A window opens when proven
// absence moves an operation to retry_wait (the settled transitions of
// the trail) and lasts d.Window(); its last look comes within a
// reconciliation tick after it ends.
func awaitWindows(ctx context.Context, st *store.Store, igs []*integrator, d review.Destination, log *slog.Logger) error {
	if d.Window() <= 0 {
		return nil
	}
	ours := map[string]bool{}
	for _, ig := range igs {
		for _, it := range ig.work {
			if it.opID != "" {
				ours[it.opID] = true
			}
		}
	}
	var last time.Time
	for after := int64(0); ; {
		evs, err := st.AuditEvents(ctx, after, 5000)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if ours[e.OperationID] && e.ToState == string(review.RetryWait) &&
				(e.Action == "reconcile.settled" || e.Action == "evidence.settled") && e.At.After(last) {
				last = e.At
			}
		}
		after = evs[len(evs)-1].Seq
	}
	if last.IsZero() {
		return nil
	}
	until := last.Add(d.Window() + 4*app.ReconcileEvery + time.Second)
	if wait := time.Until(until); wait > 0 {
		log.Info("chaos: waiting for the last confirm window to close", "wait", wait.Round(time.Millisecond))
		if !simulate.Pause(ctx, wait) {
			return ctx.Err()
		}
	}
	return nil
}
