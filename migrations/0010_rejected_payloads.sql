-- Payloads refused because their key was already used with another payload,
-- kept with their case so a reviewer sees the field-level difference.
CREATE TABLE rejected_payloads (
    case_id      TEXT NOT NULL REFERENCES cases (id),
    payload_hash TEXT NOT NULL,
    payload      TEXT NOT NULL,
    received_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (case_id, payload_hash)
);
