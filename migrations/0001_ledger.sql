-- The ledger spine: tenants, tokens, operations, attempts, evidence, jobs.
-- Times are TIMESTAMP in UTC, truncated to microseconds by the store.

CREATE TABLE tenants (
    name       TEXT PRIMARY KEY,
    created_at TIMESTAMP NOT NULL
);

-- Only a SHA-256 of each token is stored; the token is shown once.
CREATE TABLE api_tokens (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL REFERENCES tenants (name),
    name       TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);

CREATE TABLE operations (
    id               TEXT PRIMARY KEY,
    tenant           TEXT NOT NULL REFERENCES tenants (name),
    key              TEXT NOT NULL,
    source_ref       TEXT NOT NULL,
    logical_version  TEXT NOT NULL,
    action           TEXT NOT NULL,
    destination      TEXT NOT NULL,
    risk             TEXT NOT NULL,
    flags            TEXT NOT NULL DEFAULT '',
    payload          TEXT NOT NULL,
    payload_hash     TEXT NOT NULL,
    state            TEXT NOT NULL,
    state_reason     TEXT NOT NULL DEFAULT '',
    deadline         TIMESTAMP NOT NULL,
    max_attempts     INTEGER NOT NULL,
    cost_budget      DOUBLE PRECISION,
    cost_spent       DOUBLE PRECISION NOT NULL DEFAULT 0,
    attempt_count    INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMP,
    first_attempt_at TIMESTAMP,
    resource_ref     TEXT,
    resource_kind    TEXT,
    resource_version TEXT,
    version          BIGINT NOT NULL,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL,
    UNIQUE (tenant, key)
);

CREATE INDEX operations_tenant_state ON operations (tenant, state, id);
CREATE INDEX operations_tenant_id ON operations (tenant, id);

CREATE TABLE attempts (
    operation_id        TEXT NOT NULL REFERENCES operations (id),
    n                   INTEGER NOT NULL,
    generation          BIGINT NOT NULL,
    destination         TEXT NOT NULL,
    credential          TEXT NOT NULL DEFAULT '',
    model               TEXT NOT NULL DEFAULT '',
    started_at          TIMESTAMP NOT NULL,
    lease_expires_at    TIMESTAMP NOT NULL,
    finished_at         TIMESTAMP,
    result              TEXT NOT NULL DEFAULT '',
    phase               TEXT NOT NULL DEFAULT '',
    http_status         INTEGER NOT NULL DEFAULT 0,
    provider_code       TEXT NOT NULL DEFAULT '',
    provider_request_id TEXT NOT NULL DEFAULT '',
    retry_after         TEXT NOT NULL DEFAULT '',
    cost                DOUBLE PRECISION NOT NULL DEFAULT 0,
    next                TEXT NOT NULL DEFAULT '',
    next_reason         TEXT NOT NULL DEFAULT '',
    retry_at            TIMESTAMP,
    outcome_hash        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (operation_id, n)
);

-- Open attempts: concurrency limits count them, the sweeper scans them.
CREATE INDEX attempts_open ON attempts (lease_expires_at) WHERE finished_at IS NULL;
CREATE INDEX attempts_open_destination ON attempts (destination) WHERE finished_at IS NULL;
-- The retry budget counts first attempts and retries per destination in a window.
CREATE INDEX attempts_destination_started ON attempts (destination, started_at);

CREATE TABLE jobs (
    operation_id  TEXT NOT NULL REFERENCES operations (id),
    ref           TEXT NOT NULL,
    status        TEXT NOT NULL,
    input_version TEXT NOT NULL DEFAULT '',
    output_ref    TEXT NOT NULL DEFAULT '',
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (operation_id, ref)
);

-- One row per destination, locked by attempt starts that must count open
-- attempts or retries, so limits hold across server instances.
CREATE TABLE destination_locks (
    destination TEXT PRIMARY KEY
);
