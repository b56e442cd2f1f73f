package sandbox

import (
	"net/http"
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
