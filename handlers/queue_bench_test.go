package handlers_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/store/storetest"
)

// BenchmarkQueuePage measures the whole queue page (HTML, counts included)
// as a signed-in reviewer over a bulk-loaded ledger: LIMBO_BENCH_OPS
// operations (default 100,000) with LIMBO_BENCH_OPEN open cases (default
// 5% of them). The figure uses 1,000,000 and 50,000:
//
//	LIMBO_BENCH_OPS=1000000 LIMBO_BENCH_OPEN=50000 go test -run '^$' -bench QueuePage ./handlers
func BenchmarkQueuePage(b *testing.B) {
	n := envInt("LIMBO_BENCH_OPS", 100000)
	open := envInt("LIMBO_BENCH_OPEN", n/20)
	for _, e := range storetest.Engines(b) {
		b.Run(string(e), func(b *testing.B) {
			srv, st := consoleServer(b, e)
			start := time.Now()
			if err := st.BulkLoad(context.Background(), n, open); err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: loaded %d operations, %d open cases in %s", e, n, open, time.Since(start).Round(time.Millisecond))
			br := newBrowser(b, srv.URL)
			br.login("reviewer@example.com")
			deep := deepCursor(b, br)
			pages := []string{"/", "/?reason=multiple_candidates", "/?tenant=bench-3&destination=dest-3", deep}
			// The page in each language the console speaks: Italian reads
			// the stored English reasons back, which English does not.
			for _, lang := range []struct{ tag, open string }{{"en", "open</strong>"}, {"it", "aperti</strong>"}} {
				b.Run(lang.tag, func(b *testing.B) {
					var lat []time.Duration
					for i := 0; i < b.N; i++ {
						p := pages[i%len(pages)]
						req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
						req.Header.Set("Accept-Language", lang.tag)
						t0 := time.Now()
						resp, err := br.c.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						lat = append(lat, time.Since(t0))
						if resp.StatusCode != 200 || !strings.Contains(string(body), lang.open) {
							b.Fatalf("GET %s (%s): %d", p, lang.tag, resp.StatusCode)
						}
					}
					b.StopTimer()
					sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
					b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds())/1000, "p99_ms")
				})
			}
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// deepCursor walks a few pages in and returns a deep keyset page URL.
func deepCursor(b *testing.B, br *browser) string {
	next := "/"
	for i := 0; i < 20; i++ {
		resp, err := br.c.Get(br.base + next)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		i0 := strings.Index(string(body), `href="/?after=`)
		if i0 < 0 {
			return next
		}
		rest := string(body)[i0+6:]
		next = strings.ReplaceAll(rest[:strings.Index(rest, `"`)], "&amp;", "&")
	}
	return next
}
