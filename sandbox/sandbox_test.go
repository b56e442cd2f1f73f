package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testBundle is one sandbox served on loopback.
type testBundle struct {
	sb     *Sandbox
	url    string
	client *http.Client
}

func setup(t *testing.T, opts Options) *testBundle {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	sb := New(opts)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() {
		srv.Close()
		sb.Close()
	})
	return &testBundle{sb: sb, url: srv.URL, client: srv.Client()}
}

// do sends one request and returns status and body; a transport error is
// returned as is.
func (b *testBundle) do(method, path, key string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}

// must is do for requests that must get an answer with the wanted status.
func (b *testBundle) must(t *testing.T, want int, method, path, key string, body any) map[string]any {
	t.Helper()
	status, _, data, err := b.do(method, path, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	var v map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return v
}

func folder(op, version string) map[string]any {
	return map[string]any{"name": "contracts", "metadata": map[string]any{"operation_id": op, "logical_version": version}}
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestKeyReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	first := b.must(t, 201, "POST", "/folders", "k1", folder("op-1", "v1"))
	if first["kind"] != "folder" || first["operation_id"] != "op-1" || first["version"] != "v1" || first["status"] != "active" {
		t.Fatalf("create answered %v", first)
	}
	status, h, data, err := b.do("POST", "/folders", "k1", folder("op-1", "v1"))
	if err != nil || status != 201 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %v", status, h, err)
	}
	var again map[string]any
	json.Unmarshal(data, &again)
	if again["ref"] != first["ref"] {
		t.Errorf("replay answered ref %v, first %v", again["ref"], first["ref"])
	}
	if got := b.must(t, 422, "POST", "/folders", "k1", folder("op-1", "v2")); got["error"] != "key_reused" {
		t.Errorf("different body under the same key: %v", got)
	}
	if n := len(b.sb.Truth()); n != 1 {
		t.Fatalf("truth has %d effects after a replay, want 1", n)
	}
	// Without a key every create is a new effect.
	b.must(t, 201, "POST", "/folders", "", folder("op-2", "v1"))
	b.must(t, 201, "POST", "/folders", "", folder("op-2", "v1"))
	if n := len(b.sb.Truth()); n != 3 {
		t.Fatalf("truth has %d effects, want 3", n)
	}
}

func TestNoKeySupport(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{NoKeySupport: true})
	a := b.must(t, 201, "POST", "/files", "k1", map[string]any{"name": "a.txt", "content": "hi", "metadata": map[string]any{"operation_id": "op-1", "logical_version": 7}})
	c := b.must(t, 201, "POST", "/files", "k1", map[string]any{"name": "a.txt", "content": "hi", "metadata": map[string]any{"operation_id": "op-1", "logical_version": 7}})
	if a["ref"] == c["ref"] {
		t.Errorf("no key support: both creates answered %v", a["ref"])
	}
	truth := b.sb.Truth()
	if len(truth) != 2 || truth[0].OperationID != "op-1" || truth[1].LogicalVersion != "7" {
		t.Fatalf("truth = %+v, want two effects of op-1 v7", truth)
	}
}

func TestInvalidRequestReleasesKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	for _, body := range []any{
		map[string]any{"metadata": map[string]any{"operation_id": "op"}},                     // no name
		map[string]any{"name": "x", "metadata": map[string]any{"operation_id": 5}},           // id not a string
		map[string]any{"name": "x", "metadata": map[string]any{"logical_version": []int{1}}}, // version not scalar
		[]int{1, 2}, // not an object
	} {
		b.must(t, 400, "POST", "/folders", "k", body)
	}
	b.must(t, 400, "POST", "/charges", "", map[string]any{"amount": -3, "currency": "EUR"})
	b.must(t, 400, "POST", "/charges", "", map[string]any{"amount": 3, "currency": "euro"})
	b.must(t, 400, "POST", "/jobs", "", map[string]any{"input_ref": "x"})
	b.must(t, 400, "POST", "/links", "", map[string]any{})
	b.must(t, 400, "POST", "/emails", "", map[string]any{"to": "a@example.com"})
	// An invalid request keeps nothing under its key.
	b.must(t, 201, "POST", "/folders", "k", folder("op", "v1"))
	if n := len(b.sb.Truth()); n != 1 {
		t.Fatalf("truth has %d effects, want 1", n)
	}
	status, _, _, err := b.do("POST", "/folders", "", strings.Repeat("x", maxBody+1))
	if err != nil || status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversize body: %d %v", status, err)
	}
}

