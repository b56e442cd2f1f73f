package bench

// `limbo bench --targets URL,…`: the attempt cycle through Limbo instances
// started separately (`limbo serve`, one process each) on one database, for
// docs/scaling.md. The clients are spread round-robin over the instances;
// nothing else of a bench run happens (no floors, reconciliation or bulk
// load), since those measure one process against its own database. Bench
// opens --db only to create the clients' token and, afterwards, to check
// that every cycle it counted is in the ledger, confirmed.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// TargetReport is one instance's share of a --targets run.
type TargetReport struct {
	URL    string `json:"url"`
	Cycles int64  `json:"cycles"`
	// CPUMsPerCycle is the instance's CPU time (its process_cpu_seconds_total)
	// per cycle it served, median over rounds; absent when its /metrics
	// does not say.
	CPUMsPerCycle *float64 `json:"cpu_ms_per_cycle,omitempty"`
	// FastPathCallsPerBatch is how many calls shared one round trip and
	// commit in the instance's group commit (its limbo_store_fast_batch_*
	// counters), median over rounds. Group commit is per
	// instance: clients spread over more instances make smaller batches.
	FastPathCallsPerBatch *float64 `json:"fast_path_calls_per_batch,omitempty"`
}

const (
	/* bench --targets: WAL written so far (PostgreSQL), for wal_bytes_per_cycle. */
	benchWALPosition = `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::BIGINT`
	/* bench --targets: the cycles a run counted must all be in the ledger, confirmed. */
	benchConfirmedRefs = `SELECT COUNT(*) FROM operations WHERE tenant = ? AND source_ref LIKE ? AND state = 'confirmed'`
)

// parseTargets reads --targets: comma-separated http:// base URLs.
func parseTargets(list string) ([]string, error) {
	var out []string
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		if t == "" {
			continue
		}
		u, err := url.Parse(t)
		if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("bench: --targets: %q is not an http://host:port base URL", t)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("bench: --targets: %s is named twice", t)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("bench: --targets names no instance")
	}
	return out, nil
}

