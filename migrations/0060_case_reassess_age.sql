-- Age now ranks a case on the clock, as a nearing deadline does
-- (review.Assessment.ChangesAt: its operation having waited an hour, four,
-- twelve and a day). Before, age counted only when something else
-- assessed a case, so a case nobody touched kept the rank it came in
-- with. Every case open at the upgrade is visited once by the deadline
-- sweeper (store.ExpireDeadlines), which ranks it by its age now and
-- schedules its next step.
UPDATE cases SET reassess_at = opened_at
WHERE status = 'open' AND (reassess_at IS NULL OR reassess_at > opened_at);
