package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
)

// Outbound webhook retry policy: a failed delivery waits base·2^(n-1),
// capped, with jitter, and a message still undelivered once
// WebhookGiveUpAfter has passed since it was enqueued (or delivered again
// by an admin: RedeliverWebhookMessages) is marked failed.
// With these figures a receiver that stays down gets 21–33 tries over three
// days (25 at the mean jitter), the first ten within 4–9 hours and the rest
// 3–6 hours apart.
const (
	WebhookRetryBase   = 30 * time.Second
	WebhookRetryCap    = 6 * time.Hour
	WebhookGiveUpAfter = 72 * time.Hour
)

// Outbox message statuses.
const (
	OutboxPending   = "pending"
	OutboxDelivered = "delivered"
	OutboxFailed    = "failed"
)

// ErrDeliveryFenced: the delivery claim was superseded (its lease expired
// and another worker claimed the message, or the message was settled
// meanwhile). The completion wrote nothing.
var ErrDeliveryFenced = errors.New("delivery claim superseded")

// OutboxMessage is one decision webhook to one endpoint, as the history
// page shows it.
type OutboxMessage struct {
	ID             string     `json:"id" db:"id"`
	EndpointID     string     `json:"endpoint_id" db:"endpoint_id"`
	Tenant         string     `json:"tenant" db:"tenant"`
	EventType      string     `json:"event_type" db:"event_type"`
	EventID        string     `json:"event_id" db:"event_id"`
	Payload        string     `json:"payload" db:"payload"`
	Status         string     `json:"status" db:"status"`
	Attempts       int        `json:"attempts" db:"attempts"`
	NextAttemptAt  time.Time  `json:"next_attempt_at" db:"next_attempt_at"`
	LastStatusCode int        `json:"last_status_code" db:"last_status_code"`
	LastError      string     `json:"last_error" db:"last_error"`
	CreatedAt      time.Time  `json:"created_at" db:"created_at"`
	DeliveredAt    *time.Time `json:"delivered_at,omitempty" db:"delivered_at"`
}

// DeliveryClaim is a due message claimed by one worker for one try.
// Generation fences the try's completion write.
type DeliveryClaim struct {
	ID         string `db:"id"`
	EndpointID string `db:"endpoint_id"`
	Tenant     string `db:"tenant"`
	URL        string `db:"url"`
	Secret     string `db:"secret"`
	EventType  string `db:"event_type"`
	// EventID is the webhook-id: the same on every try of the message.
	EventID string `db:"event_id"`
	Payload string `db:"payload"`
	// Attempts counts the completed tries before this one.
	Attempts   int    `db:"attempts"`
	Owner      string `db:"lease_owner"`
	Generation int64  `db:"lease_generation"`
	// LeaseUntil is when the claim lapses, at the store's clock: a try
	// not finished by then may be made again by another worker.
	LeaseUntil time.Time `db:"lease_until"`
	CreatedAt  time.Time `db:"created_at"`
	// RetryFrom is when an admin last delivered the message again (nil:
	// never); its give-up window runs from then (Since).
	RetryFrom *time.Time `db:"retry_from"`
}

// Since is when the message's give-up window began: when it was enqueued,
// or last delivered again by an admin. (Read as two columns: SQLite's
// COALESCE would lose the columns' type, and the driver its time.)
func (c DeliveryClaim) Since() time.Time {
	if c.RetryFrom != nil {
		return c.RetryFrom.UTC()
	}
	return c.CreatedAt.UTC()
}

// Delivery is one try of one message, as the history page lists it.
type Delivery struct {
	ID         string    `json:"id" db:"id"`
	OutboxID   string    `json:"outbox_id" db:"outbox_id"`
	EndpointID string    `json:"endpoint_id" db:"endpoint_id"`
	EventType  string    `json:"event_type" db:"event_type"`
	EventID    string    `json:"event_id" db:"event_id"`
	N          int       `json:"n" db:"n"`
	At         time.Time `json:"at" db:"at"`
	StatusCode int       `json:"status_code" db:"status_code"`
	// ErrorClass is the class of a failed try (netguard.Failure: policy,
	// dns, connect, tls, timeout, http_status); Error its fixed message.
	ErrorClass string `json:"error_class,omitempty" db:"error_class"`
	Error      string `json:"error,omitempty" db:"error"`
	DurationMS int64  `json:"duration_ms" db:"duration_ms"`
	// MessageStatus is where the message stands now.
	MessageStatus string `json:"message_status" db:"message_status"`
}

