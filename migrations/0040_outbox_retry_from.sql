-- An admin may deliver a given-up message again (store.RedeliverWebhookMessages).
-- retry_from is when its current give-up window began: NULL until then, when
-- the window runs from created_at, so the message keeps its enqueue time
-- and its tries' history.
ALTER TABLE outbox ADD COLUMN retry_from TIMESTAMP;
