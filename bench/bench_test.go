package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBenchFloorsWriteWhatTheAPIWrites runs one attempt cycle through the
// API and one through each floor, and checks that each floor wrote the
// same rows as the API — as many per table, every table of the schema, and
// the same content apart from ids and times — so no floor is faster for
// skipping work. The floors' audit events must verify like the store's.
func TestBenchFloorsWriteWhatTheAPIWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		st, srv := benchServerForTest(t, e)
		api, err := newAPIClient(clientLean, srv.url, srv.token)
		if err != nil {
			t.Fatal(err)
		}
		defer api.http.close()
		plain, err := newFloor(ctx, st, floorPlain, benchTenant, srv.actor)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		minFloor, err := newFloor(ctx, st, floorMin, benchTenant, srv.actor)
		if err != nil {
			t.Fatal(err)
		}
		defer minFloor.Close()

		tables := tableNames(t, st)
		var calls atomic.Int64
		rec := func(time.Duration) { calls.Add(1) }
		cycles := []struct {
			name      string
			cycle     cycleFunc
			sourceRef string
			calls     int64
		}{
			{"api", api.cycle, "bench/1", 3},
			{"plain", plain.cycle, "floor-plain/2", 3},
			{"min", minFloor.cycle, "floor-min/3", 3},
			{"api in two calls", api.cycle2, "bench/4", 2},
		}
		var want map[string]int64
		var wantRows string
		for i, c := range cycles {
			before := countRows(t, st.DB(), tables)
			calls.Store(0)
			if err := c.cycle(ctx, int64(i+1), rec); err != nil {
				t.Fatalf("%s cycle: %v", c.name, err)
			}
			if calls.Load() != c.calls {
				t.Errorf("%s cycle timed %d calls, want %d", c.name, calls.Load(), c.calls)
			}
			after := countRows(t, st.DB(), tables)
			delta := map[string]int64{}
			for _, tb := range tables {
				if d := after[tb] - before[tb]; d != 0 {
					delta[tb] = d
				}
			}
			rows := cycleRows(t, st, c.sourceRef)
			if i == 0 {
				want, wantRows = delta, rows
				// The API's own writes, to be sure the comparison compares something.
				if fmt.Sprint(delta) != "map[attempts:1 audit_events:3 evidence:1 operations:1]" {
					t.Fatalf("the API cycle wrote %v", delta)
				}
				continue
			}
			if !maps.Equal(delta, want) {
				t.Errorf("%s floor wrote %v rows per table, the API %v", c.name, delta, want)
			}
			if rows != wantRows {
				t.Errorf("%s floor wrote\n%s\nthe API\n%s", c.name, rows, wantRows)
			}
		}
		if err := st.SealAll(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := st.VerifyAudit(ctx, store.VerifyOptions{PublicKey: st.AuditPublicKey()})
		if err != nil || !rep.OK {
			t.Fatalf("audit after the floors: %v %+v", err, rep)
		}
	})
}

