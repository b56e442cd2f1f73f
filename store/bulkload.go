package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/limbo-dev/limbo/review"
)

// BulkLoad fills an empty database quickly for benchmarks: n operations
// spread over 10 tenants and 5 destinations, the first open of them in
// review with an open case each (reasons and priorities spread), the rest
// confirmed with a resource ref ('file-N.pdf'; the open ones have none
// yet), and the operation.registered audit event of each, hashed as every
// event is (bulkAudit), so that the audit page and its export are timed
// over a trail as long as the ledger.
func (s *Store) BulkLoad(ctx context.Context, n, open int) error {
	if open > n {
		return fmt.Errorf("store.BulkLoad: open (%d) > operations (%d)", open, n)
	}
	reasons := make([]string, len(allReasons))
	for i, r := range allReasons {
		reasons[i] = "'" + string(r) + "'"
	}
	// One statement per table, the rows generated in the database; on
	// SQLite one per bulkChunk rows, whose memory grows with the rows of
	// the statement (478 MB of RSS for 1,000,000 in one, 4.7 GB for ten).
	series, pad, ts, ago := "generate_series(%d, %d) AS g(x)", "lpad(x::text, 10, '0')", "now() AT TIME ZONE 'UTC'", "(x || ' seconds')::interval"
	reasonExpr := "(ARRAY[" + strings.Join(reasons, ",") + "])[1 + x %% 11]"
	if s.engine == SQLite {
		series = "(WITH RECURSIVE g(x) AS (SELECT %d UNION ALL SELECT x + 1 FROM g WHERE x < %d) SELECT x FROM g)"
		// Times as the driver writes a time.Time (_time_format=sqlite):
		// "2006-01-02 15:04:05+00:00", fractions trimmed, zone appended.
		// Timestamps are compared as text on SQLite, so another form
		// (no zone, say) sorts apart from the times bound as arguments,
		// and the browser's keyset cursor would repeat rows. Whole
		// seconds: no fraction to trim.
		pad, ts = "printf('%%010d', x)", "(strftime('%%Y-%%m-%%d %%H:%%M:%%S', 'now') || '+00:00')"
		ago = ""
		reasonExpr = "CASE x %% 11 " + caseList(reasons) + " END"
	}
	opened := ts
	if ago != "" {
		opened = "(" + ts + " - " + ago + ")"
	} else {
		opened = "(strftime('%%Y-%%m-%%d %%H:%%M:%%S', 'now', '-' || x || ' seconds') || '+00:00')"
	}
	// chunks splits rows 0 … count-1 into the statement q's ranges, q
	// ending in a series (two %d: its first and last row).
	chunks := func(q string, count int, qargs ...any) []string {
		size := count
		if s.engine == SQLite {
			size = bulkChunk
		}
		var out []string
		for lo := 0; lo < count; lo += size {
			out = append(out, fmt.Sprintf(q, append(qargs, lo, min(lo+size, count)-1)...))
		}
		return out
	}
	stmts := []string{
		fmt.Sprintf(`INSERT INTO tenants (name, created_at) SELECT 'bench-' || x, `+ts+` FROM `+series+` WHERE 1 = 1 ON CONFLICT (name) DO NOTHING`, 0, 9), // WHERE: SQLite's upsert-after-SELECT rule
	}
	stmts = append(stmts, chunks(`INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
    payload, payload_hash, state, state_reason, resource_ref, deadline, max_attempts, cost_spent, attempt_count, version, created_at, updated_at)
SELECT 'op_bench' || `+pad+`, 'bench-' || (x %% 10), 'key-' || x, 'src-' || x, '1', 'render', 'dest-' || (x %% 5),
    'compensable_write', '', '{"bench":true}', 'hash', CASE WHEN x < %d THEN 'needs_review' ELSE 'confirmed' END,
    'bench', CASE WHEN x < %d THEN NULL ELSE 'file-' || x || '.pdf' END, `+ts+`, 5, 0, 1, 1, `+opened+`, `+ts+`
FROM `+series, n, open, open)...)
	if open > 0 {
		stmts = append(stmts, chunks(`INSERT INTO cases (id, tenant, operation_id, status, reasons, reason_bits, priority, recommended_action,
    recommended_ref, rationale, destination, action, flags, opened_at, version)
SELECT 'case_bench' || `+pad+`, 'bench-' || (x %% 10), 'op_bench' || `+pad+`, 'open', `+reasonExpr+`, 1 << (x %% 11), x %% 100,
    'reconcile_again', '', 'bench', 'dest-' || (x %% 5), 'render', '', `+opened+`, 1
FROM `+series, open)...)
	}
	// The queue's counts, recounted from scratch: bulk rows bypass openCase.
	stmts = append(stmts, `DELETE FROM open_case_counts`, recountOpenCases)
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("store.BulkLoad: %w", err)
		}
	}
	if err := s.bulkAudit(ctx, n); err != nil {
		return fmt.Errorf("store.BulkLoad: %w", err)
	}
	// Statistics for the planner; on PostgreSQL also the visibility map,
	// which autovacuum would set on a real ledger in time, and without
	// which the browser's index-only counts read the table too. Only
	// these tables: the server may hold other schemas.
	stats := `ANALYZE`
	if s.engine == Postgres {
		stats = `VACUUM (ANALYZE) tenants, operations, cases, open_case_counts, audit_events`
	}
	_, err := s.db.ExecContext(ctx, stats)
	return err
}

