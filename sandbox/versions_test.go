package sandbox

import (
	"net/http"
	"strings"
	"testing"
)

// TestVersionsHistoryMoves: a new version of a file keeps its ref and
// history; a move keeps ref, metadata and what search finds; a job records
// the input version it ran on; a repeated upload under its key is one
// version.
func TestVersionsHistoryMoves(t *testing.T) {
	b := setup(t, Options{Seed: 1})
	md := func(op, v string) map[string]any { return map[string]any{"operation_id": op, "logical_version": v} }
	f := b.must(t, http.StatusCreated, "POST", "/files", "k-file", map[string]any{"name": "contract.docx", "content": "v7 text", "metadata": md("op-v7", "7")})
	ref := f["ref"].(string)
	job := b.must(t, http.StatusAccepted, "POST", "/jobs", "k-job", map[string]any{"input_ref": ref, "format": "pdf", "metadata": md("op-pdf7", "7")})

	up := map[string]any{"content": "v8 text, longer", "metadata": md("op-v8", "8")}
	v8 := b.must(t, http.StatusCreated, "POST", "/files/"+ref+"/versions", "k-v8", up)
	if v8["ref"] != ref || v8["version"] != "8" || v8["version_ref"] != ref+"@2" {
		t.Fatalf("new version = %v, want the same ref at logical version 8 (ref@2)", v8)
	}
	b.must(t, http.StatusCreated, "POST", "/files/"+ref+"/versions", "k-v8", up) // replayed under its key
	h := b.must(t, http.StatusOK, "GET", "/resources/"+ref+"/history", "", nil)
	vs := h["versions"].([]any)
	if len(vs) != 2 || vs[0].(map[string]any)["logical_version"] != "7" || vs[1].(map[string]any)["operation_id"] != "op-v8" {
		t.Fatalf("history = %v, want versions 7 then 8", h)
	}
	if j := b.must(t, http.StatusOK, "GET", "/jobs/"+job["ref"].(string), "", nil); j["input_version"] != "7" {
		t.Errorf("job = %v, want it to record input version 7", j)
	}
	// Search for the v7 upload finds the file, now at version 8.
	s := b.must(t, http.StatusOK, "GET", "/search?operation_id=op-v7", "", nil)
	items := s["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["version"] != "8" {
		t.Errorf("search op-v7 = %v, want the file at its current version 8", s)
	}
	if s := b.must(t, http.StatusOK, "GET", "/search?operation_id=op-v8", "", nil); len(s["items"].([]any)) != 1 {
		t.Errorf("search op-v8 = %v, want the file", s)
	}

	dir := b.must(t, http.StatusCreated, "POST", "/folders", "k-dir", folder("op-dir", "1"))
	moved := b.must(t, http.StatusOK, "POST", "/resources/"+ref+"/move", "k-move", map[string]any{"folder_ref": dir["ref"]})
	if moved["ref"] != ref || moved["folder_ref"] != dir["ref"] || moved["operation_id"] != "op-v7" {
		t.Errorf("moved = %v, want the same ref and identity in the new folder", moved)
	}
	if s := b.must(t, http.StatusOK, "GET", "/search?operation_id=op-v7", "", nil); len(s["items"].([]any)) != 1 {
		t.Errorf("after the move, search op-v7 = %v, want the file still found", s)
	}
	b.must(t, http.StatusBadRequest, "POST", "/resources/"+ref+"/move", "k-move-bad", map[string]any{"folder_ref": ref})
	b.must(t, http.StatusNotFound, "POST", "/files/nope/versions", "k-nope", up)

	kinds := map[string]int{}
	for _, e := range b.sb.Truth() {
		kinds[e.Kind]++
	}
	if kinds[KindFile] != 1 || kinds[KindFileVersion] != 1 || kinds[KindFolder] != 1 || kinds[KindJob] != 1 {
		t.Errorf("effects = %v, want one file, one new version, one folder, one job (the move is none)", kinds)
	}
}

// TestOpenAPIDocument: GET /openapi.json is an OpenAPI 3.1 document naming
// every route the sandbox serves, with operationIds, the probe routes
// marked x-limbo-probe and the creates' request schemas.
func TestOpenAPIDocument(t *testing.T) {
	b := setup(t, Options{Seed: 1})
	doc := b.must(t, http.StatusOK, "GET", "/openapi.json", "", nil)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)
	ids := map[string]bool{}
	probes := map[string]string{}
	for path, ops := range paths {
		for method, op := range ops.(map[string]any) {
			o := op.(map[string]any)
			id, _ := o["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("%s %s: operationId %q missing or repeated", method, path, id)
			}
			ids[id] = true
			if p, ok := o["x-limbo-probe"].(string); ok {
				probes[p] = method + " " + path
			}
		}
	}
	if len(ids) != len(routeTable) {
		t.Errorf("%d operations in the document, %d routes", len(ids), len(routeTable))
	}
	want := map[string]string{"status": "get /resources/{ref}", "search": "get /search", "job": "get /jobs/{ref}", "history": "get /resources/{ref}/history"}
	for k, v := range want {
		if probes[k] != v {
			t.Errorf("probe %s = %q, want %q", k, probes[k], v)
		}
	}
	folder := paths["/folders"].(map[string]any)["post"].(map[string]any)
	schema := folder["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "name" {
		t.Errorf("createFolder's schema = %v, want name required", schema)
	}
	// Every route in the table answers something other than the mux's 404/405.
	for _, r := range routeTable {
		path := pathParam.ReplaceAllString(r.path, "x")
		status, _, _, err := b.do(r.method, path, "", nil)
		if err != nil || status == http.StatusMethodNotAllowed || (status == http.StatusNotFound && !strings.Contains(r.path, "{")) {
			t.Errorf("%s %s: %d %v", r.method, path, status, err)
		}
	}
}

// TestDeletedFileTakesItsVersions: undoing a file (DELETE /resources/{ref})
// removes every version of it, so the ground truth marks each upload's
// effect compensated — not only the first. The truth kept a later
// version's effect live while its file was gone, so a fault run held the
// ledger to an effect the destination no longer had.
func TestDeletedFileTakesItsVersions(t *testing.T) {
	b := setup(t, Options{Seed: 1})
	md := func(op, v string) map[string]any { return map[string]any{"operation_id": op, "logical_version": v} }
	f := b.must(t, http.StatusCreated, "POST", "/files", "k-file", map[string]any{"name": "contract.docx", "content": "v7", "metadata": md("op-v7", "7")})
	ref := f["ref"].(string)
	b.must(t, http.StatusCreated, "POST", "/files/"+ref+"/versions", "k-v8", map[string]any{"content": "v8", "metadata": md("op-v8", "8")})
	b.must(t, http.StatusCreated, "POST", "/files/"+ref+"/versions", "k-v9", map[string]any{"content": "v9", "metadata": md("op-v9", "9")})
	b.must(t, http.StatusNoContent, "DELETE", "/resources/"+ref, "", nil)
	truth := b.sb.Truth()
	if len(truth) != 3 {
		t.Fatalf("effects %+v, want the file and two versions", truth)
	}
	for _, e := range truth {
		if !e.Compensated {
			t.Errorf("effect %s of %s (%s) is live after its file was deleted", e.ResourceRef, e.OperationID, e.Kind)
		}
	}
}
