-- Signed checkpoints. Each checkpoint carries an Ed25519 signature over its
-- hash by a key kept outside the database, and the id of that key, so
-- whoever can write the database still cannot make a forged or rebuilt
-- checkpoint verify. seal_max_ms is the sealer's promise, signed with the
-- rest: it writes a checkpoint at least this often, even with no events, so
-- a newest checkpoint older than that says the tail may have been cut.
-- Nothing is deployed yet: earlier, unsigned checkpoints are not migrated
-- (they fail verification).
ALTER TABLE audit_checkpoints ADD COLUMN seal_max_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit_checkpoints ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_checkpoints ADD COLUMN signature TEXT NOT NULL DEFAULT '';
