-- Outbound decision webhooks: endpoints per tenant, a transactional outbox
-- (one row per decision and endpoint, written in the decision's own
-- transaction), and the history of every delivery try.

-- A tenant's receiver. The secret ("whsec_…") signs every delivery; it must
-- be readable to sign, so it is stored as given, not hashed.
CREATE TABLE webhook_endpoints (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL REFERENCES tenants (name),
    url         TEXT NOT NULL,
    secret      TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    disabled_at TIMESTAMP,
    created_at  TIMESTAMP NOT NULL
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant, id);

-- One message to one endpoint. event_id is the webhook-id the receiver
-- deduplicates by: the same on every try. A worker claims a due row with a
-- lease; lease_generation fences its completion write (RELIABILITY 3).
-- status: pending (due at next_attempt_at) | delivered | failed (gave up).
CREATE TABLE outbox (
    id               TEXT PRIMARY KEY,
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id),
    tenant           TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    event_id         TEXT NOT NULL UNIQUE,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMP NOT NULL,
    lease_owner      TEXT,
    lease_until      TIMESTAMP,
    lease_generation BIGINT NOT NULL DEFAULT 0,
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMP NOT NULL,
    delivered_at     TIMESTAMP
);
-- The workers' due-scan only ever looks at pending rows.
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_endpoint ON outbox (endpoint_id, id);

-- Every try, appended once it is complete: the delivery history page.
CREATE TABLE webhook_deliveries (
    id          TEXT PRIMARY KEY,
    outbox_id   TEXT NOT NULL REFERENCES outbox (id),
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id),
    tenant      TEXT NOT NULL,
    n           INTEGER NOT NULL,
    at          TIMESTAMP NOT NULL,
    status_code INTEGER NOT NULL DEFAULT 0,
    error       TEXT NOT NULL DEFAULT '',
    duration_ms BIGINT NOT NULL DEFAULT 0,
    UNIQUE (outbox_id, n)
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
