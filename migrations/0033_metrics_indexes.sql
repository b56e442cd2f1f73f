-- Read by /metrics at every scrape (store.Gauges): the oldest open case
-- (limbo_open_case_oldest_age_seconds) and the failed outbox messages
-- (limbo_outbox_failed), each from a partial index instead of a scan.
CREATE INDEX cases_open_opened ON cases (opened_at) WHERE status = 'open';
CREATE INDEX outbox_failed ON outbox (id) WHERE status = 'failed';
