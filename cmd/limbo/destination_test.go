package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
)

// limbo destination import reads the sandbox's document from its URL (or
// a file) and writes a block `serve --config` accepts, with the probes the
// document marks and the request schema of each --action.
func TestDestinationImport(t *testing.T) {
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() { srv.Close(); sb.Close() })

	out := filepath.Join(t.TempDir(), "sandbox.yaml")
	code, _, stderr := limbo(t, "destination", "import", "--openapi", srv.URL+"/openapi.json", "--name", "sandbox",
		"--action", "upload_file=uploadFile", "--action", "share_link=publishShareLink", "--body", "body",
		"--auth-env", "SANDBOX_READ_TOKEN", "--write-auth-env", "SANDBOX_TOKEN", "--allow-internal", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := review.ParseConfig(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	d := cfg.Destinations["sandbox"]
	if d.Probes.Search == nil || !strings.HasPrefix(d.Probes.Search.URL, srv.URL+"/search?") || d.Actions["share_link"].Request == nil {
		t.Fatalf("imported = %+v", d)
	}
	// --out never replaces a file (it may be the whole configuration)
	// unless --force.
	if err := os.WriteFile(out, []byte("payload_retention: 2160h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again := []string{"destination", "import", "--openapi", srv.URL + "/openapi.json", "--name", "sandbox", "--allow-internal", "--out", out}
	code, _, stderr = limbo(t, again...)
	if data, _ := os.ReadFile(out); code != 2 || !strings.Contains(stderr, "already exists") || !strings.Contains(stderr, "--force") ||
		string(data) != "payload_retention: 2160h\n" {
		t.Fatalf("--out onto an existing file: exit %d, %s; the file now holds:\n%s", code, stderr, data)
	}
	code, _, stderr = limbo(t, append(again, "--force")...)
	if data, _ := os.ReadFile(out); code != 0 || !strings.Contains(string(data), "sandbox:") {
		t.Fatalf("--out --force: exit %d, %s; the file holds:\n%s", code, stderr, data)
	}
	// The same document from a file, to standard output.
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, sandbox.OpenAPI(srv.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := limbo(t, "destination", "import", "--openapi", file, "--name", "sandbox", "--allow-internal")
	if code != 0 || !strings.Contains(stdout, "history:") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	// An operationId the document lacks is named.
	code, _, stderr = limbo(t, "destination", "import", "--openapi", file, "--name", "sandbox", "--action", "x=nope")
	if code != 2 || !strings.Contains(stderr, "x=nope") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
