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
	// Named are actions the person named by their label with Action's
	// text (web.AuditActionsNamed: "decisione" names decision.confirm,
	// …), found too; only with Action.
	Named []string
	// From and To bound the events' times; a page bounded by either is
	// read by time, newest first (page).
	From time.Time
	To   time.Time
	// Before is the keyset cursor: events after it in the page's order
	// (older ones; by time, those before its time or at it with a lower
	// seq).
	Before int64

	// actions are the trail's actions that begin with Action
	// (Store.withActions); nil until they are read.
	actions []string
}

// byTime reports whether f bounds the events' times, and so is read by
// time (page).
func (f AuditFilter) byTime() bool { return !f.From.IsZero() || !f.To.IsZero() }

// where is the filter's condition on audit_events, named e.
func (f AuditFilter) where() (string, []any) {
	conds, args := []string{}, []any{}
	for _, ts := range [][]string{f.Scope, f.tenant()} {
		c, targs := aboutTenants("e.", ts)
		conds, args = append(conds, c), append(args, targs...)
	}
	rest, rargs := f.rest()
	return strings.Join(append(conds, rest...), " AND "), append(args, rargs...)
}

// machineActors are the prefixes of the actors that act by the thousand:
// API tokens, Limbo's own workers, signed webhooks. The partial index
// audit_events_person (migration 0051, which spells them out again)
// leaves their events out.
var machineActors = []string{"token:", "system:", "webhook:"}

// personActor is that index's condition, as the migration writes it: the
// acts of people and operators. A query filtering by one of them states
// it too, or the planner may not use the index, and reads the trail from
// the newest event down instead (TestAuditPersonReadsItsIndex).
var personActor = func() string {
	var conds []string
	for _, p := range machineActors {
		conds = append(conds, "e.actor NOT LIKE '"+p+"%'")
	}
	return strings.Join(conds, " AND ")
}()

// machineActor reports whether actor is one personActor leaves out (in
// any case: SQLite's LIKE ignores it).
func machineActor(actor string) bool {
	return slices.ContainsFunc(machineActors, func(p string) bool {
		return len(actor) >= len(p) && strings.EqualFold(actor[:len(p)], p)
	})
}

// cycleActions are the actions of the three events every attempt cycle
// writes. The partial index audit_events_action (migration 0052, which
// spells them out again) leaves them out: the cycle's writes pay for no
// more index than before, and a page of them, a third of the trail each,
// fills from the newest events.
var cycleActions = []string{"operation.registered", "attempt.started", "attempt.outcome"}

// notCycleAction is that index's condition, as the migration writes it.
// A query for other actions states it too, or the planner may not use the
// index (TestAuditTimeAndActionReadTheirIndexes).
var notCycleAction = "e.action NOT IN ('" + strings.Join(cycleActions, "', '") + "')"

// actionsIn is the condition that an event's action is one of actions (at
// least one): with notCycleAction when none is a cycle's, so that their
// index serves it.
func actionsIn(actions []string) (string, []any) {
	c, args := inScope("e.action", actions)
	if !slices.ContainsFunc(actions, func(a string) bool { return slices.Contains(cycleActions, a) }) {
		c = "(" + c + " AND " + notCycleAction + ")"
	}
	return c, args
}

// tenant is the tenant filter as a list (nil: none).
func (f AuditFilter) tenant() []string {
	if f.Tenant == "" {
		return nil
	}
	return []string{f.Tenant}
}