// bulkChunk is how many rows one of BulkLoad's statements writes on
// SQLite.
const bulkChunk = 100_000

const (
	// auditChunk is how many events one of bulkAudit's transactions
	// writes. On PostgreSQL the sealer cuts a checkpoint only at a
	// transaction's end: a bigger one would be sealed whole, past
	// sealBatch's bound on its memory.
	auditChunk = 10_000
	// auditRowsSQLite is how many events one SQLite statement inserts
	// (11 parameters each, under its limit of 32,766).
	auditRowsSQLite = 2_000
)

/*
Store.bulkAudit (PostgreSQL): the hash finished as appendEvent's, from

	the content hashed in Go, seqs drawn in the events' order.
*/
const insertBulkEvents = `
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
SELECT q.seq, pg_current_xact_id()::text::bigint, q.at, $1, q.tenant, q.op, $2, '', $3, '{}', limbo_event_hash(q.seq, q.h)
FROM (SELECT nextval('audit_events_seq') AS seq, u.*
      FROM unnest($4::timestamp[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS u(at, tenant, op, h, ord)
      ORDER BY u.ord) q`

// bulkAudit writes the operation.registered event of each of BulkLoad's n
// operations, oldest first (operation x was registered x seconds before
// the load, in whole seconds), hashed as appendEvent hashes, so that the
// trail verifies and the sealer seals it like any other.
func (s *Store) bulkAudit(ctx context.Context, n int) error {
	const actor, action, to = "system:bench", "operation.registered", string(review.Pending)
	now := s.now().UTC().Truncate(time.Second)
	for hi := n; hi > 0; hi -= auditChunk {
		var evs []AuditEvent
		for x := hi - 1; x >= max(hi-auditChunk, 0); x-- {
			evs = append(evs, AuditEvent{At: now.Add(-time.Duration(x) * time.Second), Actor: actor, Tenant: fmt.Sprintf("bench-%d", x%10),
				OperationID: fmt.Sprintf("op_bench%010d", x), Action: action, ToState: to, Detail: "{}"})
		}
		if s.engine == Postgres {
			ats, tenants, ops, hashes := make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs))
			for i, e := range evs {
				ats[i], tenants[i], ops[i], hashes[i] = e.At.Format("2006-01-02 15:04:05"), e.Tenant, e.OperationID, ContentHash(&e)
			}
			if _, err := s.db.ExecContext(ctx, insertBulkEvents, actor, action, to,
				pq.StringArray(ats), pq.StringArray(tenants), pq.StringArray(ops), pq.StringArray(hashes)); err != nil {
				return err
			}
			continue
		}
		err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
			var seq int64
			if err := tx.GetContext(ctx, &seq, nextSeqSQLite); err != nil {
				return err
			}
			for lo := 0; lo < len(evs); lo += auditRowsSQLite {
				rows := evs[lo:min(lo+auditRowsSQLite, len(evs))]
				var q strings.Builder
				q.WriteString(`INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash) VALUES `)
				args := make([]any, 0, 11*len(rows))
				for i := range rows {
					e := &rows[i]
					e.Seq, seq = seq, seq+1
					if i > 0 {
						q.WriteString(", ")
					}
					q.WriteString("(?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
					args = append(args, e.Seq, e.At, e.Actor, e.Tenant, e.OperationID, e.Action, e.FromState, e.ToState, e.Detail, EventHash(e))
				}
				if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func caseList(vals []string) string {
	var b strings.Builder
	for i, v := range vals {
		fmt.Fprintf(&b, "WHEN %d THEN %s ", i, v)
	}
	return b.String()
}

// ForgetPlannerStatistics drops SQLite's planner statistics, which
// BulkLoad gathers, and closes the idle connections so that none plans
// with them: a database serve made has none, since serve never runs
// ANALYZE, and limbo bench --no-planner-stats times the pages so.
// PostgreSQL's statistics are its autovacuum's, there in production too:
// left as they are.
func (s *Store) ForgetPlannerStatistics(ctx context.Context) error {
	if s.engine != SQLite {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `DROP TABLE IF EXISTS sqlite_stat1; DROP TABLE IF EXISTS sqlite_stat4`); err != nil {
		return fmt.Errorf("store: dropping the planner's statistics: %w", err)
	}
	n := s.db.Stats().MaxOpenConnections
	s.db.SetMaxIdleConns(0)
	s.db.SetMaxIdleConns(n)
	return nil
}
