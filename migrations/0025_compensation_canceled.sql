-- A reviewer's word on an undo (compensation_done or compensation_failed)
-- cancels the compensation operations not yet attempted
-- (review.SettlesByHand): they fail, and the link says who canceled them,
-- so the dashboard does not count a canceled undo as a failed one.
ALTER TABLE compensations ADD COLUMN canceled_by TEXT NOT NULL DEFAULT '';
-- A decision that registers a compensation names it, so the integrator
-- who runs undos learns which operation to run from the decisions feed.
ALTER TABLE decisions ADD COLUMN compensation_id TEXT NOT NULL DEFAULT '';
