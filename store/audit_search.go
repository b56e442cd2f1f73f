package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// AuditFilter selects audit events.
type AuditFilter struct {
	// Scope limits tenants (nil: all, and tenant-less events too): the
	// events about them (aboutTenants).
	Scope []string
	Actor string
	// Tenant is one tenant: the events about it (aboutTenants).
	Tenant      string
	OperationID string
	// Action matches a prefix: "decision" finds decision.confirm, …
	Action string
	From   time.Time
	To     time.Time
	// Before is the keyset cursor: events with a lower seq.
	Before int64
}

func (f AuditFilter) where() (string, []any) {
	scope, args := aboutTenants(f.Scope)
	conds := []string{scope}
	add := func(c string, v any) { conds, args = append(conds, c), append(args, v) }
	if f.Actor != "" {
		add("actor = ?", f.Actor)
	}
	if f.Tenant != "" {
		c, targs := aboutTenants([]string{f.Tenant})
		conds, args = append(conds, c), append(args, targs...)
	}
	if f.OperationID != "" {
		add("operation_id = ?", f.OperationID)
	}
	if f.Action != "" {
		// Actions are lower case: the prefix is too, so that "Decision"
		// finds the same events on PostgreSQL (LIKE minds case) as on
		// SQLite (LIKE ignores ASCII case).
		add("action LIKE ?", strings.ToLower(strings.ReplaceAll(f.Action, "%", ""))+"%")
	}
	if !f.From.IsZero() {
		add("at >= ?", dbTime(f.From))
	}
	if !f.To.IsZero() {
		add("at < ?", dbTime(f.To))
	}
	if f.Before > 0 {
		add("seq < ?", f.Before)
	}
	return strings.Join(conds, " AND "), args
}

// aboutTenants is the one condition that bounds audit reads to tenants
// (review.Scope.List: nil means all, an empty list none): an event is about
// its own tenant, or, if it is about a console user (which names none),
// about the tenants the user had or has, and about every tenant when that
// is all of them (appendUserEvent).
func aboutTenants(tenants []string) (string, []any) {
	own, args := inScope("tenant", tenants)
	if len(tenants) == 0 {
		return own, args
	}
	listed, largs := inScope("tenant", append(slices.Clone(tenants), "*"))
	return "(" + own + " OR seq IN (SELECT seq FROM audit_event_tenants WHERE " + listed + "))", append(args, largs...)
}

const auditColumns = `seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash`

// SearchAudit returns up to limit events, newest first, and the cursor of
// the next page (0 at the end).
func (s *Store) SearchAudit(ctx context.Context, f AuditFilter, limit int) ([]AuditEvent, int64, error) {
	w, args := f.where()
	var evs []AuditEvent
	q := `SELECT ` + auditColumns + ` FROM audit_events WHERE ` + w + ` ORDER BY seq DESC LIMIT ?`
	if err := s.db.SelectContext(ctx, &evs, s.rebind(q), append(args, limit+1)...); err != nil {
		return nil, 0, fmt.Errorf("store.SearchAudit: %w", err)
	}
	var next int64
	if len(evs) > limit {
		evs = evs[:limit]
		next = evs[limit-1].Seq
	}
	for i := range evs {
		evs[i].At = evs[i].At.UTC()
	}
	return evs, next, nil
}

// EachAudit streams every matching event, oldest first, to fn (for CSV
// export) without holding them all in memory.
func (s *Store) EachAudit(ctx context.Context, f AuditFilter, fn func(AuditEvent) error) error {
	w, args := f.where()
	rows, err := s.db.QueryxContext(ctx, s.rebind(`SELECT `+auditColumns+` FROM audit_events WHERE `+w+` ORDER BY seq`), args...)
	if err != nil {
		return fmt.Errorf("store.EachAudit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e AuditEvent
		if err := rows.StructScan(&e); err != nil {
			return fmt.Errorf("store.EachAudit: %w", err)
		}
		e.At = e.At.UTC()
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// RecordReveal audits that actor looked at op's redacted payload fields.
func (s *Store) RecordReveal(ctx context.Context, op *review.Operation, actor string) error {
	return s.WithTx(ctx, func(tx *sqlx.Tx) error {
		return s.appendEvent(ctx, tx, &AuditEvent{Actor: actor, Tenant: op.Tenant, OperationID: op.ID, Action: "payload.revealed"})
	})
}
