package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// limbo runs the command line in-process and returns exit code and output.
func limbo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	// stderr is where commands log: never a token, password or session id
	// there (stdout carries what a command was asked for, such as the
	// token `token create` prints).
	for _, line := range strings.Split(errb.String(), "\n") {
		if storetest.HoldsSecret(line, "correct horse battery") {
			t.Errorf("limbo %s: stderr holds a secret: %q", strings.Join(args, " "), line)
		}
	}
	return code, out.String(), errb.String()
}

func TestCLIUsage(t *testing.T) {
	t.Parallel()
	if code, _, errOut := limbo(t); code != 2 || !strings.Contains(errOut, "Usage") {
		t.Errorf("no args: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "token", "create", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db")); code != 2 || !strings.Contains(errOut, "--tenant") {
		t.Errorf("token create without tenant: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "migrate", "--db", "mysql://nope"); code != 2 || !strings.Contains(errOut, "sqlite:") {
		t.Errorf("bad db url: code %d, stderr %q", code, errOut)
	}
}

// TestServeTrustedProxies: --trusted-proxies (env LIMBO_TRUSTED_PROXIES)
// overrides the file's trusted_proxies; a bad range stops serve at start.
func TestServeTrustedProxies(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{TrustedProxies: []string{"10.0.0.0/8"}}
	for _, tt := range []struct {
		flag, want string
	}{
		{"", "[10.0.0.0/8]"},
		{"192.0.2.1/32, 2001:db8::/32", "[192.0.2.1/32 2001:db8::/32]"},
	} {
		got, err := trustedProxies(tt.flag, cfg)
		if err != nil || fmt.Sprint(got) != tt.want {
			t.Errorf("trustedProxies(%q) = %v, %v; want %s", tt.flag, got, err, tt.want)
		}
	}
	for _, bad := range []string{"10.0.0.1", "0.0.0.0/0", "10.0.0.0/8,"} {
		if _, err := trustedProxies(bad, cfg); err == nil || !strings.Contains(err.Error(), "--trusted-proxies") {
			t.Errorf("trustedProxies(%q) = %v, want an error naming the flag", bad, err)
		}
	}
	db := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	if code, _, errOut := limbo(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--trusted-proxies", "0.0.0.0/0"); code == 0 || !strings.Contains(errOut, "every address") {
		t.Errorf("serve with a /0 proxy range: code %d, stderr %q", code, errOut)
	}
}

func TestCLITokenAndAudit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		db := storetest.URL(t, e)
		if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
			t.Fatalf("migrate: %d %s", code, errOut)
		}
		code, out, errOut := limbo(t, "token", "create", "--tenant", "acme", "--name", "ci", "--db", db)
		if code != 0 || !regexp.MustCompile(`^limbo_[0-9a-f]{64}\n$`).MatchString(out) {
			t.Fatalf("token create: code %d, stdout %q, stderr %q", code, out, errOut)
		}
		keyFile := filepath.Join(t.TempDir(), "audit-key")
		code, pub, errOut := limbo(t, "audit", "keygen", "--out", keyFile)
		if code != 0 {
			t.Fatalf("keygen: %d %s", code, errOut)
		}
		key, err := auditkey.ReadFile(keyFile)
		if err != nil {
			t.Fatal(err)
		}

		ctx := context.Background()
		st, err := store.Open(ctx, db, store.Options{AuditKey: key, MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ti, err := st.TenantForToken(ctx, strings.TrimSpace(out))
		if err != nil || ti.Tenant != "acme" {
			t.Fatalf("token does not resolve to acme: %v %+v", err, ti)
		}
		for i := 0; i < 3; i++ {
			if _, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "doc-" + string(rune('a'+i)),
				LogicalVersion: "1", Action: "render", Destination: "files", Risk: review.RiskCompensableWrite,
				Payload: []byte(`{"i":1}`), Actor: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		if rep := storetest.Sealed(t, st); !rep.OK {
			t.Fatalf("sealed trail does not verify: %+v", rep)
		}
		for _, by := range [][]string{{"--audit-key", keyFile}, {"--pubkey", strings.TrimSpace(pub)}} {
			if code, out, errOut := limbo(t, append([]string{"audit", "verify", "--db", db}, by...)...); code != 0 || !strings.Contains(out, "holds") {
				t.Fatalf("verify %s: code %d, stdout %q, stderr %q", by[0], code, out, errOut)
			}
		}
		code, out, _ = limbo(t, "audit", "export", "--db", db)
		if code != 0 || !strings.Contains(out, `"events_digest"`) || !strings.Contains(out, `"signature"`) {
			t.Fatalf("export: code %d, %q", code, out)
		}
		exported := filepath.Join(t.TempDir(), "checkpoint.json")
		if err := os.WriteFile(exported, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := limbo(t, "audit", "verify", "--db", db, "--audit-key", keyFile, "--checkpoint", exported); code != 0 {
			t.Fatalf("verify against exported checkpoint: %d %s", code, errOut)
		}
		// Another key's public key: an intact trail is not called broken
		// (exit 1) but checked with the wrong key (2), naming both.
		code, other, _ := limbo(t, "audit", "keygen", "--out", filepath.Join(t.TempDir(), "other-key"))
		if code != 0 {
			t.Fatal("keygen")
		}
		otherPub, err := auditkey.DecodePub(other)
		if err != nil {
			t.Fatal(err)
		}
		code, _, errOut = limbo(t, "audit", "verify", "--db", db, "--pubkey", strings.TrimSpace(other))
		if code != 2 || !strings.Contains(errOut, "wrong key") || !strings.Contains(errOut, auditkey.ID(key)) ||
			!strings.Contains(errOut, store.AuditKeyID(otherPub)) || !strings.Contains(errOut, "--audit-key") {
			t.Fatalf("verify with another key: code %d, stderr %q", code, errOut)
		}

		// Edit a sealed event: verify must exit 1 naming its seq.
		var seq int64
		if err := st.DB().Get(&seq, `SELECT MIN(seq) FROM audit_events WHERE action = 'operation.registered'`); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().Exec(st.DB().Rebind(`UPDATE audit_events SET actor = 'mallory' WHERE seq = ?`), seq); err != nil {
			t.Fatal(err)
		}
		code, _, errOut = limbo(t, "audit", "verify", "--db", db, "--audit-key", keyFile)
		if want := "broken at seq " + strconv.FormatInt(seq, 10) + ":"; code != 1 || !strings.Contains(errOut, want) {
			t.Fatalf("tampered verify: code %d, stderr %q, want %q", code, errOut, want)
		}
		// Tampered and checked with another key: broken, not a wrong key.
		if code, _, errOut = limbo(t, "audit", "verify", "--db", db, "--pubkey", strings.TrimSpace(other)); code != 1 || strings.Contains(errOut, "wrong key") {
			t.Fatalf("tampered verify with another key: code %d, stderr %q", code, errOut)
		}
	})
}

func TestCLIUserAdd(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "users.db")
	if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, errOut)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"user", "add", "--email", "rev@example.com", "--role", "reviewer", "--db", db},
		strings.NewReader(""), &out, &errb)
	if code != 0 || !regexp.MustCompile(`password \(shown once\): \S{20,}`).MatchString(out.String()) {
		t.Fatalf("generated password: code %d, %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	code = run(context.Background(), []string{"user", "add", "--email", "sup@example.com", "--role", "support", "--tenants", "acme,beta", "--db", db},
		strings.NewReader("a password from stdin\n"), &out, &errb)
	if code != 0 || strings.Contains(out.String(), "password") || !strings.Contains(out.String(), "acme,beta") {
		t.Fatalf("stdin password: code %d, %q", code, out.String())
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Login(ctx, "sup@example.com", "a password from stdin", "127.0.0.1", store.SessionPolicy{}); err != nil {
		t.Fatalf("login with the piped password: %v", err)
	}
	if code, _, errOut := limbo(t, "user", "add", "--email", "x@example.com", "--role", "boss", "--db", db); code != 2 || !strings.Contains(errOut, "role") {
		t.Fatalf("bad role: %d %q", code, errOut)
	}
}

// TestServeWarnsOfMissingProbeCredential: a probe whose auth_env is not set
// is warned of at start and named by /readyz, which still answers 200 —
// the instance serves; that destination's operations go to review.
func TestServeWarnsOfMissingProbeCredential(t *testing.T) {
	t.Parallel()
	const env = "LIMBO_TEST_UNSET_SERVE_TOKEN_51C2"
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "limbo.yaml")
	yaml := "destinations:\n  files:\n    probes:\n      search:\n        url: https://files.example.com/search?op={{.ID}}\n" +
		"        candidates: $.results\n        auth_header: Authorization\n        auth_env: " + env + "\n"
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serveInProcess(t, "--db", "sqlite:"+filepath.Join(dir, "x.db"), "--config", cfgFile)
	resp, err := http.Get("http://" + s.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status   string
		Warnings []string
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Status != "ready" ||
		len(body.Warnings) != 1 || !strings.Contains(body.Warnings[0], env+" is not set") || !strings.Contains(body.Warnings[0], `"files"`) {
		t.Errorf("/readyz = %d %+v (%v), want 200, ready, one warning naming files and %s", resp.StatusCode, body, err, env)
	}
	if code, log := s.stop(); code != 0 || !strings.Contains(log, "probe credential not set") || !strings.Contains(log, "auth_env="+env) {
		t.Errorf("serve: code %d, log does not warn of %s:\n%s", code, env, log)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestServeBatchInFlight: --batch-in-flight (env LIMBO_BATCH_IN_FLIGHT)
// reaches the server, which says its bound when it starts, and a bound
// below one full batch, which would keep a batch of 1,000 waiting
// forever, or beyond a hundred full batches, stops serve at start naming
// the flag.
// TestServeBodyTimeout: --body-timeout is how long a body may take,
// positive, and serve says what it uses.
func TestServeBodyTimeout(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, bad := range []string{"0s", "-1s"} {
		if code, _, errOut := limbo(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--body-timeout", bad); code == 0 ||
			!strings.Contains(errOut, "--body-timeout must be positive") {
			t.Errorf("serve --body-timeout %s: code %d, stderr %q", bad, code, errOut)
		}
	}
	if _, log := serveInProcess(t, "--db", db, "--body-timeout", "90s").stop(); !strings.Contains(log, "body_timeout=1m30s") {
		t.Errorf("serve --body-timeout 90s did not say its timeout:\n%s", log)
	}
	if _, log := serveInProcess(t, "--db", db).stop(); !strings.Contains(log, "body_timeout=1m0s") {
		t.Errorf("serve did not say its default body timeout:\n%s", log)
	}
}

func TestServeBatchInFlight(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for bad, why := range map[string]string{"999": "is less than one full batch (1000)", "-1": "is less than one full batch (1000)",
		"100001": "is more than 100000, a hundred full batches", "9223372036854775807": "is more than 100000"} {
		if code, _, errOut := limbo(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--batch-in-flight", bad); code == 0 ||
			!strings.Contains(errOut, "--batch-in-flight: "+bad+" registrations "+why) {
			t.Errorf("serve --batch-in-flight %s: code %d, stderr %q", bad, code, errOut)
		}
	}
	_, log := serveInProcess(t, "--db", db, "--batch-in-flight", "2000").stop()
	if !strings.Contains(log, "batch_in_flight=2000") {
		t.Errorf("serve --batch-in-flight 2000 did not say its bound:\n%s", log)
	}
	_, log = serveInProcess(t, "--db", db).stop()
	if !strings.Contains(log, "batch_in_flight=4000") {
		t.Errorf("serve did not say its default bound:\n%s", log)
	}
}

// TestServeAddressUnusable: serve on a port in use, or a bogus --addr,
// exits 2 before it creates anything: no database, no audit key.
func TestServeAddressUnusable(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, addr := range []string{busy.Addr().String(), "bogus", "", " ", ":"} { // "", ":": every interface on a random port, never asked for
		dbFile := filepath.Join(t.TempDir(), "limbo.db")
		code, _, errOut := limbo(t, "serve", "--addr", addr, "--db", "sqlite:"+dbFile)
		if code != 2 || !strings.Contains(errOut, "--addr") {
			t.Errorf("serve --addr %s: exit %d, stderr %q", addr, code, errOut)
		}
		for _, f := range []string{dbFile, dbFile + ".audit-key"} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Errorf("serve --addr %s left %s behind (%v)", addr, f, err)
			}
		}
	}
}
