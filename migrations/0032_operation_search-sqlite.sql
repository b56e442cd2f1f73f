-- The operations browser and its search (store/browse.go).
--
-- Search finds what people paste: an operation id (the primary key), a key
-- by its prefix, a source or resource ref by any part of it, ASCII letters
-- in either case. An FTS5 trigram index over the refs finds the rows that
-- contain a text of three characters or more; LIKE then decides, so the
-- answer is LIKE's (ASCII letters in either case), as on PostgreSQL.
-- External content: the refs are stored once, in operations; the FTS rows
-- are keyed by operations' rowid and kept by the triggers below (operations
-- are never deleted; the delete trigger is there should one ever be).
CREATE VIRTUAL TABLE operations_search USING fts5(
    source_ref, resource_ref, content = 'operations', content_rowid = 'rowid', tokenize = 'trigram');
INSERT INTO operations_search (operations_search) VALUES ('rebuild');
CREATE TRIGGER operations_search_insert AFTER INSERT ON operations BEGIN
    INSERT INTO operations_search (rowid, source_ref, resource_ref) VALUES (new.rowid, new.source_ref, new.resource_ref);
END;
CREATE TRIGGER operations_search_update AFTER UPDATE OF source_ref, resource_ref ON operations BEGIN
    INSERT INTO operations_search (operations_search, rowid, source_ref, resource_ref)
        VALUES ('delete', old.rowid, old.source_ref, old.resource_ref);
    INSERT INTO operations_search (rowid, source_ref, resource_ref) VALUES (new.rowid, new.source_ref, new.resource_ref);
END;
CREATE TRIGGER operations_search_delete AFTER DELETE ON operations BEGIN
    INSERT INTO operations_search (operations_search, rowid, source_ref, resource_ref)
        VALUES ('delete', old.rowid, old.source_ref, old.resource_ref);
END;
-- A key prefix across tenants (GLOB 'prefix*' on the binary collation).
CREATE INDEX operations_key ON operations (key);
-- Newest first: over every tenant, within tenants, within a state (the
-- state tabs count each state with it too).
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_tenant_created ON operations (tenant, created_at, id);
CREATE INDEX operations_state_created ON operations (state, created_at, id);
