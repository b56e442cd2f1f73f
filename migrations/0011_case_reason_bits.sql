-- Reasons also as a bit set, so the queue counts open cases per reason with
-- integer arithmetic over an index instead of eleven LIKEs per row. Bit i is
-- reason i of store.allReasons; the order never changes (append only).
ALTER TABLE cases ADD COLUMN reason_bits BIGINT NOT NULL DEFAULT 0;
UPDATE cases SET reason_bits =
    (CASE WHEN (',' || reasons || ',') LIKE '%,financial,%' THEN 1 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,irreversible,%' THEN 2 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,regulated,%' THEN 4 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,sources_disagree,%' THEN 8 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,deadline_expired,%' THEN 16 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,no_dedup_evidence,%' THEN 32 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,payload_mismatch,%' THEN 64 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,multiple_candidates,%' THEN 128 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,version_mismatch,%' THEN 256 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,state_conflict,%' THEN 512 ELSE 0 END) +
    (CASE WHEN (',' || reasons || ',') LIKE '%,budget_exhausted,%' THEN 1024 ELSE 0 END);
CREATE INDEX cases_open_bits ON cases (tenant, reason_bits) WHERE status = 'open';
