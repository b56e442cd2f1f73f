package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

// probeFixture is a sandbox holding a folder and a finished job, and the
// probe paths that ask about them (and about something it does not hold).
type probeFixture struct {
	*testBundle
	paths []string
	// truth is each path's true answer, asked before any fault.
	truth map[string]probeAnswer
}

type probeAnswer struct {
	status int
	body   []byte
}

func newProbeFixture(t *testing.T, opts Options) *probeFixture {
	t.Helper()
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts.Now = clk.Now
	// The truth is read through a twin without faults holding the same,
	// on the same clock. The state is put in place directly, so that no
	// fault of a mutating request spoils it.
	fixtures := func(sb *Sandbox) []string {
		md := func(op string) map[string]any { return map[string]any{"operation_id": op, "logical_version": "v1"} }
		sb.mu.Lock()
		fld := sb.add(KindFolder, md("op-1"), map[string]any{"name": "contracts"}, "")
		file := sb.add(KindFile, md("op-2"), map[string]any{"name": "in.txt"}, "")
		jb := sb.add(KindJob, md("op-3"), map[string]any{"input_ref": file.ref, "format": "pdf"}, "")
		jb.job = &job{status: JobQueued, inputRef: file.ref, format: "pdf"}
		sb.mu.Unlock()
		if _, ok := sb.completeJob(jb.ref); !ok {
			t.Fatal("the job did not complete")
		}
		return []string{"/resources/" + fld.ref, "/resources/fld-999999", "/search?operation_id=op-1",
			"/search?operation_id=op-3&include_outputs=true", "/jobs/" + jb.ref, "/jobs/job-999999"}
	}
	truthOpts := opts
	truthOpts.ProbeErrors = 0
	twin := setup(t, truthOpts)
	paths := fixtures(twin.sb)
	truth := map[string]probeAnswer{}
	for _, p := range paths {
		status, _, body, err := twin.do("GET", p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		truth[p] = probeAnswer{status, body}
	}
	b := setup(t, opts)
	if got := fixtures(b.sb); !reflect.DeepEqual(got, paths) {
		t.Fatalf("the two sandboxes hold %v and %v", got, paths)
	}
	return &probeFixture{testBundle: b, paths: paths, truth: truth}
}

// classify says which kind of answer a probe got, given its true answer.
func classify(t *testing.T, path string, truth probeAnswer, status int, body []byte) probeFault {
	t.Helper()
	switch {
	case status == truth.status && bytes.Equal(body, truth.body):
		return probeTruth
	case status == http.StatusInternalServerError, status == http.StatusBadGateway, status == http.StatusServiceUnavailable:
		var e apiError
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
			t.Errorf("%s: %d with body %q, want a JSON error", path, status, body)
		}
		return probe5xx
	case status == http.StatusGatewayTimeout:
		return probeHang
	case status == http.StatusOK:
		// Garbage: never readable as the answer asked for.
		var v any
		if json.Unmarshal(body, &v) == nil {
			if m, ok := v.(map[string]any); ok && (m["ref"] != nil || m["items"] != nil) {
				t.Errorf("%s: garbage %q reads as an answer", path, body)
			}
		}
		return probeGarbage
	}
	t.Fatalf("%s: answered %d %q, true answer %d %q", path, status, body, truth.status, truth.body)
	return 0
}

// TestProbeFaultShares: with ProbeErrors 0.3 about 30 % of probe answers
// are faulted, a third of them each as a 5xx, a hang and garbage, the
// sandbox counts each, and the truth is untouched.
func TestProbeFaultShares(t *testing.T) {
	t.Parallel()
	f := newProbeFixture(t, Options{ProbeErrors: 0.3, ProbeHang: 5 * time.Millisecond, Seed: 42})
	before := f.sb.Truth()
	const n = 900
	count := map[probeFault]int{}
	statuses := map[int]bool{}
	garbageBodies := map[string]bool{}
	for i := range n {
		p := f.paths[i%len(f.paths)]
		status, _, body, err := f.do("GET", p, "", nil)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		k := classify(t, p, f.truth[p], status, body)
		count[k]++
		switch k {
		case probe5xx:
			statuses[status] = true
		case probeGarbage:
			garbageBodies[string(body)] = true
		}
	}
	t.Logf("%d probes: %v", n, count)
	faulted := count[probe5xx] + count[probeHang] + count[probeGarbage]
	if faulted < n*24/100 || faulted > n*36/100 {
		t.Errorf("%d of %d answers faulted, want about 30 %%", faulted, n)
	}
	for _, k := range []probeFault{probe5xx, probeHang, probeGarbage} {
		if c := count[k]; c < n/10*6/10 || c > n/10*14/10 {
			t.Errorf("fault kind %d: %d of %d, want about 10 %%", k, c, n)
		}
	}
	if len(statuses) != len(probeStatuses) {
		t.Errorf("5xx answers %v, want each of %v", statuses, probeStatuses)
	}
	if len(garbageBodies) < len(garbage) {
		t.Errorf("%d distinct garbage bodies, want at least %d", len(garbageBodies), len(garbage))
	}
	got := f.sb.ProbeStats()
	want := ProbeStats{Probes: n, Errors: int64(count[probe5xx]), Hangs: int64(count[probeHang]), Garbage: int64(count[probeGarbage])}
	if got != want || got.Faulted() != int64(faulted) {
		t.Errorf("ProbeStats %+v, want %+v", got, want)
	}
	if after := f.sb.Truth(); !reflect.DeepEqual(before, after) {
		t.Errorf("faulted probes changed the truth:\n%+v\n%+v", before, after)
	}
}

