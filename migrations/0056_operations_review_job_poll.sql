-- limbo: indexes, built concurrently on a large PostgreSQL table
-- The operations in review whose job is polled (store.ClaimJobsInReview):
-- few, read in the order they are due. Partial, like operations_accepted;
-- the claim's conditions imply it, so that the planner may use it.
CREATE INDEX operations_review_job_poll ON operations (next_probe_at) WHERE state = 'needs_review' AND next_probe_at IS NOT NULL;
