package main

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/internal/testlog"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCLIAuditKeygenAndPubkey: keygen writes a 0600 key file it never
// overwrites and prints the public key, which pubkey prints again; a key
// file others can read, or no key at all, is refused with a way out.
func TestCLIAuditKeygenAndPubkey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit-key")
	code, pub, errOut := limbo(t, "audit", "keygen", "--out", keyFile)
	if code != 0 || !strings.HasPrefix(pub, auditkey.PubPrefix) || strings.Count(pub, "\n") != 1 {
		t.Fatalf("keygen: code %d, stdout %q, stderr %q", code, pub, errOut)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	written, _ := os.ReadFile(keyFile)
	if !strings.HasPrefix(string(written), auditkey.KeyPrefix) {
		t.Fatalf("key file holds %q", written)
	}
	if code, _, errOut := limbo(t, "audit", "keygen", "--out", keyFile); code != 2 || !strings.Contains(errOut, "never overwritten") {
		t.Fatalf("keygen over an existing key: code %d, stderr %q", code, errOut)
	}
	if again, _ := os.ReadFile(keyFile); string(again) != string(written) {
		t.Fatal("keygen replaced an existing key file")
	}
	db := "sqlite:" + filepath.Join(dir, "limbo.db")
	if code, out, errOut := limbo(t, "audit", "pubkey", "--audit-key", keyFile, "--db", db); code != 0 || out != pub || !strings.Contains(errOut, keyFile) {
		t.Fatalf("pubkey: code %d, stdout %q (keygen printed %q), stderr %q", code, out, pub, errOut)
	}
	// The config's audit.key_file, relative to the config file.
	cfgFile := filepath.Join(dir, "limbo.yaml")
	if err := os.WriteFile(cfgFile, []byte("audit:\n  key_file: audit-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := limbo(t, "audit", "pubkey", "--config", cfgFile, "--db", db); code != 0 || out != pub {
		t.Fatalf("pubkey from the config: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Without --out the key itself is printed, for LIMBO_AUDIT_KEY.
	code, printed, errOut := limbo(t, "audit", "keygen")
	if _, err := auditkey.Decode(printed); code != 0 || err != nil || !strings.Contains(errOut, auditkey.PubPrefix) {
		t.Fatalf("keygen to stdout: code %d, %v, stdout %q, stderr %q", code, err, printed, errOut)
	}

	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := limbo(t, "audit", "pubkey", "--audit-key", keyFile, "--db", db); code != 2 || !strings.Contains(errOut, "chmod 600") {
		t.Fatalf("pubkey of a world-readable key: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "audit", "pubkey", "--db", db); code != 2 || !strings.Contains(errOut, "limbo.db.audit-key") {
		t.Fatalf("pubkey without a key: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, errOut)
	}
	if code, _, errOut := limbo(t, "audit", "verify", "--db", db); code != 2 || !strings.Contains(errOut, "--pubkey") {
		t.Fatalf("verify without a key: code %d, stderr %q", code, errOut)
	}
}

// TestCLIAuditKeyFromEnv: LIMBO_AUDIT_KEY holds the key itself; a key file
// as well is ambiguous and refused. (Not parallel: it sets the environment.)
func TestCLIAuditKeyFromEnv(t *testing.T) {
	k := auditkey.New()
	t.Setenv("LIMBO_AUDIT_KEY", auditkey.Encode(k))
	db := "sqlite:" + filepath.Join(t.TempDir(), "limbo.db")
	code, out, errOut := limbo(t, "audit", "pubkey", "--db", db)
	if code != 0 || strings.TrimSpace(out) != auditkey.EncodePub(k.Public().(ed25519.PublicKey)) || !strings.Contains(errOut, "LIMBO_AUDIT_KEY") {
		t.Fatalf("pubkey from LIMBO_AUDIT_KEY: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if code, _, _ := limbo(t, "audit", "keygen", "--out", keyFile); code != 0 {
		t.Fatal("keygen")
	}
	if code, _, errOut := limbo(t, "audit", "pubkey", "--db", db, "--audit-key", keyFile); code != 2 || !strings.Contains(errOut, "keep one") {
		t.Fatalf("two keys: code %d, stderr %q", code, errOut)
	}
}

// TestServePostgresNeedsKey: instances on one PostgreSQL must share a key,
// so serve does not make one up; it refuses before connecting, saying how.
func TestServePostgresNeedsKey(t *testing.T) {
	t.Parallel()
	code, _, errOut := limbo(t, "serve", "--addr", "127.0.0.1:0", "--db", "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	if code != 2 || !strings.Contains(errOut, "limbo audit keygen --out FILE") || !strings.Contains(errOut, "--audit-key") {
		t.Fatalf("serve on PostgreSQL without a key: code %d, stderr %q", code, errOut)
	}
}

// serving is a `limbo serve` run in process.
type serving struct {
	addr string
	stop func() (code int, log string)
}

// serveInProcess starts `limbo serve` with args on a free port and waits
// until /readyz answers.
func serveInProcess(t *testing.T, args ...string) *serving {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", addr}, args...), strings.NewReader(""), &out, &errOut)
	}()
	stopped := false
	stop := func() (int, string) {
		if stopped {
			return 0, errOut.String()
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			return code, errOut.String()
		case <-time.After(30 * time.Second):
			t.Fatalf("limbo serve did not stop within 30 s\n%s", errOut.String())
			return 0, ""
		}
	}
	t.Cleanup(func() { stop() })
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case code := <-done:
			t.Fatalf("limbo serve exited %d before it was ready\n%s", code, errOut.String())
		default:
		}
		if resp, err := hc.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("limbo serve never became ready\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &serving{addr: addr, stop: stop}
}

// waitAnchored waits until dir holds a checkpoint covering seq.
func waitAnchored(t *testing.T, dir string, seq int64) []store.Checkpoint {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cps, err := anchor.Read(dir)
		if err == nil && len(cps) > 0 && cps[len(cps)-1].Horizon >= seq { // SQLite: the horizon is a seq
			return cps
		}
	}
	t.Fatalf("no checkpoint covering seq %d was anchored in %s", seq, dir)
	return nil
}

// TestServeAuditKeyAndAnchor: serve on SQLite without a key makes one
// beside the database and says so; the running sealer writes every
// checkpoint to the anchor directory, catching up after a restart on what
// it had not written; `limbo audit verify --anchor` then proves the trail
// complete, and names the seq where it was cut.
func TestServeAuditKeyAndAnchor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "limbo.db")
	db := "sqlite:" + dbFile
	anchorDir := filepath.Join(dir, "anchor")
	keyFile := dbFile + ".audit-key"

	// First run: no anchor directory yet.
	_, log := serveInProcess(t, "--db", db, "--audit-seal-max", "2s").stop()
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated key %s: %v; want it beside the database, mode 0600\n%s", keyFile, err, log)
	}
	code, pub, _ := limbo(t, "audit", "pubkey", "--db", db)
	if code != 0 || !strings.Contains(log, "generated an audit signing key") || !strings.Contains(log, keyFile) ||
		!strings.Contains(log, strings.TrimSpace(pub)) {
		t.Fatalf("serve's log does not say it generated %s with public key %s:\n%s", keyFile, pub, log)
	}

	// While stopped, an event; the second run anchors everything sealed
	// before (catching up) and after it started.
	if code, _, errOut := limbo(t, "token", "create", "--tenant", "acme", "--db", db); code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var tokenSeq int64
	if err := st.DB().Get(&tokenSeq, `SELECT MAX(seq) FROM audit_events WHERE action = 'token.created'`); err != nil {
		t.Fatal(err)
	}
	srv := serveInProcess(t, "--db", db, "--audit-anchor", anchorDir, "--audit-seal-max", "2s")
	anchored := waitAnchored(t, anchorDir, tokenSeq)
	if anchored[0].ID != 1 {
		t.Fatalf("the anchor directory starts at checkpoint %d: the first run's were not caught up", anchored[0].ID)
	}
	code, log = srv.stop()
	if code != 0 || strings.Contains(log, "generated an audit signing key") || strings.Contains(log, "alarm") {
		t.Fatalf("second run: exit %d, and it must reuse the key and raise no alarm:\n%s", code, log)
	}
	stored, err := st.CheckpointsAfter(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	anchored, err = anchor.Read(anchorDir)
	if err != nil || len(anchored) != len(stored) {
		t.Fatalf("%d anchors for %d checkpoints (%v): the final seal was not anchored", len(anchored), len(stored), err)
	}
	code, out, errOut := limbo(t, "audit", "verify", "--db", db, "--anchor", anchorDir)
	if want := "complete up to anchored checkpoint " + strconv.FormatInt(stored[len(stored)-1].ID, 10); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("verify --anchor: code %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}

	// Cut the tail from the token event on: events and the checkpoints
	// covering them. Only the anchor can name it on a stopped server.
	for _, q := range []string{`DELETE FROM audit_events WHERE seq >= ?`, `DELETE FROM audit_checkpoints WHERE horizon >= ?`} {
		if _, err := st.DB().Exec(q, tokenSeq); err != nil {
			t.Fatal(err)
		}
	}
	want := "broken at seq " + strconv.FormatInt(tokenSeq, 10) + ":"
	if code, _, errOut := limbo(t, "audit", "verify", "--db", db, "--anchor", anchorDir); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("verify --anchor after the cut: code %d, stderr %q; want %q", code, errOut, want)
	}
	// Without it, only once the newest checkpoint is older than allowed
	// (here: any age at all).
	if code, _, errOut := limbo(t, "audit", "verify", "--db", db, "--max-age", "1ns"); code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "--anchor") {
		t.Fatalf("verify --max-age 1ns after the cut: code %d, stderr %q; want %q", code, errOut, want)
	}
}

// serveRefused runs `limbo serve` with args, which must refuse to start;
// it gives up (and the test fails) if the server is still running after
// 20 s.
func serveRefused(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut testlog.Buffer
	code := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), &out, &errOut)
	if ctx.Err() != nil {
		t.Errorf("limbo serve %s started instead of refusing:\n%s", strings.Join(args, " "), tail(errOut.String(), 10))
	}
	return code, errOut.String()
}

