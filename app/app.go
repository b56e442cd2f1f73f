// Package app assembles a running Limbo once: the store and its
// migrations, the HTTP server (API, console, metrics) and every
// background loop. `limbo serve`, the demo, the fault run, the benchmark
// and the tests that start a server all run this one assembly, so what is
// tested is what users run.
package app

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/outbox"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/undo"
)

// Background intervals: leases are swept and the audit trail sealed about
// once a second, so an expired attempt is closed within lease + 1 s (I4)
// and an event is chained within a second or two.
const (
	SweepEvery     = time.Second
	SealEvery      = time.Second
	ReconcileEvery = 500 * time.Millisecond
	OutboxEvery    = time.Second
	UndoEvery      = 500 * time.Millisecond
)

// The background loops, by name. Every App runs all of them.
const (
	LoopReconcile = "reconcile"     // probes ambiguous operations, watches confirm windows
	LoopOutbox    = "outbox"        // delivers outgoing webhooks
	LoopUndo      = "undo"          // runs compensations through destinations' undo calls
	LoopSweep     = "lease-sweep"   // closes expired attempts, expires deadlines
	LoopSeal      = "audit-seal"    // chains, signs and anchors the audit trail
	LoopPurge     = "payload-purge" // empties payloads past their retention (purge_every)
)

// Config is everything one Limbo needs; cmd/limbo fills it from flags.
type Config struct {
	// DB is the database URL (sqlite:PATH or postgres://…).
	DB string
	// MaxConns bounds the database pool; zero is the store's default.
	MaxConns int
	// BatchesInFlight bounds the registrations of bulk intake calls worked
	// on at once; zero is handlers.DefaultBatchesInFlight.
	BatchesInFlight int
	// IdleTimeout closes a keep-alive connection that carried no request
	// for that long; zero is DefaultIdleTimeout.
	IdleTimeout time.Duration
	// BodyTimeout is how long a client may take to send a request's body
	// before it is answered 408; zero is handlers.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Listener serves the HTTP surface; nil: listen on Addr.
	Listener net.Listener
	Addr     string
	// Destinations is the destination configuration (--config).
	Destinations *review.Config
	// AuditKey signs the checkpoints; New refuses it when the newest
	// checkpoint names another key. AuditKeyFrom says where it came from,
	// for that refusal.
	AuditKey     ed25519.PrivateKey
	AuditKeyFrom string
	// AnyAuditKey skips that check: for the benchmark's reused ledger,
	// whose trail an earlier run signed with a throwaway key.
	AnyAuditKey bool
	// ReplaceAuditKey lets AuditKey take over a trail another key signed
	// so far (lost, leaked or retired): the handover is audited
	// (audit.key_replaced), and verify with the new key carries the
	// earlier checkpoints over, vouched for by hash (store.VerifyReport).
	ReplaceAuditKey bool
	// AnchorDir, when set, receives a copy of every signed checkpoint.
	AnchorDir string
	SealMax   time.Duration
	// SecureCookies marks session cookies Secure (Limbo behind HTTPS).
	SecureCookies  bool
	Session        store.SessionPolicy
	TrustedProxies []*net.IPNet
	// Owner names this instance in claims and fences; "" is host/pid.
	Owner string
	Log   *slog.Logger
	// OnSweep, when set, hears of every lease-sweep round that
	// succeeded: the fault run checks I4 against them.
	OnSweep func(start, end time.Time)
}

// DefaultIdleTimeout is how long an idle keep-alive connection stays open.
// Without one, net/http keeps it until the client closes it: each a
// goroutine, its buffers and a file descriptor, however many clients left
// theirs open. Two minutes outlasts the idle timeouts of the usual proxies
// in front (60 s), so a proxy never reuses a connection Limbo has just
// closed.
const DefaultIdleTimeout = 2 * time.Minute

// App is one running Limbo.
type App struct {
	// Store is the app's store, open from New until Close.
	Store *store.Store
	// URL is where the HTTP surface listens, http://host:port.
	URL string

	cfg     Config
	log     *slog.Logger
	ln      net.Listener
	srv     *http.Server
	anchors *anchor.Writer
	metrics *metrics.Metrics
	// loopStatus is what the background loops' rounds report, for /metrics.
	loopStatus *loop.Statuses
	rec        *reconcile.Reconciler
	hooks      *outbox.Worker
	undo       *undo.Worker
	serveErr   chan error
	// batchesInFlight is the bulk intake's bound the handlers hold, for
	// the start-up line.
	batchesInFlight int
	bodyTimeout     time.Duration

	mu       sync.Mutex
	running  []string
	stopWork context.CancelFunc
	wg       sync.WaitGroup
	stopped  bool
}

