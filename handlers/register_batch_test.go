package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/metrics"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// batchAnswer is POST /operations/batch's answer.
type batchAnswer struct {
	Results []struct {
		Status    int               `json:"status"`
		Operation *review.Operation `json:"operation"`
		Problem   *struct {
			Type        string `json:"type"`
			Status      int    `json:"status"`
			Field       string `json:"field"`
			OperationID string `json:"operation_id"`
			RequestID   string `json:"request_id"`
		} `json:"problem"`
	} `json:"results"`
}

func batchBody(items ...string) string { return `{"operations":[` + strings.Join(items, ",") + `]}` }

// TestRegisterBatch: each registration of a batch answers as POST
// /operations would answer it on its own, in order, and a refused one
// (malformed, invalid, a payload mismatch) leaves its neighbours
// registered. Only what concerns the call as a whole is its problem. Every
// answer is checked against the OpenAPI document by do.
func TestRegisterBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		stored := b.register(t, "stored", review.RiskCompensableWrite)
		items := []struct {
			body   string
			status int
			typ    string // the problem's, when refused
			field  string
		}{
			{registration("new-1", "drive", review.RiskCompensableWrite), 201, "", ""},
			{registration("stored", "drive", review.RiskCompensableWrite), 200, "", ""},
			{strings.Replace(registration("stored", "drive", review.RiskCompensableWrite), `"name":"stored"`, `"name":"other"`, 1), 422, "payload-mismatch", ""},
			{registration("colour", "drive", review.RiskRead, `"colour":"red"`), 400, "invalid-request", "colour"},
			{registration("attempt", "drive", review.RiskRead, `"attempt":true`), 400, "invalid-request", "attempt"},
			{registration("fatal", "drive", "fatal"), 400, "invalid-request", "risk"},
			{strings.Replace(registration("nul", "drive", review.RiskRead), `"source_ref":"nul"`, `"source_ref":"nul\u0000"`, 1), 400, "invalid-request", "source_ref"},
			{`"not an object"`, 400, "invalid-request", ""},
			{registration("twin", "drive", review.RiskRead), 201, "", ""},
			{registration("twin", "drive", review.RiskRead), 200, "", ""},
			{registration("new-2", "drive", review.RiskRead), 201, "", ""},
			// Year 10000 in UTC: it was stored and the whole call answered 500.
			{registration("far", "drive", review.RiskRead, `"deadline":"9999-12-31T23:59:59-00:01"`), 400, "invalid-request", "deadline"},
		}
		var bodies []string
		for _, it := range items {
			bodies = append(bodies, it.body)
		}
		var got batchAnswer
		b.post("/api/v1/operations/batch", batchBody(bodies...)).want(t, http.StatusOK).decode(t, &got)
		if len(got.Results) != len(items) {
			t.Fatalf("%d results for %d registrations", len(got.Results), len(items))
		}
		for i, it := range items {
			r := got.Results[i]
			if r.Status != it.status {
				t.Errorf("registration %d: status %d, want %d (%+v)", i, r.Status, it.status, r.Problem)
				continue
			}
			if it.typ == "" {
				if r.Operation == nil || r.Problem != nil {
					t.Errorf("registration %d: operation %v, problem %+v", i, r.Operation, r.Problem)
					continue
				}
				if g := b.get("/api/v1/operations/"+r.Operation.ID).want(t, http.StatusOK).op(t); g.Key != r.Operation.Key {
					t.Errorf("registration %d: stored %s, answered %s", i, g.Key, r.Operation.Key)
				}
				continue
			}
			if r.Operation != nil || r.Problem == nil || r.Problem.Type != it.typ || r.Problem.Status != it.status ||
				(it.field != "" && r.Problem.Field != it.field) || r.Problem.RequestID == "" {
				t.Errorf("registration %d: operation %v, problem %+v; want %s naming %q", i, r.Operation, r.Problem, it.typ, it.field)
			}
		}
		if got.Results[1].Operation.ID != stored.ID || got.Results[2].Problem.OperationID != stored.ID ||
			got.Results[9].Operation.ID != got.Results[8].Operation.ID {
			t.Errorf("repeats answer other operations: %+v", got.Results)
		}
		var ops page
		b.get("/api/v1/operations?limit=500").want(t, http.StatusOK).decode(t, &ops)
		if len(ops.Operations) != 4 {
			t.Errorf("%d operations, want stored, new-1, twin and new-2", len(ops.Operations))
		}

		// What the call as a whole refuses.
		b.post("/api/v1/operations/batch", `{"operations":[]}`).want(t, http.StatusBadRequest).problem(t, "invalid-request")
		b.post("/api/v1/operations/batch", `{}`).want(t, http.StatusBadRequest).problem(t, "invalid-request")
		b.post("/api/v1/operations/batch", `{"operations":[`).want(t, http.StatusBadRequest).problem(t, "invalid-request")
		many := make([]string, store.MaxRegisterMany+1)
		for i := range many {
			many[i] = registration(fmt.Sprintf("many-%d", i), "drive", review.RiskRead)
		}
		if p := b.post("/api/v1/operations/batch", batchBody(many...)).want(t, http.StatusBadRequest).problem(t, "invalid-request"); p.Field != "operations" {
			t.Errorf("1,001 registrations: field %q", p.Field)
		}
		huge := registration("huge", "drive", review.RiskRead, `"flags":[`+strings.Repeat(`"regulated",`, 17<<20/12)+`"regulated"]`)
		if p := b.post("/api/v1/operations/batch", batchBody(huge)).want(t, http.StatusRequestEntityTooLarge).problem(t, "payload-too-large"); !strings.Contains(p.Detail, "16 MiB") {
			t.Errorf("413 detail %q", p.Detail)
		}
		b.do(request{method: http.MethodPost, path: "/api/v1/operations/batch", body: batchBody(bodies[0]), token: strp("")}).
			want(t, http.StatusUnauthorized)

		// A batch may be larger than a single call's 1 MiB.
		big := make([]string, 100)
		for i := range big {
			big[i] = registration(fmt.Sprintf("big-%d", i), "drive", review.RiskRead, `"payload":{"text":"`+strings.Repeat("x", 16<<10)+`"}`)
			big[i] = strings.Replace(big[i], `"payload":{"name":"big-`+fmt.Sprint(i)+`"},`, "", 1)
		}
		var bigAnswer batchAnswer
		b.post("/api/v1/operations/batch", batchBody(big...)).want(t, http.StatusOK).decode(t, &bigAnswer)
		for i, r := range bigAnswer.Results {
			if r.Status != http.StatusCreated {
				t.Fatalf("big registration %d: %d %+v", i, r.Status, r.Problem)
			}
		}
	})
}

