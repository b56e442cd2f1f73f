package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestEveryCommandHelp: every command answers --help, and limbo help
// COMMAND, with its usage, a description and its flags, on stdout, exit
// 0 — and does nothing else (no database is made). A group's first word
// lists its commands.
func TestEveryCommandHelp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range commands {
		for _, args := range [][]string{append(strings.Fields(c.name), "--help"), append([]string{"help"}, strings.Fields(c.name)...),
			append(strings.Fields(c.name), "-h")} {
			args = append(args, "--db", "sqlite:"+filepath.Join(dir, "never.db"))
			if c.name == "help" || args[0] == "help" {
				args = args[:len(args)-2] // help takes no flags of its own
			}
			code, out, errOut := limbo(t, args...)
			if code != 0 || errOut != "" {
				t.Errorf("limbo %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
				continue
			}
			if !strings.HasPrefix(out, "Usage: limbo "+c.name) || len(strings.Split(out, "\n")) < 5 {
				t.Errorf("limbo %s: no usage and description:\n%s", strings.Join(args, " "), out)
			}
			if c.name != "help" && !strings.Contains(out, "\nFlags:\n  --") {
				t.Errorf("limbo %s: no flags listed:\n%s", strings.Join(args, " "), out)
			}
			// The help reads as written: one blank line before the flags,
			// no flag type taken from a quoted command, no sentinel default.
			for _, bad := range []string{"\n\n\nFlags:", " limbo\n", "(default -1", " value\n"} {
				if strings.Contains(out, bad) {
					t.Errorf("limbo %s: help holds %q:\n%s", strings.Join(args, " "), bad, out)
				}
			}
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Errorf("--help made files: %v", m)
	}
	if code, out, _ := limbo(t, "audit", "--help"); code != 0 || !strings.Contains(out, "limbo audit verify") || !strings.Contains(out, "limbo audit keygen") {
		t.Errorf("limbo audit --help: %d %q", code, out)
	}
	if code, _, errOut := limbo(t, "audit"); code != 2 || !strings.Contains(errOut, "limbo audit verify") {
		t.Errorf("limbo audit: %d %q", code, errOut)
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		if code, out, _ := limbo(t, args...); code != 0 || !strings.Contains(out, "limbo serve ") || !strings.Contains(out, "limbo version ") {
			t.Errorf("limbo %v: %d, no command list", args, code)
		}
	}
	// A bad flag: the help, then the error once, naming the flag as the
	// help does.
	if code, _, errOut := limbo(t, "serve", "--no-such-flag"); code != 2 || !strings.Contains(errOut, "Flags:") ||
		strings.Count(errOut, "flag provided but not defined") != 1 ||
		!strings.Contains(errOut, "serve: flag provided but not defined: --no-such-flag (see limbo serve --help)") {
		t.Errorf("a bad flag: %d %q", code, errOut)
	}
}

// TestFlagsReadTheEnvironment: a flag left off the command line takes its
// environment variable, parsed as the flag parses (a bool by
// strconv.ParseBool: "true" works, "yes" is an error, not ignored); the
// command line wins over the environment.
func TestFlagsReadTheEnvironment(t *testing.T) {
	var s settings
	mk := func() (*flags, *bool) {
		fs := newFlags("serve", stdio{out: io.Discard, err: io.Discard}, &s)
		b := fs.Bool("secure-cookies", false, "")
		fs.bindEnv("secure-cookies", "LIMBO_SECURE_COOKIES")
		return fs, b
	}
	t.Setenv("LIMBO_DB", "sqlite:from-env.db")
	t.Setenv("LIMBO_SECURE_COOKIES", "true")
	t.Setenv("LIMBO_DB_MAX_CONNS", "7")
	fs, secure := mk()
	if _, err := fs.parse(nil); err != nil || s.DB != "sqlite:from-env.db" || !*secure || s.MaxConns != 7 {
		t.Fatalf("from the environment: %v, db %q, secure %v, conns %d", err, s.DB, *secure, s.MaxConns)
	}
	fs, secure = mk()
	if _, err := fs.parse([]string{"--db", "sqlite:from-flag.db", "--secure-cookies=false", "--db-max-conns", "3"}); err != nil ||
		s.DB != "sqlite:from-flag.db" || *secure || s.MaxConns != 3 {
		t.Fatalf("the command line must win: %v, db %q, secure %v, conns %d", err, s.DB, *secure, s.MaxConns)
	}
	for env, val := range map[string]string{"LIMBO_SECURE_COOKIES": "yes", "LIMBO_DB_MAX_CONNS": "many"} {
		t.Setenv(env, val)
		fs, _ = mk()
		if _, err := fs.parse(nil); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: %v, want an error naming it", env, val, err)
		}
		t.Setenv(env, map[string]string{"LIMBO_SECURE_COOKIES": "1", "LIMBO_DB_MAX_CONNS": "2"}[env])
	}
	// Through the command: a serve flag's variable that does not parse stops serve.
	t.Setenv("LIMBO_SESSION_IDLE", "soon")
	if code, _, errOut := limbo(t, "serve", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db"), "--addr", "127.0.0.1:0"); code != 2 ||
		!strings.Contains(errOut, "LIMBO_SESSION_IDLE") {
		t.Errorf("serve with LIMBO_SESSION_IDLE=soon: %d %q", code, errOut)
	}
}

// TestVersion: limbo version names the module version and the Go
// version; --json is the same as one object.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := limbo(t, "version")
	if code != 0 || !regexp.MustCompile(`^limbo \S+\nrevision .+\ngo1\.\d+`).MatchString(out) {
		t.Errorf("limbo version: %d %q", code, out)
	}
	code, out, _ = limbo(t, "version", "--json")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["version"] == nil || !strings.HasPrefix(v["go"].(string), "go1.") {
		t.Errorf("limbo version --json: %d %q", code, out)
	}
}

