-- Evidence and audit events need increasing ids; the dialects spell that differently.

CREATE TABLE evidence (
    id            BIGSERIAL PRIMARY KEY,
    operation_id  TEXT NOT NULL REFERENCES operations (id),
    source        TEXT NOT NULL,
    authoritative BOOLEAN NOT NULL,
    candidates    TEXT NOT NULL,
    verdict       TEXT NOT NULL,
    note          TEXT NOT NULL DEFAULT '',
    observed_at   TIMESTAMP NOT NULL
);
CREATE INDEX evidence_operation ON evidence (operation_id, id);

-- Audit sequence numbers are taken before the insert, so that each event's
-- hash covers its own number (a reordered row no longer matches its hash).
CREATE SEQUENCE audit_events_seq;
