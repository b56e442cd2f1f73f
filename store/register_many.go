package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// Bulk intake: many registrations in one call (POST /operations/batch).
//
// Each registration is planned exactly as Register plans it and answers
// what Register would: created, the stored operation for the same
// intention, or its own error (a planning error, a payload mismatch) that
// leaves its neighbours alone. What changes is the write: the batch's new
// keys are inserted with their audit events in one transaction — on
// PostgreSQL one statement over arrays, one round trip however long the
// batch — instead of one group commit each. A key that already exists takes
// Register's own comparison afterwards (registerTakenTx), and a
// registration that opens an approval case or waits for another operation
// takes Register whole, so refusals, cases and dependencies keep their one
// implementation.

// MaxRegisterMany bounds one batch.
const MaxRegisterMany = 1000

// Registered is one registration's answer in a batch: the operation and
// whether this call created it, or the error that refused it.
type Registered struct {
	Op      *review.Operation
	Created bool
	Err     error
}

const (
	/* Store.RegisterMany (PostgreSQL): the batch's new keys and their audit
	   events, one statement. The arrays are parallel, one element per
	   registration; ON CONFLICT skips a key that exists, or that an earlier
	   element of the same batch took. Rows are inserted in key order, so
	   two batches sharing keys wait for each other instead of deadlocking:
	   the bytes' order (COLLATE "C"), the fast path's (batch.go, lockOrder),
	   whatever the database's collation.
	   The hash is limbo_event_hash, as appendEvent's. */
	insertOperationsMany = `
WITH i AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
        $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[])
    WITH ORDINALITY AS i(id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
        payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget,
        ev_action, ev_from, ev_detail, ev_hash, actor, ord)
), o AS (
    INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
        payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
        attempt_count, version, created_at, updated_at)
    SELECT id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
        payload, payload_hash, state, state_reason, deadline::timestamp, max_attempts::integer,
        cost_budget::double precision, 0, 0, 1, $22::timestamp, $22::timestamp
    FROM i ORDER BY tenant COLLATE "C", key COLLATE "C", ord
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING id
)
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
SELECT q.seq, pg_current_xact_id()::text::bigint, $22::timestamp, q.actor, q.tenant, q.id, q.ev_action, q.ev_from,
    q.state, q.ev_detail, limbo_event_hash(q.seq, q.ev_hash)
FROM (SELECT nextval('audit_events_seq') AS seq, i.* FROM i JOIN o USING (id) ORDER BY i.ord) q
RETURNING operation_id`
)

// RegisterMany registers rs, at most MaxRegisterMany, as Register would
// one by one, and answers each in order. The error is for the call as a
// whole (the database): registrations before it may have been recorded,
// and repeating the call is safe — a recorded one answers as the same
// intention.
func (s *Store) RegisterMany(ctx context.Context, rs []review.Registration) ([]Registered, error) {
	if len(rs) > MaxRegisterMany {
		return nil, fmt.Errorf("store.RegisterMany: %d registrations, at most %d", len(rs), MaxRegisterMany)
	}
	now := s.now()
	out := make([]Registered, len(rs))
	plans := make([]*review.RegistrationPlan, len(rs))
	var (
		bulk   []int // the registrations the bulk write may create
		inBulk = make([]bool, len(rs))
		alone  = map[[2]string]bool{} // keys a registration written alone uses
	)
	for i, r := range rs {
		p, err := review.PlanRegistration(r, s.cfg, now)
		if err != nil {
			op, rerr := s.repeatDespitePolicy(ctx, err)
			switch {
			case rerr != nil:
				return nil, fmt.Errorf("store.RegisterMany: %w", rerr)
			case op != nil:
				out[i] = Registered{Op: op}
			default:
				out[i].Err = err
			}
			continue
		}
		if err := s.knownTenant(ctx, p.Registration.Tenant, now); err != nil {
			return nil, fmt.Errorf("store.RegisterMany: %w", err)
		}
		plans[i] = p
		// A key an earlier registration of the batch writes alone stays
		// with it: the bulk write commits first, and would take the key
		// out of order.
		k := [2]string{p.Registration.Tenant, p.Registration.Key}
		if bulkable(p) && !alone[k] {
			bulk, inBulk[i] = append(bulk, i), true
		} else {
			alone[k] = true
		}
	}
	rows, err := s.insertMany(ctx, plans, bulk, now)
	if err != nil {
		return nil, fmt.Errorf("store.RegisterMany: %w", err)
	}
	// The others in order, one by one, as Register takes them.
	for i, p := range plans {
		switch {
		case p == nil:
		case rows[i] != nil:
			op := rows[i].operation()
			s.snaps.put(&snapshot{op: op})
			out[i] = Registered{Op: copyOperation(op), Created: true}
			s.fastHits.Add(1)
		default:
			r, err := s.registerAlone(ctx, p, !inBulk[i], now)
			if err != nil {
				return nil, fmt.Errorf("store.RegisterMany: %w", err)
			}
			out[i] = r
		}
	}
	return out, nil
}

// registerAlone answers a registration of a batch that the bulk write did
// not create: written as Register writes it (when write), then, if its key
// was taken, compared with the operation holding it. Only a database
// failure is an error; the registration's own refusal is in the answer.
func (s *Store) registerAlone(ctx context.Context, p *review.RegistrationPlan, write bool, now time.Time) (Registered, error) {
	if write {
		op, err := s.registerFast(ctx, p, now)
		if errors.Is(err, review.ErrInvalid) { // the dependency it names
			return Registered{Err: err}, nil
		}
		if err != nil || op != nil {
			return Registered{Op: op, Created: op != nil}, err
		}
	}
	// The key was taken, before this call or by an earlier registration of
	// it: Register's comparison decides.
	s.fastMisses.Add(1)
	taken, err := inTx(ctx, s, func(tx *sqlx.Tx) (keyTaken, error) { return s.registerTakenTx(ctx, tx, p, now) })
	if err != nil {
		return Registered{}, err
	}
	if taken.plan.Mismatch != nil {
		return Registered{Err: taken.plan.Mismatch}, nil
	}
	op, err := s.loadDetails(ctx, s.db, taken.op)
	return Registered{Op: op}, err
}

