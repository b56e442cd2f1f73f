-- detail_version counts changes to an operation's evidence and jobs, which
-- do not move its version (an attempt in flight must not be fenced off by a
-- new piece of evidence). With version it identifies everything the API
-- answers about an operation, so the store can answer from what it last
-- wrote, guarded in SQL by both.
ALTER TABLE operations ADD COLUMN detail_version BIGINT NOT NULL DEFAULT 0;
