-- The audit trail. Rows are only ever inserted. Each event stores the
-- SHA-256 of its canonical content (which includes seq); the sealer chains
-- events into checkpoints, each hashing the previous checkpoint and the
-- events it covers, so writers never wait on a single chain head.

CREATE TABLE audit_events (
    seq          BIGINT PRIMARY KEY,
    -- txid: PostgreSQL transaction id of the writer (0 on SQLite). The sealer
    -- covers only transactions older than every running one, so an event
    -- that commits late still lands in the next checkpoint.
    txid         BIGINT NOT NULL,
    at           TIMESTAMP NOT NULL,
    actor        TEXT NOT NULL,
    tenant       TEXT NOT NULL DEFAULT '',
    operation_id TEXT NOT NULL DEFAULT '',
    action       TEXT NOT NULL,
    from_state   TEXT NOT NULL DEFAULT '',
    to_state     TEXT NOT NULL DEFAULT '',
    detail       TEXT NOT NULL DEFAULT '{}',
    hash         TEXT NOT NULL
);
CREATE INDEX audit_events_operation ON audit_events (operation_id, seq);
CREATE INDEX audit_events_txid ON audit_events (txid, seq);

CREATE TABLE audit_checkpoints (
    id            BIGINT PRIMARY KEY,
    sealed_at     TIMESTAMP NOT NULL,
    -- seqs: the sequence numbers covered, as ranges "1-500,502-731".
    seqs          TEXT NOT NULL,
    event_count   BIGINT NOT NULL,
    -- horizon: events with txid below it (PostgreSQL) or seq up to it
    -- (SQLite) are all covered by this or an earlier checkpoint.
    horizon       BIGINT NOT NULL,
    events_digest TEXT NOT NULL,
    -- event_hashes: the first 16 hex digits of each covered event's hash,
    -- in seq order, so verification can name the first event that differs.
    event_hashes  TEXT NOT NULL,
    prev_hash     TEXT NOT NULL,
    hash          TEXT NOT NULL
);
