package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// BenchmarkAttemptCycle measures the integration's hot path through the
// real HTTP API: register → attempt → outcome (success with a resource),
// with JSON bodies and bearer auth over keep-alive connections, on a fresh
// database per engine. It reports whole cycles per second. See
// docs/benchmarks.md for how to run it and the recorded figures.
func BenchmarkAttemptCycle(b *testing.B) {
	for _, engine := range []store.Engine{store.SQLite, store.Postgres} {
		b.Run(string(engine), func(b *testing.B) {
			if !slices.Contains(storetest.Engines(b), engine) {
				b.Skip("PostgreSQL unavailable")
			}
			st := storetest.Open(b, engine, store.Options{})
			srv := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
			b.Cleanup(srv.Close)
			token, err := st.CreateToken(context.Background(), review.Operator("bench"), "bench", "bench")
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			// Each cycle waits on the network and the database more than on
			// a core: several integrations per core keep the server busy.
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
				defer hc.CloseIdleConnections()
				c := benchClient{hc: hc, base: srv.URL, token: token}
				for pb.Next() {
					if err := c.cycle(seq.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// benchClient is one integration with its own keep-alive connections.
type benchClient struct {
	hc    *http.Client
	base  string
	token string
}

// cycle registers operation i, takes an attempt and reports its success.
func (c benchClient) cycle(i int64) error {
	ref := fmt.Sprintf("bench/%d", i)
	var op struct {
		ID string `json:"id"`
	}
	reg := fmt.Sprintf(`{"source_ref":%q,"logical_version":"v1","action":"transform","destination":"files",`+
		`"risk":"compensable_write","payload":{"document":%d,"format":"pdf"}}`, ref, i)
	if err := c.post("/api/v1/operations", reg, http.StatusCreated, &op); err != nil {
		return err
	}
	var g struct {
		N int `json:"n"`
	}
	if err := c.post("/api/v1/operations/"+op.ID+"/attempts", `{}`, http.StatusCreated, &g); err != nil {
		return err
	}
	var res struct {
		Next review.Next `json:"next"`
	}
	out := fmt.Sprintf(`{"result":"success","phase":"after_send","http_status":201,`+
		`"resource":{"ref":"file:%s","kind":"file","version":"v1"}}`, ref)
	if err := c.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N), out, http.StatusOK, &res); err != nil {
		return err
	}
	if res.Next != review.NextDone {
		return fmt.Errorf("operation %s: next %q after a success, want done", op.ID, res.Next)
	}
	return nil
}

// post sends a JSON body with the bearer token, reads the whole answer (so
// the connection is reused) and decodes it into out.
func (c benchClient) post(path, body string, want int, out any) error {
	req, err := http.NewRequest(http.MethodPost, c.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d, want %d: %s", path, resp.StatusCode, want, data)
	}
	return json.Unmarshal(data, out)
}
