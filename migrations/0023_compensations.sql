-- Compensation as an operation (SPEC "Operation states"): a compensate
-- decision registers a child operation that undoes resource_ref of its
-- parent; the parent follows the child (review.CompensationSettles).
CREATE TABLE compensations (
    operation_id TEXT PRIMARY KEY REFERENCES operations (id),
    parent_id    TEXT NOT NULL REFERENCES operations (id),
    case_id      TEXT NOT NULL REFERENCES cases (id),
    decision_id  TEXT NOT NULL,
    resource_ref TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL
);
CREATE INDEX compensations_parent ON compensations (parent_id, created_at);
