package store

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "TestFastBatchMigrationIsFresh: write limbo_fast_batch's migration anew")

// TestFastBatchMigrationIsFresh: limbo_fast_batch is generated from the
// cycle's writes and plans (writes.go), so the newest migration that
// creates it must be what they generate today. With -update, a change is
// written as the next migration (an applied migration is never edited).
func TestFastBatchMigrationIsFresh(t *testing.T) {
	files, err := filepath.Glob("../migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var newest string
	for _, f := range files {
		if strings.Contains(filepath.Base(f), "fast_batch") {
			newest = f
		}
	}
	want := fastBatchMigration()
	got, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) == want {
		return
	}
	if !*update {
		t.Fatalf("%s is not what store/writes.go generates: run go test ./store -run TestFastBatchMigrationIsFresh -update", newest)
	}
	n, err := strconv.Atoi(filepath.Base(files[len(files)-1])[:4])
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join("../migrations", fmt.Sprintf("%04d_fast_batch-postgres.sql", n+1))
	if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", name)
}
