-- limbo_event_hash: the hash stored with an audit event, SHA-256 over "seq:"
-- and the hash of its content (store.ContentHash). Every PostgreSQL insert
-- of an audit event finishes its hash here, in the statement that draws seq
-- from the sequence (store.insertEventPostgres, limbo_fast_batch and the
-- bulk intake); store.hashWithSeq is its Go twin, for SQLite and for
-- verifying the chain, and TestEventHashFormulasAgree holds them together.
--
-- STABLE, as convert_to is: a SQL function is inlined into the statement
-- that calls it only when its body is no more volatile than it says. Run
-- as a function instead, it was planned anew in every statement, and cost
-- a third of the database's time per attempt cycle (limbo bench).
CREATE FUNCTION limbo_event_hash(seq bigint, content_hash text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT encode(sha256(convert_to(seq::text || ':' || content_hash, 'UTF8')), 'hex')
$$;
