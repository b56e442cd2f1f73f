package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// AuditEvent is one append-only record of a state change, decision, login
// or admin act.
type AuditEvent struct {
	Seq         int64     `json:"seq" db:"seq"`
	TxID        int64     `json:"-" db:"txid"`
	At          time.Time `json:"at" db:"at"`
	Actor       string    `json:"actor" db:"actor"`
	Tenant      string    `json:"tenant,omitempty" db:"tenant"`
	OperationID string    `json:"operation_id,omitempty" db:"operation_id"`
	Action      string    `json:"action" db:"action"`
	FromState   string    `json:"from_state,omitempty" db:"from_state"`
	ToState     string    `json:"to_state,omitempty" db:"to_state"`
	// Detail is a JSON object with whatever else explains the event.
	Detail string `json:"detail" db:"detail"`
	Hash   string `json:"hash" db:"hash"`

	// ShownTo is read by VerifyAudit only, for an event without a tenant
	// of its own: the tenants audit_event_tenants shows it to, sorted and
	// comma-joined (nil: none). Not part of the event: its detail names
	// them (shown_to, appendUserEvent), under its hash.
	ShownTo *string `json:"-" db:"shown_to"`
}

// EventHash is the hash stored with an event: SHA-256 over "seq:" and the
// hash of its content (ContentHash), so a row that is edited or moved to
// another seq no longer matches it. The two steps let PostgreSQL finish the
// hash in the INSERT that draws seq from the sequence (one round trip): Go
// hashes the content, SQL adds the seq. Exported for tools that write
// events without the store (the bench floors).
func EventHash(e *AuditEvent) string {
	return hashWithSeq(e.Seq, ContentHash(e))
}

func hashWithSeq(seq int64, contentHash string) string {
	sum := sha256.Sum256([]byte(strconv.FormatInt(seq, 10) + ":" + contentHash))
	return hex.EncodeToString(sum[:])
}