// DeliveryPage is one page of an endpoint's delivery history, newest first.
type DeliveryPage struct {
	Deliveries []Delivery
	// Next is the cursor of the following page; empty on the last one.
	Next string
}

const outboxColumns = `id, endpoint_id, tenant, event_type, event_id, payload, status, attempts, next_attempt_at,
last_status_code, last_error, created_at, delivered_at`

const (
	/* Store.enqueueDecision */
	selectEnabledEndpoints = `SELECT id FROM webhook_endpoints WHERE tenant = ? AND disabled_at IS NULL ORDER BY id`
	/* Store.enqueueDecision */
	insertOutbox = `
INSERT INTO outbox (id, endpoint_id, tenant, event_type, event_id, payload, status, next_attempt_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`
	/* Store.ClaimDeliveries: due, unleased (or lease expired) messages. */
	selectDueDeliveries = `
SELECT o.id, e.disabled_at FROM outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id
WHERE o.status = 'pending' AND o.next_attempt_at <= ? AND (o.lease_until IS NULL OR o.lease_until <= ?)
ORDER BY o.next_attempt_at LIMIT ?`
	/* Store.ClaimDeliveries: PostgreSQL lets several workers claim disjoint sets. */
	selectDueDeliveriesSkipLocked = selectDueDeliveries + ` FOR UPDATE OF o SKIP LOCKED`
	/* Store.ClaimDeliveries */
	claimDelivery = `
UPDATE outbox SET lease_owner = ?, lease_until = ?, lease_generation = lease_generation + 1
WHERE id = ? AND status = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`
	/* Store.ClaimDeliveries: a message whose endpoint was disabled is not sent. */
	failDisabledDelivery = `
UPDATE outbox SET status = 'failed', last_error = 'endpoint disabled', lease_owner = NULL, lease_until = NULL
WHERE id = ? AND status = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`
	/* Store.ClaimDeliveries: earlier claims recorded no try (claimOne) — the next one waits longer. */
	deferDelivery = `UPDATE outbox SET next_attempt_at = ? WHERE id = ?`
	/* Store.ClaimDeliveries: earlier claims recorded no try, and the give-up window is over. */
	failUnrecordedDelivery = `
UPDATE outbox SET status = 'failed', last_error = 'no try could be recorded; given up', lease_owner = NULL, lease_until = NULL
WHERE id = ?`
	/* Store.ClaimDeliveries */
	selectClaimedDelivery = `
SELECT o.id, o.endpoint_id, o.tenant, e.url, e.secret, o.event_type, o.event_id, o.payload, o.attempts,
    o.lease_owner, o.lease_generation, o.lease_until, o.created_at, o.retry_from
FROM outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id WHERE o.id = ?`
	/* Store.CompleteDelivery */
	selectEndpointDisabled = `SELECT disabled_at FROM webhook_endpoints WHERE id = ?`
	/* Store.CompleteDelivery: fenced — only the current claim may complete the try. */
	completeDelivery = `
UPDATE outbox SET status = ?, attempts = attempts + 1, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL,
    last_status_code = ?, last_error = ?, delivered_at = ?
WHERE id = ? AND status = 'pending' AND lease_owner = ? AND lease_generation = ?`
	/* Store.CompleteDelivery: the tries of a message delivered again since then. */
	countTriesSince = `SELECT COUNT(*) FROM webhook_deliveries WHERE outbox_id = ? AND at >= ?`
	/* Store.CompleteDelivery */
	insertDelivery = `
INSERT INTO webhook_deliveries (id, outbox_id, endpoint_id, tenant, n, at, status_code, error_class, error, duration_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	/* Store.CompleteDelivery, Store.OutboxMessage */
	selectOutboxMessage = `SELECT ` + outboxColumns + ` FROM outbox WHERE id = ?`
	/* Store.EndpointMessages */
	selectEndpointMessages = `SELECT ` + outboxColumns + ` FROM outbox WHERE endpoint_id = ?`
	/* Store.DeliveryHistory */
	selectDeliveries = `
SELECT d.id, d.outbox_id, d.endpoint_id, o.event_type, o.event_id, d.n, d.at, d.status_code, d.error_class, d.error, d.duration_ms,
    o.status AS message_status
FROM webhook_deliveries d JOIN outbox o ON o.id = d.outbox_id
WHERE d.endpoint_id = ?`
)

// decisionEvent is the body of a decision webhook.
type decisionEvent struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      *Decision `json:"data"` // the Standard Webhooks envelope: type, timestamp, data
}

// enqueueDecision writes one outbox message per enabled endpoint of the
// decision's tenant, inside tx: the transaction that records the decision,
// so a decision is announced if and only if it commits. Only applied
// decisions are announced; a first approval changes nothing an integrator
// can act on, and may yet be voided.
func (s *Store) enqueueDecision(ctx context.Context, tx *sqlx.Tx, d *Decision) error {
	if d.Status != DecisionApplied {
		return nil
	}
	var eps []string
	if err := tx.SelectContext(ctx, &eps, s.rebind(selectEnabledEndpoints), d.Tenant); err != nil {
		return fmt.Errorf("enqueue decision: %w", err)
	}
	if len(eps) == 0 {
		return nil
	}
	typ := "decision." + d.Action
	body, err := json.Marshal(decisionEvent{Type: typ, Timestamp: d.DecidedAt.UTC(), Data: d})
	if err != nil {
		return fmt.Errorf("enqueue decision: %w", err)
	}
	now := s.now()
	for _, ep := range eps {
		if _, err := tx.ExecContext(ctx, s.rebind(insertOutbox), newID("obx_", now), ep, d.Tenant, typ, newID("msg_", now),
			string(body), now, now); err != nil {
			return fmt.Errorf("enqueue decision: %w", err)
		}
	}
	return nil
}

// ClaimDeliveries claims up to n due messages for lease, for owner. Each
// claim bumps the message's lease generation, which fences its completion.
// Messages whose endpoint was disabled are marked failed instead, and so
// are those whose earlier claims recorded no try past the give-up window
// (claimOne). A message that cannot be claimed is skipped (*SkippedRows,
// with the claims of the others) and due again next round.
func (s *Store) ClaimDeliveries(ctx context.Context, owner string, n int, lease time.Duration) ([]DeliveryClaim, error) {
	var probe []dueDelivery
	if now := s.now(); s.sel(ctx, nil, &probe, selectDueDeliveries, now, now, 1) == nil && len(probe) == 0 {
		return nil, nil // nothing due: no write transaction (see Store.claim)
	}
	claims, err := inTx(ctx, s, func(tx *sqlx.Tx) ([]DeliveryClaim, error) {
		now := s.now()
		q := selectDueDeliveries
		if s.engine == Postgres {
			q = selectDueDeliveriesSkipLocked
		}
		var due []dueDelivery
		if err := tx.SelectContext(ctx, &due, s.rebind(q), now, now, n); err != nil {
			return nil, err
		}
		var claims []DeliveryClaim
		for _, m := range due {
			c, err := s.claimOne(ctx, tx, m, owner, lease, now)
			if err != nil {
				return nil, err
			}
			if c != nil {
				claims = append(claims, *c)
			}
		}
		return claims, nil
	})
	if err != nil && ctx.Err() == nil {
		// One message whose claim fails every time would fail the batch,
		// and every round's after it, and nothing would be delivered: the
		// messages due are claimed again one per transaction, and those
		// that fail are skipped.
		return s.claimDeliveriesEach(ctx, owner, n, lease)
	}
	if err != nil {
		return nil, fmt.Errorf("store.ClaimDeliveries: %w", err)
	}
	return claims, nil
}

// dueDelivery is a message selectDueDeliveries lists.
type dueDelivery struct {
	ID         string     `db:"id"`
	DisabledAt *time.Time `db:"disabled_at"`
}

// claimOne claims message m in tx, or marks it failed when its
// endpoint was disabled; nil when it was not claimed.
func (s *Store) claimOne(ctx context.Context, tx *sqlx.Tx, m dueDelivery, owner string, lease time.Duration, now time.Time) (*DeliveryClaim, error) {
	if m.DisabledAt != nil {
		if _, err := tx.ExecContext(ctx, s.rebind(failDisabledDelivery), m.ID, now); err != nil {
			return nil, err
		}
		return nil, nil
	}
	res, err := tx.ExecContext(ctx, s.rebind(claimDelivery), owner, now.Add(lease), m.ID, now)
	if err != nil {
		return nil, err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return nil, nil
	}
	var c DeliveryClaim
	if err := tx.GetContext(ctx, &c, s.rebind(selectClaimedDelivery), m.ID); err != nil {
		return nil, err
	}
	// Claims before this one that recorded no try (CompleteDelivery):
	// their worker stopped, or the try's record cannot be written. The
	// latter would send the message again at every lease's end, for ever,
	// since the backoff and the give-up are decided where the try is
	// recorded. So each such claim waits as a failed try would, should it
	// record nothing either, and past the give-up window the message fails.
	if unrecorded := int(c.Generation) - 1 - c.Attempts; unrecorded > 0 {
		if now.After(c.Since().Add(WebhookGiveUpAfter)) {
			_, err := tx.ExecContext(ctx, s.rebind(failUnrecordedDelivery), m.ID)
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.rebind(deferDelivery), dbTime(now.Add(webhookBackoff(unrecorded+1, s.Float64()))), m.ID); err != nil {
			return nil, err
		}
	}
	c.CreatedAt, c.LeaseUntil = c.CreatedAt.UTC(), c.LeaseUntil.UTC()
	return &c, nil
}

// claimDeliveriesEach is ClaimDeliveries one message per transaction,
// skipping those that fail.
func (s *Store) claimDeliveriesEach(ctx context.Context, owner string, n int, lease time.Duration) ([]DeliveryClaim, error) {
	var due []dueDelivery
	now := s.now()
	if err := s.sel(ctx, nil, &due, selectDueDeliveries, now, now, n); err != nil {
		return nil, fmt.Errorf("store.ClaimDeliveries: %w", err)
	}
	var claims []DeliveryClaim
	var skipped *SkippedRows
	for _, m := range due {
		// Its claim query re-checks that it is still due and unclaimed:
		// another worker may have taken it since it was listed.
		c, err := inTx(ctx, s, func(tx *sqlx.Tx) (*DeliveryClaim, error) {
			return s.claimOne(ctx, tx, m, owner, lease, s.now())
		})
		switch {
		case IsUnavailable(err):
			return claims, roundEnds(skipped, "store.ClaimDeliveries", err)
		case err != nil:
			skip(&skipped, "store.ClaimDeliveries", m.ID, err)
		case c != nil:
			claims = append(claims, *c)
		}
	}
	return claims, skipped.orNil()
}

// CompleteDelivery records the try a claim made: the receiver's status
// code (0 when none came) and the error, if any — as its class and fixed
// message (netguard.Explain) — and how long it took. A
// 2xx without error delivers the message. Anything else schedules the next
// try by exponential backoff with jitter, or — when that would fall past
// WebhookGiveUpAfter since the message was enqueued (or delivered again), or the endpoint is
// disabled — marks it failed. Every try is appended to the history.
//
// It is fenced by the claim's generation: a worker that paused past its
// lease while another claimed the message gets ErrDeliveryFenced and
// writes nothing.
func (s *Store) CompleteDelivery(ctx context.Context, c DeliveryClaim, statusCode int, sendErr error, took time.Duration) (*OutboxMessage, error) {
	out, err := inTx(ctx, s, func(tx *sqlx.Tx) (*OutboxMessage, error) {
		now := s.now()
		n := c.Attempts + 1
		// The class and a fixed message, never sendErr's text: that would
		// show internal addresses and port states in the history.
		class, errText := netguard.Explain(sendErr)
		if sendErr == nil && (statusCode < 200 || statusCode > 299) {
			class, errText = netguard.Status(statusCode)
		}
		if len(errText) > 500 {
			errText = errText[:500]
		}
		status, next := OutboxDelivered, now
		var deliveredAt any
		if errText == "" {
			deliveredAt = now
		} else {
			var disabled *time.Time
			if err := tx.GetContext(ctx, &disabled, s.rebind(selectEndpointDisabled), c.EndpointID); err != nil {
				return nil, err
			}
			// The backoff counts the tries since the message was last
			// delivered again by an admin: after redelivery the receiver
			// is presumably back, and a first failure there waits
			// seconds, not the hours its earlier tries had reached.
			tries := n
			if c.RetryFrom != nil {
				if err := tx.GetContext(ctx, &tries, s.rebind(countTriesSince), c.ID, dbTime(*c.RetryFrom)); err != nil {
					return nil, err
				}
				tries++
			}
			status, next = OutboxPending, dbTime(now.Add(webhookBackoff(tries, s.Float64())))
			switch {
			case disabled != nil:
				status, next = OutboxFailed, now
				errText = strings.TrimSpace(errText + "; endpoint disabled")
			case next.After(c.Since().Add(WebhookGiveUpAfter)):
				status, next = OutboxFailed, now
			}
		}
		res, err := tx.ExecContext(ctx, s.rebind(completeDelivery), status, next, statusCode, errText, deliveredAt,
			c.ID, c.Owner, c.Generation)
		if err != nil {
			return nil, err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return nil, ErrDeliveryFenced
		}
		if _, err := tx.ExecContext(ctx, s.rebind(insertDelivery), newID("dlv_", now), c.ID, c.EndpointID, c.Tenant, n, now,
			statusCode, string(class), errText, took.Milliseconds()); err != nil {
			return nil, err
		}
		var m OutboxMessage
		if err := tx.GetContext(ctx, &m, s.rebind(selectOutboxMessage), c.ID); err != nil {
			return nil, err
		}
		return &m, nil
	})
	if err != nil {
		if errors.Is(err, ErrDeliveryFenced) {
			return nil, err
		}
		return nil, fmt.Errorf("store.CompleteDelivery: %w", err)
	}
	out.fill()
	return out, nil
}

// webhookBackoff is the wait after the n-th failed try: the nominal
// base·2^(n-1), capped, then jittered into [nominal/2, nominal] ("equal
// jitter"): spread enough that a receiver coming back is not hit by every
// message at once, never so short that a try is wasted.
func webhookBackoff(n int, r float64) time.Duration {
	d := WebhookRetryBase
	for i := 1; i < n && d < WebhookRetryCap; i++ {
		d *= 2
	}
	d = min(d, WebhookRetryCap)
	return d/2 + time.Duration(r*float64(d/2))
}

// OutboxMessage returns one message; another tenant's (out of scope) is
// review.ErrNotFound.
func (s *Store) OutboxMessage(ctx context.Context, id string, scope []string) (*OutboxMessage, error) {
	var m OutboxMessage
	err := s.db.GetContext(ctx, &m, s.rebind(selectOutboxMessage), id)
	if errors.Is(err, sql.ErrNoRows) || err == nil && scope != nil && !slices.Contains(scope, m.Tenant) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.OutboxMessage: %w", err)
	}
	m.fill()
	return &m, nil
}

// EndpointMessages lists an endpoint's messages, newest first, optionally
// only those with status; cursor is the last id of the previous page.
func (s *Store) EndpointMessages(ctx context.Context, endpointID string, scope []string, status, cursor string, limit int) ([]OutboxMessage, string, error) {
	if _, err := s.endpoint(ctx, s.db, endpointID, scope); err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	q, args := selectEndpointMessages, []any{endpointID}
	if status != "" {
		q, args = q+" AND status = ?", append(args, status)
	}
	if cursor != "" {
		q, args = q+" AND id < ?", append(args, cursor)
	}
	var ms []OutboxMessage
	if err := s.db.SelectContext(ctx, &ms, s.rebind(q+" ORDER BY id DESC LIMIT ?"), append(args, limit+1)...); err != nil {
		return nil, "", fmt.Errorf("store.EndpointMessages: %w", err)
	}
	next := ""
	if len(ms) > limit {
		ms, next = ms[:limit], ms[limit-1].ID
	}
	for i := range ms {
		ms[i].fill()
	}
	return ms, next, nil
}

// DeliveryHistory returns one page of an endpoint's delivery tries, newest
// first; cursor is the previous page's Next (empty for the first page).
// An unknown or out-of-scope endpoint is review.ErrNotFound.
func (s *Store) DeliveryHistory(ctx context.Context, endpointID string, scope []string, cursor string, limit int) (*DeliveryPage, error) {
	if _, err := s.endpoint(ctx, s.db, endpointID, scope); err != nil {
		return nil, err
	}
	limit = pageLimit(limit)
	q, args := selectDeliveries, []any{endpointID}
	if cursor != "" {
		q, args = q+" AND d.id < ?", append(args, cursor)
	}
	var ds []Delivery
	if err := s.db.SelectContext(ctx, &ds, s.rebind(q+" ORDER BY d.id DESC LIMIT ?"), append(args, limit+1)...); err != nil {
		return nil, fmt.Errorf("store.DeliveryHistory: %w", err)
	}
	page := &DeliveryPage{Deliveries: ds}
	if len(ds) > limit {
		page.Deliveries, page.Next = ds[:limit], ds[limit-1].ID
	}
	for i := range page.Deliveries {
		page.Deliveries[i].At = page.Deliveries[i].At.UTC()
	}
	return page, nil
}

func pageLimit(limit int) int {
	if limit <= 0 || limit > 500 {
		return 50
	}
	return limit
}

func (m *OutboxMessage) fill() {
	m.NextAttemptAt, m.CreatedAt = m.NextAttemptAt.UTC(), m.CreatedAt.UTC()
	if m.DeliveredAt != nil {
		t := m.DeliveredAt.UTC()
		m.DeliveredAt = &t
	}
}