func TestEveryKind(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	md := map[string]any{"operation_id": "op-k", "logical_version": "v1"}
	cases := []struct {
		path, kind string
		status     int
		body       map[string]any
	}{
		{"/folders", KindFolder, 201, map[string]any{"name": "f"}},
		{"/files", KindFile, 201, map[string]any{"name": "a.pdf", "folder_ref": "fld-1", "content": "%PDF"}},
		{"/jobs", KindJob, 202, map[string]any{"input_ref": "file-1", "format": "pdf"}},
		{"/links", KindLink, 201, map[string]any{"file_ref": "file-1"}},
		{"/emails", KindEmail, 201, map[string]any{"to": "a@example.com", "subject": "hello"}},
		{"/charges", KindCharge, 201, map[string]any{"amount": 1250, "currency": "EUR"}},
	}
	for i, c := range cases {
		c.body["metadata"] = md
		got := b.must(t, c.status, "POST", c.path, fmt.Sprint("key-", i), c.body)
		if got["kind"] != c.kind || got["operation_id"] != "op-k" || got["version"] != "v1" {
			t.Errorf("POST %s answered %v", c.path, got)
		}
		if !strings.HasPrefix(got["ref"].(string), refPrefix[c.kind]+"-") {
			t.Errorf("POST %s: ref %v", c.path, got["ref"])
		}
		look := b.must(t, 200, "GET", "/resources/"+got["ref"].(string), "", nil)
		if look["kind"] != c.kind || look["operation_id"] != "op-k" {
			t.Errorf("lookup of %v: %v", got["ref"], look)
		}
	}
	if n := len(b.sb.Truth()); n != len(cases) {
		t.Errorf("truth has %d effects, want %d", n, len(cases))
	}
	if got := b.must(t, 404, "GET", "/resources/nope", "", nil); got["error"] != "not_found" {
		t.Errorf("unknown ref: %v", got)
	}
	b.must(t, 404, "GET", "/jobs/fld-000001", "", nil)
	b.must(t, 400, "GET", "/search", "", nil)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      Options
		status    int // 0: the client sees a transport error
		effects   int
		retryAfer string
	}{
		{name: "rate limited", opts: Options{RateLimited: 1}, status: 429, effects: 0, retryAfer: "1"},
		{name: "unavailable", opts: Options{Unavailable: 1}, status: 503, effects: 0},
		{name: "error after commit", opts: Options{ErrorAfterCommit: 1}, status: 500, effects: 1},
		{name: "loss", opts: Options{Loss: 1}, status: 0, effects: 1},
		{name: "none", opts: Options{}, status: 201, effects: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.opts)
			status, h, _, err := b.do("POST", "/folders", "k", folder("op-f", "v1"))
			switch {
			case tt.status == 0 && err == nil:
				t.Fatalf("lost answer arrived: %d", status)
			case tt.status != 0 && (err != nil || status != tt.status):
				t.Fatalf("status %d, %v; want %d", status, err, tt.status)
			}
			if got := h.Get("Retry-After"); tt.status != 0 && got != tt.retryAfer {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfer)
			}
			truth := b.sb.Truth()
			if len(truth) != tt.effects {
				t.Fatalf("truth has %d effects, want %d", len(truth), tt.effects)
			}
			// Probes are never faulted: the effect is visible whatever the client saw.
			items := b.must(t, 200, "GET", "/search?operation_id=op-f", "", nil)["items"].([]any)
			if len(items) != tt.effects {
				t.Errorf("search found %d, want %d", len(items), tt.effects)
			}
			if tt.effects == 1 {
				b.must(t, 200, "GET", "/resources/"+truth[0].ResourceRef, "", nil)
			}
		})
	}
}

// TestLossThenReplay: after a lost answer the same key replays the effect
// instead of repeating it, and replays can be lost too.
func TestLossThenReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Loss: 0.5, Seed: 3})
	email := map[string]any{"to": "a@example.com", "subject": "s", "metadata": map[string]any{"operation_id": "op-e"}}
	lost, refs := 0, map[any]bool{}
	for range 20 {
		status, _, data, err := b.do("POST", "/emails", "k", email)
		if err != nil {
			lost++
			continue
		}
		var v map[string]any
		json.Unmarshal(data, &v)
		if status != 201 {
			t.Fatalf("status %d: %s", status, data)
		}
		refs[v["ref"]] = true
	}
	truth := b.sb.Truth()
	if lost == 0 || len(refs) != 1 || len(truth) != 1 || !refs[truth[0].ResourceRef] {
		t.Fatalf("%d lost, answered refs %v, truth %+v; want some lost and one effect", lost, refs, truth)
	}
}

