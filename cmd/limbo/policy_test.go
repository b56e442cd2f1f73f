package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The example configuration's policies are complete; a policy missing its
// evidence and escalation items fails the lint, naming them.
func TestPolicyLint(t *testing.T) {
	code, out, errs := limbo(t, "policy", "lint", "--config", "../../limbo.example.yaml")
	if code != 0 || !strings.Contains(out, "every policy complete") {
		t.Fatalf("example config: exit %d\n%s%s", code, out, errs)
	}
	// The example agent's configuration too.
	if code, out, errs := limbo(t, "policy", "lint", "--config", "../../examples/agent/release/limbo.yaml"); code != 0 || !strings.Contains(out, "5 actions, every policy complete") {
		t.Fatalf("example agent config: exit %d\n%s%s", code, out, errs)
	}

	data, err := os.ReadFile("../../limbo.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, cut := range []string{"        evidence: [response, metadata_search, webhook]\n", "        escalate_on: [budget_exhausted, deadline_expired]\n        concurrency: 5\n"} {
		if !strings.Contains(text, cut) {
			t.Fatalf("the example no longer holds %q", cut)
		}
	}
	text = strings.Replace(text, "        evidence: [response, metadata_search, webhook]\n", "", 1)
	text = strings.Replace(text, "        escalate_on: [budget_exhausted, deadline_expired]\n        concurrency: 5\n", "        concurrency: 5\n", 1)
	path := filepath.Join(t.TempDir(), "limbo.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = limbo(t, "policy", "lint", "--config", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	for _, want := range []string{`destination "mail" action "send_invoice": evidence missing`, `destination "mail" action "send_invoice": escalate_on missing`,
		"1 of 3 actions miss checklist items"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs := limbo(t, "policy", "lint"); code != 2 || !strings.Contains(errs, "--config") {
		t.Errorf("without a file: exit %d, %s", code, errs)
	}
	// A file that configures no action checks nothing: not green.
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("payload_retention: 720h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := limbo(t, "policy", "lint", "--config", empty); code != 1 || !strings.Contains(out, "no action is configured") {
		t.Errorf("a file without actions: exit %d, %s", code, out)
	}
}

// TestConfigErrorNamesTheFile: a configuration file that does not parse is
// named in the error, with the line and what is wrong in the file's words.
func TestConfigErrorNamesTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "limbo.yaml")
	if err := os.WriteFile(path, []byte("destinations:\n  files:\n    lease: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := limbo(t, "policy", "lint", "--config", path)
	if want := path + `: invalid input: config: line 3: "3" is not a duration`; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("policy lint on a bad file: %d %q, want %q", code, errs, want)
	}
}