// rest is the filter's conditions but the tenants'.
func (f AuditFilter) rest() ([]string, []any) {
	var conds []string
	var args []any
	add := func(c string, v any) { conds, args = append(conds, c), append(args, v) }
	if f.Actor != "" {
		add("e.actor = ?", f.Actor)
		if !machineActor(f.Actor) {
			conds = append(conds, personActor)
		}
	}
	if f.OperationID != "" {
		add("e.operation_id = ?", f.OperationID)
	}
	if f.Action != "" {
		// The actions the prefix matched (withActions), listed, so that
		// audit_events_action serves them (but the cycle's); none matched
		// (or none read), no event.
		if len(f.actions) == 0 {
			conds = append(conds, "1 = 0")
		} else {
			c, a := actionsIn(f.actions)
			conds, args = append(conds, c), append(args, a...)
		}
	}
	if !f.From.IsZero() {
		add("e.at >= ?", dbTime(f.From))
	}
	if !f.To.IsZero() {
		add("e.at < ?", dbTime(f.To))
	}
	switch {
	case f.Before > 0 && f.byTime():
		// Older by time: at the cursor's time or before it, and at it only
		// with a lower seq. The first condition bounds the read on
		// audit_events_at; the cursor's time is read in SQL, as stored,
		// so that SQLite compares it text to text.
		cursorAt := `(SELECT c.at FROM audit_events c WHERE c.seq = ?)`
		conds = append(conds, "e.at <= "+cursorAt, "(e.at < "+cursorAt+" OR e.seq < ?)")
		args = append(args, f.Before, f.Before, f.Before)
	case f.Before > 0:
		add("e.seq < ?", f.Before)
	}
	return conds, args
}

// tenants are the tenants f is read by, part by part (page, export):
// own, those whose own events are read from audit_events_tenant; shown,
// those whose events about users are read from audit_event_tenants. Not
// ok, f is read with the one condition (where): every tenant (no bound
// to read by), none, too many, or a tenant outside the scope (its events
// about users read by both lists).
func (f AuditFilter) tenants() (own, shown []string, ok bool) {
	own = f.Scope
	if f.Tenant != "" {
		own = []string{f.Tenant}
	}
	own = slices.Compact(slices.Sorted(slices.Values(own)))
	if len(own) == 0 || len(own) > maxTenantBranches || (f.Tenant != "" && f.Scope != nil && !slices.Contains(f.Scope, f.Tenant)) {
		return nil, nil, false
	}
	return own, append(slices.Clone(own), "*"), true
}

// restWhere is rest as one condition, true when there is none.
func (f AuditFilter) restWhere() (string, []any) {
	rest, args := f.rest()
	return strings.Join(append([]string{"1 = 1"}, rest...), " AND "), args
}

// maxTenantBranches bounds the tenants a page is read tenant by tenant
// for (page); a wider scope is read with the one condition.
const maxTenantBranches = 64

