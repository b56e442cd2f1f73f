package bench

// `limbo bench`: the performance harness of issue 5. It measures, in one
// process and one run, the attempt cycle through the real HTTP API
// (bench_cycle.go) against two floors that do the same writes straight on
// the database (bench_floor.go), interleaved so that drift on a shared
// machine hits all three alike; then the reconciler against a slow sandbox
// (bench_reconcile.go), optionally the console's queue and case pages over
// a bulk-loaded ledger (bench_queue.go), and the process's peak memory.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

const Usage = `Usage: limbo bench [--db URL] [--duration D] [--concurrency N] [--rounds R]
                   [--queue-ops N] [--open-cases M] [--reconcile-ops K] [--keep]
                   [--targets URL,URL…]

Measures Limbo on this machine and prints one JSON object:
  cycle_per_s, call_p50_ms, call_p99_ms   register → attempt → outcome through
      the HTTP API (JSON, bearer auth, validation) by --concurrency clients,
      each on its own keep-alive connection, on an in-process server;
  cycle_two_calls_per_s, call_two_calls_p50_ms, call_two_calls_p99_ms
      the same cycle in two calls: registration with "attempt": true, then
      the outcome;
  floor_plain_per_s, floor_min_per_s      the same writes with no HTTP, JSON
      or validation: a transaction of plain statements per call, and one
      statement (one round trip) per call; ratio_plain, ratio_min =
      cycle_per_s over each. API and floors run interleaved, --rounds times
      each for --duration, and the medians are reported;
  queue_p50_ms, queue_p99_ms, case_p99_ms with --queue-ops: the console's
      queue and case pages over a bulk-loaded ledger;
  browse_p50_ms, browse_p99_ms, search_p50_ms, search_p99_ms,
  operation_p50_ms, operation_p99_ms with --queue-ops: the operations
      browser (first page, a state, a tenant, 20 pages deep), its search
      (key prefix, source ref, resource ref in capitals, a broad fragment,
      two digits, no match, an exact id with its redirect) and operation
      pages, over the same ledger; browse_kinds has each kind's figures;
  audit_p50_ms, audit_p99_ms with --queue-ops: the audit page (first, a
      tenant, an operation, an actor with no events, 20 pages deep, an
      action nobody took, the day of the oldest events; as a
      manager of every tenant, of one, and of a tenant with no events) and
      its export (an operation's, the quiet tenant's), over the trail the
      bulk load writes beside its ledger (an event per operation); their
      kinds are in browse_kinds too;
  bulk_ops_per_s, bulk_batch, bulk   with --bulk-batch (default 100,1000):
      registrations per second through POST /operations/batch by
      --concurrency clients, each sending batches of one size, every
      registration new and audited; bulk has each size's rate, call
      latency and CPU per registration (process and database);
  reconcile_per_min   ambiguous operations settled per minute against the
      sandbox with 50 ms per call;
  rss_mb              the process's peak resident memory.

--targets URL,…: time only the attempt cycle, through Limbo instances
started separately (limbo serve) on the database --db names, which bench
opens to create its token and to check afterwards that every cycle it
counted is confirmed in the ledger. The clients are spread round-robin over
the instances; targets has each one's cycles, CPU per cycle and calls per
group commit (read from its /metrics), instances_cpu_ms_per_cycle all of them together, cpu_ms_per_cycle
the clients', db_cpu_ms_per_cycle the database server's, wal_bytes_per_cycle
PostgreSQL's write-ahead log. docs/scaling.md
was measured this way (tools/scaling/run.sh).

--db: default a fresh SQLite file in a temporary directory. A postgres://
URL without search_path gets a fresh schema, dropped afterwards; with
search_path, that schema is used and must hold no Limbo data (no
operations, audit events, users, tokens or tenants: checked before bench
writes anything), or with --reuse-ledger the ledger an earlier run with
--queue-ops loaded there, which is timed again without loading it. LIMBO_DB is not read: the run
writes many synthetic rows.

Flags:
`