// TestRegisterBatchConcurrent: fifty batches at once over the same keys;
// each key is created by exactly one of them and every other answer names
// that operation. Both engines.
func TestRegisterBatchConcurrent(t *testing.T) {
	t.Parallel()
	const batches, keys = 50, 20
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		var (
			wg  sync.WaitGroup
			got = make([]batchAnswer, batches)
		)
		for n := range batches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var items []string
				for k := range keys {
					items = append(items, registration(fmt.Sprintf("shared-%02d", (k*7+n)%keys), "drive", review.RiskRead))
				}
				b.post("/api/v1/operations/batch", batchBody(items...)).want(t, http.StatusOK).decode(t, &got[n])
			}()
		}
		wg.Wait()
		ids, created := map[string]string{}, map[string]int{}
		for n := range batches {
			for _, r := range got[n].Results {
				if r.Operation == nil {
					t.Fatalf("batch %d: %d %+v", n, r.Status, r.Problem)
				}
				if id, ok := ids[r.Operation.SourceRef]; ok && id != r.Operation.ID {
					t.Fatalf("%s answered as %s and %s", r.Operation.SourceRef, id, r.Operation.ID)
				}
				ids[r.Operation.SourceRef] = r.Operation.ID
				if r.Status == http.StatusCreated {
					created[r.Operation.SourceRef]++
				}
			}
		}
		for ref := range ids {
			if created[ref] != 1 {
				t.Errorf("%s created %d times, want 1", ref, created[ref])
			}
		}
		if len(ids) != keys {
			t.Errorf("%d keys answered, want %d", len(ids), keys)
		}
	})
}

