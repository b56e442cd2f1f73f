package handlers_test

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/web"
)

// logSink receives every log line of the suite (handlers.New(st, nil)
// logs to slog.Default): none may hold a token, a password, a session id.
var logSink = storetest.NewLogSink(browserPassword)

// TestMain fails the package when any page rendered in Italian looked up
// a text the catalog lacks (the catalog tests read the keys written in
// the code, this catches the ones only a running page composes), and when
// any log line of the suite held a secret.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(logSink))
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
	lines, leaks := logSink.Report()
	if len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of %d log lines hold a secret (a token, password, session id or cookie):\n", len(leaks), lines)
		for _, l := range leaks[:min(len(leaks), 20)] {
			fmt.Fprintf(os.Stderr, "\t%s", l)
		}
		code = 1
	}
	os.Exit(code)
}
