package bench

// Bulk intake: POST /operations/batch timed as River's InsertMany is
// (../shared/peers/riverbench -mode insertmany): clients each sending
// batches of one size, one after the other, every registration new.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// BulkReport is the bulk intake at one batch size: registrations per
// second, each call's latency (one batch), and CPU per registration.
type BulkReport struct {
	Batch        int       `json:"batch"`
	OpsPerS      float64   `json:"ops_per_s"`
	OpsRounds    []float64 `json:"ops_per_s_rounds"`
	CallP50Ms    float64   `json:"call_p50_ms"`
	CallP99Ms    float64   `json:"call_p99_ms"`
	CPUMsPerOp   float64   `json:"cpu_ms_per_op"`
	DBCPUMsPerOp *float64  `json:"db_cpu_ms_per_op,omitempty"`
}

// parseBatches reads --bulk-batch: comma-separated sizes, "0" for none.
func parseBatches(v string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		switch {
		case err != nil || n < 0 || n > 1000:
			return nil, fmt.Errorf("--bulk-batch: %q is not a batch size from 1 to 1000 (0: none)", f)
		case n > 0:
			out = append(out, n)
		}
	}
	return out, nil
}

// benchBulk times the bulk intake at each batch size, o.Rounds runs of
// o.Duration each, o.Concurrency clients, and reports the medians.
func benchBulk(ctx context.Context, srv *benchServer, o Options, dbURL string) ([]BulkReport, error) {
	dbCPU := localDBCPU(dbURL)
	var seq atomic.Int64
	var out []BulkReport
	for _, size := range o.BulkBatches {
		newWorker := func() (cycleFunc, func()) {
			c, _ := newAPIClient(o.HTTPClient, srv.url, srv.token)
			return func(ctx context.Context, i int64, rec func(time.Duration)) error { return c.batch(ctx, size, i, rec) }, c.http.close
		}
		if o.Warmup > 0 {
			if _, err := runCycles(ctx, o.Warmup, o.Concurrency, &seq, newWorker, nil); err != nil {
				return nil, fmt.Errorf("bench: warm-up bulk %d: %w", size, err)
			}
		}
		rep := BulkReport{Batch: size}
		var lat []time.Duration
		var cpu, db []float64
		for r := range o.Rounds {
			// Without cycles, the profile is of the first bulk round.
			stopProfile, err := startProfile(o.CPUProfile, o.NoCycles && len(out) == 0 && r == 0)
			if err != nil {
				return nil, err
			}
			res, err := runCycles(ctx, o.Duration, o.Concurrency, &seq, newWorker, dbCPU)
			stopProfile()
			if err != nil {
				return nil, fmt.Errorf("bench: bulk %d, round %d: %w", size, r+1, err)
			}
			ops := res.cycles * int64(size)
			rep.OpsRounds = append(rep.OpsRounds, round(res.perSecond()*float64(size), 0))
			lat = append(lat, res.lat...)
			if ops > 0 {
				cpu = append(cpu, float64(res.cpu.Microseconds())/1000/float64(ops))
				db = append(db, float64(res.dbCPU.Microseconds())/1000/float64(ops))
			}
			progress(o.Stderr, "bulk %4d round %d/%d %9.0f ops/s  p50 %7.2f ms  p99 %7.2f ms", size, r+1, o.Rounds,
				res.perSecond()*float64(size), ms(pct(res.lat, 50)), ms(pct(res.lat, 99)))
		}
		slices.Sort(lat)
		rep.OpsPerS, rep.CallP50Ms, rep.CallP99Ms = median(rep.OpsRounds), ms(pct(lat, 50)), ms(pct(lat, 99))
		rep.CPUMsPerOp = round(median(cpu), 4)
		if dbCPU != nil {
			rep.DBCPUMsPerOp = ptr(round(median(db), 4))
		}
		out = append(out, rep)
	}
	return out, nil
}

// batch registers size new operations in one call and requires each to
// be created.
func (c *apiClient) batch(ctx context.Context, size int, i int64, rec func(time.Duration)) error {
	var b strings.Builder
	b.WriteString(`{"operations":[`)
	for k := range size {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"source_ref":"bulk/%d/%d","logical_version":"v1","action":"transform","destination":"files",`+
			`"risk":"compensable_write","payload":{"document":%d,"format":"pdf"}}`, i, k, k)
	}
	b.WriteString(`]}`)
	var ans struct {
		Results []struct {
			Status  int             `json:"status"`
			Problem json.RawMessage `json:"problem"`
		} `json:"results"`
	}
	if err := c.post(ctx, "/api/v1/operations/batch", b.String(), http.StatusOK, &ans, rec); err != nil {
		return err
	}
	if len(ans.Results) != size {
		return fmt.Errorf("bulk: %d results for %d registrations", len(ans.Results), size)
	}
	for _, r := range ans.Results {
		if r.Status != http.StatusCreated {
			return fmt.Errorf("bulk: a registration answered %d: %s", r.Status, r.Problem)
		}
	}
	return nil
}
