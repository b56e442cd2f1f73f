package app_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"log/slog"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/internal/testlog"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestAppRunsEveryLoop: an App serves HTTP and runs every background loop
// until Stop; its log names the loops and each lease-sweep round, in the
// lines a fault run reads from a child server.
func TestAppRunsEveryLoop(t *testing.T) {
	var log testlog.Buffer
	ctx := context.Background()
	a, err := app.New(ctx, app.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "limbo.db"), Addr: "127.0.0.1:0",
		AuditKey: auditkey.New(), Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	want := []string{app.LoopReconcile, app.LoopOutbox, app.LoopUndo, app.LoopSweep, app.LoopSeal, app.LoopPurge}
	if got := a.Loops(); !slices.Equal(got, want) {
		t.Fatalf("loops %v, want %v", got, want)
	}
	resp, err := http.Get(a.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	var served []string
	var sweeps int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && (served == nil || sweeps == 0); time.Sleep(50 * time.Millisecond) {
		sweeps = 0
		for _, line := range strings.Split(log.String(), "\n") {
			if loops, ok := app.ParseServingLine(line); ok {
				served = loops
			}
			if start, end, ok := app.ParseSweepLine(line); ok && !end.Before(start) {
				sweeps++
			}
		}
	}
	if !slices.Equal(served, want) || sweeps == 0 {
		t.Fatalf("the log names loops %v and %d sweep rounds:\n%s", served, sweeps, strings.Join(strings.Split(log.String(), "\n"), "\n"))
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Loops(); len(got) != 0 {
		t.Errorf("loops %v after Stop", got)
	}
	if _, err := http.Get(a.URL + "/healthz"); err == nil {
		t.Error("the server still answers after Stop")
	}
}

// TestMetricsLeaderPassesOnClose: two apps on one PostgreSQL schema; one
// exports the database-wide gauges, and when it closes (shutdown), the
// other does at its next scrape.
func TestMetricsLeaderPassesOnClose(t *testing.T) {
	ctx := context.Background()
	url := storetest.URL(t, store.Postgres) // skips without PostgreSQL
	newApp := func() *app.App {
		a, err := app.New(ctx, app.Config{DB: url, MaxConns: storetest.MaxConns, Addr: "127.0.0.1:0", AuditKey: auditkey.New()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	leads := func(a *app.App) bool {
		rec := httptest.NewRecorder()
		a.HTTPServer().Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, "\nlimbo_metrics_leader ") {
			t.Fatalf("/metrics: %d\n%s", rec.Code, body)
		}
		return strings.Contains(body, "\nlimbo_metrics_leader 1\n") && strings.Contains(body, "\nlimbo_operations{")
	}
	a, b := newApp(), newApp()
	if !leads(a) || leads(b) {
		t.Fatal("want the first app scraped to lead, alone")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !leads(b) {
		t.Fatal("the other app did not take over when the leader shut down")
	}
}

// TestAppPurgesPayloads: the payload-purge loop empties, by itself, the
// payload of an operation terminal for longer than payload_retention, at
// the configuration's purge_every; one still within it is kept.
func TestAppPurgesPayloads(t *testing.T) {
	ctx := context.Background()
	cfg := &review.Config{PayloadRetention: time.Hour, PurgeEvery: time.Second}
	a, err := app.New(ctx, app.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "limbo.db"), Addr: "127.0.0.1:0",
		AuditKey: auditkey.New(), Destinations: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	confirm := func(ref string) *review.Operation {
		op, _, err := a.Store.Register(ctx, review.Registration{Tenant: "acme", SourceRef: ref, LogicalVersion: "1", Action: "render",
			Destination: "files", Risk: review.RiskIdempotentWrite, Payload: []byte(`{"email":"ada@example.com"}`), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Store.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Store.RecordOutcome(ctx, "acme", op.ID, 1, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "f-" + ref}}, "test"); err != nil {
			t.Fatal(err)
		}
		return op
	}
	old, recent := confirm("old"), confirm("recent")
	if _, err := a.Store.DB().Exec(`UPDATE operations SET updated_at = ? WHERE id = ?`,
		time.Now().UTC().Add(-2*time.Hour).Truncate(time.Microsecond), old.ID); err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	var got *review.Operation
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err = a.Store.GetOperation(ctx, "acme", old.ID, ""); err != nil {
			t.Fatal(err)
		}
		if got.PayloadPurgedAt != nil {
			break
		}
	}
	if got.PayloadPurgedAt == nil || got.Payload != nil {
		t.Fatalf("the loop did not purge an operation terminal for 2h under a 1h retention: %+v", got)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Store.GetOperation(ctx, "acme", recent.ID, ""); err != nil || r.PayloadPurgedAt != nil {
		t.Errorf("an operation confirmed just now was purged: %v, %v", r, err)
	}
}

// TestIdleConnectionsClosed: a keep-alive connection that carries no
// further request is closed by the server once IdleTimeout has passed,
// not kept for as long as the client leaves it open.
func TestIdleConnectionsClosed(t *testing.T) {
	ctx := context.Background()
	a, err := app.New(ctx, app.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "limbo.db"), Addr: "127.0.0.1:0",
		AuditKey: auditkey.New(), IdleTimeout: 200 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: limbo\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("/healthz: %d, close %v; want 200 on a connection kept alive", resp.StatusCode, resp.Close)
	}
	// Idle from here: the server closes the connection (EOF), long before
	// this read's own deadline.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle keep-alive connection: read %d bytes, %v; want the server to close it (EOF)", n, err)
	}
}

// TestCheckUnused: a database not yet created, or freshly migrated, holds
// no Limbo data; one with a user (and the audit event adding it) does, and
// is refused, named without its password, and left as it was.
func TestCheckUnused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		if err := app.CheckUnused(ctx, db); err != nil {
			t.Fatalf("a database never migrated: %v", err)
		}
		st, err := app.OpenStore(ctx, db, store.Options{MaxConns: storetest.MaxConns}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := app.CheckUnused(ctx, db); err != nil {
			t.Fatalf("a freshly migrated database: %v", err)
		}
		if _, err := st.AddUser(ctx, review.Operator("cli:test"), store.NewUser{Email: "ops@example.com", Password: "correct horse battery",
			Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		err = app.CheckUnused(ctx, db)
		if err == nil || !strings.Contains(err.Error(), "users") || !strings.Contains(err.Error(), "audit events") ||
			strings.Contains(err.Error(), "postgres:postgres@") {
			t.Fatalf("a database with a user: %v", err)
		}
		held, err := st.Held(ctx)
		if err != nil || !slices.Equal(held, []string{"audit events", "users"}) {
			t.Fatalf("Held = %v, %v", held, err)
		}
	})
}

// TestNewRefusesAnotherAuditKey: an App does not sign a trail whose newest
// checkpoint another key signed; the trail's own key still starts.
func TestNewRefusesAnotherAuditKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		key := auditkey.New()
		st, err := app.OpenStore(ctx, db, store.Options{AuditKey: key, MaxConns: storetest.MaxConns}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if c, err := st.Seal(ctx); err != nil || c == nil {
			t.Fatalf("Seal = %v, %v", c, err)
		}
		cfg := app.Config{DB: db, MaxConns: storetest.MaxConns, Addr: "127.0.0.1:0", AuditKeyFrom: "test"}
		cfg.AuditKey = auditkey.New()
		if a, err := app.New(ctx, cfg); !errors.Is(err, app.ErrWrongAuditKey) || !strings.Contains(err.Error(), auditkey.ID(key)) {
			if a != nil {
				a.Close()
			}
			t.Fatalf("New with another key: %v", err)
		}
		cfg.AuditKey = key
		a, err := app.New(ctx, cfg)
		if err != nil {
			t.Fatalf("New with the trail's key: %v", err)
		}
		a.Close()
	})
}

// TestAppExportsLoopHealth: /metrics says, for every background loop, how
// long since its last round that succeeded, whether a round runs, and how
// many failed or panicked, so a loop that fails, panics or is stuck on a
// query is seen, not only in the log.
func TestAppExportsLoopHealth(t *testing.T) {
	ctx := context.Background()
	a, err := app.New(ctx, app.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "limbo.db"), Addr: "127.0.0.1:0",
		AuditKey: auditkey.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	var body string
	missing := a.Loops()
	for deadline := time.Now().Add(10 * time.Second); len(missing) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(a.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		missing = slices.DeleteFunc(slices.Clone(a.Loops()), func(l string) bool {
			return strings.Contains(body, `limbo_loop_last_success_age_seconds{loop="`+l+`"}`) &&
				strings.Contains(body, `limbo_loop_round_running_seconds{loop="`+l+`"}`) &&
				strings.Contains(body, `limbo_loop_failures_total{loop="`+l+`"} 0`) &&
				strings.Contains(body, `limbo_loop_panics_total{loop="`+l+`"} 0`) &&
				strings.Contains(body, `limbo_loop_rows_skipped_total{loop="`+l+`"} 0`)
		})
	}
	if len(missing) > 0 {
		t.Fatalf("/metrics says nothing of the loops %v:\n%s", missing, body)
	}
}

// TestAppExportsAnchorAlarms: when the database stops agreeing with the
// anchor directory (here the newest anchored checkpoint is deleted from
// it), /metrics counts the alarm, so an alert can fire; before, it was a
// log line only.
func TestAppExportsAnchorAlarms(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := app.New(ctx, app.Config{DB: "sqlite:" + filepath.Join(dir, "limbo.db"), Addr: "127.0.0.1:0",
		AuditKey: auditkey.New(), AnchorDir: filepath.Join(dir, "anchors")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	metric := func() string {
		resp, err := http.Get(a.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "limbo_audit_anchor_alarms_total ") {
				return line
			}
		}
		return ""
	}
	var last *store.Checkpoint
	for deadline := time.Now().Add(10 * time.Second); last == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last, err = a.Store.LatestCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if last == nil {
		t.Fatal("nothing sealed")
	}
	if got := metric(); got != "limbo_audit_anchor_alarms_total 0" {
		t.Fatalf("before any tampering: %q", got)
	}
	// The sealer may anchor a newer one meanwhile: delete all of them.
	if _, err := a.Store.DB().ExecContext(ctx, `DELETE FROM audit_checkpoints`); err != nil {
		t.Fatal(err)
	}
	got := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = metric(); got != "limbo_audit_anchor_alarms_total 0" && got != "" {
			break
		}
	}
	if got == "limbo_audit_anchor_alarms_total 0" || got == "" {
		t.Fatalf("after deleting the anchored checkpoints: %q, want an alarm counted", got)
	}
}

// TestOpenStoreLogsAnUpgrade: serve's log names each migration of an
// upgrade as it starts and once applied, with how long it took (one may
// build an index over a large table for minutes, before the instance
// serves); a new database's migrations are not listed one by one.
func TestOpenStoreLogsAnUpgrade(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		var log testlog.Buffer
		logger := slog.New(slog.NewTextHandler(&log, nil))
		st, err := app.OpenStore(ctx, db, store.Options{MaxConns: storetest.MaxConns}, logger)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log.String(), "migrat") {
			t.Errorf("a new database's migrations logged:\n%s", log.String())
		}
		for _, q := range []string{`DROP INDEX audit_events_at`, `DROP INDEX audit_events_action`, `DELETE FROM schema_migrations WHERE version = 52`} {
			if _, err := st.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		st, err = app.OpenStore(ctx, db, store.Options{MaxConns: storetest.MaxConns}, logger)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if !regexp.MustCompile(`level=INFO msg=migrating migration=0052_audit_events_at_action\n` +
			`.* level=INFO msg=migrated migration=0052_audit_events_at_action took=[0-9.]+m?s\n$`).MatchString(log.String()) {
			t.Errorf("the upgrade's log:\n%s", log.String())
		}
	})
}