// TestMigrateSaysWhatItApplied: a fresh database gets every migration,
// each named; a second run applies none and says so.
func TestMigrateSaysWhatItApplied(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		db := storetest.URL(t, e)
		code, _, errOut := limbo(t, "migrate", "--db", db)
		// A new database's are named once each, when applied.
		if code != 0 || !strings.Contains(errOut, "limbo: applied 0001_") || !strings.Contains(errOut, "limbo: applied 0032_operation_search\n") ||
			strings.Contains(errOut, "applying") ||
			!regexp.MustCompile(`applied \d+ migrations; the schema is up to date`).MatchString(errOut) {
			t.Fatalf("first migrate: %d %q", code, errOut)
		}
		if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 || errOut != "limbo: the schema was up to date; nothing applied\n" {
			t.Fatalf("second migrate: %d %q", code, errOut)
		}

		// An upgrade names each migration as it starts, then how long it
		// took: one may build an index over a large table for minutes.
		st, err := store.Open(context.Background(), db, store.Options{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`DROP INDEX audit_events_at`, `DROP INDEX audit_events_action`, `DELETE FROM schema_migrations WHERE version = 52`} {
			if _, err := st.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		code, _, errOut = limbo(t, "migrate", "--db", db)
		if code != 0 || !regexp.MustCompile(`^limbo: applying 0052_audit_events_at_action\n`+
			`limbo: applied 0052_audit_events_at_action in [0-9.]+m?s\n`+
			`limbo: applied 1 migration; the schema is up to date\n$`).MatchString(errOut) {
			t.Errorf("an upgrade's migrate: %d %q", code, errOut)
		}
	})
}

// lockedBuffer is serve's stderr, read while serve writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeJSONLogs: serve --log-format json writes one JSON object per
// line; a request gets an access line carrying its X-Request-Id.
func TestServeJSONLogs(t *testing.T) {
	t.Parallel()
	var errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--db", "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "--addr", "127.0.0.1:0",
			"--log-format", "json"}, strings.NewReader(""), io.Discard, &errb)
	}()
	url := ""
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`"url":"(http://127\.0\.0\.1:\d+)"`).FindStringSubmatch(errb.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("serve did not say where it listens: %s", errb.String())
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve: exit %d: %s", code, errb.String())
	}
	if storetest.HoldsSecret(errb.String()) {
		t.Errorf("serve's log holds a secret:\n%s", errb.String())
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(errb.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		found = found || line["msg"] == "request" && line["request_id"] == id && line["route"] == "/healthz"
	}
	if id == "" || !found {
		t.Fatalf("no access line with request id %q:\n%s", id, errb.String())
	}
}
