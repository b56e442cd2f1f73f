-- The queue filtered by tenant (or a reviewer's scope of tenants) in queue
-- order: without it SQLite took the tenant index and sorted a tenant's
-- open cases on every page (10 ms for 5,000 of them).
CREATE INDEX cases_open_tenant_queue ON cases (tenant, priority DESC, opened_at, id) WHERE status = 'open';
