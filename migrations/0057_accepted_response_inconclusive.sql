-- A success answer that accepted a job and named no resource is the
-- destination's word that it took the job, not that the effect happened
-- (review.responseEvidence): its evidence is inconclusive. It was recorded
-- as confirming, which made an empty search while the job ran, or after
-- it failed, read as sources disagreeing. Such rows are read again the
-- same way: their note is the attempt's reason, which says the job was
-- accepted. The job's end is the evidence that settles the operation, and
-- it is recorded apart (a status lookup).
UPDATE evidence SET verdict = 'inconclusive'
WHERE source = 'response' AND verdict = 'confirms' AND candidates IN ('[]', 'null', '')
  AND note LIKE 'attempt %: destination accepted job %';