// tableNames lists every table of the schema.
func tableNames(t *testing.T, st *store.Store) []string {
	t.Helper()
	// The search index on SQLite (an FTS5 table and its shadow tables, kept
	// by triggers) is an index, as pg_trgm's are on PostgreSQL: not rows.
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'operations_search%' ORDER BY name`
	if st.Engine() == store.Postgres {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	var names []string
	if err := st.DB().Select(&names, q); err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 {
		t.Fatalf("tables: %v", names)
	}
	return names
}

func countRows(t *testing.T, db *sqlx.DB, tables []string) map[string]int64 {
	t.Helper()
	n := map[string]int64{}
	for _, tb := range tables {
		var c int64
		if err := db.Get(&c, `SELECT COUNT(*) FROM `+tb); err != nil {
			t.Fatal(err)
		}
		n[tb] = c
	}
	return n
}

// cycleRows renders what a cycle wrote for the operation with sourceRef,
// leaving out ids, keys, hashes of per-operation content and times.
func cycleRows(t *testing.T, st *store.Store, sourceRef string) string {
	t.Helper()
	db := st.DB()
	var id string
	if err := db.Get(&id, db.Rebind(`SELECT id FROM operations WHERE source_ref = ?`), sourceRef); err != nil {
		t.Fatalf("operation %s: %v", sourceRef, err)
	}
	var b strings.Builder
	dump := func(label, q string) {
		rows, err := db.Queryx(db.Rebind(q), id)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		defer rows.Close()
		for rows.Next() {
			vals, err := rows.SliceScan()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if bs, ok := v.([]byte); ok {
					vals[i] = string(bs)
				}
			}
			fmt.Fprintf(&b, "%s %v\n", label, vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	dump("operation", `SELECT tenant, action, destination, risk, flags, logical_version, state, state_reason,
    max_attempts, cost_budget IS NULL, cost_spent, attempt_count, next_attempt_at IS NULL, first_attempt_at IS NOT NULL,
    resource_kind, resource_version, resource_ref IS NOT NULL, version, probe_owner IS NULL, probe_until IS NULL,
    probe_generation, probe_round, next_probe_at IS NULL, length(key), length(payload_hash)
FROM operations WHERE id = ?`)
	dump("attempt", `SELECT n, generation, destination, credential, model, finished_at IS NOT NULL, result, phase,
    http_status, provider_code, provider_request_id, retry_after, cost, next, next_reason, retry_at IS NULL, length(outcome_hash)
FROM attempts WHERE operation_id = ? ORDER BY n`)
	dump("evidence", `SELECT source, authoritative, verdict, note, length(candidates) > 2 FROM evidence WHERE operation_id = ? ORDER BY id`)
	dump("audit", `SELECT actor, tenant, action, from_state, to_state, length(detail) > 2 FROM audit_events WHERE operation_id = ? ORDER BY seq`)
	return b.String()
}

// benchServerForTest opens a fresh store on engine e and starts bench's
// server over it; both stop when the test ends.
func benchServerForTest(t *testing.T, e store.Engine) (*store.Store, *benchServer) {
	t.Helper()
	srv, err := startBenchServer(context.Background(), storetest.URL(t, e), storetest.MaxConns, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.close)
	return srv.app.Store, srv
}

// TestBenchHTTPClients runs attempt cycles through both kinds of bench
// client, and checks the lean one dials again when the server closes its
// connection.
func TestBenchHTTPClients(t *testing.T) {
	ctx := context.Background()
	_, srv := benchServerForTest(t, store.SQLite)
	var seq int64
	for _, kind := range []string{clientLean, clientNetHTTP} {
		c, err := newAPIClient(kind, srv.url, srv.token)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		rec := func(time.Duration) { calls++ }
		for i := range 4 {
			// For the lean client, the server drops its idle connections
			// before the second cycle, whose answers say "Connection:
			// close". (net/http.Client cannot re-send a POST that meets a
			// connection closed under it, so it is not put to that test.)
			srv.app.HTTPServer().SetKeepAlivesEnabled(kind != clientLean || i != 1)
			seq++
			if err := c.cycle(ctx, seq, rec); err != nil {
				t.Fatalf("%s, cycle %d: %v", kind, i, err)
			}
		}
		c.http.close()
		if calls != 12 {
			t.Errorf("%s: %d calls timed, want 12", kind, calls)
		}
	}
	if _, err := newAPIClient("curl", srv.url, srv.token); err == nil {
		t.Error("an unknown client kind was accepted")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	c, _ := newAPIClient(clientLean, srv.url, srv.token)
	if err := c.cycle(cancelled, seq+1, func(time.Duration) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cycle on a cancelled context: %v, want context.Canceled", err)
	}
}

// TestBenchRun runs bench, as `limbo bench` does, for a moment on each engine and
// checks every figure is there.
func TestBenchRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		db := storetest.URL(t, e)
		args := []string{"--db", db, "--db-max-conns", "4", "--duration", "200ms", "--warmup", "0", "--concurrency", "2", "--rounds", "1",
			"--reconcile-ops", "4", "--queue-ops", "2000", "--queue-requests", "14", "--bulk-batch", "3,50"}
		code, out, errOut := benchCLI(t, args...)
		if code != 0 {
			t.Fatalf("bench: %d\n%s", code, errOut)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("bench output is not one JSON object: %v\n%s", err, out)
		}
		for _, f := range []string{"cycle_per_s", "call_p50_ms", "call_p99_ms", "floor_plain_per_s", "floor_min_per_s",
			"ratio_plain", "ratio_min", "cycle_two_calls_per_s", "call_two_calls_p99_ms", "cpu_ms_per_cycle_two_calls", "queue_p50_ms", "queue_p99_ms", "case_p99_ms", "reconcile_per_min", "rss_mb",
			"cpu_ms_per_cycle", "floor_plain_cpu_ms_per_cycle", "floor_min_cpu_ms_per_cycle",
			"case_p50_ms", "browse_p50_ms", "browse_p99_ms", "search_p50_ms", "search_p99_ms", "operation_p50_ms", "operation_p99_ms",
			"audit_p50_ms", "audit_p99_ms"} {
			if v, ok := rep[f].(float64); !ok || v <= 0 {
				t.Errorf("%s = %v, want a positive number", f, rep[f])
			}
		}
		// The bulk intake at each batch size, the first one's rate on top.
		bulk, _ := rep["bulk"].([]any)
		if len(bulk) != 2 || rep["bulk_batch"] != 3.0 || rep["bulk_ops_per_s"] != bulk[0].(map[string]any)["ops_per_s"] {
			t.Errorf("bulk = %v, bulk_batch %v, bulk_ops_per_s %v; want sizes 3 and 50, 3 on top", bulk, rep["bulk_batch"], rep["bulk_ops_per_s"])
		}
		for _, b := range bulk {
			for _, f := range []string{"ops_per_s", "call_p50_ms", "call_p99_ms", "cpu_ms_per_op"} {
				if v, _ := b.(map[string]any)[f].(float64); v <= 0 {
					t.Errorf("bulk %v: %s = %v, want a positive number", b.(map[string]any)["batch"], f, v)
				}
			}
		}
		// Every kind of browser, search and operation page was timed.
		kinds, _ := rep["browse_kinds"].(map[string]any)
		for _, k := range []string{"browse:first", "browse:state", "browse:tenant", "browse:deep", "search:key-prefix", "search:source-ref",
			"search:resource-ref", "search:broad", "search:short", "search:none", "search:id", "operation:settled", "operation:open",
			"audit:first", "audit:tenant", "audit:operation", "audit:actor-none", "audit:deep", "audit:action-none", "audit:action-rare", "audit:action-rare-scoped",
			"audit:day-oldest", "audit:day-oldest-scoped",
			"audit:scoped", "audit:scoped-quiet",
			"audit:export-operation", "audit:export-quiet"} {
			if fig, _ := kinds[k].(map[string]any); fig == nil || fig["n"].(float64) < 1 || fig["p99_ms"].(float64) <= 0 {
				t.Errorf("browse_kinds[%s] = %v, want timed requests", k, kinds[k])
			}
		}
		// The database server's CPU is measured when it runs here.
		_, procOK := postgresCPU()
		for _, f := range []string{"db_cpu_ms_per_cycle", "floor_plain_db_cpu_ms_per_cycle", "floor_min_db_cpu_ms_per_cycle"} {
			v, ok := rep[f].(float64)
			switch {
			case e == store.Postgres && localPostgres(db) && procOK && (!ok || v < 0):
				t.Errorf("%s = %v, want a number for a PostgreSQL on this machine", f, rep[f])
			case e == store.SQLite && rep[f] != nil:
				t.Errorf("%s = %v on SQLite, want none (its CPU is the process's)", f, rep[f])
			}
		}
		if rep["http_client"] != "lean" {
			t.Errorf("http_client = %v, want lean by default", rep["http_client"])
		}
		if rep["fast_path_share"] != 1.0 {
			t.Errorf("fast_path_share = %v, want 1: every API call of the cycle takes the one-statement path", rep["fast_path_share"])
		}
		// Every fast-path call went through a batch (of one or more).
		if perBatch, ok := rep["fast_path_calls_per_batch"].(float64); !ok || perBatch < 1 {
			t.Errorf("fast_path_calls_per_batch = %v, want at least 1", rep["fast_path_calls_per_batch"])
		}
		if rep["engine"] != string(e) {
			t.Errorf("engine %v, want %s", rep["engine"], e)
		}
		if rep["reconcile_confirmed"] != 4.0 {
			t.Errorf("reconcile_confirmed = %v, want 4", rep["reconcile_confirmed"])
		}
		// The run wrote operations: bench refuses to write into them again.
		if code, _, errOut := benchCLI(t, args...); code != 2 || !strings.Contains(errOut, "already holds Limbo data") {
			t.Errorf("bench on a used database: %d %s", code, errOut)
		}
	})
}

// TestBenchReuseLedger: --reuse-ledger times the pages again over the
// ledger an earlier run loaded, on each engine (here without SQLite's
// planner statistics, --no-planner-stats); a ledger of another size, or
// anything else to time with it, is refused.
func TestBenchReuseLedger(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		db := storetest.URL(t, e)
		pages := []string{"--db", db, "--db-max-conns", "4", "--duration", "100ms", "--rounds", "1", "--no-cycles", "--bulk-batch", "0",
			"--reconcile-ops", "0", "--queue-ops", "300", "--open-cases", "30", "--queue-requests", "14"}
		if code, _, errOut := benchCLI(t, pages...); code != 0 {
			t.Fatalf("first run: %d %s", code, errOut)
		}
		// SQLite's planner statistics: the bulk load gathers them, and
		// --no-planner-stats drops them before the pages are timed.
		sqliteStats := func() bool {
			t.Helper()
			st, err := store.Open(context.Background(), db, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var n int
			if err := st.DB().Get(&n, `SELECT COUNT(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'`); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
		if e == store.SQLite && !sqliteStats() {
			t.Error("no planner statistics after the bulk load")
		}
		code, out, errOut := benchCLI(t, append(pages, "--reuse-ledger", "--no-planner-stats")...)
		if code != 0 {
			t.Fatalf("again with --reuse-ledger: %d %s", code, errOut)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if v, _ := rep["search_p99_ms"].(float64); v <= 0 || rep["queue_ops"] != 300.0 {
			t.Errorf("reused: search_p99_ms %v, queue_ops %v", rep["search_p99_ms"], rep["queue_ops"])
		}
		if got, _ := rep["no_planner_stats"].(bool); got != (e == store.SQLite) {
			t.Errorf("no_planner_stats %v on %s", rep["no_planner_stats"], e)
		}
		if e == store.SQLite && sqliteStats() {
			t.Error("planner statistics left after --no-planner-stats")
		}
		var held int
		st, err := store.Open(context.Background(), db, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.DB().Get(&held, `SELECT COUNT(*) FROM operations`); err != nil || held != 300 {
			t.Errorf("after two runs: %d operations (%v), want the one ledger of 300", held, err)
		}
		for _, bad := range [][]string{
			append(append([]string{}, pages...), "--reuse-ledger", "--queue-ops", "301"),
			append(append([]string{}, pages...), "--reuse-ledger", "--bulk-batch", "10"),
		} {
			if code, _, errOut := benchCLI(t, bad...); code != 2 || !strings.Contains(errOut, "reuse-ledger") {
				t.Errorf("%v: %d %s", bad[len(bad)-2:], code, errOut)
			}
		}
	})
}

// benchCLI runs bench on args as `limbo bench` would: exit 2 and the
// error on stderr, or the report as JSON on stdout.
func benchCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o Options
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2, "", err.Error()
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		return 2, "", err.Error()
	}
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out), ""
}

