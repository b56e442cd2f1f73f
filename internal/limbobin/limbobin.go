// Package limbobin builds the limbo binary for tests that run it as a
// child process (the crash test, the fault run that kills its server).
package limbobin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Path builds cmd/limbo once per test process and returns the binary.
func Path(t *testing.T) string {
	t.Helper()
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "limbo-bin-"); err != nil {
			return
		}
		path = filepath.Join(dir, "limbo")
		if out, e := exec.Command("go", "build", "-o", path, "github.com/limbo-dev/limbo/cmd/limbo").CombinedOutput(); e != nil {
			err = fmt.Errorf("go build: %v\n%s", e, out)
		}
	})
	if err != nil {
		t.Fatalf("building limbo: %v", err)
	}
	return path
}

// Main runs a package's tests and removes the binary after them: call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
