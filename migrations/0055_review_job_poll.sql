-- An operation in review is polled for the job its case waits on
-- (review.JobToWaitOn: the deadline passed while it followed the job), so
-- that the job's end reaches the person deciding (store.ClaimJobsInReview).
-- In review, next_probe_at now schedules those polls only: a transition
-- into review clears it, and the deadline sweeper sets it for an operation
-- that waits on its job. Values left from earlier states would read as
-- polls due; they are cleared. (Operations already in review beside a job
-- are not polled: their job's end still counts when reported.)
UPDATE operations SET next_probe_at = NULL WHERE state = 'needs_review' AND next_probe_at IS NOT NULL;
