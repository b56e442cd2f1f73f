// Package metrics exposes Limbo's Prometheus metrics: counters and
// histograms fed by the handlers and the reconciler, and gauges read from
// the ledger at scrape time. Operators alert on these.
package metrics

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/limbo-dev/limbo/buildinfo"
	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Metrics holds Limbo's collectors in a registry of its own (no globals).
//
// Several Limbo instances may share one PostgreSQL. The gauges read from
// the database (operations by state, open cases, attempts in flight, retry
// budgets, the outbox backlog, the oldest open case, the audit seal lag)
// say the same in every instance, so only one exports them: the leader,
// the instance holding a PostgreSQL session advisory lock (a key of
// Limbo's metrics and the current schema) on a connection of its own. An
// instance tries to take it at each scrape while it does not hold it, and
// keeps it until Close or until that connection breaks; every instance
// exports limbo_metrics_leader (1 or 0) and its own counters and
// histograms, so sum() over instances is right for everything. On SQLite
// (one process per database file) the instance is always the leader.
type Metrics struct {
	Registry *prometheus.Registry

	// Attempts counts reported outcomes by what comes next (done,
	// retry_at, reconcile, review, failed) and destination.
	Attempts *prometheus.CounterVec
	// Verdicts counts reconciliation rounds by result (Verdicts).
	Verdicts *prometheus.CounterVec
	// ProbeSeconds is probe latency by destination and kind.
	ProbeSeconds *prometheus.HistogramVec
	// AmbiguousSeconds is how long operations stayed ambiguous.
	AmbiguousSeconds *prometheus.HistogramVec
	// HTTPSeconds is request latency by route and status class.
	HTTPSeconds *prometheus.HistogramVec
	// Delivered counts webhook messages this process delivered;
	// DeliverySeconds is the time from a message's creation to its
	// delivery (ObserveDelivery).
	Delivered       prometheus.Counter
	DeliverySeconds prometheus.Histogram
	// BatchWaiting is the registrations of POST /operations/batch calls
	// waiting in this process for their turn (handlers.DefaultBatchesInFlight).
	BatchWaiting prometheus.Gauge
	// BatchRefusals counts the registrations of bulk intake calls refused
	// because the batches waiting already held all they may (503 busy).
	BatchRefusals prometheus.Counter

	ledger *ledger
	loops  *loopCollector
}

// Verdicts are the reconciliation verdicts a round may end with: the state
// it settled the operation in, or inconclusive. Each is exported from the
// start, at 0, for every configured destination.
func Verdicts() []string {
	return []string{string(review.Confirmed), string(review.Accepted), string(review.RetryWait), string(review.Failed),
		string(review.NeedsReview), "inconclusive"}
}

// Nexts are the attempt outcomes' next steps, exported from the start.
func Nexts() []review.Next {
	return []review.Next{review.NextDone, review.NextRetryAt, review.NextReconcile, review.NextReview, review.NextFailed}
}

// New builds the collectors and registers the ledger gauges read from st.
// Close releases the connection that holds leadership.
func New(st *store.Store, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limbo_attempt_outcomes_total",
			Help: "Attempt outcomes reported, by what comes next and destination."}, []string{"next", "destination"}),
		Verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limbo_reconcile_verdicts_total",
			Help: "Reconciliation rounds by verdict (the state reached, or inconclusive)."}, []string{"verdict", "destination"}),
		ProbeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limbo_probe_duration_seconds",
			Help: "Probe latency by destination and kind.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"destination", "kind"}),
		AmbiguousSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limbo_ambiguous_duration_seconds",
			Help: "Time operations spent ambiguous before reconciliation settled them.", Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)}, []string{"destination"}),
		HTTPSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limbo_http_request_duration_seconds",
			Help: "HTTP request latency by route, method and status class.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"route", "method", "code"}),
		Delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "limbo_outbox_delivered_total",
			Help: "Webhook messages this process delivered."}),
		DeliverySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "limbo_outbox_delivery_latency_seconds",
			Help:    "Time from a webhook message's creation (the decision) to its delivery, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.25, 4, 10)}),
		BatchWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "limbo_batch_registrations_waiting",
			Help: "Registrations of bulk intake calls (POST /api/v1/operations/batch) waiting in this process for their turn."}),
		BatchRefusals: prometheus.NewCounter(prometheus.CounterOpts{Name: "limbo_batch_registrations_refused_total",
			Help: "Registrations of bulk intake calls refused (503 busy, nothing written) because the batches waiting in this process already held all they may."}),
		ledger: &ledger{st: st, log: log},
		loops:  &loopCollector{},
	}
	var dests []string
	if cfg := st.Config(); cfg != nil {
		dests = slices.Sorted(maps.Keys(cfg.Destinations))
	}
	for _, d := range dests {
		for _, n := range Nexts() {
			m.Attempts.WithLabelValues(string(n), d)
		}
		for _, v := range Verdicts() {
			m.Verdicts.WithLabelValues(v, d)
		}
	}
	bi := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "limbo_build_info",
		Help:        "Always 1; the labels say which Limbo this process runs.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion}})
	build.Set(1)
	m.Registry.MustRegister(m.Attempts, m.Verdicts, m.ProbeSeconds, m.AmbiguousSeconds, m.HTTPSeconds,
		m.Delivered, m.DeliverySeconds, m.BatchWaiting, m.BatchRefusals, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.ledger, m.loops)
	return m
}

