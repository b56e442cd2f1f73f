-- An agent run's tool calls share their run as source_ref; the tool-call
-- controller rebuilds a run's history from the ledger with
-- GET /api/v1/operations?source_ref=, after a crash as on every start.
CREATE INDEX operations_tenant_source ON operations (tenant, source_ref, id);