// Options configure one bench run.
type Options struct {
	DB            string
	Duration      time.Duration
	Concurrency   int
	Rounds        int
	Warmup        time.Duration
	QueueOps      int
	OpenCases     int
	QueueRequests int
	// ReuseLedger: the database already holds the ledger of QueueOps
	// operations an earlier run loaded; the pages are timed over it.
	ReuseLedger bool
	// NoPlannerStats times the pages on SQLite without planner
	// statistics, as a database serve made is (store.ForgetPlannerStatistics).
	NoPlannerStats bool
	ReconcileOps   int
	// NoCycles skips the attempt cycle rounds (API and floors).
	NoCycles bool
	// BulkBatches are the batch sizes the bulk intake is timed at (none:
	// skipped).
	BulkBatches []int
	ProbeDelay  time.Duration
	Keep        bool
	// Targets, when set, are Limbo instances started separately on DB:
	// only the API cycle is timed, through them (targets.go).
	Targets []string
	// DBMaxConns bounds the server's database pool (0: the store's default).
	DBMaxConns int
	// HTTPClient is the API clients' kind: clientLean (the default) or
	// clientNetHTTP.
	HTTPClient string
	// CPUProfile, when set, receives a CPU profile of the first timed API run
	// (with NoCycles, of the first bulk round).
	CPUProfile string
	Log        *slog.Logger
	// Stderr receives progress lines (nil: none).
	Stderr io.Writer
}

// RegisterFlags adds bench's flags to fs, defaults included.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", "database URL (sqlite:PATH or postgres://…); default: a fresh SQLite file in a temporary directory")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each timed run (API and each floor, per round)")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "concurrent clients")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds of API, plain floor and min floor, interleaved; medians are reported")
	fs.DurationVar(&o.Warmup, "warmup", -1, "untimed warm-up of each mode before the first round (default: a fifth of --duration, at most 2s)")
	fs.IntVar(&o.QueueOps, "queue-ops", 0, "bulk-load this many operations and time the queue and case pages (0: skip)")
	fs.IntVar(&o.OpenCases, "open-cases", -1, "open cases among --queue-ops (default 5%)")
	fs.IntVar(&o.QueueRequests, "queue-requests", 400, "queue page requests, and as many case, browser, search and operation page requests each, with --queue-ops")
	fs.BoolVar(&o.NoCycles, "no-cycles", false, "skip the attempt cycle rounds (API and floors), to time only what else is asked")
	o.BulkBatches = []int{100, 1000}
	fs.Func("bulk-batch", "comma-separated batch `sizes` the bulk intake (POST /operations/batch) is timed at; 0: skip (default 100,1000)", func(v string) error {
		b, err := parseBatches(v)
		o.BulkBatches = b
		return err
	})
	fs.IntVar(&o.ReconcileOps, "reconcile-ops", 500, "ambiguous operations for reconcile_per_min (0: skip)")
	fs.DurationVar(&o.ProbeDelay, "sandbox-delay", 50*time.Millisecond, "latency the sandbox adds to every call, probes included")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the first timed API run (with --no-cycles: of the first bulk round) to this file (go tool pprof)")
	fs.StringVar(&o.HTTPClient, "http-client", clientLean, "the API clients: lean (HTTP/1.1 by the calling goroutine) or net/http (net/http.Client)")
	fs.IntVar(&o.DBMaxConns, "db-max-conns", 0, "most database connections Limbo opens (0: 32 on PostgreSQL, 8 on SQLite)")
	fs.Func("targets", "comma-separated base `URLs` of Limbo instances started separately on --db (limbo serve): time only the attempt cycle, its clients spread round-robin over them", func(v string) error {
		t, err := parseTargets(v)
		o.Targets = t
		return err
	})
	fs.BoolVar(&o.ReuseLedger, "reuse-ledger", false, "with --queue-ops and a --db naming a search_path: time the pages over the ledger an earlier run loaded there (10 minutes saved at 10,000,000), not a new one")
	fs.BoolVar(&o.NoPlannerStats, "no-planner-stats", false, "with --queue-ops on SQLite: time the pages without planner statistics, as a database limbo serve made has none (serve never runs ANALYZE; the bulk load does)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the database (the temporary SQLite file, or the fresh PostgreSQL schema)")
}

