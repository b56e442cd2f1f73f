-- The retry budget is kept per tenant × destination (one noisy tenant cannot
-- spend another's retries), so each attempt carries its operation's tenant:
-- the budget counts attempts in a window without joining operations.
ALTER TABLE attempts ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
UPDATE attempts SET tenant = (SELECT o.tenant FROM operations o WHERE o.id = attempts.operation_id);
DROP INDEX attempts_destination_started;
CREATE INDEX attempts_budget ON attempts (destination, tenant, started_at);