// page is the query of one page of n events, newest first. Bounded to
// tenants, it reads each tenant's own events from its index
// (audit_events_tenant), and the events about users shown to each or to
// all ("*", audit_event_tenants), newest first and n at most each, then
// the n newest of those. The one condition (aboutTenants), an OR across
// the two tables, is read from the newest event down until n match,
// which for a tenant with few events is the whole trail (a second at 5 M
// events). Each part's tenant implies the tenant conditions, so a part
// keeps only the others (rest), and the parts together hold exactly the
// events the one condition does: an event of a tenant is in its tenant's
// part; one about users (no tenant of its own) in the part of a tenant it
// is shown to. (Listed beside an event of a tenant, a row of
// audit_event_tenants is tampering, which VerifyAudit reports.)
func (f AuditFilter) page(n int, e Engine) (string, []any) {
	own, shown, ok := f.tenants()
	byTime := f.byTime()
	// Read by action when not bounded to tenants, and on SQLite when
	// bounded too: its planner then chooses between the actions' index and
	// the tenants' (through the one condition's OR), where read tenant by
	// tenant it read a tenant's every event looking for a rare action (0.15
	// s at 100,000). PostgreSQL's planner cannot read that OR from an
	// index, but chooses well tenant by tenant (TestAuditTimeAndActionReadTheirIndexes).
	if (!ok || e == SQLite) && !byTime && len(f.actions) > 0 && len(f.actions) <= maxActionBranches && len(f.Scope) <= maxTenantBranches {
		return f.byAction(n)
	}
	// newest is the page's order in a part, and across them (of the
	// columns as the parts name them).
	newest, across := "e.seq DESC", "seq DESC"
	if byTime {
		// By time, from the end of the range down (audit_events_at when
		// nothing narrower serves): the page reads no event outside the
		// range. Read by seq, an old day's page read every event since
		// (1.8 s at 10 million events). Events are written in time order
		// but where instances' clocks differ, so this is the trail's
		// order but for them.
		newest, across = "e.at DESC, e.seq DESC", "at DESC, seq DESC"
	}
	if !ok {
		w, args := f.where()
		return `SELECT ` + auditColumns + ` FROM audit_events e WHERE ` + w + ` ORDER BY ` + newest + ` LIMIT ?`, append(args, n)
	}
	w, args := f.restWhere()
	var parts []string
	var all []any
	for i, t := range own {
		parts = append(parts, fmt.Sprintf(`SELECT * FROM (SELECT %s FROM audit_events e WHERE e.tenant = ? AND %s ORDER BY %s LIMIT ?) own%d`,
			auditColumns, w, newest, i))
		all = append(append(append(all, t), args...), n)
	}
	shownNewest := newest
	if !byTime {
		// CROSS JOIN and s.seq: SQLite then reads s first, in its index's
		// order (tenant, seq); joined the other way round, it read every
		// event without a tenant (e.tenant = '') and sorted them.
		shownNewest = "s.seq DESC"
	}
	for i, t := range shown {
		parts = append(parts, fmt.Sprintf(`SELECT * FROM (SELECT %s FROM audit_event_tenants s CROSS JOIN audit_events e
WHERE e.seq = s.seq AND s.tenant = ? AND e.tenant = '' AND %s ORDER BY %s LIMIT ?) shown%d`, auditColumns, w, shownNewest, i))
		all = append(append(append(all, t), args...), n)
	}
	return `SELECT * FROM (` + strings.Join(parts, "\nUNION\n") + `) page ORDER BY ` + across + ` LIMIT ?`, append(all, n)
}

// maxActionBranches bounds the actions a page is read action by action
// for (byAction); more are read as the rest of the filter says.
const maxActionBranches = 16

// byAction is page's query for a filter by action: each action's events
// newest first from audit_events_action (a cycle's action from the newest
// event down), n at most, then the n newest of those. Read newest first
// across the trail, a page of an action nobody took lately read the whole
// trail (0.6 s at 10 million events). Each part keeps the filter's other
// conditions as the one condition (where).
func (f AuditFilter) byAction(n int) (string, []any) {
	var parts []string
	var all []any
	for i, a := range f.actions {
		one := f
		one.actions = []string{a}
		w, args := one.where()
		parts = append(parts, fmt.Sprintf(`SELECT * FROM (SELECT %s FROM audit_events e WHERE %s ORDER BY e.seq DESC LIMIT ?) action%d`, auditColumns, w, i))
		all = append(append(all, args...), n)
	}
	return `SELECT * FROM (` + strings.Join(parts, "\nUNION ALL\n") + `) page ORDER BY seq DESC LIMIT ?`, append(all, n)
}

/* Store.withActions */
// trailActions lists the trail's actions but the cycle's, in the
// database's order, one probe of audit_events_action each (a loose index
// scan: SELECT DISTINCT reads every event).
var trailActions = `WITH RECURSIVE a(action) AS (
	SELECT MIN(e.action) FROM audit_events e WHERE ` + notCycleAction + `
	UNION ALL
	SELECT (SELECT MIN(e.action) FROM audit_events e WHERE e.action > a.action AND ` + notCycleAction + `) FROM a WHERE a.action IS NOT NULL
) SELECT action FROM a WHERE action IS NOT NULL`