func runTargets(ctx context.Context, o Options, began time.Time) (*Report, error) {
	if o.DB == "" {
		return nil, errors.New("bench: --targets needs --db, the database the instances serve")
	}
	st, err := store.Open(ctx, o.DB, store.Options{MaxConns: 2})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// The instances must be up before anything is timed.
	for _, t := range o.Targets {
		if err := ready(ctx, t); err != nil {
			return nil, err
		}
	}
	token, err := st.CreateToken(ctx, review.Operator("cli:bench"), benchTenant, "bench-targets")
	if err != nil {
		return nil, err
	}
	ti, err := st.TenantForToken(ctx, token)
	if err != nil {
		return nil, err
	}
	// A prefix of its own, so a run never meets a key an earlier run used.
	var nonce [4]byte
	rand.Read(nonce[:])
	refs := "bench-" + hex.EncodeToString(nonce[:])

	rep := &Report{Engine: string(st.Engine()), Concurrency: o.Concurrency, Duration: o.Duration.String(), Rounds: o.Rounds,
		HTTPClient: o.HTTPClient, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Started: began.UTC().Format(time.RFC3339), FloorMinNote: "not measured with --targets"}
	dbCPU := localDBCPU(o.DB)
	served := make([]atomic.Int64, len(o.Targets))
	var next atomic.Int64
	newWorker := func() (cycleFunc, func()) {
		k := int(next.Add(1)-1) % len(o.Targets)
		c, _ := newAPIClient(o.HTTPClient, o.Targets[k], token) // the kind is checked before the runs
		c.refs = refs
		return func(ctx context.Context, i int64, rec func(time.Duration)) error {
			if err := c.cycle(ctx, i, rec); err != nil {
				return fmt.Errorf("%s: %w", o.Targets[k], err)
			}
			served[k].Add(1)
			return nil
		}, c.http.close
	}
	var seq atomic.Int64
	if o.Warmup > 0 {
		if _, err := runCycles(ctx, o.Warmup, o.Concurrency, &seq, newWorker, nil); err != nil {
			return nil, fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	wal := func() int64 {
		var n int64
		if st.Engine() != store.Postgres || st.DB().GetContext(ctx, &n, benchWALPosition) != nil {
			return -1
		}
		return n
	}
	var walPerCycle []float64
	var runs []benchRun
	instCPU := make([][]float64, len(o.Targets))  // per target, ms per cycle, per round
	perBatch := make([][]float64, len(o.Targets)) // per target, fast-path calls per batch, per round
	var allCPU []float64                          // every instance together, ms per cycle, per round
	for r := range o.Rounds {
		m0 := scrape(ctx, o.Targets)
		n0, wal0 := counts(served), wal()
		res, err := runCycles(ctx, o.Duration, o.Concurrency, &seq, newWorker, dbCPU)
		if err != nil {
			return nil, fmt.Errorf("bench: round %d: %w", r+1, err)
		}
		if wal1 := wal(); wal0 >= 0 && wal1 >= wal0 && res.cycles > 0 {
			walPerCycle = append(walPerCycle, float64(wal1-wal0)/float64(res.cycles))
		}
		m1, n1 := scrape(ctx, o.Targets), counts(served)
		var sum time.Duration
		known := true
		for k := range o.Targets {
			if b := m1[k].batches - m0[k].batches; b > 0 {
				perBatch[k] = append(perBatch[k], (m1[k].batchCalls-m0[k].batchCalls)/b)
			}
			if m0[k].cpu < 0 || m1[k].cpu < 0 {
				known = false
				continue
			}
			sum += m1[k].cpu - m0[k].cpu
			if d := n1[k] - n0[k]; d > 0 {
				instCPU[k] = append(instCPU[k], float64((m1[k].cpu-m0[k].cpu).Microseconds())/1000/float64(d))
			}
		}
		if known && res.cycles > 0 {
			allCPU = append(allCPU, float64(sum.Microseconds())/1000/float64(res.cycles))
		}
		progress(o.Stderr, "round %d/%d %d instances %8.1f cycles/s  p50 %6.2f ms  p99 %6.2f ms", r+1, o.Rounds, len(o.Targets),
			res.perSecond(), ms(pct(res.lat, 50)), ms(pct(res.lat, 99)))
		runs = append(runs, res)
	}

	var lat []time.Duration
	var clientCPU, db []float64
	for _, r := range runs {
		rep.CycleRounds = append(rep.CycleRounds, round(r.perSecond(), 1))
		lat = append(lat, r.lat...)
		if r.cycles > 0 {
			clientCPU = append(clientCPU, float64(r.cpu.Microseconds())/1000/float64(r.cycles))
			db = append(db, float64(r.dbCPU.Microseconds())/1000/float64(r.cycles))
		}
	}
	slices.Sort(lat)
	rep.CyclePerS = median(rep.CycleRounds)
	rep.CallP50Ms, rep.CallP99Ms = ms(pct(lat, 50)), ms(pct(lat, 99))
	rep.CPUMsPerCycle = round(median(clientCPU), 3)
	if dbCPU != nil {
		rep.DBCPUMsPerCycle = ptr(round(median(db), 3))
	}
	if len(walPerCycle) > 0 {
		rep.WALBytesPerCycle = ptr(round(median(walPerCycle), 0))
	}
	if len(allCPU) > 0 {
		rep.InstancesCPUMsPerCycle = ptr(round(median(allCPU), 3))
	}
	for k, t := range o.Targets {
		tr := TargetReport{URL: t, Cycles: served[k].Load()}
		if len(instCPU[k]) > 0 {
			tr.CPUMsPerCycle = ptr(round(median(instCPU[k]), 3))
		}
		if len(perBatch[k]) > 0 {
			tr.FastPathCallsPerBatch = ptr(round(median(perBatch[k]), 2))
		}
		rep.Targets = append(rep.Targets, tr)
	}

	// Every counted cycle ended in a confirmed operation (warm-up included).
	var confirmed int64
	if err := st.DB().GetContext(ctx, &confirmed, st.DB().Rebind(benchConfirmedRefs), ti.Tenant, refs+"/%"); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var total int64
	for k := range served {
		total += served[k].Load()
	}
	if confirmed != total {
		return nil, fmt.Errorf("bench: %d cycles answered, but %d of their operations are confirmed in the ledger", total, confirmed)
	}
	if err := st.RevokeToken(ctx, review.Operator("cli:bench"), ti.ID); err != nil {
		return nil, err
	}
	rep.RSSMb = peakRSSMb()
	rep.Elapsed = time.Since(began).Round(time.Millisecond).String()
	return rep, nil
}

func counts(c []atomic.Int64) []int64 {
	out := make([]int64, len(c))
	for i := range c {
		out[i] = c[i].Load()
	}
	return out
}

// ready waits up to 30 s for an instance's /readyz to answer 200.
func ready(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: %s is not ready: %w", base, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// instanceMetrics is what bench reads from an instance's /metrics.
type instanceMetrics struct {
	cpu                 time.Duration // process_cpu_seconds_total; -1 when unread
	batches, batchCalls float64       // limbo_store_fast_batches_total, limbo_store_fast_batch_calls_total
}

// scrape reads each instance's /metrics.
func scrape(ctx context.Context, targets []string) []instanceMetrics {
	out := make([]instanceMetrics, len(targets))
	for k, t := range targets {
		out[k].cpu = -1
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			name, v, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				continue
			}
			switch name {
			case "process_cpu_seconds_total":
				out[k].cpu = time.Duration(f * float64(time.Second))
			case "limbo_store_fast_batches_total":
				out[k].batches = f
			case "limbo_store_fast_batch_calls_total":
				out[k].batchCalls = f
			}
		}
		resp.Body.Close()
	}
	return out
}