// TestGoTransportResendsKeyedPOST documents a trap for integrators: when a
// response is lost on a reused keep-alive connection, net/http's Transport
// silently sends a POST again if it carries an Idempotency-Key header (it
// counts such requests as replayable). With key support that is harmless;
// without it, one client call makes two effects.
func TestGoTransportResendsKeyedPOST(t *testing.T) {
	t.Parallel()
	sb := New(Options{Loss: 1, NoKeySupport: true, Seed: 1})
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		sb.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); sb.Close() })
	b := &testBundle{sb: sb, url: srv.URL, client: srv.Client()}
	b.must(t, 200, "GET", "/healthz", "", nil) // leaves an idle connection to reuse
	if _, _, _, err := b.do("POST", "/folders", "k", folder("op", "v1")); err == nil {
		t.Fatal("lost answer arrived")
	}
	if n := posts.Load(); n != 2 {
		t.Skipf("net/http sent the POST %d times; the resend trap seems gone", n)
	}
	if n := len(sb.Truth()); n != 2 {
		t.Errorf("truth has %d effects, want the 2 the resend made", n)
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Delay: 80 * time.Millisecond})
	start := time.Now()
	b.must(t, 201, "POST", "/folders", "", folder("op", "v1"))
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("create took %v, want at least the delay", d)
	}
	start = time.Now()
	b.must(t, 200, "GET", "/search?operation_id=op", "", nil)
	if d := time.Since(start); d >= 80*time.Millisecond {
		t.Errorf("probe took %v: probes are not delayed", d)
	}
}

func TestSeedReproducible(t *testing.T) {
	t.Parallel()
	run := func() []int {
		b := setup(t, Options{RateLimited: 0.3, Unavailable: 0.2, ErrorAfterCommit: 0.2, Seed: 42})
		var got []int
		for i := 0; i < 40; i++ {
			status, _, _, err := b.do("POST", "/folders", "", folder("op", "v1"))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, status)
		}
		return got
	}
	a, c := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(c) {
		t.Errorf("same seed, different faults:\n%v\n%v", a, c)
	}
	seen := map[int]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range []int{201, 429, 500, 503} {
		if !seen[s] {
			t.Errorf("40 draws never answered %d: %v", s, a)
		}
	}
	if New(Options{}).Seed() == 0 {
		t.Error("seed 0 was not replaced by a random one")
	}
}

func TestSearchLag(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b := setup(t, Options{SearchLag: 2 * time.Second, Now: clk.Now})
	got := b.must(t, 201, "POST", "/files", "k", map[string]any{"name": "a", "metadata": map[string]any{"operation_id": "op-s", "logical_version": "v3"}})
	ref := got["ref"].(string)
	search := func() []any {
		return b.must(t, 200, "GET", "/search?operation_id=op-s", "", nil)["items"].([]any)
	}
	if items := search(); len(items) != 0 {
		t.Fatalf("search during the lag found %v", items)
	}
	// Lookup by ref is authoritative at once.
	if look := b.must(t, 200, "GET", "/resources/"+ref, "", nil); look["status"] != "active" {
		t.Errorf("lookup: %v", look)
	}
	clk.Add(1999 * time.Millisecond)
	if items := search(); len(items) != 0 {
		t.Fatalf("search 1.999 s after creation found %v", items)
	}
	clk.Add(time.Millisecond)
	items := search()
	if len(items) != 1 {
		t.Fatalf("search after the lag found %v", items)
	}
	item := items[0].(map[string]any)
	if item["ref"] != ref || item["kind"] != "file" || item["version"] != "v3" || item["operation_id"] != "op-s" {
		t.Errorf("search item %v", item)
	}
	if items := b.must(t, 200, "GET", "/search?operation_id=op-s&kind=folder", "", nil)["items"].([]any); len(items) != 0 {
		t.Errorf("kind filter: %v", items)
	}
	b.must(t, 204, "DELETE", "/resources/"+ref, "", nil)
	if items := search(); len(items) != 0 {
		t.Errorf("search lists a compensated resource: %v", items)
	}
}

// TestSearchPages: with limit, the search answers a page at a time and
// names the next page's cursor until the last page; a resource hidden
// between two pages (compensated) does not shift what the next page holds.
func TestSearchPages(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	var refs []string
	for i := range 3 {
		got := b.must(t, 201, "POST", "/folders", fmt.Sprintf("k%d", i), map[string]any{"name": fmt.Sprint(i),
			"metadata": map[string]any{"operation_id": "op-p", "logical_version": "v1"}})
		refs = append(refs, got["ref"].(string))
	}
	page := b.must(t, 200, "GET", "/search?operation_id=op-p&limit=2", "", nil)
	if items := page["items"].([]any); len(items) != 2 || items[1].(map[string]any)["ref"] != refs[1] || page["next"] != refs[1] {
		t.Fatalf("page 1 = %v, want %v and next %s", page, refs[:2], refs[1])
	}
	b.must(t, 204, "DELETE", "/resources/"+refs[0], "", nil)
	page = b.must(t, 200, "GET", "/search?operation_id=op-p&limit=2&cursor="+refs[1], "", nil)
	if items := page["items"].([]any); len(items) != 1 || items[0].(map[string]any)["ref"] != refs[2] || page["next"] != nil {
		t.Errorf("page 2 = %v, want %s and no next", page, refs[2])
	}
	if all := b.must(t, 200, "GET", "/search?operation_id=op-p", "", nil); len(all["items"].([]any)) != 2 || all["next"] != nil {
		t.Errorf("without limit = %v, want both visible, one page", all)
	}
	b.must(t, 400, "GET", "/search?operation_id=op-p&cursor=nope", "", nil)
	b.must(t, 400, "GET", "/search?operation_id=op-p&limit=0", "", nil)
}