// New opens and migrates the store, refuses an audit key other than the
// trail's, catches the anchor directory up and listens; nothing runs until
// Start.
func New(ctx context.Context, cfg Config) (a *App, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Destinations == nil {
		cfg.Destinations = &review.Config{}
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	a = &App{cfg: cfg, log: cfg.Log, serveErr: make(chan error, 1)}
	// The returns below set a to nil: what to close is kept apart, or a
	// failure to start would panic instead of saying what failed.
	opened := a
	defer func() {
		if err != nil {
			opened.Close()
		}
	}()
	if a.Store, err = OpenStore(ctx, cfg.DB, store.Options{Config: cfg.Destinations, AuditKey: cfg.AuditKey,
		AuditSealMax: cfg.SealMax, MaxConns: cfg.MaxConns}, a.log); err != nil {
		return nil, err
	}
	if !cfg.AnyAuditKey {
		if err = checkAuditKey(ctx, a.Store, cfg.AuditKey, cfg.AuditKeyFrom, cfg.ReplaceAuditKey, cfg.AnchorDir, a.log); err != nil {
			return nil, err
		}
	}
	if cfg.AnchorDir != "" {
		// Catch up from the database before serving, then after every seal.
		if a.anchors, err = anchor.NewWriter(cfg.AnchorDir, a.Store, a.log); err != nil {
			return nil, err
		}
		if err = a.anchors.CatchUp(ctx); err != nil {
			return nil, err
		}
	}
	if err = a.buildServer(ctx); err != nil {
		return nil, err
	}
	if a.ln = cfg.Listener; a.ln == nil {
		if a.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, err
		}
	}
	a.URL = "http://" + a.ln.Addr().String()
	return a, nil
}

// buildServer wires the handlers, the console's session keys, metrics and
// the reconciler, whose probe warnings /readyz reports.
func (a *App) buildServer(ctx context.Context) error {
	h := handlers.New(a.Store, a.log)
	if a.cfg.BatchesInFlight != 0 {
		if err := h.SetBatchesInFlight(a.cfg.BatchesInFlight); err != nil {
			return err
		}
	}
	a.batchesInFlight = h.BatchesInFlight()
	h.BodyTimeout = cmp.Or(a.cfg.BodyTimeout, handlers.DefaultBodyTimeout)
	a.bodyTimeout = h.BodyTimeout
	h.Metrics = metrics.New(a.Store, a.log)
	a.metrics = h.Metrics
	a.loopStatus = loop.NewStatuses()
	h.Metrics.WatchLoops(a.loopStatus)
	if a.anchors != nil {
		h.Metrics.WatchAnchors(a.anchors.Alarms)
	}
	h.AuditAnchor = a.cfg.AnchorDir
	h.TrustedProxies = a.cfg.TrustedProxies
	a.rec = reconcile.New(a.Store, a.cfg.Destinations, a.cfg.Owner, a.log)
	a.rec.Metrics = h.Metrics
	h.Warnings = probeWarnings(a.rec.Prober, a.log)
	h.Checker = a.rec
	a.hooks = outbox.New(a.Store, a.cfg.Owner, a.log, nil)
	a.hooks.OnDelivered = h.Metrics.ObserveDelivery
	var err error
	if a.undo, err = undo.New(a.Store, a.cfg.Destinations, a.log, nil); err != nil {
		return err
	}
	hashKey, err := a.Store.Secret(ctx, "session_hash_key", 64)
	if err != nil {
		return err
	}
	blockKey, err := a.Store.Secret(ctx, "session_block_key", 32)
	if err != nil {
		return err
	}
	h.Console = handlers.NewConsole(hashKey, blockKey, a.cfg.SecureCookies, a.cfg.Session)
	a.srv = &http.Server{Handler: handlers.NewServer(h), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: cmp.Or(a.cfg.IdleTimeout, DefaultIdleTimeout)}
	a.srv.RegisterOnShutdown(h.EndStreams) // open event streams end, so Shutdown need not wait for them
	return nil
}

