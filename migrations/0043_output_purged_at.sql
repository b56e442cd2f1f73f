-- Payload retention empties a model's outputs (store/retention.go) but
-- keeps their rows, with purged_at saying when: an attempt whose output
-- was purged must not read as one that never kept any (the console and
-- GET …/attempts/{n}/output say it was kept and purged, and when).
ALTER TABLE attempt_outputs ADD COLUMN purged_at TIMESTAMP;