func TestCompensation(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{JobDuration: time.Hour})
	charge := b.must(t, 201, "POST", "/charges", "c1", map[string]any{"amount": 12.5, "currency": "EUR", "metadata": map[string]any{"operation_id": "op-c", "logical_version": "v1"}})
	ref := charge["ref"].(string)
	b.must(t, 204, "DELETE", "/resources/"+ref, "", nil)
	b.must(t, 204, "DELETE", "/resources/"+ref, "", nil) // undoing twice is fine
	if look := b.must(t, 200, "GET", "/resources/"+ref, "", nil); look["status"] != "compensated" {
		t.Errorf("compensated lookup: %v", look)
	}
	if got := b.must(t, 404, "DELETE", "/resources/chg-999999", "", nil); got["error"] != "not_found" {
		t.Errorf("unknown compensation: %v", got)
	}
	// A queued job is canceled and never completes.
	j := b.must(t, 202, "POST", "/jobs", "j1", map[string]any{"input_ref": "doc", "format": "pdf", "metadata": map[string]any{"operation_id": "op-j", "logical_version": "v1"}})
	b.must(t, 204, "DELETE", "/resources/"+j["ref"].(string), "", nil)
	if got := b.must(t, 200, "GET", "/jobs/"+j["ref"].(string), "", nil); got["status"] != "canceled" || got["compensated"] != true {
		t.Errorf("compensated job: %v", got)
	}
	truth := b.sb.Truth()
	if len(truth) != 2 || !truth[0].Compensated || !truth[1].Compensated {
		t.Errorf("truth = %+v, want both compensated", truth)
	}
	var served []map[string]any
	resp, err := b.client.Get(b.url + "/truth")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil {
		t.Fatal(err)
	}
	if len(served) != 2 || served[0]["resource_ref"] != ref || served[0]["compensated"] != true || served[0]["operation_id"] != "op-c" || served[0]["logical_version"] != "v1" || served[0]["kind"] != "charge" {
		t.Errorf("GET /truth = %v", served)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	const n = 50
	var wg sync.WaitGroup
	statuses := make([]int, n)
	refs := make([]string, n)
	for i := range n {
		wg.Go(func() {
			status, _, data, err := b.do("POST", "/folders", "same", folder("op-cc", "v1"))
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = status
			var v map[string]any
			json.Unmarshal(data, &v)
			refs[i], _ = v["ref"].(string)
		})
	}
	wg.Wait()
	truth := b.sb.Truth()
	if len(truth) != 1 {
		t.Fatalf("%d concurrent creates under one key made %d effects", n, len(truth))
	}
	for i, s := range statuses {
		switch {
		case s == 201 && refs[i] != truth[0].ResourceRef:
			t.Errorf("caller %d got ref %q, the effect is %q", i, refs[i], truth[0].ResourceRef)
		case s != 201 && s != 409:
			t.Errorf("caller %d got status %d", i, s)
		}
	}
}

func TestConcurrentFaultedTraffic(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Loss: 0.3, RateLimited: 0.1, Unavailable: 0.05, ErrorAfterCommit: 0.05, Seed: 7})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			key := fmt.Sprint("op-", i)
			// Retry each until a 201: the key keeps it to one effect.
			for range 100 {
				if status, _, _, err := b.do("POST", "/folders", key, folder(key, "v1")); err == nil && status == 201 {
					return
				}
			}
			t.Errorf("%s never succeeded", key)
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, e := range b.sb.Truth() {
		seen[e.OperationID]++
	}
	if len(seen) != 20 {
		t.Errorf("%d operations in the truth, want 20", len(seen))
	}
	for op, n := range seen {
		if n != 1 {
			t.Errorf("%s has %d effects", op, n)
		}
	}
}

// TestDropWithoutHijack: a writer that cannot be hijacked aborts the handler.
func TestDropWithoutHijack(t *testing.T) {
	t.Parallel()
	sb := New(Options{Loss: 1})
	defer sb.Close()
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler", r)
		}
	}()
	req := httptest.NewRequestWithContext(context.Background(), "POST", "/folders", strings.NewReader(`{"name":"x"}`))
	sb.Handler().ServeHTTP(httptest.NewRecorder(), req)
	t.Error("lost answer did not abort")
}