// WatchLoops exports the background loops' health from their statuses
// (per process): the app passes the set its loops report to. Safe on a
// nil Metrics.
func (m *Metrics) WatchLoops(s *loop.Statuses) {
	if m == nil {
		return
	}
	m.loops.mu.Lock()
	defer m.loops.mu.Unlock()
	m.loops.set = s
}

// WatchAnchors exports the anchor directory's alarms (the database no
// longer agreeing with the checkpoints kept outside it) as
// limbo_audit_anchor_alarms_total, read from alarms at scrape time; the
// app calls it when an anchor directory is configured. Safe on a nil
// Metrics.
func (m *Metrics) WatchAnchors(alarms func() int64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "limbo_audit_anchor_alarms_total",
		Help: "Alarms this process raised because the database disagrees with the audit anchor directory (a checkpoint missing, rewritten, or not validly signed): tampering to look into, named in the log."},
		func() float64 { return float64(alarms()) }))
}

var (
	descLoopOK = prometheus.NewDesc("limbo_loop_last_success_age_seconds",
		"Seconds since the background loop's last round that succeeded (since the loop started, if none has): a loop failing, panicking or stuck makes it grow.", []string{"loop"}, nil)
	descLoopRunning = prometheus.NewDesc("limbo_loop_round_running_seconds",
		"How long the background loop's current round has been running, 0 between rounds: a round stuck on a query or a destination makes it grow.", []string{"loop"}, nil)
	descLoopFailures = prometheus.NewDesc("limbo_loop_failures_total",
		"Background loop rounds that failed in this process, panics included.", []string{"loop"}, nil)
	descLoopPanics = prometheus.NewDesc("limbo_loop_panics_total",
		"Background loop rounds that panicked in this process (logged with their stack; the loop goes on).", []string{"loop"}, nil)
	descLoopSkipped = prometheus.NewDesc("limbo_loop_rows_skipped_total",
		"Rows the background loop's rounds went past in this process because each failed on its own (logged with its id, rolled back, tried again next round): one row failing every time makes it grow each round while the rest are handled.", []string{"loop"}, nil)
)

// loopCollector reads the loops' statuses at scrape time.
type loopCollector struct {
	mu  sync.Mutex
	set *loop.Statuses
}

func (c *loopCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoopOK, descLoopRunning, descLoopFailures, descLoopPanics, descLoopSkipped} {
		ch <- d
	}
}

func (c *loopCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	set := c.set
	c.mu.Unlock()
	if set == nil {
		return
	}
	now := time.Now()
	for name, s := range set.Snapshot() {
		if s.Started.IsZero() {
			continue // not running yet
		}
		ok := s.LastOK
		if ok.IsZero() {
			ok = s.Started
		}
		var running time.Duration
		if !s.Running.IsZero() {
			running = now.Sub(s.Running)
		}
		ch <- prometheus.MustNewConstMetric(descLoopOK, prometheus.GaugeValue, max(now.Sub(ok), 0).Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descLoopRunning, prometheus.GaugeValue, max(running, 0).Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descLoopFailures, prometheus.CounterValue, float64(s.Failures), name)
		ch <- prometheus.MustNewConstMetric(descLoopPanics, prometheus.CounterValue, float64(s.Panics), name)
		ch <- prometheus.MustNewConstMetric(descLoopSkipped, prometheus.CounterValue, float64(s.Skipped), name)
	}
}