// loops are the background work every Limbo runs, by name.
func (a *App) loops() []struct {
	name string
	run  func(context.Context)
} {
	every := func(name string, d time.Duration, fn func(context.Context) error) func(context.Context) {
		return func(ctx context.Context) { loop.Every(ctx, d, a.log, name, fn) }
	}
	return []struct {
		name string
		run  func(context.Context)
	}{
		{LoopReconcile, func(ctx context.Context) { a.rec.Run(ctx, ReconcileEvery) }},
		{LoopOutbox, func(ctx context.Context) { a.hooks.Run(ctx, OutboxEvery) }},
		{LoopUndo, func(ctx context.Context) { a.undo.Run(ctx, UndoEvery) }},
		{LoopSweep, every(LoopSweep, SweepEvery, a.sweep)},
		{LoopSeal, every(LoopSeal, SealEvery, a.seal)},
		{LoopPurge, every(LoopPurge, a.purgeEvery(), a.purge)},
	}
}

// purgeEvery is the configuration's purge_every, or the default.
func (a *App) purgeEvery() time.Duration {
	if d := a.cfg.Destinations.PurgeEvery; d > 0 {
		return d
	}
	return review.DefaultPurgeEvery
}

// purge empties the payloads past their retention (a no-op when the
// configuration sets none).
func (a *App) purge(ctx context.Context) error {
	// With operations skipped (*store.SkippedRows), the others were
	// purged: reported as well.
	rep, err := a.Store.PurgePayloads(ctx, a.Store.Now(), false)
	if rep.Operations > 0 {
		a.log.Info("payload purge round", "operations", rep.Operations, "rejected_payloads", rep.RejectedPayloads,
			"evidence", rep.Evidence, "outputs", rep.Outputs)
	}
	return err
}

// sweep closes expired attempts, expires deadlines and ends the
// operations whose dependency can no longer be met. Each of the three runs
// whatever the others did: an attempt that cannot be closed must not keep
// deadlines from expiring.
func (a *App) sweep(ctx context.Context) error {
	start := time.Now()
	n, leases := a.Store.SweepLeases(ctx)
	if leases == nil {
		// Only a round that closed every expired lease is one (I4).
		end := time.Now()
		if a.cfg.OnSweep != nil {
			a.cfg.OnSweep(start, end)
		}
		a.log.Debug(sweepMsg, "start", start.Format(time.RFC3339Nano), "end", end.Format(time.RFC3339Nano), "closed", n)
	}
	_, deadlines := a.Store.ExpireDeadlines(ctx)
	_, dependencies := a.Store.SweepDependencies(ctx)
	return errors.Join(leases, deadlines, dependencies)
}

// servingMsg is the line that says Limbo serves, with its loops.
const servingMsg = "limbo serving"

// ParseServingLine reads the loops from the text log's serving line.
func ParseServingLine(line string) ([]string, bool) {
	if !strings.Contains(line, `msg="`+servingMsg+`"`) {
		return nil, false
	}
	_, v, ok := strings.Cut(line, ` loops="[`)
	if !ok {
		return nil, false
	}
	v, _, ok = strings.Cut(v, `]"`)
	return strings.Fields(v), ok
}

// sweepMsg is the debug line of each lease-sweep round; a fault run that
// kills a `limbo serve` child reads them (ParseSweepLine) to check I4.
const sweepMsg = "lease sweep round"

// ParseSweepLine reads a lease-sweep round's start and end from a line of
// the text log at debug level.
func ParseSweepLine(line string) (start, end time.Time, ok bool) {
	if !strings.Contains(line, `msg="`+sweepMsg+`"`) {
		return
	}
	field := func(k string) (time.Time, bool) {
		_, v, found := strings.Cut(line, " "+k+"=")
		if !found {
			return time.Time{}, false
		}
		v, _, _ = strings.Cut(v, " ")
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	}
	start, ok1 := field("start")
	end, ok2 := field("end")
	return start, end, ok1 && ok2
}

// seal chains and signs the audit trail, then copies new checkpoints to
// the anchor directory.
func (a *App) seal(ctx context.Context) error {
	if err := a.Store.SealAll(ctx); err != nil {
		return err
	}
	if a.anchors != nil {
		return a.anchors.CatchUp(ctx)
	}
	return nil
}

// Start runs the background loops and serves HTTP. The loops outlive ctx's
// cancellation until Stop, so in-flight work is not cut mid-round.
func (a *App) Start(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	workCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stopWork = stop
	for _, l := range a.loops() {
		a.running = append(a.running, l.name)
		a.wg.Go(func() { l.run(loop.WithStatus(workCtx, a.loopStatus.For(l.name))) })
	}
	go func() { a.serveErr <- a.srv.Serve(a.ln) }()
	a.log.Info(servingMsg, "url", a.URL, "db", a.Store.Engine(), "trusted_proxies", a.cfg.TrustedProxies,
		"audit_key", keyID(a.cfg.AuditKey), "audit_anchor", a.cfg.AnchorDir, "audit_seal_max", a.cfg.SealMax,
		"batch_in_flight", a.batchesInFlight, "body_timeout", a.bodyTimeout, "loops", a.running)
}