// withActions is f with the trail's actions that begin with f.Action (the
// cycle's whether or not the trail holds them yet), matched here rather
// than by LIKE: a prefix then means the same on both engines whatever it
// holds (LIKE minds case on PostgreSQL, not on SQLite, and reads "_" as
// any character), and the query lists the actions, which their index
// serves. Actions are lower case; so is the prefix, so "Decision" finds
// decision.confirm. The actions f.Named are found too.
func (s *Store) withActions(ctx context.Context, f AuditFilter) (AuditFilter, error) {
	if f.Action == "" {
		return f, nil
	}
	var all []string
	if err := s.db.SelectContext(ctx, &all, trailActions); err != nil {
		return f, fmt.Errorf("store: the trail's actions: %w", err)
	}
	// The cycle's, which any trail past its first cycle holds.
	all = append(all, cycleActions...)
	prefix := strings.ToLower(f.Action)
	f.actions = []string{}
	for _, a := range all {
		if strings.HasPrefix(a, prefix) || slices.Contains(f.Named, a) {
			f.actions = append(f.actions, a)
		}
	}
	return f, nil
}

// aboutTenants is the one condition that bounds audit reads to tenants
// (review.Scope.List: nil means all, an empty list none): an event is about
// its own tenant, or, if it is about a console user (which names none),
// about the tenants the user had or has, and about every tenant when that
// is all of them (appendUserEvent).
//
// e is how the query names audit_events ("e." or "").
func aboutTenants(e string, tenants []string) (string, []any) {
	own, args := inScope(e+"tenant", tenants)
	if len(tenants) == 0 {
		return own, args
	}
	listed, largs := inScope("tenant", append(slices.Clone(tenants), "*"))
	return "(" + own + " OR " + e + "seq IN (SELECT seq FROM audit_event_tenants WHERE " + listed + "))", append(args, largs...)
}

// auditColumns are an event's columns, of audit_events named e.
const auditColumns = `e.seq, e.txid, e.at, e.actor, e.tenant, e.operation_id, e.action, e.from_state, e.to_state, e.detail, e.hash`

// SearchAudit returns up to limit events, newest first (by time when f
// bounds it), and the cursor of the next page (0 at the end).
func (s *Store) SearchAudit(ctx context.Context, f AuditFilter, limit int) ([]AuditEvent, int64, error) {
	f, err := s.withActions(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("store.SearchAudit: %w", err)
	}
	q, args := f.page(limit+1, s.engine)
	var evs []AuditEvent
	if err := s.db.SelectContext(ctx, &evs, s.rebind(q), args...); err != nil {
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

// export is the query of every event f matches, oldest first (for
// EachAudit): page's parts, unbounded, merged in one order. The one
// condition read the whole trail however few of its events the reader's
// tenants have (a second at 5 M events for none at all). Here each
// tenant's own events come from its index, and the events about users
// shown to any of them or to all, each once, from audit_event_tenants.
func (f AuditFilter) export() (string, []any) {
	// The page's order, oldest first: in one query, and across parts.
	oldest, across := "e.seq", "seq"
	if f.byTime() {
		oldest, across = "e.at, e.seq", "at, seq"
	}
	own, shown, ok := f.tenants()
	if !ok {
		w, args := f.where()
		return `SELECT ` + auditColumns + ` FROM audit_events e WHERE ` + w + ` ORDER BY ` + oldest, args
	}
	w, rargs := f.restWhere()
	var parts []string
	var args []any
	for _, t := range own {
		parts = append(parts, `SELECT `+auditColumns+` FROM audit_events e WHERE e.tenant = ? AND `+w)
		args = append(append(args, t), rargs...)
	}
	listed, largs := inScope("s.tenant", shown)
	parts = append(parts, `SELECT `+auditColumns+` FROM audit_events e
WHERE e.tenant = '' AND e.seq IN (SELECT s.seq FROM audit_event_tenants s WHERE `+listed+`) AND `+w)
	args = append(append(args, largs...), rargs...)
	return strings.Join(parts, "\nUNION ALL\n") + "\nORDER BY " + across, args
}

// EachAudit streams every matching event, oldest first, to fn (for CSV
// export) without holding them all in memory.
func (s *Store) EachAudit(ctx context.Context, f AuditFilter, fn func(AuditEvent) error) error {
	f, err := s.withActions(ctx, f)
	if err != nil {
		return fmt.Errorf("store.EachAudit: %w", err)
	}
	q, args := f.export()
	rows, err := s.db.QueryxContext(ctx, s.rebind(q), args...)
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
