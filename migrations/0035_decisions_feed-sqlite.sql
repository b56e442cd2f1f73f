-- SQLite reads the decisions feed by seq alone, through decisions_tenant
-- (store.Decisions): nothing to add. The twin keeps both engines' versions
-- in step.
SELECT 1;