// Close gives leadership up (the advisory lock and its connection), so
// another instance takes it at its next scrape. Safe to call more than
// once, and on a nil Metrics.
func (m *Metrics) Close() error {
	if m == nil {
		return nil
	}
	return m.ledger.close()
}

// ObserveDelivery counts one delivered webhook message and how long it
// waited since its creation. outbox.Worker calls it (OnDelivered).
func (m *Metrics) ObserveDelivery(msg *store.OutboxMessage) {
	if m == nil || msg == nil {
		return
	}
	m.Delivered.Inc()
	if msg.DeliveredAt != nil {
		m.DeliverySeconds.Observe(max(msg.DeliveredAt.Sub(msg.CreatedAt), 0).Seconds())
	}
}

// BatchWaits counts n registrations of a bulk intake call as waiting for
// their turn until the returned func is called. Safe on a nil Metrics.
func (m *Metrics) BatchWaits(n int) (done func()) {
	if m == nil {
		return func() {}
	}
	m.BatchWaiting.Add(float64(n))
	return func() { m.BatchWaiting.Sub(float64(n)) }
}

// BatchRefused counts n registrations of a bulk intake call refused
// because too many batches wait. Safe on a nil Metrics.
func (m *Metrics) BatchRefused(n int) {
	if m != nil {
		m.BatchRefusals.Add(float64(n))
	}
}

// Handler serves the exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Middleware times every request by its route pattern (never the raw path,
// which would make one series per operation id). An event stream is not
// timed: it lasts as long as the page stays open, which says nothing of
// latency.
func (m *Metrics) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			// Answered here, so the status timed is the one sent: a
			// problem+json or a console error page is not an *echo.HTTPError.
			c.Error(err)
		}
		if strings.HasPrefix(c.Response().Header().Get(echo.HeaderContentType), "text/event-stream") {
			return nil
		}
		status := c.Response().Status
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.HTTPSeconds.WithLabelValues(route, methodLabel(c.Request().Method), strconv.Itoa(status/100)+"xx").Observe(time.Since(start).Seconds())
		return nil
	}
}

// methodLabel is a request's method as the latency series name it: one
// of HTTP's own, else "other" — net/http takes any token as a method, and
// a series per name a client makes up would grow without bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// ObserveOutcome counts one applied outcome.
func (m *Metrics) ObserveOutcome(next review.Next, destination string) {
	if m != nil {
		m.Attempts.WithLabelValues(string(next), m.Destination(destination)).Inc()
	}
}

// OtherDestination is the label of every destination the configuration
// does not name.
const OtherDestination = "other"

// Destination is destination as a label: itself when the configuration
// names it (or names no destination at all), else OtherDestination. A
// registration may name any destination, and /metrics needs no sign-in:
// one label per name a tenant typed would publish it, and let any API
// token add series without bound.
func (m *Metrics) Destination(destination string) string {
	return destinationLabel(m.ledger.st.Config(), destination)
}

func destinationLabel(cfg *review.Config, destination string) string {
	if cfg == nil || len(cfg.Destinations) == 0 {
		return destination
	}
	if _, ok := cfg.Destinations[destination]; ok {
		return destination
	}
	return OtherDestination
}

