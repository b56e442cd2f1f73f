-- A job reconciliation or evidence found at the destination, which no
-- attempt's outcome named (review.Job.Found): 1 for such a job, 0 for one
-- an outcome named. Its attempt is a guess (the latest when it was found),
-- so its failure settles nothing alone after several attempts
-- (review.JobFailureSettles). Jobs recorded before read as named, as they
-- were taken.
ALTER TABLE jobs ADD COLUMN found INTEGER NOT NULL DEFAULT 0;
