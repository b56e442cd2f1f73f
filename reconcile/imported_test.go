package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/contract"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// configurations of the sandbox destination: the hand-written one the
// demo and the fault runs use (sandbox.LimboConfig), and the one `limbo
// destination import` writes from the sandbox's own OpenAPI document. What
// a document cannot say (the search lag, the lease) is the same in both.
var configurations = map[string]func(t *testing.T, base string) review.Destination{
	"hand-written": func(t *testing.T, base string) review.Destination {
		cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: base, HonoursKeys: true, SearchLag: searchLag, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Destinations[sandbox.DestinationName]
	},
	"imported": func(t *testing.T, base string) review.Destination {
		resp, err := http.Get(base + "/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc bytes.Buffer
		if _, err := doc.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		block, err := contract.Import(context.Background(), doc.Bytes(), contract.Options{Name: sandbox.DestinationName, AllowInternal: true})
		if err != nil {
			t.Fatalf("import: %v", err)
		}
		cfg, err := review.ParseConfig(block)
		if err != nil {
			t.Fatalf("the imported block: %v\n%s", err, block)
		}
		d := cfg.Destinations[sandbox.DestinationName]
		if d.Probes.Status == nil || d.Probes.Search == nil || d.Probes.Job == nil || d.Probes.History == nil {
			t.Fatalf("imported probes = %+v, want status, search, job and history", d.Probes)
		}
		d.HonoursKeys, d.ConflictMeansInProgress, d.SearchLag, d.Lease = true, true, searchLag, time.Minute
		return d
	},
}

// eachConfiguration runs test on both engines with both configurations.
func eachConfiguration(t *testing.T, opts sandbox.Options, test func(t *testing.T, b *testBundle)) {
	for name, dest := range configurations {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, e store.Engine) {
				b := setupWith(t, e, opts, nil, func(base string) review.Destination { return dest(t, base) })
				test(t, b)
			})
		})
	}
}

// post sends a create to the sandbox directly, as the destination
// committing an operation's request, and returns the created view.
func (b *testBundle) post(t *testing.T, path string, op *review.Operation, body map[string]any) map[string]any {
	t.Helper()
	body["metadata"] = map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, b.url+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", op.Key+path)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d, %v, %v", path, resp.StatusCode, v, err)
	}
	return v
}

// The same scenarios reconcile the same way with the hand-written and the
// imported configuration: a committed create is confirmed, nothing created
// is proven absent and retried, and duplicates go to a person.
func TestImportedConfigurationReconcilesAsHandWritten(t *testing.T) {
	t.Parallel()
	t.Run("committed", func(t *testing.T) {
		eachConfiguration(t, sandbox.Options{SearchLag: searchLag}, func(t *testing.T, b *testBundle) {
			var ref string
			op := b.ambiguous(t, "folder-1", "sandbox", func(op *review.Operation) { ref = b.createFolder(t, op) })
			b.clk.Advance(searchLag + time.Second)
			b.runOnce(t, 1)
			got := b.get(t, op)
			wantState(t, got, review.Confirmed)
			if got.Resource == nil || got.Resource.Ref != ref {
				t.Errorf("resource = %+v, want %s", got.Resource, ref)
			}
		})
	})
	t.Run("absent", func(t *testing.T) {
		eachConfiguration(t, sandbox.Options{SearchLag: searchLag}, func(t *testing.T, b *testBundle) {
			op := b.ambiguous(t, "folder-1", "sandbox", nil)
			b.clk.Advance(searchLag + time.Second)
			b.runOnce(t, 1)
			wantState(t, b.get(t, op), review.RetryWait)
		})
	})
	t.Run("duplicates", func(t *testing.T) {
		eachConfiguration(t, sandbox.Options{SearchLag: searchLag, NoKeySupport: true}, func(t *testing.T, b *testBundle) {
			op := b.ambiguous(t, "folder-1", "sandbox", func(op *review.Operation) { b.createFolder(t, op); b.createFolder(t, op) })
			b.clk.Advance(searchLag + time.Second)
			b.runOnce(t, 1)
			wantState(t, b.get(t, op), review.NeedsReview)
			cs, err := b.st.CasesForOperation(b.ctx, op.ID)
			if err != nil || len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonMultipleCands) {
				t.Fatalf("cases = %+v, %v; want one multiple_candidates case", cs, err)
			}
		})
	})
	// A file moved to another folder after the lost answer keeps its ref
	// and metadata: the search still finds it by the operation's id, and
	// the operation is confirmed with that ref.
	t.Run("moved", func(t *testing.T) {
		eachConfiguration(t, sandbox.Options{SearchLag: searchLag}, func(t *testing.T, b *testBundle) {
			var ref string
			op := b.ambiguous(t, "contract-9", "sandbox", func(op *review.Operation) {
				ref = b.post(t, "/files", op, map[string]any{"name": "contract-9.docx", "content": "v1"})["ref"].(string)
			})
			other := &review.Operation{ID: "someone-else", LogicalVersion: "1", Key: "k-archive"}
			folder := b.post(t, "/folders", other, map[string]any{"name": "archive"})["ref"].(string)
			moved := b.post(t, "/resources/"+ref+"/move", other, map[string]any{"folder_ref": folder})
			if moved["ref"] != ref || moved["folder_ref"] != folder {
				t.Fatalf("move answered %v", moved)
			}
			b.clk.Advance(searchLag + time.Second)
			b.runOnce(t, 1)
			got := b.get(t, op)
			wantState(t, got, review.Confirmed)
			if got.Resource == nil || got.Resource.Ref != ref {
				t.Errorf("resource = %+v, want the moved file %s", got.Resource, ref)
			}
		})
	})
}

