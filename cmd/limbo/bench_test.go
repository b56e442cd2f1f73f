package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	if code, out, _ := limbo(t, "bench", "--help"); code != 0 || !strings.Contains(out, "floor_plain_per_s") {
		t.Errorf("bench --help: %d %q", code, out)
	}
	if code, _, errOut := limbo(t, "bench", "--concurrency", "0", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db")); code != 2 || !strings.Contains(errOut, "--concurrency") {
		t.Errorf("bench --concurrency 0: %d %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "bench", "--bulk-batch", "100,2000", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db")); code != 2 || !strings.Contains(errOut, "--bulk-batch") {
		t.Errorf("bench --bulk-batch 100,2000: %d %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "bench", "--http-client", "curl", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db")); code != 2 || !strings.Contains(errOut, "--http-client") {
		t.Errorf("bench --http-client curl: %d %q", code, errOut)
	}
}
