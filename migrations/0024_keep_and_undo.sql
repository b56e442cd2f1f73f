-- keep_and_undo (SPEC "Decision"): one decision keeps a resource and
-- undoes another. The decision names both; the compensation remembers the
-- kept one, which the operation is confirmed with once the undo is.
ALTER TABLE decisions ADD COLUMN undo_ref TEXT NOT NULL DEFAULT '';
ALTER TABLE compensations ADD COLUMN keep_ref TEXT NOT NULL DEFAULT '';
