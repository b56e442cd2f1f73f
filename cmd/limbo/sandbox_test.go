package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSandboxHelp(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if err := cmdSandbox(context.Background(), []string{"--help"}, stdio{out: &out, err: &errb}); err != nil {
		t.Fatalf("--help: %v (stderr %q)", err, errb.String())
	}
	for _, name := range []string{"addr", "loss", "rate-limited", "unavailable", "error-after-commit", "delay",
		"search-lag", "no-key-support", "seed", "job-duration", "job-failures", "webhook-url", "webhook-secret"} {
		if !strings.Contains(out.String(), "-"+name+" ") && !strings.Contains(out.String(), "-"+name+"\n") {
			t.Errorf("--help does not document --%s:\n%s", name, out.String())
		}
	}
	if !strings.Contains(out.String(), "answer is dropped") {
		t.Errorf("--help lacks the flags' help texts:\n%s", out.String())
	}
}

func TestSandboxBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--loss", "2"}, {"--job-failures", "1.5"}, {"--rate-limited", "0.7", "--unavailable", "0.7"}, {"--frobnicate"}, {"extra"}} {
		var out, errb bytes.Buffer
		if err := cmdSandbox(context.Background(), args, stdio{out: &out, err: &errb}); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestSandboxServes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- cmdSandbox(ctx, []string{"--addr", "127.0.0.1:0", "--seed", "1"}, stdio{out: pw, err: io.Discard})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "sandbox listening on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	resp, err := http.Post(url+"/folders", "application/json", strings.NewReader(`{"name":"f","metadata":{"operation_id":"op"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("POST /folders: %s", resp.Status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cmdSandbox returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cmdSandbox did not stop with its context")
	}
}
