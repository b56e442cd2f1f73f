package main

// `limbo chaos`: the whole fault scenario in one process. Limbo (API and
// background workers) and the sandbox destination run in process on
// loopback listeners; simulated integrations built on client/ run
// operations of every risk class against the faulty sandbox, and are killed
// and restarted at random points. At the end the ledger is checked against
// the sandbox's ground truth (RELIABILITY.md I1–I7).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

const chaosUsage = `Usage: limbo chaos [fault flags] [--ops N] [--integrators N] [--kills K] [--db URL]
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
own (chaos-<run>-<n>), so --db may name a database used before.
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

// chaosOptions configure one chaos run.
type chaosOptions struct {
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
	// Log receives Limbo's, the sandbox's and the integrations' logs.
	Log *slog.Logger

	// DBMaxConns bounds the store's connection pool (store.Options
	// MaxConns; 0: the default). Tests keep it small.
	DBMaxConns int
}

func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := chaosOptions{}
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
	fs.DurationVar(&o.ConfiguredLag, "configured-lag", 0, "the search lag Limbo is told the destination has (0: the sandbox's real --search-lag); shorter than --search-lag, the destination lies about its lag and the confirm window must catch the late writes")
	fs.DurationVar(&o.ConfirmWindow, "confirm-window", 0, "the destination's confirm_window: how long after a proof of absence Limbo keeps searching for a late write (0: 10 × the configured lag)")
	verbose := fs.Bool("verbose", false, "log every reconciliation and worker event to stderr")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, chaosUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0, nil
		}
		fmt.Fprint(stderr, chaosUsage)
		fs.PrintDefaults()
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("chaos: unexpected argument %q", fs.Arg(0))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sum, err := runChaos(ctx, o)
	if err != nil {
		return 2, err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sum); err != nil {
		return 2, err
	}
	if !sum.Holds() {
		return 1, nil
	}
	return 0, nil
}

func (o *chaosOptions) validate() error {
	switch {
	case o.Ops < 1:
		return errors.New("chaos: --ops must be at least 1")
	case o.Integrators < 1:
		return errors.New("chaos: --integrators must be at least 1")
	case o.Workers < 1:
		return errors.New("chaos: --workers must be at least 1")
	case o.Kills < 0:
		return errors.New("chaos: --kills must not be negative")
	case o.Settle <= 0:
		return errors.New("chaos: --settle must be positive")
	case !(o.RetryRatio > 0 && o.RetryRatio <= 1):
		return errors.New("chaos: --retry-ratio must lie in (0, 1]")
	case o.ConfiguredLag < 0:
		return errors.New("chaos: --configured-lag must not be negative")
	case o.ConfirmWindow < 0:
		return errors.New("chaos: --confirm-window must not be negative")
	}
	return o.Sandbox.Validate()
}

// runChaos runs the scenario and checks it. The database is left in place.
func runChaos(ctx context.Context, o chaosOptions) (*chaosSummary, error) {
	began := time.Now()
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.RetryRatio == 0 {
		o.RetryRatio = 1
	}
	if o.DB == "" {
		dir, err := os.MkdirTemp("", "limbo-chaos-")
		if err != nil {
			return nil, err
		}
		o.DB = "sqlite:" + filepath.Join(dir, "limbo.db")
	}
	if err := o.validate(); err != nil {
		return nil, err
	}

	// Listeners first: the configuration names the sandbox's address, and
	// the sandbox names Limbo's for its webhooks.
	sbLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sbLn.Close()
	limboLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer limboLn.Close()
	sbURL, limboURL := "http://"+sbLn.Addr().String(), "http://"+limboLn.Addr().String()

	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	// The lag Limbo is told: the sandbox's real one, unless the
	// destination lies about it.
	lag := o.Sandbox.SearchLag
	if o.ConfiguredLag > 0 {
		lag = o.ConfiguredLag
	}
	draft, err := sandboxDestConfig(sbURL, !o.Sandbox.NoKeySupport, lag, chaosLease, secret, o.RetryRatio)
	if err != nil {
		return nil, err
	}
	d := draft.Destinations[sandboxDest]
	d.ConfirmWindow = o.ConfirmWindow
	draft.Destinations[sandboxDest] = d
	cfg, err := parsedConfig(draft)
	if err != nil {
		return nil, err
	}
	// A key of the run's own, and an anchor directory, so I5 checks the
	// trail as `limbo audit verify --anchor` would.
	st, err := openStore(ctx, o.DB, store.Options{Config: cfg, AuditKey: newAuditKey(), MaxConns: o.DBMaxConns})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	anchorDir, err := os.MkdirTemp("", "limbo-chaos-anchor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(anchorDir)
	anchors, err := anchor.NewWriter(anchorDir, st, o.Log)
	if err != nil {
		return nil, err
	}

	host, _ := os.Hostname()
	lim := startLimbo(st, cfg, limboLn, o.Log, fmt.Sprintf("%s/%d/chaos", host, os.Getpid()), anchors)
	defer lim.stop()

	sbOpts := o.Sandbox
	sbOpts.WebhookURL, sbOpts.WebhookSecret, sbOpts.Logger = limboURL+"/api/v1/inbound/"+sandboxDest, secret, o.Log
	sb := sandbox.New(sbOpts)
	sbSrv := &http.Server{Handler: sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go sbSrv.Serve(sbLn)
	defer sbSrv.Close()
	defer sb.Close()

	rng := rand.New(rand.NewPCG(uint64(sb.Seed()), 0x5eed))
	igs, err := newIntegrators(ctx, st, o, limboURL, sbURL, rng)
	if err != nil {
		return nil, err
	}
	o.Log.Info("chaos: running", "ops", o.Ops, "integrators", o.Integrators, "kills", o.Kills, "db", o.DB,
		"limbo", limboURL, "sandbox", sbURL, "seed", sb.Seed())

	settled := runIntegrators(ctx, igs, o.Settle, o.Log)
	if settled && lag < o.Sandbox.SearchLag {
		// A destination that lies about its lag shows first writes late:
		// the confirm windows still open are Limbo's work in progress, so
		// judge the ledger once they have closed. (With the real lag there
		// is nothing late for a window to find.)
		if err := awaitWindows(ctx, st, igs, cfg.Destination(sandboxDest), o.Log); err != nil {
			return nil, err
		}
	}
	// Freeze the ledger: stop Limbo's workers and API, then the sandbox.
	stoppedAt := time.Now()
	lim.stop()
	sb.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	truth := sb.Truth()
	if o.TruthOut != "" {
		if err := writeTruth(o.TruthOut, truth); err != nil {
			return nil, err
		}
	}
	sum, err := checkChaos(ctx, st, anchors, igs, truth, cfg, lim.sweeps.all(), stoppedAt)
	if err != nil {
		return nil, err
	}
	sum.DB = o.DB
	sum.Seed = sb.Seed()
	sum.SettledInTime = settled
	sum.Elapsed = time.Since(began).Round(time.Millisecond).String()
	for _, ig := range igs {
		sum.Kills += int(ig.kills.Load())
	}
	return sum, nil
}

// sandboxConfig is the configuration of the "sandbox" destination at base:
// what it guarantees (keys, 409 for a key in progress, search lag), its
// probes, and the secret of its webhooks.
//
// The sandbox runs in process on loopback, which netguard refuses to
// every outbound request by default: its probes may reach it only because
// allow_internal names its address, and only that address.
func sandboxConfig(base string, honoursKeys bool, searchLag, lease time.Duration, secret string, retryRatio float64) (*review.Config, error) {
	cfg, err := sandboxDestConfig(base, honoursKeys, searchLag, lease, secret, retryRatio)
	if err != nil {
		return nil, err
	}
	return parsedConfig(cfg)
}

// parsedConfig passes cfg through the parser's own checks, as a
// configuration file would go.
func parsedConfig(cfg *review.Config) (*review.Config, error) {
	data, err := yamlConfig(cfg)
	if err != nil {
		return nil, err
	}
	return review.ParseConfig(data)
}

// sandboxDestConfig is sandboxConfig before the parser.
func sandboxDestConfig(base string, honoursKeys bool, searchLag, lease time.Duration, secret string, retryRatio float64) (*review.Config, error) {
	probe := func(path, candidates string) *review.Probe {
		return &review.Probe{URL: base + path, Timeout: 5 * time.Second, Candidates: candidates}
	}
	paged := func(p *review.Probe) *review.Probe {
		p.Next, p.CursorParam = "$.next", "cursor"
		return p
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("sandbox address %q: %w", base, err)
	}
	own, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("sandbox address %q: not an IP address", base)
	}
	cfg := &review.Config{
		Destinations: map[string]review.Destination{sandboxDest: {
			HonoursKeys:             honoursKeys,
			ConflictMeansInProgress: true,
			SearchLag:               searchLag,
			Lease:                   lease,
			ProbeConcurrency:        8,
			Probes: review.Probes{
				Status: probe("/resources/{{if .ResourceRef}}{{.ResourceRef}}{{else}}{{.JobRef}}{{end}}", ""),
				// Two hits a page: duplicates (no key support) are found
				// only by reading every page, as a real search's would be.
				Search: paged(probe("/search?operation_id={{.ID}}&limit=2", "items")),
				Job:    probe("/jobs/{{.JobRef}}", ""),
			},
			WebhookSecrets: []string{secret},
			AllowInternal:  review.AllowList{Prefixes: []netip.Prefix{netip.PrefixFrom(own, own.BitLen())}},
		}},
		RetryBudget: review.RetryBudget{Ratio: retryRatio},
	}
	return cfg, nil
}

// yamlConfig renders cfg as the YAML a --config file would hold.
func yamlConfig(cfg *review.Config) ([]byte, error) {
	var b []byte
	add := func(format string, args ...any) { b = fmt.Appendf(b, format, args...) }
	add("retry_budget:\n  ratio: %s\n", strconv.FormatFloat(cfg.RetryBudget.Ratio, 'f', -1, 64))
	add("destinations:\n")
	for name, d := range cfg.Destinations {
		add("  %s:\n", name)
		add("    honours_keys: %t\n    conflict_means_in_progress: %t\n", d.HonoursKeys, d.ConflictMeansInProgress)
		add("    search_lag: %s\n    lease: %s\n    probe_concurrency: %d\n", d.SearchLag, d.Lease, d.ProbeConcurrency)
		if d.ConfirmWindow > 0 {
			add("    confirm_window: %s\n", d.ConfirmWindow)
		}
		add("    probes:\n")
		for _, p := range []struct {
			name string
			p    *review.Probe
		}{{"status", d.Probes.Status}, {"search", d.Probes.Search}, {"job", d.Probes.Job}} {
			if p.p == nil {
				continue
			}
			add("      %s:\n        url: %q\n        timeout: %s\n", p.name, p.p.URL, p.p.Timeout)
			if p.p.Candidates != "" {
				add("        candidates: %q\n", p.p.Candidates)
			}
			if p.p.Next != "" {
				add("        next: %q\n        cursor_param: %q\n", p.p.Next, p.p.CursorParam)
			}
		}
		if !d.AllowInternal.Empty() {
			add("    allow_internal:\n")
			for _, a := range d.AllowInternal.Strings() {
				add("      - %q\n", a)
			}
		}
		if len(d.WebhookSecrets) > 0 {
			add("    webhook_secrets:\n")
			for _, s := range d.WebhookSecrets {
				add("      - %q\n", s)
			}
		}
	}
	return b, nil
}

// limboProcess is Limbo in process: the API on a listener and the
// background workers `limbo serve` runs (reconciler, lease sweeper, sealer
// with its anchor writer).
type limboProcess struct {
	srv  *http.Server
	stop func()
	// sweeps records every lease-sweep round, for I4.
	sweeps sweepLog
}

// sweepLog records when each lease-sweep round ran.
type sweepLog struct {
	mu     sync.Mutex
	rounds []sweepRound
}

type sweepRound struct{ start, end time.Time }

func (l *sweepLog) add(start, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rounds = append(l.rounds, sweepRound{start, end})
}

func (l *sweepLog) all() []sweepRound {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sweepRound(nil), l.rounds...)
}

func startLimbo(st *store.Store, cfg *review.Config, ln net.Listener, log *slog.Logger, owner string, anchors *anchor.Writer) *limboProcess {
	srv := &http.Server{Handler: handlers.NewServer(handlers.New(st, log)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	p := &limboProcess{srv: srv}
	workCtx, stopWork := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	rec := reconcile.New(st, cfg, owner, log)
	wg.Go(func() { rec.Run(workCtx, reconcileEvery) })
	wg.Go(func() {
		loop.Every(workCtx, sweepEvery, log, "lease sweep", func(c context.Context) error {
			start := time.Now()
			_, err := st.SweepLeases(c)
			if err == nil {
				p.sweeps.add(start, time.Now())
			}
			return err
		})
	})
	wg.Go(func() {
		loop.Every(workCtx, sealEvery, log, "audit seal", func(c context.Context) error {
			if err := st.SealAll(c); err != nil {
				return err
			}
			return anchors.CatchUp(c)
		})
	})
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(shutCtx)
			stopWork()
			wg.Wait()
		})
	}
	return p
}

// truthItem is one effect in --truth-out.
type truthItem struct {
	OperationID    string `json:"operation_id"`
	LogicalVersion string `json:"logical_version"`
	ResourceRef    string `json:"resource_ref"`
	Kind           string `json:"kind"`
	Compensated    bool   `json:"compensated"`
}

func writeTruth(path string, truth []sandbox.Effect) error {
	items := make([]truthItem, len(truth))
	for i, e := range truth {
		items[i] = truthItem{OperationID: e.OperationID, LogicalVersion: e.LogicalVersion, ResourceRef: e.ResourceRef, Kind: e.Kind, Compensated: e.Compensated}
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
	until := last.Add(d.Window() + 4*reconcileEvery + time.Second)
	if wait := time.Until(until); wait > 0 {
		log.Info("chaos: waiting for the last confirm window to close", "wait", wait.Round(time.Millisecond))
		if !pause(ctx, wait) {
			return ctx.Err()
		}
	}
	return nil
}
