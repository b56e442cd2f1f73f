-- limbo: indexes, built concurrently on a large PostgreSQL table
-- The open cases the deadline sweeper assesses again (store.ExpireDeadlines),
-- read in the order they are due.
CREATE INDEX cases_reassess ON cases (reassess_at) WHERE status = 'open' AND reassess_at IS NOT NULL;
