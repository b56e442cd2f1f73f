package contract

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
)

func imported(t *testing.T, doc []byte, o Options) *review.Destination {
	t.Helper()
	block, err := Import(context.Background(), doc, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := review.ParseConfig(block)
	if err != nil {
		t.Fatalf("%v\n%s", err, block)
	}
	d := cfg.Destinations[o.Name]
	return &d
}

// The sandbox's document gives every probe, bound to the operation's
// fields, and the request schema of the actions named.
func TestImportSandboxDocument(t *testing.T) {
	d := imported(t, sandbox.OpenAPI("http://127.0.0.1:9999"), Options{Name: "files", AllowInternal: true,
		Actions: map[string]string{"upload_file": "uploadFile", "share_link": "publishShareLink"}, Body: "body",
		AuthEnv: "FILES_READ_TOKEN", WriteAuthEnv: "FILES_TOKEN"})
	want := map[string]string{
		"status":  "http://127.0.0.1:9999/resources/{{.ResourceRef}}",
		"search":  "http://127.0.0.1:9999/search?operation_id={{.ID}}",
		"job":     "http://127.0.0.1:9999/jobs/{{.JobRef}}",
		"history": "http://127.0.0.1:9999/resources/{{.ResourceRef}}/history",
	}
	got := map[string]*review.Probe{"status": d.Probes.Status, "search": d.Probes.Search, "job": d.Probes.Job, "history": d.Probes.History}
	for kind, u := range want {
		p := got[kind]
		if p == nil || p.URL != u || p.AuthEnv != "FILES_READ_TOKEN" || p.AuthHeader != "Authorization" || p.Method != "" {
			t.Errorf("%s probe = %+v, want GET %s with the read credential", kind, p, u)
		}
	}
	if s := d.Probes.Search; s.Candidates != "$.items" || s.Next != "$.next" || s.CursorParam != "cursor" {
		t.Errorf("search reads %q, next %q by %q; want $.items, $.next, cursor", s.Candidates, s.Next, s.CursorParam)
	}
	if d.Probes.History.Candidates != "$.versions" || d.WriteAuthEnv != "FILES_TOKEN" || d.AllowInternal.Empty() {
		t.Errorf("history reads %q, write credential %q, allow_internal %v", d.Probes.History.Candidates, d.WriteAuthEnv, d.AllowInternal)
	}
	up := d.Actions["upload_file"].Request
	if up == nil || up.Operation != "uploadFile" || up.Method != "POST" || up.Path != "/files" || up.Body != "body" {
		t.Fatalf("upload_file request = %+v", up)
	}
	if err := up.Check([]byte(`{"body":{"content":"x"},"method":"POST","path":"/files"}`)); !errors.Is(err, review.ErrInvalid) ||
		!strings.Contains(err.Error(), `"payload.body.name"`) {
		t.Errorf("a body without its name: %v", err)
	}
	if err := d.Actions["share_link"].Request.Check([]byte(`{"body":{"file_ref":"f-1"}}`)); err != nil {
		t.Errorf("a valid share link: %v", err)
	}
}

const petstore = `openapi: 3.0.3
info: {title: Files, version: "2"}
servers: [{url: "https://files.example.com/v2"}]
paths:
  /files:
    post:
      operationId: upload
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Upload"}
      responses: {"201": {description: created}}
  /find:
    post:
      operationId: find
      x-limbo-probe: search
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties:
                  hits: {type: array, items: {type: object}}
  /files/{id}:
    get:
      operationId: getFile
      x-limbo-probe: status
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
    delete:
      operationId: deleteFile
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
components:
  schemas:
    Upload:
      type: object
      required: [name, owner]
      properties:
        name: {type: string}
        owner: {$ref: "#/components/schemas/Owner"}
    Owner:
      type: object
      required: [email]
      properties:
        email: {type: string, format: email}
`

// A YAML 3.0 document: $refs in a request schema are inlined; a POST
// search is refused unless allowed, and then sends the operation's id in
// its body.
func TestImportYAMLWithRefsAndPostSearch(t *testing.T) {
	o := Options{Name: "files", Actions: map[string]string{"upload_file": "upload"}}
	if _, err := Import(context.Background(), []byte(petstore), o); err == nil || !strings.Contains(err.Error(), "--allow-post-search") {
		t.Fatalf("a POST search without --allow-post-search: %v", err)
	}
	o.AllowPostSearch = true
	d := imported(t, []byte(petstore), o)
	if s := d.Probes.Search; s == nil || s.Method != "POST" || s.URL != "https://files.example.com/v2/find" ||
		s.Body != `{"operation_id": "{{.ID}}"}` || s.Candidates != "$.hits" || !d.AllowPostSearch {
		t.Fatalf("search = %+v", s)
	}
	if s := d.Probes.Status; s == nil || s.URL != "https://files.example.com/v2/files/{{.ResourceRef}}" {
		t.Fatalf("status = %+v", s)
	}
	err := d.Actions["upload_file"].Request.Check([]byte(`{"name":"a","owner":{}}`))
	if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), `"payload.owner.email"`) {
		t.Errorf("the inlined $ref is checked: %v", err)
	}
}

// What cannot become a sound configuration is refused, saying why.
func TestImportRefuses(t *testing.T) {
	doc := []byte(petstore)
	for _, tc := range []struct {
		doc  string
		o    Options
		says string
	}{
		{petstore, Options{Name: "files", Probes: map[string]string{"status": "deleteFile"}}, "only reads"},
		{petstore, Options{Name: "files", AllowPostSearch: true, Actions: map[string]string{"x": "nope"}}, "no operation"},
		{petstore, Options{Name: "files", AllowPostSearch: true, Actions: map[string]string{"x": "getFile"}}, "no request body"},
		{petstore, Options{Name: "fi les"}, "--name"},
		{strings.Replace(petstore, `servers: [{url: "https://files.example.com/v2"}]`, "", 1), Options{Name: "files", AllowPostSearch: true}, "--base"},
		{strings.Replace(petstore, "x-limbo-probe: status", "x-limbo-probe: statu", 1), Options{Name: "files", AllowPostSearch: true}, "not one of"},
		{strings.Replace(petstore, "x-limbo-probe: status", "x-limbo-probe: search", 1), Options{Name: "files", AllowPostSearch: true}, "both marked"},
		{strings.Replace(petstore, `email: {type: string, format: email}`, `email: {$ref: "#/components/schemas/Owner"}`, 1),
			Options{Name: "files", AllowPostSearch: true, Actions: map[string]string{"upload_file": "upload"}}, "refers to itself"},
		{strings.Replace(petstore, "#/components/schemas/Owner", "https://example.com/owner.json", 1),
			Options{Name: "files", AllowPostSearch: true}, "reading the OpenAPI document"},
		{"not: [an, openapi", Options{Name: "files"}, "reading the OpenAPI document"},
		// A probe reads only a 200 answer: a search answering 202 has no list
		// Limbo reads.
		{strings.Replace(petstore, `"200":
          description: ok`, `"202":
          description: accepted`, 1), Options{Name: "files", AllowPostSearch: true}, "200 answer's schema names no list"},
	} {
		doc = []byte(tc.doc)
		if _, err := Import(context.Background(), doc, tc.o); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want an error saying %q", tc.o, err, tc.says)
		}
	}
}