// Loops names the background loops running, in start order.
func (a *App) Loops() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.running)
}

// Failed delivers the HTTP server's error if it stops serving on its own.
func (a *App) Failed() <-chan error { return a.serveErr }

// Stop shuts the HTTP server down (in-flight requests finish), stops the
// loops and seals what is left, so the trail is chained up to the last
// request. The store stays open for reading until Close.
func (a *App) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped || a.stopWork == nil {
		a.stopped = true
		return nil
	}
	a.stopped = true
	err := a.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	a.stopWork()
	a.wg.Wait()
	a.running = nil
	return errors.Join(err, a.seal(ctx))
}

// Close stops the app if it runs and closes the store and listener.
func (a *App) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := a.Stop(ctx)
	if a.ln != nil {
		a.ln.Close()
	}
	// Leadership of the database-wide gauges passes to another instance.
	err = errors.Join(err, a.metrics.Close())
	if a.Store != nil {
		err = errors.Join(err, a.Store.Close())
	}
	return err
}

// probeWarnings logs, once at start, every probe whose credential is not
// set, and returns them for /readyz. Such a destination's probes are not
// sent (an unauthenticated answer is no evidence): its ambiguous operations
// go to review until the variable is set and Limbo restarted.
func probeWarnings(p *reconcile.Prober, log *slog.Logger) []string {
	var out []string
	for _, m := range p.MissingCredentials() {
		msg := "probe credential not set: this destination's probes are not sent and its ambiguous operations go to review"
		if m.Probe == "undo" {
			msg = "undo credential not set: Limbo runs no compensation at this destination; the integrator must"
		}
		log.Warn(msg, "destination", m.Destination, "probe", m.Probe, "auth_env", m.Env)
		out = append(out, m.String())
	}
	return out
}

// keyID names the audit key in the log, "" without one.
func keyID(k ed25519.PrivateKey) string {
	if k == nil {
		return ""
	}
	return store.AuditKeyID(k.Public().(ed25519.PublicKey))
}

// OpenStore opens the database, creating it when new, and migrates it, as
// serve does at start, telling log (when not nil) what an upgrade does
// (migrationLog); a schema a newer Limbo migrated is refused
// (store.ErrSchemaNewer). Commands that must neither create nor migrate
// open with store.Options.Existing and check store.Store.CheckSchema.
func OpenStore(ctx context.Context, dbURL string, opt store.Options, log *slog.Logger) (*store.Store, error) {
	s, err := store.Open(ctx, dbURL, opt)
	if err != nil {
		return nil, err
	}
	var report func(store.MigrationStep)
	if log != nil {
		report = migrationLog(log)
	}
	if _, err := s.MigrateReporting(ctx, report); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// migrationLog says what the migrations of an upgrade do, each as it
// starts and once applied: one may build an index over a large table for
// minutes, in which this instance does not serve yet. A new database's
// are not named one by one: they take a moment.
func migrationLog(log *slog.Logger) func(store.MigrationStep) {
	return func(m store.MigrationStep) {
		switch {
		case !m.Upgrade:
		case !m.Done && m.Concurrently:
			log.Info("migrating: building indexes concurrently; the instances already serving go on writing", "migration", m.Name)
		case !m.Done:
			log.Info("migrating", "migration", m.Name)
		default:
			log.Info("migrated", "migration", m.Name, "took", m.Took.Round(time.Millisecond).String())
		}
	}
}

// HTTPServer is the server the app runs, for tools that tune it (the
// benchmark's test turns keep-alives off to see its client dial again).
func (a *App) HTTPServer() *http.Server { return a.srv }

// CheckUnused refuses a database that holds Limbo data (store.Held): the
// benchmark and the fault run fill theirs with synthetic operations and
// sign its audit trail with a throwaway key, so on a real database they
// would leave fake operations and a trail its own key no longer verifies.
// It only reads, and runs before they start anything; a database not yet
// created or migrated passes.
func CheckUnused(ctx context.Context, dbURL string) error {
	st, err := store.Open(ctx, dbURL, store.Options{MaxConns: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	held, err := st.Held(ctx)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("the database %s already holds Limbo data (%s), and nothing was written to it: "+
			"this run writes synthetic operations and signs the audit trail with a key of its own; give it an empty database",
			store.RedactURL(dbURL), strings.Join(held, ", "))
	}
	return nil
}