// TestBenchTargets runs the attempt cycle through instances started apart
// from bench — two on PostgreSQL, one on SQLite (one process per file) —
// and checks the clients were spread over them, each counted cycle is a
// confirmed operation (runTargets fails otherwise) and the CPU figures are
// there. Twice on one database: a run's keys never meet an earlier run's.
func TestBenchTargets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		n := 2
		if e == store.SQLite {
			n = 1
		}
		key := auditkey.New()
		var targets []string
		for i := range n {
			a, err := app.New(ctx, app.Config{DB: db, MaxConns: 4, Addr: "127.0.0.1:0", AuditKey: key, Owner: fmt.Sprintf("limbo-bench-test/%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			a.Start(ctx)
			t.Cleanup(func() { a.Close() })
			targets = append(targets, a.URL)
		}
		for run := range 2 {
			args := []string{"--db", db, "--targets", strings.Join(targets, ","), "--duration", "200ms", "--warmup", "50ms",
				"--concurrency", "4", "--rounds", "2"}
			code, out, errOut := benchCLI(t, args...)
			if code != 0 {
				t.Fatalf("run %d: bench --targets: %d\n%s", run, code, errOut)
			}
			var rep Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.CyclePerS <= 0 || rep.CallP99Ms <= 0 || len(rep.CycleRounds) != 2 || rep.InstancesCPUMsPerCycle == nil || *rep.InstancesCPUMsPerCycle <= 0 {
				t.Errorf("run %d: cycle_per_s %v, p99 %v, rounds %v, instances' CPU %v", run, rep.CyclePerS, rep.CallP99Ms, rep.CycleRounds, rep.InstancesCPUMsPerCycle)
			}
			if len(rep.Targets) != n {
				t.Fatalf("run %d: %d targets reported, want %d", run, len(rep.Targets), n)
			}
			for _, tr := range rep.Targets {
				if tr.Cycles < 1 || tr.CPUMsPerCycle == nil {
					t.Errorf("run %d: %s served %d cycles, CPU %v: want its share of the clients and its CPU", run, tr.URL, tr.Cycles, tr.CPUMsPerCycle)
				}
			}
			for _, tr := range rep.Targets {
				if tr.FastPathCallsPerBatch == nil || *tr.FastPathCallsPerBatch < 1 {
					t.Errorf("run %d: %s: fast_path_calls_per_batch %v on %s", run, tr.URL, tr.FastPathCallsPerBatch, e)
				}
			}
			if got := rep.WALBytesPerCycle != nil; got != (e == store.Postgres) {
				t.Errorf("run %d: wal_bytes_per_cycle %v on %s", run, rep.WALBytesPerCycle, e)
			}
		}
	})
}

