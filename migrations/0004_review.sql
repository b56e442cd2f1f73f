-- Reconciliation and review: probe leases on operations, cases, decisions, inbound webhooks.

-- The reconciler claims an ambiguous operation with a lease; the generation
-- fences its completion write, so a probe that wakes up late cannot apply.
ALTER TABLE operations ADD COLUMN probe_owner TEXT;
ALTER TABLE operations ADD COLUMN probe_until TIMESTAMP;
ALTER TABLE operations ADD COLUMN probe_generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN probe_round INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN next_probe_at TIMESTAMP;
CREATE INDEX operations_ambiguous ON operations (next_probe_at) WHERE state = 'ambiguous';

-- A case is an operation escalated to people. At most one open case per operation.
CREATE TABLE cases (
    id                 TEXT PRIMARY KEY,
    tenant             TEXT NOT NULL,
    operation_id       TEXT NOT NULL REFERENCES operations (id),
    status             TEXT NOT NULL,          -- open | resolved
    reasons            TEXT NOT NULL,          -- comma-separated escalation reasons
    priority           INTEGER NOT NULL,
    recommended_action TEXT NOT NULL,
    recommended_ref    TEXT NOT NULL DEFAULT '',
    rationale          TEXT NOT NULL,
    -- Denormalised from the operation for queue filters without a join.
    destination        TEXT NOT NULL,
    action             TEXT NOT NULL,
    flags              TEXT NOT NULL DEFAULT '',
    claimed_by         TEXT NOT NULL DEFAULT '',
    claim_until        TIMESTAMP,
    opened_at          TIMESTAMP NOT NULL,
    resolved_at        TIMESTAMP,
    resolved_by        TEXT NOT NULL DEFAULT '',
    resolution         TEXT NOT NULL DEFAULT '',
    version            BIGINT NOT NULL
);
CREATE UNIQUE INDEX cases_one_open ON cases (operation_id) WHERE status = 'open';
CREATE INDEX cases_queue ON cases (priority DESC, opened_at, id) WHERE status = 'open';
CREATE INDEX cases_operation ON cases (operation_id, opened_at);

-- A reviewer's act on a case. status: applied, first_approval (four-eyes,
-- waiting for a second reviewer), void (a first approval whose payload or
-- key changed). seq orders the integrators' feed.
CREATE TABLE decisions (
    seq          BIGINT PRIMARY KEY,
    txid         BIGINT NOT NULL,
    id           TEXT NOT NULL UNIQUE,
    tenant       TEXT NOT NULL,
    case_id      TEXT NOT NULL REFERENCES cases (id),
    operation_id TEXT NOT NULL REFERENCES operations (id),
    action       TEXT NOT NULL,
    resource_ref TEXT NOT NULL DEFAULT '',
    compensation TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL,
    actor        TEXT NOT NULL,
    payload_hash TEXT NOT NULL,
    key          TEXT NOT NULL,
    status       TEXT NOT NULL,
    from_state   TEXT NOT NULL,
    to_state     TEXT NOT NULL,
    decided_at   TIMESTAMP NOT NULL
);
CREATE INDEX decisions_tenant ON decisions (tenant, seq);
CREATE INDEX decisions_case ON decisions (case_id, seq);

-- Inbound webhooks, deduplicated by (source, event id).
CREATE TABLE inbox (
    source       TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    received_at  TIMESTAMP NOT NULL,
    operation_id TEXT NOT NULL DEFAULT '',
    body         TEXT NOT NULL,
    PRIMARY KEY (source, event_id)
);
