package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/webhook"
)

// receiver collects webhook deliveries; the first fail answers fail with 500.
type receiver struct {
	mu    sync.Mutex
	fail  int
	got   []delivery
	ready chan struct{}
}

type delivery struct {
	h    http.Header
	body []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got = append(rc.got, delivery{r.Header.Clone(), body})
	if rc.fail > 0 {
		rc.fail--
		w.WriteHeader(500)
		return
	}
	w.WriteHeader(204)
	close(rc.ready)
}

func TestJobCompletesWithSignedWebhook(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{fail: 1, ready: make(chan struct{})}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	b := setup(t, Options{JobDuration: 20 * time.Millisecond, WebhookURL: hook.URL, WebhookSecret: secret})

	j := b.must(t, 202, "POST", "/jobs", "j1", map[string]any{"input_ref": "contract-583", "format": "pdf", "metadata": map[string]any{"operation_id": "op-j", "logical_version": "v7"}})
	jobRef := j["ref"].(string)
	if j["status"] != "queued" || !strings.HasPrefix(jobRef, "job-") {
		t.Fatalf("job answered %v", j)
	}
	select {
	case <-rc.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook delivered")
	}
	rc.mu.Lock()
	got := rc.got
	rc.mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2 (one failed, one retried)", len(got))
	}
	if got[0].h.Get("webhook-id") != got[1].h.Get("webhook-id") {
		t.Errorf("a retry changed the event id: %q, %q", got[0].h.Get("webhook-id"), got[1].h.Get("webhook-id"))
	}
	last := got[1]
	id, err := webhook.Verify([]string{secret}, last.h, last.body, time.Now(), 0)
	if err != nil || !strings.HasPrefix(id, "msg_") {
		t.Fatalf("webhook does not verify: %q, %v", id, err)
	}
	if _, err := webhook.Verify([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, last.h, last.body, time.Now(), 0); err == nil {
		t.Error("webhook verifies with another secret")
	}
	var ev map[string]any
	if err := json.Unmarshal(last.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["type"] != "job.completed" || ev["job_ref"] != jobRef || ev["status"] != "succeeded" || ev["operation_id"] != "op-j" || ev["logical_version"] != "v7" || ev["output_ref"] == "" {
		t.Errorf("event %v", ev)
	}

	st := b.must(t, 200, "GET", "/jobs/"+jobRef, "", nil)
	if st["status"] != "succeeded" || st["output_ref"] != ev["output_ref"] || st["operation_id"] != "op-j" || st["logical_version"] != "v7" {
		t.Errorf("job status %v", st)
	}
	out := b.must(t, 200, "GET", "/resources/"+st["output_ref"].(string), "", nil)
	md, _ := out["metadata"].(map[string]any)
	if out["kind"] != "file" || out["job_ref"] != jobRef || md["operation_id"] != "op-j" || md["logical_version"] != "v7" {
		t.Errorf("output %v", out)
	}
	// One effect, one search hit: the output belongs to the job's effect.
	if items := b.must(t, 200, "GET", "/search?operation_id=op-j", "", nil)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["ref"] != jobRef {
		t.Errorf("search %v", items)
	}
	if items := b.must(t, 200, "GET", "/search?operation_id=op-j&include_outputs=true", "", nil)["items"].([]any); len(items) != 2 {
		t.Errorf("search with outputs %v", items)
	}
	if truth := b.sb.Truth(); len(truth) != 1 || truth[0].Kind != KindJob || truth[0].ResourceRef != jobRef {
		t.Errorf("truth %+v", truth)
	}
	// Compensating a finished job takes its output along.
	b.must(t, 204, "DELETE", "/resources/"+jobRef, "", nil)
	if out := b.must(t, 200, "GET", "/resources/"+st["output_ref"].(string), "", nil); out["status"] != "compensated" {
		t.Errorf("output after compensation: %v", out)
	}
}

func TestCloseStopsJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{JobDuration: 50 * time.Millisecond})
	j := b.must(t, 202, "POST", "/jobs", "", map[string]any{"input_ref": "x", "format": "pdf"})
	b.sb.Close()
	b.sb.Close() // twice is fine
	time.Sleep(100 * time.Millisecond)
	if st := b.must(t, 200, "GET", "/jobs/"+j["ref"].(string), "", nil); st["status"] != "queued" {
		t.Errorf("job after Close: %v", st)
	}
}

// TestJobFails: with JobFailures, a job can end failed. It has no output,
// its webhook and lookup say "failed", search still lists it (a provider's
// does), and the truth records it as no effect. A share of one fails every
// job; a share of a half fails some and not others, the same ones from the
// same seed.
func TestJobFails(t *testing.T) {
	t.Parallel()
	rc := &receiver{ready: make(chan struct{})}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, Options{JobDuration: 10 * time.Millisecond, JobFailures: 1, WebhookURL: hook.URL, WebhookSecret: secret})
	j := b.must(t, 202, "POST", "/jobs", "", map[string]any{"input_ref": "contract-9", "format": "pdf", "metadata": map[string]any{"operation_id": "op-f", "logical_version": "v1"}})
	jobRef := j["ref"].(string)
	select {
	case <-rc.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook delivered")
	}
	var ev map[string]any
	if err := json.Unmarshal(rc.got[0].body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["job_ref"] != jobRef || ev["status"] != "failed" || ev["output_ref"] != "" || ev["operation_id"] != "op-f" {
		t.Errorf("event %v", ev)
	}
	if st := b.must(t, 200, "GET", "/jobs/"+jobRef, "", nil); st["status"] != "failed" || st["output_ref"] != nil && st["output_ref"] != "" {
		t.Errorf("job status %v", st)
	}
	if items := b.must(t, 200, "GET", "/search?operation_id=op-f&include_outputs=true", "", nil)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["ref"] != jobRef {
		t.Errorf("search %v", items)
	}
	if truth := b.sb.Truth(); len(truth) != 1 || truth[0].ResourceRef != jobRef || !truth[0].Failed || truth[0].Compensated {
		t.Errorf("truth %+v", truth)
	}

	outcomes := func() []bool {
		b := setup(t, Options{JobDuration: time.Hour, JobFailures: 0.5, Seed: 7})
		var failed []bool
		for range 40 {
			j := b.must(t, 202, "POST", "/jobs", "", map[string]any{"input_ref": "x", "format": "pdf"})
			b.sb.completeJob(j["ref"].(string))
		}
		for _, e := range b.sb.Truth() {
			failed = append(failed, e.Failed)
		}
		return failed
	}
	first := outcomes()
	n := 0
	for _, f := range first {
		if f {
			n++
		}
	}
	if n == 0 || n == len(first) {
		t.Errorf("with a share of a half, %d of %d jobs failed", n, len(first))
	}
	if again := outcomes(); !slices.Equal(first, again) {
		t.Errorf("the same seed failed other jobs: %v, then %v", first, again)
	}
}
