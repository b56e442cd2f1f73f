-- The operations browser and its search (store/browse.go).
--
-- Search finds what people paste: an operation id (the primary key), a key
-- by its prefix, a source or resource ref by any part of it, ASCII letters
-- in either case. pg_trgm indexes the parts; the refs are indexed folded
-- with translate() rather than lower(), because lower() also folds non-ASCII
-- letters by the database's locale, and SQLite's LIKE does not: both
-- engines must find the same operations for the same text.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX operations_source_trgm ON operations
    USING gin ((translate(source_ref, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) gin_trgm_ops);
CREATE INDEX operations_resource_trgm ON operations
    USING gin ((translate(resource_ref, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) gin_trgm_ops);
-- A key prefix across tenants (LIKE 'prefix%' whatever the collation).
CREATE INDEX operations_key_prefix ON operations (key text_pattern_ops);
-- Newest first: over every tenant, within tenants, within a state (the
-- state tabs count each state with it too).
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_tenant_created ON operations (tenant, created_at, id);
CREATE INDEX operations_state_created ON operations (state, created_at, id);
