-- The attempt a job belongs to: the one whose outcome named it, or, for a
-- job reconciliation found, the operation's latest attempt then. It is
-- kept as first recorded. A job's end settles an operation following it
-- only when no attempt was sent after that one (review.JobEndSettles): a
-- retry a reviewer approved while the job was queued, whose outcome was
-- then lost, may have an effect of its own, which the job's end says
-- nothing about. 0: recorded before this column, read as the latest.
ALTER TABLE jobs ADD COLUMN attempt_n INTEGER NOT NULL DEFAULT 0;
