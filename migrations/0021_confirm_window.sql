-- The confirm window (review/watch.go): after proven absence moves an
-- operation on, the reconciler keeps searching the destination for it
-- until watch_until, next at watch_next_at, in case its search lags longer
-- than configured. watch_generation fences a look that outlived its claim.
ALTER TABLE operations ADD COLUMN watch_until TIMESTAMP;
ALTER TABLE operations ADD COLUMN watch_next_at TIMESTAMP;
ALTER TABLE operations ADD COLUMN watch_generation BIGINT NOT NULL DEFAULT 0;
-- Only watched operations are indexed: the claim reads the due ones.
CREATE INDEX operations_watch_due ON operations (watch_next_at) WHERE watch_next_at IS NOT NULL;