// insertMany writes the operations of plans[i] for i in idx whose key is
// free, with their audit events, in one transaction; the answer holds the
// row of each one written, by index, nil for the others.
func (s *Store) insertMany(ctx context.Context, plans []*review.RegistrationPlan, idx []int, now time.Time) ([]*opRow, error) {
	type item struct {
		i   int
		row opRow
		ev  *AuditEvent
	}
	items := make([]item, 0, len(idx))
	for _, i := range idx {
		row, ev := registrationRow(plans[i], now)
		items = append(items, item{i: i, row: row, ev: ev})
	}
	written, err := inTx(ctx, s, func(tx *sqlx.Tx) (map[string]bool, error) {
		if len(items) == 0 {
			return nil, nil
		}
		written := make(map[string]bool, len(items))
		if s.engine == Postgres {
			cols := make([]textArray, 21)
			for c := range cols {
				cols[c] = make(textArray, len(items))
			}
			for k, it := range items {
				r := &it.row
				for c, v := range []any{r.ID, r.Tenant, r.Key, r.SourceRef, r.LogicalVersion, r.Action, r.Destination,
					r.Risk, r.Flags, r.Payload, r.PayloadHash, r.State, r.StateReason, r.Deadline, r.MaxAttempts,
					nullFloat(r.CostBudget), it.ev.Action, it.ev.FromState, it.ev.Detail, ContentHash(it.ev), it.ev.Actor} {
					t, err := textArg(v)
					if err != nil {
						return nil, err
					}
					cols[c][k] = t
				}
			}
			args := make([]any, 0, 22)
			for _, c := range cols {
				args = append(args, c)
			}
			var ids []string
			if err := tx.SelectContext(ctx, &ids, insertOperationsMany, append(args, now)...); err != nil {
				return nil, err
			}
			for _, id := range ids {
				written[id] = true
			}
			return written, nil
		}
		// SQLite: Register's own statements, each made multi-row (manyRows),
		// in key order. One statement per chunk, not per registration: every
		// statement opens a savepoint, and at each one the search index
		// (FTS5) flushes what it holds to disk.
		sorted := slices.Clone(items)
		slices.SortStableFunc(sorted, func(a, b item) int {
			return cmp.Or(cmp.Compare(a.row.Tenant, b.row.Tenant), cmp.Compare(a.row.Key, b.row.Key))
		})
		for chunk := range slices.Chunk(sorted, sqliteChunk) {
			args := make([]any, 0, len(chunk)*len(insertOperation.params))
			for _, it := range chunk {
				a := it.row.insertArgs()
				args = append(args, insertOperation.bind(&a)...)
			}
			var ids []string
			if err := tx.SelectContext(ctx, &ids, manyRows(insertOperation.query, len(chunk))+" RETURNING id", args...); err != nil {
				return nil, err
			}
			for _, id := range ids {
				written[id] = true
			}
		}
		// The events of those written, in the same order; seq as
		// appendEvent numbers it, one after the other.
		var seq int64
		if err := s.get(ctx, tx, &seq, nextSeqSQLite); err != nil {
			return nil, err
		}
		var evs []*AuditEvent
		for _, it := range sorted {
			if written[it.row.ID] {
				it.ev.Seq, seq = seq, seq+1
				it.ev.Hash = EventHash(it.ev)
				evs = append(evs, it.ev)
			}
		}
		for chunk := range slices.Chunk(evs, sqliteChunk) {
			args := make([]any, 0, len(chunk)*10)
			for _, e := range chunk {
				args = append(args, e.Seq, e.At, e.Actor, e.Tenant, e.OperationID, e.Action, e.FromState, e.ToState, e.Detail, e.Hash)
			}
			if _, err := tx.ExecContext(ctx, manyRows(insertEventSQLite, len(chunk)), args...); err != nil {
				return nil, err
			}
		}
		return written, nil
	})
	if err != nil {
		return nil, err
	}
	rows := make([]*opRow, len(plans))
	for _, it := range items {
		if written[it.row.ID] {
			rows[it.i] = &it.row
		}
	}
	return rows, nil
}

// bulkable: p may be written by the bulk statement. An approval case or a
// dependency is written beside the operation by Register's transaction.
func bulkable(p *review.RegistrationPlan) bool {
	return p.Approval == nil && p.Registration.After == nil
}

// sqliteChunk bounds the rows of one SQLite statement: 18 arguments each
// stay far below its limit of 32,766.
const sqliteChunk = 500

// manyRows is q, an INSERT of one row, inserting n: its VALUES tuple
// repeated. The statement stays the one written for a single row.
func manyRows(q string, n int) string {
	start := strings.Index(q, "VALUES (") + len("VALUES ")
	end := start + strings.Index(q[start:], ")") + 1 // the tuples hold no parentheses
	return q[:end] + strings.Repeat(", "+q[start:end], n-1) + q[end:]
}

// nullFloat is f for textArg: nil when NULL.
func nullFloat(f sql.NullFloat64) any {
	if !f.Valid {
		return nil
	}
	return f.Float64
}
