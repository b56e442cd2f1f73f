-- A model's structured output, kept per attempt (the structured-output
-- gate): what the model answered, canonical JSON, and, when the caller's
-- schema refused it, why. Its own table: outputs are large and read only
-- where a person or the agent asks for them, never on the attempt cycle.
CREATE TABLE attempt_outputs (
    operation_id TEXT NOT NULL REFERENCES operations (id),
    n            INTEGER NOT NULL,
    output       TEXT NOT NULL,
    invalid      TEXT NOT NULL DEFAULT '',
    recorded_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (operation_id, n)
);