// TestProbeFaultsReproducible: one seed, one sequence of probe faults —
// whatever mutating requests come between.
func TestProbeFaultsReproducible(t *testing.T) {
	t.Parallel()
	seq := func(mutate bool) []probeFault {
		sb := New(Options{ProbeErrors: 0.5, Seed: 7, Loss: 0.5})
		defer sb.Close()
		var out []probeFault
		for range 200 {
			if mutate {
				sb.before()
				sb.after()
			}
			f, _ := sb.pickProbe()
			out = append(out, f)
		}
		return out
	}
	a, b := seq(false), seq(true)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the same seed drew different probe faults:\n%v\n%v", a, b)
	}
	if reflect.DeepEqual(a, make([]probeFault, len(a))) {
		t.Error("no probe fault drawn at share 0.5")
	}
}

// TestNoProbeErrorsNoFaults: at ProbeErrors 0 every probe answers the truth.
func TestNoProbeErrorsNoFaults(t *testing.T) {
	t.Parallel()
	f := newProbeFixture(t, Options{Loss: 0.5, Unavailable: 0.5, ErrorAfterCommit: 0.5, Seed: 3})
	const n = 300
	for i := range n {
		p := f.paths[i%len(f.paths)]
		status, _, body, err := f.do("GET", p, "", nil)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		if k := classify(t, p, f.truth[p], status, body); k != probeTruth {
			t.Fatalf("GET %s: answered %d %q, want the truth %d %q", p, status, body, f.truth[p].status, f.truth[p].body)
		}
	}
	if st := f.sb.ProbeStats(); st.Probes != n || st.Faulted() != 0 {
		t.Errorf("ProbeStats %+v, want %d probes, none faulted", st, n)
	}
}

// hangSandbox serves a sandbox whose probes all fault and whose first
// hang is probe number first (counted from 0); done receives once per
// request the handler has finished with.
func hangSandbox(t *testing.T, seed int64) (sb *Sandbox, url string, first int, done chan struct{}) {
	t.Helper()
	opts := Options{ProbeErrors: 1, ProbeHang: time.Hour, Seed: seed}
	twin := New(opts)
	for first = 0; ; first++ {
		if f, _ := twin.pickProbe(); f == probeHang {
			break
		}
	}
	twin.Close()
	sb = New(opts)
	done = make(chan struct{}, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		sb.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		sb.Close()
	})
	// The probes before the hang answer at once.
	for range first {
		resp, err := http.Get(srv.URL + "/search?operation_id=op-1")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-done
	}
	return sb, srv.URL, first, done
}

// TestProbeHangEndsWhenClientLeaves: a hang is held past the probe's
// timeout, and the handler returns as soon as the client gives up — not
// after ProbeHang (an hour here).
func TestProbeHangEndsWhenClientLeaves(t *testing.T) {
	t.Parallel()
	sb, url, _, done := hangSandbox(t, 11)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/resources/fld-000001", nil)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a hung probe answered %s", resp.Status)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung probe failed with %v, want the client's timeout", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the hang outlived the client by 5 s")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the hang took %v", took)
	}
	if st := sb.ProbeStats(); st.Hangs != 1 {
		t.Errorf("ProbeStats %+v, want one hang", st)
	}
}

// TestProbeHangEndsOnClose: closing the sandbox ends a hang (answered 503)
// and Close waits for it.
func TestProbeHangEndsOnClose(t *testing.T) {
	t.Parallel()
	sb, url, _, done := hangSandbox(t, 12)
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(url + "/jobs/job-000001")
		if err != nil {
			got <- err.Error()
			return
		}
		resp.Body.Close()
		got <- resp.Status
	}()
	for sb.ProbeStats().Hangs == 0 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { sb.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a probe hung")
	}
	select {
	case s := <-got:
		if s != fmt.Sprintf("%d %s", http.StatusServiceUnavailable, http.StatusText(http.StatusServiceUnavailable)) {
			t.Errorf("the hung probe got %s after Close, want 503", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hung probe got no answer after Close")
	}
	<-done
}

// TestSetProbeErrors: the share can be changed while the sandbox serves
// (a fault run ends its probe faults so that everything settles), and a
// share outside [0, 1] is refused.
func TestSetProbeErrors(t *testing.T) {
	t.Parallel()
	f := newProbeFixture(t, Options{ProbeErrors: 1, ProbeHang: time.Millisecond, Seed: 5})
	p := f.paths[0]
	for range 20 {
		status, _, body, err := f.do("GET", p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if classify(t, p, f.truth[p], status, body) == probeTruth {
			t.Fatalf("GET %s answered the truth at share 1", p)
		}
	}
	for _, bad := range []float64{-0.1, 1.1, math.NaN()} {
		if err := f.sb.SetProbeErrors(bad); err == nil {
			t.Errorf("SetProbeErrors(%v) accepted", bad)
		}
	}
	if err := f.sb.SetProbeErrors(0); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		status, _, body, err := f.do("GET", p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if classify(t, p, f.truth[p], status, body) != probeTruth {
			t.Fatalf("GET %s answered %d %q at share 0", p, status, body)
		}
	}
	if st := f.sb.ProbeStats(); st.Probes != 40 || st.Faulted() != 20 {
		t.Errorf("ProbeStats %+v, want 40 probes, 20 faulted", st)
	}
}