// waitCheckpoint waits until the database at db holds a checkpoint.
func waitCheckpoint(t *testing.T, db string) *store.Checkpoint {
	t.Helper()
	st, err := store.Open(context.Background(), db, store.Options{MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := st.LatestCheckpoint(context.Background()); err == nil && c != nil {
			return c
		}
	}
	t.Fatalf("no checkpoint was sealed in %s", db)
	return nil
}

// TestServeRefusesAnotherAuditKey: serve does not sign a trail another
// key signed. A SQLite database moved without its key file is refused
// (no key generated beside it), as is --audit-key naming another key, and
// on PostgreSQL an instance with another key than the one running; each
// refusal names both keys and --audit-key. `audit verify` with another
// key says so, exit 2.
func TestServeRefusesAnotherAuditKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "d.db")
	_, log := serveInProcess(t, "--db", "sqlite:"+dbFile, "--audit-seal-max", "2s").stop()
	key, err := auditkey.ReadFile(dbFile + ".audit-key")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	waitCheckpoint(t, "sqlite:"+dbFile)
	other := filepath.Join(dir, "other-key")
	if code, _, errOut := limbo(t, "audit", "keygen", "--out", other); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	otherKey, err := auditkey.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	wantIn := func(what string, code int, errOut string) {
		t.Helper()
		if code != 2 || !strings.Contains(errOut, auditkey.ID(key)) || !strings.Contains(errOut, "--audit-key") {
			t.Errorf("%s: exit %d, want 2 naming key %s and --audit-key:\n%s", what, code, auditkey.ID(key), errOut)
		}
	}

	// Moved without its key file: the copy's new home has none.
	moved := filepath.Join(t.TempDir(), "d.db")
	data, err := os.ReadFile(dbFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, errOut := serveRefused(t, "--db", "sqlite:"+moved)
	wantIn("serve on a database moved without its key", code, errOut)
	if _, err := os.Stat(moved + ".audit-key"); !os.IsNotExist(err) {
		t.Errorf("a key was generated beside the moved database (%v)", err)
	}
	code, errOut = serveRefused(t, "--db", "sqlite:"+dbFile, "--audit-key", other)
	wantIn("serve --audit-key with another key", code, errOut)
	if !strings.Contains(errOut, auditkey.ID(otherKey)) {
		t.Errorf("serve --audit-key with another key does not name it (%s):\n%s", auditkey.ID(otherKey), errOut)
	}
	code, _, errOut = limbo(t, "audit", "verify", "--db", "sqlite:"+moved, "--audit-key", other, "--max-age", "0")
	if code != 2 || !strings.Contains(errOut, "wrong key") || !strings.Contains(errOut, auditkey.ID(key)) {
		t.Errorf("verify with another key: exit %d, want 2 and a wrong key:\n%s", code, errOut)
	}
	if code, out, errOut := limbo(t, "audit", "verify", "--db", "sqlite:"+dbFile, "--max-age", "0"); code != 0 {
		t.Errorf("the trail no longer verifies with its key: %d %s%s", code, out, errOut)
	}

	// The way out when the key is lost: --replace-audit-key hands the trail
	// over to the new key, audited; verify with it carries the old
	// checkpoints over, and with the old key finds the new ones (exit 1).
	srv := serveInProcess(t, "--db", "sqlite:"+moved, "--audit-key", other, "--replace-audit-key", "--audit-seal-max", "2s")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c := waitCheckpoint(t, "sqlite:"+moved); c.KeyID == auditkey.ID(otherKey) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new key sealed no checkpoint")
		}
	}
	srv.stop()
	code, out, errOut := limbo(t, "audit", "verify", "--db", "sqlite:"+moved, "--audit-key", other, "--max-age", "0")
	if code != 0 || !strings.Contains(out, "carried over") || !strings.Contains(out, auditkey.ID(key)) {
		t.Errorf("verify with the replacing key: exit %d:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := limbo(t, "audit", "verify", "--db", "sqlite:"+moved, "--audit-key", dbFile+".audit-key", "--max-age", "0"); code != 1 {
		t.Errorf("verify of the handed-over trail with the old key: exit %d, want 1 (broken):\n%s", code, errOut)
	}
	mst, err := store.Open(context.Background(), "sqlite:"+moved, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := mst.AuditEvents(context.Background(), 0, 10000)
	mst.Close()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(evs, func(e store.AuditEvent) bool { return e.Action == "audit.key_replaced" }); i < 0 ||
		!strings.Contains(evs[i].Detail, auditkey.ID(key)) || !strings.Contains(evs[i].Detail, auditkey.ID(otherKey)) {
		t.Errorf("no audit.key_replaced event naming both keys")
	}

	// PostgreSQL: a second instance with another key than the first's.
	pg := storetest.URL(t, store.Postgres)
	keyFile := filepath.Join(dir, "pg-key")
	if code, _, errOut := limbo(t, "audit", "keygen", "--out", keyFile); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	first := serveInProcess(t, "--db", pg, "--audit-key", keyFile)
	waitCheckpoint(t, pg)
	pgKey, err := auditkey.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	code, errOut = serveRefused(t, "--db", pg, "--audit-key", other)
	if code != 2 || !strings.Contains(errOut, auditkey.ID(pgKey)) || !strings.Contains(errOut, auditkey.ID(otherKey)) {
		t.Errorf("a second PostgreSQL instance with another key: exit %d:\n%s", code, errOut)
	}
	first.stop()
	// Verifying with no key at all: told how to give the instances' key,
	// not serve's advice to make one (a new key verifies nothing sealed).
	code, _, errOut = limbo(t, "audit", "verify", "--db", pg)
	if code != 2 || !strings.Contains(errOut, "--pubkey KEY") || strings.Contains(errOut, "keygen") {
		t.Errorf("verify on PostgreSQL without a key: exit %d:\n%s", code, errOut)
	}
}
