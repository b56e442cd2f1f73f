-- Accepted operations (an asynchronous job at the destination) are polled
-- for their job's status by the reconciler too.
CREATE INDEX operations_accepted ON operations (next_probe_at) WHERE state = 'accepted';
