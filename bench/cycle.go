package bench

// The attempt cycle rounds of `limbo bench`: the API through real HTTP
// clients and the two floors, interleaved, timed the same way.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// benchMode is one of the three things timed per round.
type benchMode string

const (
	modeAPI   benchMode = "api"
	modeAPI2  benchMode = "api2" // register with "attempt": true, then the outcome
	modePlain benchMode = "plain"
	modeMin   benchMode = "min"
)

// benchCycles warms up, then runs the rounds — API, plain floor and min
// floor, the order rotating each round — and fills rep's cycle figures.
func benchCycles(ctx context.Context, st *store.Store, srv *benchServer, o Options, dbURL string, rep *Report) error {
	plain, err := newFloor(ctx, st, floorPlain, benchTenant, srv.actor)
	if err != nil {
		return err
	}
	defer plain.Close()
	minFloor, err := newFloor(ctx, st, floorMin, benchTenant, srv.actor)
	if err != nil {
		return err
	}
	defer minFloor.Close()
	modes := []benchMode{modeAPI, modeAPI2, modePlain, modeMin}
	rep.FloorMinNote = "one round trip per call: limbo_fast_batch with that call alone (PostgreSQL)"
	if st.Engine() == store.SQLite {
		// In process there are no round trips to save: min is plain.
		modes = modes[:3]
		rep.FloorMinNote = "SQLite runs in process, with no round trips to save: floor min is floor plain"
	}
	// The database server's CPU, when it runs on this machine.
	dbCPU := localDBCPU(dbURL)
	var seq atomic.Int64
	newCycle := func(m benchMode) func() (cycleFunc, func()) {
		switch m {
		case modePlain:
			return func() (cycleFunc, func()) { return plain.cycle, func() {} }
		case modeMin:
			return func() (cycleFunc, func()) { return minFloor.cycle, func() {} }
		}
		return func() (cycleFunc, func()) {
			c, _ := newAPIClient(o.HTTPClient, srv.url, srv.token) // the kind is checked before the runs
			if m == modeAPI2 {
				return c.cycle2, c.http.close
			}
			return c.cycle, c.http.close
		}
	}
	if o.Warmup > 0 {
		for _, m := range modes {
			if _, err := runCycles(ctx, o.Warmup, o.Concurrency, &seq, newCycle(m), nil); err != nil {
				return fmt.Errorf("bench: warm-up %s: %w", m, err)
			}
		}
	}
	runs := map[benchMode][]benchRun{}
	var fastHits, fastMisses int64 // the API's calls on the store's fast path, and the others
	var batches, batched int64     // the API's fast-path batches and the calls they carried
	for r := range o.Rounds {
		for i := range modes {
			m := modes[(r+i)%len(modes)]
			stopProfile, err := startProfile(o.CPUProfile, m == modeAPI && len(runs[modeAPI]) == 0)
			if err != nil {
				return err
			}
			hits0, misses0 := st.FastPath()
			b0 := st.FastBatches()
			res, err := runCycles(ctx, o.Duration, o.Concurrency, &seq, newCycle(m), dbCPU)
			stopProfile()
			if m == modeAPI || m == modeAPI2 {
				hits, misses := st.FastPath()
				fastHits, fastMisses = fastHits+hits-hits0, fastMisses+misses-misses0
				b1 := st.FastBatches()
				batches, batched = batches+b1.Batches-b0.Batches, batched+b1.Calls-b0.Calls
			}
			if err != nil {
				return fmt.Errorf("bench: round %d, %s: %w", r+1, m, err)
			}
			progress(o.Stderr, "round %d/%d %-5s %8.1f cycles/s  p50 %6.2f ms  p99 %6.2f ms", r+1, o.Rounds, m,
				res.perSecond(), ms(pct(res.lat, 50)), ms(pct(res.lat, 99)))
			runs[m] = append(runs[m], res)
		}
	}
	if st.Engine() == store.SQLite {
		runs[modeMin] = runs[modePlain]
	}
	rates := func(m benchMode) []float64 {
		var out []float64
		for _, r := range runs[m] {
			out = append(out, round(r.perSecond(), 1))
		}
		return out
	}
	pooled := func(m benchMode) []time.Duration {
		var all []time.Duration
		for _, r := range runs[m] {
			all = append(all, r.lat...)
		}
		slices.Sort(all)
		return all
	}
	if fastHits+fastMisses > 0 {
		rep.FastPathShare = round(float64(fastHits)/float64(fastHits+fastMisses), 4)
	}
	if batches > 0 {
		rep.FastPathCallsPerBatch = ptr(round(float64(batched)/float64(batches), 2))
	}
	rep.CycleRounds, rep.FloorPlainRounds, rep.FloorMinRounds = rates(modeAPI), rates(modePlain), rates(modeMin)
	rep.CyclePerS, rep.FloorPlainPerS, rep.FloorMinPerS = median(rep.CycleRounds), median(rep.FloorPlainRounds), median(rep.FloorMinRounds)
	perCycle := func(m benchMode, of func(benchRun) time.Duration) float64 {
		var out []float64
		for _, r := range runs[m] {
			if r.cycles > 0 {
				out = append(out, float64(of(r).Microseconds())/1000/float64(r.cycles))
			}
		}
		return round(median(out), 3)
	}
	cpu := func(r benchRun) time.Duration { return r.cpu }
	rep.CPUMsPerCycle, rep.FloorPlainCPUMsPerCycle, rep.FloorMinCPUMsPerCycle = perCycle(modeAPI, cpu), perCycle(modePlain, cpu), perCycle(modeMin, cpu)
	if dbCPU != nil {
		db := func(m benchMode) *float64 {
			v := perCycle(m, func(r benchRun) time.Duration { return r.dbCPU })
			return &v
		}
		rep.DBCPUMsPerCycle, rep.FloorPlainDBCPUMsPerCycle, rep.FloorMinDBCPUMsPerCycle = db(modeAPI), db(modePlain), db(modeMin)
	}
	api := pooled(modeAPI)
	rep.CallP50Ms, rep.CallP99Ms = ms(pct(api, 50)), ms(pct(api, 99))
	rep.Cycle2Rounds = rates(modeAPI2)
	rep.Cycle2PerS = median(rep.Cycle2Rounds)
	api2 := pooled(modeAPI2)
	rep.Call2P50Ms, rep.Call2P99Ms = ms(pct(api2, 50)), ms(pct(api2, 99))
	rep.CPUMsPerCycle2 = perCycle(modeAPI2, cpu)
	rep.FloorPlainCallP99Ms, rep.FloorMinCallP99Ms = ms(pct(pooled(modePlain), 99)), ms(pct(pooled(modeMin), 99))
	if rep.FloorPlainPerS > 0 {
		rep.RatioPlain = round(rep.CyclePerS/rep.FloorPlainPerS, 3)
	}
	if rep.FloorMinPerS > 0 {
		rep.RatioMin = round(rep.CyclePerS/rep.FloorMinPerS, 3)
	}
	return nil
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startProfile starts a CPU profile into path when on, and returns what
// stops it.
func startProfile(path string, on bool) (func(), error) {
	if path == "" || !on {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// cycleFunc runs attempt cycle i, reporting each call's latency to rec.
type cycleFunc func(ctx context.Context, i int64, rec func(time.Duration)) error

// benchRun is one timed run of one mode.
type benchRun struct {
	cycles  int64
	elapsed time.Duration
	// cpu is this process's CPU time (user + system) during the run:
	// clients, server and driver, not the database server.
	cpu time.Duration
	// dbCPU is the database server's CPU time during the run, when it runs
	// on this machine (see postgresCPU).
	dbCPU time.Duration
	// lat holds every call's latency, sorted.
	lat []time.Duration
}

func (r benchRun) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.cycles) / r.elapsed.Seconds()
}

// runCycles runs n workers, each doing whole cycles one after the other
// until d has passed. Elapsed runs to the end of the last cycle, so a cycle
// in progress at the deadline is counted in full, with its time. The first
// error stops the run. dbCPU, when not nil, reads the database server's
// CPU time.
func runCycles(ctx context.Context, d time.Duration, n int, seq *atomic.Int64, newWorker func() (cycleFunc, func()), dbCPU func() time.Duration) (benchRun, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		run    benchRun
		cycles atomic.Int64
	)
	var db0 time.Duration
	if dbCPU != nil {
		db0 = dbCPU()
	}
	start, cpu0 := time.Now(), processCPU()
	deadline := start.Add(d)
	for range n {
		cycle, done := newWorker()
		wg.Go(func() {
			defer done()
			var lat []time.Duration
			rec := func(l time.Duration) { lat = append(lat, l) }
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := cycle(ctx, seq.Add(1), rec); err != nil {
					cancel(err)
					return
				}
				cycles.Add(1)
			}
			mu.Lock()
			run.lat = append(run.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return benchRun{}, err
	}
	run.cycles, run.elapsed, run.cpu = cycles.Load(), time.Since(start), processCPU()-cpu0
	if dbCPU != nil {
		// A backend that exits between two reads of /proc can be missed
		// by one read and counted by the next; never report less than 0.
		run.dbCPU = max(dbCPU()-db0, 0)
	}
	slices.Sort(run.lat)
	return run, nil
}

// apiClient is one integration: its own keep-alive connection and token.
type apiClient struct {
	http  httpDoer
	token string
	// refs prefixes the source refs of the operations it registers
	// (default "bench").
	refs string
}

func newAPIClient(kind, base, token string) (*apiClient, error) {
	d, err := newHTTPDoer(kind, base)
	if err != nil {
		return nil, err
	}
	return &apiClient{http: d, token: token}, nil
}

// cycle registers operation i, takes an attempt and reports its success,
// as an integration does (the bodies handlers/bench_test.go sends).
func (c *apiClient) cycle(ctx context.Context, i int64, rec func(time.Duration)) error {
	return c.run(ctx, i, rec, false)
}

// cycle2 is cycle in two calls: the registration asks for its attempt
// ("attempt": true), then the outcome.
func (c *apiClient) cycle2(ctx context.Context, i int64, rec func(time.Duration)) error {
	return c.run(ctx, i, rec, true)
}

func (c *apiClient) run(ctx context.Context, i int64, rec func(time.Duration), withAttempt bool) error {
	ref := fmt.Sprintf("%s/%d", cmp.Or(c.refs, "bench"), i)
	var op struct {
		ID      string `json:"id"`
		Attempt *struct {
			N int `json:"n"`
		} `json:"attempt"`
		AttemptProblem json.RawMessage `json:"attempt_problem"`
	}
	attempt := ""
	if withAttempt {
		attempt = `,"attempt":true`
	}
	reg := fmt.Sprintf(`{"source_ref":%q,"logical_version":"v1","action":"transform","destination":"files",`+
		`"risk":"compensable_write","payload":{"document":%d,"format":"pdf"}%s}`, ref, i, attempt)
	if err := c.post(ctx, "/api/v1/operations", reg, http.StatusCreated, &op, rec); err != nil {
		return err
	}
	var g struct {
		N int `json:"n"`
	}
	switch {
	case !withAttempt:
		if err := c.post(ctx, "/api/v1/operations/"+op.ID+"/attempts", `{}`, http.StatusCreated, &g, rec); err != nil {
			return err
		}
	case op.Attempt == nil:
		return fmt.Errorf("operation %s: registered without its attempt: %s", op.ID, op.AttemptProblem)
	default:
		g.N = op.Attempt.N
	}
	var res struct {
		Next review.Next `json:"next"`
	}
	out := fmt.Sprintf(`{"result":"success","phase":"after_send","http_status":201,`+
		`"resource":{"ref":"file:%s","kind":"file","version":"v1"}}`, ref)
	if err := c.post(ctx, "/api/v1/operations/"+op.ID+"/attempts/"+strconv.Itoa(g.N)+"/outcome", out, http.StatusOK, &res, rec); err != nil {
		return err
	}
	if res.Next != review.NextDone {
		return fmt.Errorf("operation %s: next %q after a success, want done", op.ID, res.Next)
	}
	return nil
}

// post sends a JSON body with the bearer token, reads the whole answer (so
// the connection is reused), times the call and decodes the answer.
func (c *apiClient) post(ctx context.Context, path, body string, want int, out any, rec func(time.Duration)) error {
	t0 := time.Now()
	status, data, err := c.http.post(ctx, path, c.token, body)
	if err != nil {
		return err
	}
	rec(time.Since(t0))
	if status != want {
		return fmt.Errorf("POST %s: %d, want %d: %s", path, status, want, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}
