-- When the clock alone next changes a case's assessment other than by age
-- (review.Assessment.ChangesAt: its operation's deadline coming within six
-- hours, within one, and passing): the deadline sweeper assesses the case
-- again then (store.ExpireDeadlines). Before, a deadline passing while its
-- operation was in review changed nothing on the case: it went on
-- recommending a retry, preselected, where a case opened a minute later
-- recommended failing the operation.
ALTER TABLE cases ADD COLUMN reassess_at TIMESTAMP;
-- Open cases not yet told their deadline passed: the sweeper visits those
-- whose deadline has passed once, at once, and the others when it passes
-- (from their next assessment on, at the nearer steps too).
UPDATE cases SET reassess_at = (SELECT o.deadline FROM operations o WHERE o.id = cases.operation_id)
WHERE status = 'open' AND (',' || reasons || ',') NOT LIKE '%,deadline_expired,%';
