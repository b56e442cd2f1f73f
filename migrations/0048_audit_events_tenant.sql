-- limbo: indexes, built concurrently on a large PostgreSQL table
-- A tenant's audit events, newest first (store.AuditFilter.page): a
-- manager of one tenant, or a reader filtering by one, read the trail
-- from the newest event down until a page of that tenant's matched,
-- which for a tenant with few events was the whole trail (0.3 s to
-- seconds at 5 million events on PostgreSQL).
CREATE INDEX audit_events_tenant ON audit_events (tenant, seq);
