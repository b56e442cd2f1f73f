-- An operation's dependency (a registration's `after`): the operation it
-- waits for, of the same tenant, the state it must reach (confirmed) and
-- the version its confirmed resource must have ('' for any). Its own
-- table: few operations have one, and the attempt cycle of the rest never
-- reads it.
CREATE TABLE operation_dependencies (
    operation_id  TEXT PRIMARY KEY REFERENCES operations (id),
    tenant        TEXT NOT NULL,
    after_id      TEXT NOT NULL REFERENCES operations (id),
    after_state   TEXT NOT NULL,
    after_version TEXT NOT NULL DEFAULT '',
    created_at    TIMESTAMP NOT NULL
);
-- The sweep finds the dependents of operations that settled.
CREATE INDEX operation_dependencies_after ON operation_dependencies (after_id);
