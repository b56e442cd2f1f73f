-- Evidence and audit events need increasing ids; the dialects spell that differently.

CREATE TABLE evidence (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id  TEXT NOT NULL REFERENCES operations (id),
    source        TEXT NOT NULL,
    authoritative BOOLEAN NOT NULL,
    candidates    TEXT NOT NULL,
    verdict       TEXT NOT NULL,
    note          TEXT NOT NULL DEFAULT '',
    observed_at   TIMESTAMP NOT NULL
);
CREATE INDEX evidence_operation ON evidence (operation_id, id);