// A lost answer after a later upload: the file's version 7 was uploaded
// for the operation, its answer lost, and version 8 uploaded since. The
// search finds the file for the operation at version 8; its history says
// version 7 existed, by this operation: confirmed, at version 7. Without
// a history probe, the same answers go to a person (version_mismatch).
func TestHistorySettlesALostVersionUpload(t *testing.T) {
	t.Parallel()
	scenario := func(t *testing.T, b *testBundle) *review.Operation {
		creator := &review.Operation{ID: "op-creator", LogicalVersion: "6", Key: "k-create"}
		file := b.post(t, "/files", creator, map[string]any{"name": "contract-583.docx", "content": "v6"})["ref"].(string)
		var op *review.Operation
		op = b.ambiguous(t, "contract-583", "sandbox", func(op *review.Operation) {
			b.post(t, "/files/"+file+"/versions", op, map[string]any{"content": "v7"})
		})
		later := &review.Operation{ID: "op-v8", LogicalVersion: "8", Key: "k-v8"}
		if v := b.post(t, "/files/"+file+"/versions", later, map[string]any{"content": "v8"}); v["version"] != "8" {
			t.Fatalf("v8 upload answered %v", v)
		}
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, 1)
		return b.get(t, op)
	}
	eachConfiguration(t, sandbox.Options{SearchLag: searchLag}, func(t *testing.T, b *testBundle) {
		got := scenario(t, b)
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Version != got.LogicalVersion {
			t.Fatalf("resource = %+v, want the file at version %s", got.Resource, got.LogicalVersion)
		}
		var history *review.Evidence
		for i, ev := range got.Evidence {
			if strings.HasPrefix(ev.Note, "history of ") {
				history = &got.Evidence[i]
			}
		}
		if history == nil || history.Verdict != review.VerdictConfirms || !strings.Contains(history.Note, "version v1 by "+got.ID) {
			t.Fatalf("history evidence = %+v", history)
		}
	})
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag}, nil) // no history probe
		got := scenario(t, b)
		wantState(t, got, review.NeedsReview)
		cs, err := b.st.CasesForOperation(b.ctx, got.ID)
		if err != nil || len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonVersionMismatch) {
			t.Fatalf("cases = %+v, %v; want version_mismatch", cs, err)
		}
	})
}

// A destination whose search takes its query as a body: with
// allow_post_search the search is a POST of the rendered body (fields
// escaped as JSON string content), and its answer settles the operation.
func TestPostSearch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		var seen struct {
			sync.Mutex
			method, ctype string
			body          map[string]string
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Lock()
			defer seen.Unlock()
			seen.method, seen.ctype = r.Method, r.Header.Get("Content-Type")
			_ = json.NewDecoder(r.Body).Decode(&seen.body)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"hits":[{"ref":"doc-1","kind":"file","operation_id":%q,"version":"v1"}]}`, seen.body["operation_id"])
		}))
		t.Cleanup(srv.Close)
		b := setup(t, e, sandbox.Options{SearchLag: searchLag}, map[string]review.Destination{"finder": {
			Lease: time.Minute, AllowInternal: loopbackV4, AllowPostSearch: true,
			Probes: review.Probes{Search: &review.Probe{Method: "POST", URL: srv.URL + "/find",
				Body: `{"operation_id": "{{.ID}}", "source": "{{.SourceRef}}"}`, Candidates: "hits", Timeout: 2 * time.Second}},
		}})
		op := b.ambiguous(t, "folder <1> & more", "finder", nil)
		b.clk.Advance(time.Second)
		b.runOnce(t, 1)
		got := b.get(t, op)
		wantState(t, got, review.Confirmed)
		seen.Lock()
		defer seen.Unlock()
		if seen.method != http.MethodPost || seen.ctype != "application/json" || seen.body["operation_id"] != op.ID ||
			seen.body["source"] != "folder <1> & more" {
			t.Errorf("search sent %s %s %v", seen.method, seen.ctype, seen.body)
		}
	})
}