var (
	descLeader = prometheus.NewDesc("limbo_metrics_leader",
		"1 in the one instance that exports the database-wide gauges (it holds the metrics advisory lock on PostgreSQL; always on SQLite), 0 in the others.", nil, nil)
	descUp       = prometheus.NewDesc("limbo_database_up", "1 when this instance's database answered a ping at scrape time, else 0.", nil, nil)
	descOps      = prometheus.NewDesc("limbo_operations", "Operations in the ledger by state (leader only).", []string{"state"}, nil)
	descCases    = prometheus.NewDesc("limbo_open_cases", "Open review cases by escalation reason (leader only).", []string{"reason"}, nil)
	descOldest   = prometheus.NewDesc("limbo_open_case_oldest_age_seconds", "How long the oldest open case has been open, 0 with none (leader only).", nil, nil)
	descInFlight = prometheus.NewDesc("limbo_attempts_in_flight", "Attempts holding a live lease, by destination (concurrency in use; leader only).", []string{"destination"}, nil)
	// The retry budgets are per tenant, but /metrics is served to anyone
	// who reaches it: no label names a tenant. Admin → Destinations shows
	// whose budget is spent.
	descBudget = prometheus.NewDesc("limbo_retry_budget_left",
		"Retries still allowed in the sliding window at the destination to the tenant with the fewest left (leader only).", []string{"destination"}, nil)
	descBudgetsSpent = prometheus.NewDesc("limbo_retry_budgets_exhausted",
		"Tenants with no retry left in the sliding window at the destination (leader only).", []string{"destination"}, nil)
	descPending  = prometheus.NewDesc("limbo_outbox_pending", "Webhook messages not delivered yet and still to be tried (leader only).", nil, nil)
	descFailed   = prometheus.NewDesc("limbo_outbox_failed", "Webhook messages given up on (leader only).", nil, nil)
	descUnsealed = prometheus.NewDesc("limbo_audit_unsealed_oldest_age_seconds",
		"Age of the first audit event no checkpoint covers yet, 0 when all are sealed: the seal lag (leader only).", nil, nil)
	descFastPath = prometheus.NewDesc("limbo_store_fast_path_total",
		"Attempt-cycle calls (register, attempt, outcome) this process wrote with one guarded statement (path=fast) or through the ordinary locked path (path=ordinary). Many ordinary ones with several instances mean calls for one operation are spread across instances.",
		[]string{"path"}, nil)
	descBatches = prometheus.NewDesc("limbo_store_fast_batches_total",
		"Transactions that carried this process's fast-path writes (on PostgreSQL, each one round trip): concurrent calls share one (group commit).", nil, nil)
	descBatchCalls = prometheus.NewDesc("limbo_store_fast_batch_calls_total",
		"Fast-path calls carried by those round trips; divided by limbo_store_fast_batches_total, the calls per commit.", nil, nil)
	descBatchSplits = prometheus.NewDesc("limbo_store_fast_batch_splits_total",
		"Batches a database error rolled back; their calls were then sent one by one so the error reached only its own call.", nil, nil)
	descLoginRefusals = prometheus.NewDesc("limbo_login_refusals_total",
		"Sign-ins this process refused as throttled, by the rule that refused (account_address, delay, address, account), or busy: it waited over 5 s for another sign-in on its account or address to be checked. The audit trail records when each refusal period starts, not every refusal.", []string{"rule"}, nil)
	descTxRetries = prometheus.NewDesc("limbo_store_tx_retries_total",
		"Transactions the database refused with nothing committed and the store ran again, by cause (deadlock, serialization, busy). Deadlocks should stay at 0: each costs its callers PostgreSQL's deadlock_timeout.", []string{"cause"}, nil)
)

// leaderLock takes the metrics advisory lock for this schema, once per
// session (it is reentrant, so it is only asked for while not held).
const (
	leaderLock   = `SELECT pg_try_advisory_lock(hashtext('limbo-metrics:' || current_schema()))`
	leaderUnlock = `SELECT pg_advisory_unlock(hashtext('limbo-metrics:' || current_schema()))`
)

// ledger reads gauges from the database at scrape time.
type ledger struct {
	st  *store.Store
	log *slog.Logger

	mu sync.Mutex // one scrape at a time decides leadership
	// conn holds the advisory lock while this instance leads (PostgreSQL).
	conn   *sql.Conn
	closed bool
}

func (l *ledger) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descUp, descOps, descCases, descOldest, descInFlight, descBudget, descBudgetsSpent,
		descPending, descFailed, descUnsealed, descFastPath, descBatches, descBatchCalls, descBatchSplits, descTxRetries, descLoginRefusals} {
		ch <- d
	}
}

