package handlers_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/web"
)

// TestMain fails the package when any page rendered in Italian looked up
// a text the catalog lacks: the catalog tests read the keys written in
// the code, this catches the ones only a running page composes.
func TestMain(m *testing.M) {
	var mu sync.Mutex
	missing := map[string]bool{}
	web.Missing = func(key string) {
		mu.Lock()
		missing[key] = true
		mu.Unlock()
	}
	code := m.Run()
	if len(missing) > 0 {
		keys := make([]string, 0, len(missing))
		for k := range missing {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(os.Stderr, "FAIL: %d texts shown in Italian have no translation (add them to a web/catalog_it*.go):\n", len(keys))
		for _, k := range keys {
			fmt.Fprintf(os.Stderr, "\t%q\n", k)
		}
		code = 1
	}
	os.Exit(code)
}
