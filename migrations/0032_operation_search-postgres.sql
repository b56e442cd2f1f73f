-- The operations browser and its search (store/browse.go).
--
-- Search finds what people paste: an operation id (the primary key), a key
-- by its prefix, a source or resource ref by any part of it, ASCII letters
-- in either case. pg_trgm indexes the parts; the refs are indexed folded
-- with translate() rather than lower(), because lower() also folds non-ASCII
-- letters by the database's locale, and SQLite's LIKE does not: both
-- engines must find the same operations for the same text.
--
-- An extension exists once per database, in one schema, and Limbo may run
-- in a schema of its own (search_path) beside other Limbo schemas, a bench
-- run's included. So pg_trgm is used where it already is, or made in
-- public (in this schema when public is closed to us), and its operator
-- class is named with its schema: made in this schema it would be out of
-- reach of the next Limbo schema's search_path, and go with this schema's
-- DROP ... CASCADE, taking that schema's trigram indexes along.
DO $$
DECLARE
    trgm TEXT;
BEGIN
    SELECT n.nspname INTO trgm FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
    IF trgm IS NULL THEN
        BEGIN
            CREATE EXTENSION pg_trgm SCHEMA public;
        EXCEPTION
            WHEN insufficient_privilege OR invalid_schema_name THEN
                CREATE EXTENSION pg_trgm;
            WHEN duplicate_object OR unique_violation THEN
                NULL; -- another schema's migration made it meanwhile
        END;
        SELECT n.nspname INTO trgm FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
    END IF;
    EXECUTE format($q$CREATE INDEX operations_source_trgm ON operations
        USING gin ((translate(source_ref, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) %I.gin_trgm_ops)$q$, trgm);
    EXECUTE format($q$CREATE INDEX operations_resource_trgm ON operations
        USING gin ((translate(resource_ref, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) %I.gin_trgm_ops)$q$, trgm);
END
$$;
-- A key prefix across tenants (LIKE 'prefix%' whatever the collation).
CREATE INDEX operations_key_prefix ON operations (key text_pattern_ops);
-- Newest first: over every tenant, within tenants, within a state (the
-- state tabs count each state with it too).
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_tenant_created ON operations (tenant, created_at, id);
CREATE INDEX operations_state_created ON operations (state, created_at, id);