func TestBenchTargetsRefused(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--targets http://127.0.0.1:1", "needs --db"},
		{"--targets https://127.0.0.1:1 --db sqlite:x.db", "is not an http://host:port base URL"},
		{"--targets http://127.0.0.1:1/api --db sqlite:x.db", "is not an http://host:port base URL"},
		{"--targets http://127.0.0.1:1,http://127.0.0.1:1/ --db sqlite:x.db", "named twice"},
		{"--targets , --db sqlite:x.db", "names no instance"},
	} {
		if code, _, errOut := benchCLI(t, strings.Fields(c.args)...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: %d %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

// TestBenchRefusesUsedDatabase: a database with users, tokens and audit
// events but no operations is refused before bench writes anything: no
// checkpoint signed with its throwaway key, no tenant, no operation.
func TestBenchRefusesUsedDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		st, err := app.OpenStore(ctx, db, store.Options{MaxConns: storetest.MaxConns}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.AddUser(ctx, review.Operator("cli:test"), store.NewUser{Email: "ops@example.com", Password: "correct horse battery",
			Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateToken(ctx, review.Operator("cli:test"), "acme", "agent"); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := benchCLI(t, "--db", db, "--db-max-conns", "4", "--duration", "100ms", "--rounds", "1",
			"--bulk-batch", "0", "--reconcile-ops", "0", "--queue-ops", "0")
		if code != 2 || !strings.Contains(errOut, "already holds Limbo data") || !strings.Contains(errOut, "users") {
			t.Fatalf("bench on a database in use: %d %s", code, errOut)
		}
		for table, want := range map[string]int{"audit_checkpoints": 0, "operations": 0, "tenants": 1, "api_tokens": 1} {
			var n int
			if err := st.DB().Get(&n, `SELECT COUNT(*) FROM `+table); err != nil || n != want {
				t.Errorf("after the refusal, %s holds %d rows (%v), want %d", table, n, err, want)
			}
		}
	})
}