// lead reports whether this instance leads, taking the lock if free.
// Called with l.mu held.
func (l *ledger) lead(ctx context.Context) bool {
	if l.st.Engine() != store.Postgres {
		return true
	}
	if l.closed {
		return false
	}
	if l.conn != nil {
		// Still ours while the session lives; a broken connection lost
		// the lock with it: leadership is retried at the next scrape.
		if _, err := l.conn.ExecContext(ctx, `SELECT 1`); err == nil {
			return true
		}
		l.log.Warn("metrics: leadership lost with its database connection")
		l.drop()
		return false
	}
	conn, err := l.st.DB().Conn(ctx)
	if err != nil {
		return false
	}
	var got bool
	if err := conn.QueryRowContext(ctx, leaderLock).Scan(&got); err != nil || !got {
		conn.Close()
		return false
	}
	l.conn = conn
	return true
}

// drop discards the leader's connection rather than return it to the pool
// (a session still holding the lock must not be reused). Called with l.mu.
func (l *ledger) drop() {
	if l.conn == nil {
		return
	}
	_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	l.conn.Close()
	l.conn = nil
}

func (l *ledger) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := l.conn.ExecContext(ctx, leaderUnlock)
	l.drop() // the session ends too, whatever the unlock said
	return err
}

func (l *ledger) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	hits, misses := l.st.FastPath()
	counter(descFastPath, hits, "fast")
	counter(descFastPath, misses, "ordinary")
	bs := l.st.FastBatches()
	counter(descBatches, bs.Batches)
	counter(descBatchCalls, bs.Calls)
	counter(descBatchSplits, bs.Split)
	r := l.st.TxRetries()
	counter(descTxRetries, r.Deadlock, "deadlock")
	counter(descTxRetries, r.Serialization, "serialization")
	counter(descTxRetries, r.Busy, "busy")
	refused := l.st.LoginRefusals()
	for _, rule := range store.ThrottleRules() {
		counter(descLoginRefusals, refused[rule], rule)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	pingCtx, cancelPing := context.WithTimeout(ctx, 2*time.Second)
	up := l.st.Ping(pingCtx) == nil
	cancelPing()
	gauge(descUp, b2f(up))
	leader := up && l.lead(ctx)
	gauge(descLeader, b2f(leader))
	if !leader {
		return
	}
	g, err := l.st.Gauges(ctx)
	if err != nil {
		l.log.Error("metrics: reading gauges", "err", err)
		return
	}
	for _, s := range review.AllStates() {
		gauge(descOps, float64(g.OperationsByState[string(s)]), string(s))
	}
	known := map[string]bool{}
	for _, r := range review.AllReasons() {
		known[string(r)] = true
		gauge(descCases, float64(g.OpenCasesByReason[string(r)]), string(r))
	}
	for r, n := range g.OpenCasesByReason {
		if !known[r] { // a reason a newer Limbo wrote
			gauge(descCases, float64(n), r)
		}
	}
	gauge(descOldest, g.OldestOpenCaseAge.Seconds())
	cfg := l.st.Config()
	inflight := map[string]int64{}
	for d, n := range g.InFlightByDestination {
		inflight[destinationLabel(cfg, d)] += n
	}
	if cfg != nil {
		for d := range cfg.Destinations {
			inflight[d] += 0
		}
	}
	for d, n := range inflight {
		gauge(descInFlight, float64(n), d)
	}
	fills := slices.Clone(g.Budgets)
	for i := range fills {
		fills[i].Destination = destinationLabel(cfg, fills[i].Destination)
	}
	for d, b := range budgetsByDestination(fills) {
		gauge(descBudget, float64(b.least), d)
		gauge(descBudgetsSpent, float64(b.spent), d)
	}
	gauge(descPending, float64(g.OutboxPending))
	gauge(descFailed, float64(g.OutboxFailed))
	gauge(descUnsealed, g.OldestUnsealedAuditAge.Seconds())
}

// destinationBudgets is what /metrics says of a destination's retry
// budgets without naming a tenant: the fewest retries left to any tenant,
// and how many tenants have none left.
type destinationBudgets struct {
	least int64
	spent int
}

func budgetsByDestination(fills []store.RetryBudgetFill) map[string]destinationBudgets {
	out := map[string]destinationBudgets{}
	for _, f := range fills {
		b, seen := out[f.Destination]
		if !seen || f.Left() < b.least {
			b.least = f.Left()
		}
		if f.Left() == 0 {
			b.spent++
		}
		out[f.Destination] = b
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