// TestBatchWaitRoom: by default the batches waiting may hold the bodies
// of as many full batches as may be in flight (64 MiB), and at the least
// bound one full batch's body may always wait.
func TestBatchWaitRoom(t *testing.T) {
	if got := handlers.BatchWaitBytes(handlers.DefaultBatchesInFlight); got != 64<<20 {
		t.Errorf("by default the batches waiting hold %d bytes, want 64 MiB", got)
	}
	if got := handlers.BatchWaitBytes(store.MaxRegisterMany); got < handlers.MaxBatchBodyBytes {
		t.Errorf("at the least bound the batches waiting hold %d bytes, less than one full batch's body (%d)", got, handlers.MaxBatchBodyBytes)
	}
}

// TestRegisterBatchWaitsItsTurn: a batch is worked on only while its
// registrations fit in the bound (DefaultBatchesInFlight); until then it waits, having
// written nothing, and one whose client leaves while it waits never
// writes. A batch that fits goes through at once. The batches waiting are
// bounded by the bytes they hold: one that would go over is refused at
// once (503 busy), having written nothing.
func TestRegisterBatchWaitsItsTurn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		base := setup(t, engine, nil)
		var logs syncBuffer
		h := handlers.New(base.store, slog.New(slog.NewJSONHandler(&logs, nil)))
		h.Metrics = metrics.New(base.store, nil)
		// Room for one waiting batch of two registrations like these.
		handlers.ShrinkBatchWait(h, int64(len(registration("waits-1", "drive", review.RiskRead))+len(registration("waits-2", "drive", review.RiskRead))))
		t.Cleanup(func() { h.Metrics.Close() })
		srv := httptest.NewServer(handlers.NewServer(h))
		t.Cleanup(srv.Close)
		b := &testBundle{t: t, engine: engine, store: base.store, clock: base.clock, srv: srv, token: base.token}
		send := func(ctx context.Context, refs ...string) (batchAnswer, error) {
			var items []string
			for _, r := range refs {
				items = append(items, registration(r, "drive", review.RiskRead))
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/operations/batch", strings.NewReader(batchBody(items...)))
			req.Header.Set("Authorization", "Bearer "+b.token)
			req.Header.Set("Content-Type", "application/json")
			var ans batchAnswer
			resp, err := srv.Client().Do(req)
			if err != nil {
				return ans, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return ans, fmt.Errorf("status %d", resp.StatusCode)
			}
			return ans, json.NewDecoder(resp.Body).Decode(&ans)
		}
		wantCreated := func(ans batchAnswer, n int) {
			t.Helper()
			if len(ans.Results) != n {
				t.Fatalf("%d results, want %d", len(ans.Results), n)
			}
			for i, r := range ans.Results {
				if r.Status != http.StatusCreated {
					t.Errorf("registration %d: %d %+v, want 201", i, r.Status, r.Problem)
				}
			}
		}

		// Room for one registration: a batch of one goes through.
		release := handlers.HoldBatches(t, h, handlers.DefaultBatchesInFlight-1)
		ans, err := send(context.Background(), "fits")
		if err != nil {
			t.Fatal(err)
		}
		wantCreated(ans, 1)

		waiting := func() string {
			t.Helper()
			m := regexp.MustCompile(`(?m)^limbo_batch_registrations_waiting (\S+)$`).FindStringSubmatch(string(b.get("/metrics").want(t, http.StatusOK).Body))
			if m == nil {
				t.Fatal("/metrics has no limbo_batch_registrations_waiting")
			}
			return m[1]
		}

		// A batch of two waits, and has written nothing, until there is
		// room; the gauge counts its two registrations meanwhile.
		type answer struct {
			ans batchAnswer
			err error
		}
		done := make(chan answer, 1)
		go func() {
			a, err := send(context.Background(), "waits-1", "waits-2")
			done <- answer{a, err}
		}()
		for deadline := time.Now().Add(10 * time.Second); waiting() != "2"; {
			if time.Now().After(deadline) {
				t.Fatalf("limbo_batch_registrations_waiting never read 2 while a batch of two waited (%s)", waiting())
			}
			select {
			case a := <-done:
				t.Fatalf("the batch was answered without room for it: %+v, %v", a.ans, a.err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		select {
		case a := <-done:
			t.Fatalf("the batch was answered without room for it: %+v, %v", a.ans, a.err)
		case <-time.After(300 * time.Millisecond):
		}
		var page struct{ Operations []review.Operation }
		b.get("/api/v1/operations?source_ref=waits-1").want(t, http.StatusOK).decode(t, &page)
		if len(page.Operations) != 0 {
			t.Fatalf("a waiting batch wrote %+v", page.Operations)
		}
		release()
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		wantCreated(a.ans, 2)
		if w := waiting(); w != "0" {
			t.Errorf("limbo_batch_registrations_waiting = %s once it is through, want 0", w)
		}

		// A client that leaves while its batch waits: the batch ends
		// (499 in the access log) and never writes, even once there is room.
		release = handlers.HoldBatches(t, h, handlers.DefaultBatchesInFlight)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		left := make(chan error, 1)
		go func() {
			_, err := send(ctx, "left-1", "left-2")
			left <- err
		}()
		for deadline := time.Now().Add(10 * time.Second); waiting() != "2"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) { // the batch has not reached its turn's queue
				t.Fatalf("limbo_batch_registrations_waiting never read 2 (%s)", waiting())
			}
		}
		cancel()
		if err := <-left; !errors.Is(err, context.Canceled) {
			t.Fatalf("a batch with no room answered before its client left: %v", err)
		}
		for ended, deadline := false, time.Now().Add(10*time.Second); !ended; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the batch whose client left never ended (no 499 in the access log)")
			}
			for _, l := range logs.lines(t) {
				if l["msg"] == "request" && l["route"] == "/api/v1/operations/batch" && l["status"] == float64(499) {
					ended = true
				}
			}
		}
		if w := waiting(); w != "0" {
			t.Errorf("limbo_batch_registrations_waiting = %s after its client left, want 0", w)
		}
		release()
		ans, err = send(context.Background(), "left-1", "left-2")
		if err != nil {
			t.Fatal(err)
		}
		wantCreated(ans, 2) // 201, not 200: the batch that waited wrote nothing

		// While a batch of two fills the waiting room, another batch is
		// refused at once, 503 busy with a Retry-After, and writes
		// nothing; once there is room, the waiting one goes through and
		// the refused one, sent again, is registered.
		release = handlers.HoldBatches(t, h, handlers.DefaultBatchesInFlight)
		go func() {
			a, err := send(context.Background(), "queue-1", "queue-2")
			done <- answer{a, err}
		}()
		for deadline := time.Now().Add(10 * time.Second); waiting() != "2"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("limbo_batch_registrations_waiting never read 2 (%s)", waiting())
			}
		}
		shed := request{method: http.MethodPost, path: "/api/v1/operations/batch", body: batchBody(registration("shed-1", "drive", review.RiskRead))}
		res := b.sendWithin(10*time.Second, shed) // a refusal is at once: no waiting for room
		res.want(t, http.StatusServiceUnavailable)
		if p := res.problem(t, "busy"); p.RetryAfter != 1 || res.Header.Get("Retry-After") != "1" || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("a refused batch: retry_after %d, Retry-After %q, Content-Type %q; want 1, 1, problem+json", p.RetryAfter, res.Header.Get("Retry-After"), res.Header.Get("Content-Type"))
		}
		for _, e := range checkAgainstDoc(shed.method, shed.path, shed.body, res) {
			t.Errorf("the refusal does not match openapi.json: %s", e)
		}
		b.get("/api/v1/operations?source_ref=shed-1").want(t, http.StatusOK).decode(t, &page)
		if len(page.Operations) != 0 {
			t.Fatalf("a refused batch wrote %+v", page.Operations)
		}
		if !regexp.MustCompile(`(?m)^limbo_batch_registrations_refused_total 1$`).Match(b.get("/metrics").want(t, http.StatusOK).Body) {
			t.Error("limbo_batch_registrations_refused_total does not count the refused registration")
		}
		release()
		if a := <-done; a.err != nil {
			t.Fatal(a.err)
		} else {
			wantCreated(a.ans, 2)
		}
		ans, err = send(context.Background(), "shed-1")
		if err != nil {
			t.Fatal(err)
		}
		wantCreated(ans, 1)
	})
}
