-- GET /api/v1/decisions on PostgreSQL reads a tenant's decisions in commit
-- order (txid, seq) from a cursor (store.Decisions). decisions_tenant is
-- (tenant, seq), so every page read and sorted the tenant's whole feed;
-- this index makes a page a range read from its cursor.
CREATE INDEX decisions_feed ON decisions (tenant, txid, seq);
