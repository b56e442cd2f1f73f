-- Payload retention (store/retention.go): once an operation has been
-- terminal for its action's payload_retention, its payload, the payloads
-- refused under its key, its evidence candidates and its model outputs are
-- emptied; payload_purged_at says when. Key, payload hash, states and the
-- audit trail stay. The same SQL on both engines, so one file.
ALTER TABLE operations ADD COLUMN payload_purged_at TIMESTAMP;
-- The purge's selection: terminal operations not yet purged, oldest change
-- first. Partial, so purged operations (eventually most of the ledger)
-- leave it and the scan stays short at millions of rows.
CREATE INDEX operations_retention ON operations (updated_at, id)
    WHERE payload_purged_at IS NULL AND state IN ('confirmed', 'compensated', 'failed');