func (o *Options) validate() error {
	switch {
	case o.Duration <= 0:
		return errors.New("bench: --duration must be positive")
	case o.Concurrency < 1:
		return errors.New("bench: --concurrency must be at least 1")
	case o.Rounds < 1:
		return errors.New("bench: --rounds must be at least 1")
	case o.QueueOps < 0 || o.ReconcileOps < 0 || o.QueueRequests < 1:
		return errors.New("bench: --queue-ops and --reconcile-ops must not be negative, --queue-requests positive")
	case o.OpenCases > o.QueueOps:
		return errors.New("bench: --open-cases must not exceed --queue-ops")
	case o.ProbeDelay < 0:
		return errors.New("bench: --sandbox-delay must not be negative")
	case o.ReuseLedger && (o.QueueOps == 0 || !o.NoCycles || len(o.BulkBatches) > 0 || o.ReconcileOps > 0):
		// What else bench times counts on a database of its own.
		return errors.New("bench: --reuse-ledger times the pages alone: give --queue-ops, --no-cycles, --bulk-batch 0 and --reconcile-ops 0")
	}
	return checkHTTPClient(o.HTTPClient)
}

// Report is what `limbo bench` prints. Rates are medians over rounds;
// call latencies pool every call of every round.
type Report struct {
	Engine      string `json:"engine"`
	Concurrency int    `json:"concurrency"`
	Duration    string `json:"duration"`
	Rounds      int    `json:"rounds"`
	HTTPClient  string `json:"http_client"`

	CyclePerS float64 `json:"cycle_per_s"`
	CallP50Ms float64 `json:"call_p50_ms"`
	CallP99Ms float64 `json:"call_p99_ms"`
	// The same cycle in two calls: the registration asks for its attempt
	// ("attempt": true), then the outcome. Interleaved with the rest.
	Cycle2PerS     float64   `json:"cycle_two_calls_per_s"`
	Call2P50Ms     float64   `json:"call_two_calls_p50_ms"`
	Call2P99Ms     float64   `json:"call_two_calls_p99_ms"`
	CPUMsPerCycle2 float64   `json:"cpu_ms_per_cycle_two_calls"`
	Cycle2Rounds   []float64 `json:"cycle_two_calls_per_s_rounds"`
	FloorPlainPerS float64   `json:"floor_plain_per_s"`
	FloorMinPerS   float64   `json:"floor_min_per_s"`
	RatioPlain     float64   `json:"ratio_plain"`
	RatioMin       float64   `json:"ratio_min"`

	// CPU time of this process (clients, server, driver; not the database
	// server) per cycle, medians over rounds: the cost a run's ratio hides.
	CPUMsPerCycle           float64 `json:"cpu_ms_per_cycle"`
	FloorPlainCPUMsPerCycle float64 `json:"floor_plain_cpu_ms_per_cycle"`
	FloorMinCPUMsPerCycle   float64 `json:"floor_min_cpu_ms_per_cycle"`
	// The database server's CPU time per cycle, when it runs on this
	// machine (PostgreSQL on a loopback address or a Unix socket; SQLite
	// runs inside the process and is counted above).
	DBCPUMsPerCycle           *float64 `json:"db_cpu_ms_per_cycle,omitempty"`
	FloorPlainDBCPUMsPerCycle *float64 `json:"floor_plain_db_cpu_ms_per_cycle,omitempty"`
	FloorMinDBCPUMsPerCycle   *float64 `json:"floor_min_db_cpu_ms_per_cycle,omitempty"`

	// FastPathShare is the share of the API's calls the store wrote with
	// one guarded statement (store.FastPath); 1 when nothing else ran.
	FastPathShare float64 `json:"fast_path_share"`
	// FastPathCallsPerBatch is how many fast-path calls shared one commit
	// (on PostgreSQL, one round trip) on average (store.FastBatches).
	FastPathCallsPerBatch *float64 `json:"fast_path_calls_per_batch,omitempty"`

	FloorPlainCallP99Ms float64   `json:"floor_plain_call_p99_ms"`
	FloorMinCallP99Ms   float64   `json:"floor_min_call_p99_ms"`
	CycleRounds         []float64 `json:"cycle_per_s_rounds"`
	FloorPlainRounds    []float64 `json:"floor_plain_per_s_rounds"`
	FloorMinRounds      []float64 `json:"floor_min_per_s_rounds"`
	// FloorMinNote says how floor min was measured on this engine.
	FloorMinNote string `json:"floor_min_note"`

	QueueOps  *int `json:"queue_ops,omitempty"`
	OpenCases *int `json:"open_cases,omitempty"`
	// NoPlannerStats: the pages were timed on SQLite without planner
	// statistics (--no-planner-stats).
	NoPlannerStats bool     `json:"no_planner_stats,omitempty"`
	QueueLoadS     *float64 `json:"queue_load_s,omitempty"`
	QueueP50Ms     *float64 `json:"queue_p50_ms,omitempty"`
	QueueP99Ms     *float64 `json:"queue_p99_ms,omitempty"`
	CaseP50Ms      *float64 `json:"case_p50_ms,omitempty"`
	CaseP99Ms      *float64 `json:"case_p99_ms,omitempty"`
	// The operations browser over the same ledger: its pages, its search,
	// the operation page, and each kind of request of the three.
	BrowseP50Ms    *float64 `json:"browse_p50_ms,omitempty"`
	BrowseP99Ms    *float64 `json:"browse_p99_ms,omitempty"`
	SearchP50Ms    *float64 `json:"search_p50_ms,omitempty"`
	SearchP99Ms    *float64 `json:"search_p99_ms,omitempty"`
	OperationP50Ms *float64 `json:"operation_p50_ms,omitempty"`
	OperationP99Ms *float64 `json:"operation_p99_ms,omitempty"`
	// The audit page and its export over the bulk ledger's trail.
	AuditP50Ms  *float64               `json:"audit_p50_ms,omitempty"`
	AuditP99Ms  *float64               `json:"audit_p99_ms,omitempty"`
	BrowseKinds map[string]KindLatency `json:"browse_kinds,omitempty"`

	// The bulk intake (POST /operations/batch): bulk_ops_per_s is at the
	// first batch size, bulk_batch; bulk has every size.
	BulkOpsPerS *float64     `json:"bulk_ops_per_s,omitempty"`
	BulkBatch   *int         `json:"bulk_batch,omitempty"`
	Bulk        []BulkReport `json:"bulk,omitempty"`

	ReconcileOps              int      `json:"reconcile_ops,omitempty"`
	ReconcilePerMin           *float64 `json:"reconcile_per_min,omitempty"`
	ReconcileConfirmed        int      `json:"reconcile_confirmed,omitempty"`
	ReconcileProbeConcurrency int      `json:"reconcile_probe_concurrency,omitempty"`
	SandboxDelayMs            float64  `json:"sandbox_delay_ms,omitempty"`

	// With --targets: each instance's share, and the CPU time of every
	// instance together per cycle (cpu_ms_per_cycle is then the clients').
	Targets                []TargetReport `json:"targets,omitempty"`
	InstancesCPUMsPerCycle *float64       `json:"instances_cpu_ms_per_cycle,omitempty"`
	// WALBytesPerCycle is PostgreSQL's write-ahead log per cycle (with
	// --targets; other clients of the server count too).
	WALBytesPerCycle *float64 `json:"wal_bytes_per_cycle,omitempty"`

	RSSMb float64 `json:"rss_mb"`

	GoVersion  string `json:"go_version"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Started    string `json:"started"`
	Elapsed    string `json:"elapsed"`
}

// KindLatency is one kind of request's median and 99th percentile.
type KindLatency struct {
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	N     int     `json:"n"`
}

const (
	/* bench: a fresh PostgreSQL schema per run unless the URL names one. */
	benchCreateSchema = `CREATE SCHEMA %s`
	/* bench */
	benchDropSchema = `DROP SCHEMA IF EXISTS %s CASCADE`
)

// benchTenant is the tenant of the API and floor cycles.
const benchTenant = "limbo-bench"

func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.OpenCases < 0 {
		o.OpenCases = o.QueueOps / 20
	}
	o.HTTPClient = cmp.Or(o.HTTPClient, clientLean)
	if o.Warmup < 0 {
		o.Warmup = min(o.Duration/5, 2*time.Second)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if len(o.Targets) > 0 {
		return runTargets(ctx, o, began)
	}
	dbURL, cleanup, err := benchDatabase(ctx, o.DB, o.Keep, o.Stderr)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// Before anything starts: the server's sealer would sign a checkpoint
	// with bench's throwaway key, and its token make a tenant.
	if !o.ReuseLedger {
		if err := app.CheckUnused(ctx, dbURL); err != nil {
			return nil, fmt.Errorf("bench: %w (or no --db)", err)
		}
	}

	// The sandbox first: the destination configuration names its address.
	sb, err := startBenchSandbox(o.ProbeDelay)
	if err != nil {
		return nil, err
	}
	defer sb.close()
	// Limbo as `limbo serve` runs it, every background loop included.
	srv, err := startBenchServer(ctx, dbURL, o.DBMaxConns, sb.cfg, o.ReuseLedger, o.Log)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	st := srv.app.Store

	rep := &Report{Engine: string(st.Engine()), Concurrency: o.Concurrency, Duration: o.Duration.String(), Rounds: o.Rounds, HTTPClient: o.HTTPClient,
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Started: began.UTC().Format(time.RFC3339)}
	if !o.NoCycles {
		if err := benchCycles(ctx, st, srv, o, dbURL, rep); err != nil {
			return nil, err
		}
	}
	if len(o.BulkBatches) > 0 {
		bulk, err := benchBulk(ctx, srv, o, dbURL)
		if err != nil {
			return nil, err
		}
		rep.Bulk, rep.BulkOpsPerS, rep.BulkBatch = bulk, ptr(bulk[0].OpsPerS), ptr(bulk[0].Batch)
	}
	if o.ReconcileOps > 0 {
		progress(o.Stderr, "reconcile: %d ambiguous operations, %s per sandbox call", o.ReconcileOps, o.ProbeDelay)
		r, err := benchReconcile(ctx, st, sb, o.ReconcileOps, o.Log)
		if err != nil {
			return nil, err
		}
		rep.ReconcileOps, rep.ReconcilePerMin, rep.ReconcileConfirmed = o.ReconcileOps, ptr(round(r.perMin, 0)), r.confirmed
		rep.ReconcileProbeConcurrency, rep.SandboxDelayMs = r.probeConcurrency, ms(o.ProbeDelay)
	}
	if o.QueueOps > 0 {
		if o.ReuseLedger {
			progress(o.Stderr, "queue: the ledger already loaded, %d operations", o.QueueOps)
		} else {
			progress(o.Stderr, "queue: bulk-loading %d operations, %d open cases", o.QueueOps, o.OpenCases)
		}
		q, err := benchQueue(ctx, st, srv.url, o.QueueOps, o.OpenCases, o.QueueRequests, o.ReuseLedger, o.NoPlannerStats)
		if err != nil {
			return nil, err
		}
		rep.QueueOps, rep.OpenCases, rep.QueueLoadS = ptr(o.QueueOps), ptr(o.OpenCases), ptr(round(q.load.Seconds(), 1))
		rep.NoPlannerStats = o.NoPlannerStats && st.Engine() == store.SQLite
		rep.QueueP50Ms, rep.QueueP99Ms = ptr(ms(pct(q.queue, 50))), ptr(ms(pct(q.queue, 99)))
		rep.CaseP50Ms, rep.CaseP99Ms = ptr(ms(pct(q.cases, 50))), ptr(ms(pct(q.cases, 99)))
		rep.BrowseP50Ms, rep.BrowseP99Ms = ptr(ms(pct(q.ops.browse, 50))), ptr(ms(pct(q.ops.browse, 99)))
		rep.SearchP50Ms, rep.SearchP99Ms = ptr(ms(pct(q.ops.search, 50))), ptr(ms(pct(q.ops.search, 99)))
		rep.OperationP50Ms, rep.OperationP99Ms = ptr(ms(pct(q.ops.operation, 50))), ptr(ms(pct(q.ops.operation, 99)))
		rep.AuditP50Ms, rep.AuditP99Ms = ptr(ms(pct(q.ops.audit, 50))), ptr(ms(pct(q.ops.audit, 99)))
		rep.BrowseKinds = map[string]KindLatency{}
		for k, d := range q.ops.kinds {
			rep.BrowseKinds[k] = KindLatency{P50Ms: ms(pct(d, 50)), P99Ms: ms(pct(d, 99)), N: len(d)}
		}
	}
	rep.RSSMb = peakRSSMb()
	rep.Elapsed = time.Since(began).Round(time.Millisecond).String()
	return rep, nil
}

// benchDatabase resolves --db to the URL the run uses and what to do
// afterwards: remove the temporary SQLite file, or drop the fresh schema.
func benchDatabase(ctx context.Context, dbURL string, keep bool, stderr io.Writer) (string, func(), error) {
	noop := func() {}
	switch {
	case dbURL == "":
		dir, err := os.MkdirTemp("", "limbo-bench-")
		if err != nil {
			return "", nil, err
		}
		if keep {
			progress(stderr, "database kept at %s", dir)
			return "sqlite:" + filepath.Join(dir, "limbo.db"), noop, nil
		}
		return "sqlite:" + filepath.Join(dir, "limbo.db"), func() { os.RemoveAll(dir) }, nil
	case strings.HasPrefix(dbURL, "postgres://"), strings.HasPrefix(dbURL, "postgresql://"):
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", nil, fmt.Errorf("bench: --db: %w", err)
		}
		q := u.Query()
		if q.Get("search_path") != "" {
			return dbURL, noop, nil
		}
		var b [6]byte
		rand.Read(b[:])
		schema := "limbo_bench_" + hex.EncodeToString(b[:])
		admin, err := store.Open(ctx, dbURL, store.Options{})
		if err != nil {
			return "", nil, err
		}
		if _, err := admin.DB().ExecContext(ctx, fmt.Sprintf(benchCreateSchema, schema)); err != nil {
			admin.Close()
			return "", nil, fmt.Errorf("bench: %w", err)
		}
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		if keep {
			admin.Close()
			progress(stderr, "schema %s kept", schema)
			return u.String(), noop, nil
		}
		return u.String(), func() {
			defer admin.Close()
			admin.DB().ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(benchDropSchema, schema))
		}, nil
	}
	return dbURL, noop, nil
}

// benchServer is Limbo in process, assembled by app as `limbo serve`
// assembles it (API, console, metrics, background loops), on a loopback
// listener, with the token the API cycles use.
type benchServer struct {
	app   *app.App
	url   string
	token string
	// actor is how the API names the token in audit events; the floors
	// write the same.
	actor string
}

// startBenchServer starts Limbo on dbURL, signing with a throwaway key:
// on a reused ledger (reused), after the earlier run's throwaway key.
func startBenchServer(ctx context.Context, dbURL string, maxConns int, cfg *review.Config, reused bool, log *slog.Logger) (*benchServer, error) {
	a, err := app.New(ctx, app.Config{DB: dbURL, MaxConns: maxConns, Addr: "127.0.0.1:0", Destinations: cfg,
		AuditKey: auditkey.New(), AnyAuditKey: reused, Owner: "limbo-bench/app", Log: log})
	if err != nil {
		return nil, err
	}
	a.Start(ctx)
	s := &benchServer{app: a, url: a.URL}
	if s.token, err = a.Store.CreateToken(ctx, review.Operator("cli:bench"), benchTenant, "bench"); err != nil {
		s.close()
		return nil, err
	}
	ti, err := a.Store.TenantForToken(ctx, s.token)
	if err != nil {
		s.close()
		return nil, err
	}
	s.actor = "token:" + ti.ID + " (" + ti.Name + ")"
	return s, nil
}

func (s *benchServer) close() { s.app.Close() }

// peakRSSMb is the process's peak resident set (VmHWM), 0 where /proc is missing.
func peakRSSMb() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err == nil {
				return round(kb/1024, 1)
			}
		}
	}
	return 0
}

// pct is the p-th percentile of sorted latencies.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return round((s[len(s)/2-1]+s[len(s)/2])/2, 1)
}

// ms is d in milliseconds, to the hundredth.
func ms(d time.Duration) float64 { return round(float64(d.Microseconds())/1000, 2) }

func round(x float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(x*p+0.5)) / p
}

func ptr[T any](v T) *T { return &v }

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "bench: "+format+"\n", args...)
	}
}