// ContentHash is the SHA-256 of an event's content without its seq.
// encoding/json marshals struct fields in declaration order: stable bytes.
func ContentHash(e *AuditEvent) string {
	content := struct {
		At          string `json:"at"`
		Actor       string `json:"actor"`
		Tenant      string `json:"tenant"`
		OperationID string `json:"operation_id"`
		Action      string `json:"action"`
		FromState   string `json:"from_state"`
		ToState     string `json:"to_state"`
		Detail      string `json:"detail"`
	}{e.At.UTC().Format(time.RFC3339Nano), e.Actor, e.Tenant, e.OperationID, e.Action, e.FromState, e.ToState, e.Detail}
	b, _ := json.Marshal(content)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// detailJSON marshals an event detail; a map marshals with sorted keys.
func detailJSON(v any) string {
	if v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// plannedEvent is e, an event a review plan records, as actor's at at on
// tenant's operation opID.
func plannedEvent(e review.PlannedEvent, at time.Time, actor, tenant, opID string) *AuditEvent {
	var detail any
	if e.Detail != nil {
		detail = e.Detail
	}
	return &AuditEvent{At: at, Actor: actor, Tenant: tenant, OperationID: opID, Action: e.Action,
		FromState: string(e.From), ToState: string(e.To), Detail: detailJSON(detail)}
}

const (
	/* Store.appendEvent: SQLite has one writer, so max+1 inside the write transaction is gap-free. */
	nextSeqSQLite = `SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events`
	/* Store.appendEvent */
	insertEventSQLite = `
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// appendEvent writes e inside tx, the transaction that makes the change it
// records. It fills Seq, At (when zero) and Hash.
func (s *Store) appendEvent(ctx context.Context, tx *sqlx.Tx, e *AuditEvent) error {
	if e.At.IsZero() {
		e.At = s.now()
	}
	e.At = dbTime(e.At)
	if e.Detail == "" {
		e.Detail = "{}"
	}
	if s.engine == Postgres {
		var r struct {
			Seq  int64  `db:"seq"`
			Hash string `db:"hash"`
		}
		var a args
		a.event(e)
		if err := s.get(ctx, tx, &r, insertEventReturning, insertEventPostgres.bind(&a)...); err != nil {
			return fmt.Errorf("store.appendEvent: %w", err)
		}
		e.Seq, e.Hash = r.Seq, r.Hash
		return nil
	}
	if err := s.get(ctx, tx, &e.Seq, nextSeqSQLite); err != nil {
		return fmt.Errorf("store.appendEvent: seq: %w", err)
	}
	e.Hash = EventHash(e)
	if _, err := s.exec(ctx, tx, insertEventSQLite, e.Seq, e.At, e.Actor, e.Tenant, e.OperationID, e.Action,
		e.FromState, e.ToState, e.Detail, e.Hash); err != nil {
		return fmt.Errorf("store.appendEvent: %w", err)
	}
	return nil
}

/* Store.appendUserEvent */
const insertEventTenant = `INSERT INTO audit_event_tenants (seq, tenant) VALUES (?, ?)`

// appendUserEvent writes e, an event about a console user, inside tx, and
// beside it the tenants the user's scopes name (audit_event_tenants; "*"
// for all tenants): pass the scope before and after a change. The event
// has no tenant of its own, and is seen by every reader whose scope holds
// one of those tenants (aboutTenants), so a tenant's manager reads who was
// given or lost access to it. The event's detail names the same tenants
// (shown_to), under its hash, so VerifyAudit finds a list edited since:
// a tenant struck off hides the event from that tenant's managers.
func (s *Store) appendUserEvent(ctx context.Context, tx *sqlx.Tx, e *AuditEvent, scopes ...review.Scope) error {
	if !userEventActions[e.Action] {
		return fmt.Errorf("store.appendUserEvent: %s is not listed in userEventActions", e.Action)
	}
	tenants := []string{}
	for _, sc := range scopes {
		if sc.All {
			tenants = append(tenants, "*")
		}
		// An unreadable scope names none: the event stays for readers
		// of every tenant, as the user does (review.Principal.SeesUser).
		tenants = append(tenants, sc.Tenants...)
	}
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	e.Detail = withShownTo(e.Detail, tenants)
	if err := s.appendEvent(ctx, tx, e); err != nil {
		return err
	}
	for _, t := range tenants {
		if _, err := s.exec(ctx, tx, insertEventTenant, e.Seq, t); err != nil {
			return fmt.Errorf("store.appendUserEvent: %w", err)
		}
	}
	return nil
}

// userEventActions are the actions of the events about console users
// (appendUserEvent writes no other): the only events that may be shown to
// tenants beside their own (audit_event_tenants), since migration 0042.
// VerifyAudit reports rows there beside any other event, even one written
// before its detail named them (shown_to). An action leaves this list
// only with the events written under it.
var userEventActions = map[string]bool{
	"user.added": true, "user.changed": true, "user.password_reset": true, "user.language": true,
	"login.succeeded": true, "login.failed": true, "logout": true,
}

// detailShownTo is the detail's key naming the tenants a user event is
// shown to (appendUserEvent).
const detailShownTo = "shown_to"

// withShownTo is detail with the tenants it is shown to added.
func withShownTo(detail string, tenants []string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(detail), &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m[detailShownTo], _ = json.Marshal(tenants)
	return detailJSON(m)
}

// shownTo is the tenants detail says its event is shown to, comma-joined
// (as ShownTo), and whether it says so at all: events written before it
// did list their tenants beside them only.
func shownTo(detail string) (string, bool) {
	if !strings.Contains(detail, `"`+detailShownTo+`"`) {
		return "", false // most events: no need to parse
	}
	var d map[string]json.RawMessage
	var tenants []string
	if json.Unmarshal([]byte(detail), &d) != nil || d[detailShownTo] == nil || json.Unmarshal(d[detailShownTo], &tenants) != nil {
		return "", false
	}
	return strings.Join(tenants, ","), true
}

const (
	/* Store.OperationHistory */
	selectOperationEvents = `
SELECT seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash
FROM audit_events WHERE operation_id = ? ORDER BY seq`
	/* Store.AuditEvents */
	selectEventsAfter = `
SELECT seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash
FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`
)

// OperationHistory returns an operation's audit events in order.
func (s *Store) OperationHistory(ctx context.Context, opID string) ([]AuditEvent, error) {
	var evs []AuditEvent
	if err := s.db.SelectContext(ctx, &evs, s.rebind(selectOperationEvents), opID); err != nil {
		return nil, fmt.Errorf("store.OperationHistory: %w", err)
	}
	return evs, nil
}

// AuditEvents returns up to limit events after seq, in order.
func (s *Store) AuditEvents(ctx context.Context, after int64, limit int) ([]AuditEvent, error) {
	var evs []AuditEvent
	if err := s.db.SelectContext(ctx, &evs, s.rebind(selectEventsAfter), after, limit); err != nil {
		return nil, fmt.Errorf("store.AuditEvents: %w", err)
	}
	return evs, nil
}
