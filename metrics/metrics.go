// Package metrics exposes Limbo's Prometheus metrics: counters and
// histograms fed by the handlers and the reconciler, and gauges read from
// the ledger at scrape time. Operators alert on these.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Metrics holds Limbo's collectors in a registry of its own (no globals).
type Metrics struct {
	Registry *prometheus.Registry

	// Attempts counts reported outcomes by what comes next (done,
	// retry_at, reconcile, review, failed) and destination.
	Attempts *prometheus.CounterVec
	// Verdicts counts reconciliation rounds by result (confirmed,
	// retry_wait, failed, needs_review, inconclusive).
	Verdicts *prometheus.CounterVec
	// ProbeSeconds is probe latency by destination and kind.
	ProbeSeconds *prometheus.HistogramVec
	// AmbiguousSeconds is how long operations stayed ambiguous.
	AmbiguousSeconds *prometheus.HistogramVec
	// HTTPSeconds is request latency by route and status class.
	HTTPSeconds *prometheus.HistogramVec
}

// New builds the collectors and registers the ledger gauges read from st.
func New(st *store.Store, log *slog.Logger) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limbo_attempt_outcomes_total",
			Help: "Attempt outcomes reported, by what comes next and destination."}, []string{"next", "destination"}),
		Verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limbo_reconcile_verdicts_total",
			Help: "Reconciliation rounds by verdict (the state reached, or inconclusive)."}, []string{"verdict", "destination"}),
		ProbeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limbo_probe_seconds",
			Help: "Probe latency by destination and kind.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"destination", "kind"}),
		AmbiguousSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limbo_ambiguous_seconds",
			Help: "Time operations spent ambiguous before reconciliation settled them.", Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)}, []string{"destination"}),
		HTTPSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limbo_http_request_seconds",
			Help: "HTTP request latency by route, method and status class.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"route", "method", "code"}),
	}
	m.Registry.MustRegister(m.Attempts, m.Verdicts, m.ProbeSeconds, m.AmbiguousSeconds, m.HTTPSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&ledger{st: st, log: log})
	return m
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
		err := next(c)
		if strings.HasPrefix(c.Response().Header().Get(echo.HeaderContentType), "text/event-stream") {
			return err
		}
		status := c.Response().Status
		if he, ok := err.(*echo.HTTPError); ok {
			status = he.Code
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.HTTPSeconds.WithLabelValues(route, c.Request().Method, strconv.Itoa(status/100)+"xx").Observe(time.Since(start).Seconds())
		return err
	}
}

// ObserveOutcome counts one applied outcome.
func (m *Metrics) ObserveOutcome(next review.Next, destination string) {
	if m != nil {
		m.Attempts.WithLabelValues(string(next), destination).Inc()
	}
}

var (
	descOps      = prometheus.NewDesc("limbo_operations", "Operations in the ledger by state.", []string{"state"}, nil)
	descCases    = prometheus.NewDesc("limbo_open_cases", "Open review cases by escalation reason.", []string{"reason"}, nil)
	descInFlight = prometheus.NewDesc("limbo_attempts_in_flight", "Attempts holding a live lease, by destination (concurrency in use).", []string{"destination"}, nil)
	descBudget   = prometheus.NewDesc("limbo_retry_budget_left", "Retries still allowed in the sliding window, by destination and tenant.", []string{"destination", "tenant"}, nil)
	descFastPath = prometheus.NewDesc("limbo_store_fast_path_total",
		"Attempt-cycle calls (register, attempt, outcome) this process wrote with one guarded statement (path=fast) or through the ordinary locked path (path=ordinary). Many ordinary ones with several instances mean calls for one operation are spread across instances.",
		[]string{"path"}, nil)
	descBatches = prometheus.NewDesc("limbo_store_fast_batches_total",
		"Round trips (each one transaction) that carried this process's fast-path writes to PostgreSQL: concurrent calls share one (group commit). Always 0 on SQLite.", nil, nil)
	descBatchCalls = prometheus.NewDesc("limbo_store_fast_batch_calls_total",
		"Fast-path calls carried by those round trips; divided by limbo_store_fast_batches_total, the calls per commit.", nil, nil)
	descBatchSplits = prometheus.NewDesc("limbo_store_fast_batch_splits_total",
		"Batches a database error rolled back; their calls were then sent one by one so the error reached only its own call.", nil, nil)
)

// ledger reads gauges from the database at scrape time.
type ledger struct {
	st  *store.Store
	log *slog.Logger
}

func (l *ledger) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOps
	ch <- descCases
	ch <- descInFlight
	ch <- descBudget
	ch <- descFastPath
	ch <- descBatches
	ch <- descBatchCalls
	ch <- descBatchSplits
}

func (l *ledger) Collect(ch chan<- prometheus.Metric) {
	hits, misses := l.st.FastPath()
	ch <- prometheus.MustNewConstMetric(descFastPath, prometheus.CounterValue, float64(hits), "fast")
	ch <- prometheus.MustNewConstMetric(descFastPath, prometheus.CounterValue, float64(misses), "ordinary")
	bs := l.st.FastBatches()
	ch <- prometheus.MustNewConstMetric(descBatches, prometheus.CounterValue, float64(bs.Batches))
	ch <- prometheus.MustNewConstMetric(descBatchCalls, prometheus.CounterValue, float64(bs.Calls))
	ch <- prometheus.MustNewConstMetric(descBatchSplits, prometheus.CounterValue, float64(bs.Split))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := l.st.Gauges(ctx)
	if err != nil {
		l.log.Error("metrics: reading gauges", "err", err)
		return
	}
	for _, s := range review.AllStates() {
		ch <- prometheus.MustNewConstMetric(descOps, prometheus.GaugeValue, float64(g.OperationsByState[string(s)]), string(s))
	}
	for r, n := range g.OpenCasesByReason {
		ch <- prometheus.MustNewConstMetric(descCases, prometheus.GaugeValue, float64(n), r)
	}
	for d, n := range g.InFlightByDestination {
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(n), d)
	}
	for _, f := range g.Budgets {
		ch <- prometheus.MustNewConstMetric(descBudget, prometheus.GaugeValue, float64(f.Left()), f.Destination, f.Tenant)
	}
}
