-- Approval before execution (SPEC "Operation states"): an operation whose
-- action requires approval opens an approval case. requested_by is who
-- asked for it (the creator of the registering token), who may not
-- approve it; expires_at is when the request lapses and the operation
-- fails. A token records who created it.
ALTER TABLE api_tokens ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE cases ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';
ALTER TABLE cases ADD COLUMN expires_at TIMESTAMP;
-- Only open cases that can lapse are indexed: the deadline sweep reads the due ones.
CREATE INDEX cases_expiring ON cases (expires_at) WHERE status = 'open' AND expires_at IS NOT NULL;
