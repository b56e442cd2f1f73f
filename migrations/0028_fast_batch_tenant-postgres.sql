-- limbo_fast_batch again (0016), now writing the attempt's tenant (0027).
-- Only the 'attempt' call's INSERT INTO attempts changed.
-- limbo_fast_batch: the attempt cycle's fast writes (store/fastpath.go),
-- several calls in one round trip and one transaction — a group commit.
--
-- Each element of calls is one call: calls[i][1] names it ('register',
-- 'attempt' or 'outcome') and calls[i][2..] are its arguments as text, in
-- the order the comments below give (the Go side builds them in
-- store/batch.go). Calls run one after the other as separate statements, so
-- each sees the ones before it, exactly as if they had been sent one by
-- one; only the commit is shared. One row comes back per call, in order:
--   ops          rows the call wrote its audit event for (1, or 0 when its
--                guard matched nothing — the caller takes the ordinary path);
--   evidence_id  the evidence row an outcome wrote (0 if none).
-- Any error rolls back every call in the batch; the caller then sends each
-- call alone, so an error lands on the call that caused it.
CREATE OR REPLACE FUNCTION limbo_fast_batch(calls text[]) RETURNS TABLE (ops bigint, evidence_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    a     text[]; -- the call being run
    wrote bigint; -- not n: attempts has a column n
    guard integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(calls, 1), 0) LOOP
        a := calls[i:i][:]; -- call i, still two-dimensional: a[1][k] is its argument k
        evidence_id := 0;
        CASE a[1][1]
        WHEN 'register' THEN
            /* The operation and its audit event. ON CONFLICT: an existing key
               inserts nothing at all. Arguments: 2 id, 3 tenant, 4 key,
               5 source_ref, 6 logical_version, 7 action, 8 destination,
               9 risk, 10 flags, 11 payload, 12 payload_hash, 13 state,
               14 state_reason, 15 deadline, 16 max_attempts, 17 cost_budget,
               18 now, 19 actor, 20 detail, 21 event content hash. */
            WITH o AS (
                INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
                    payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
                    attempt_count, version, created_at, updated_at)
                VALUES (a[1][2], a[1][3], a[1][4], a[1][5], a[1][6], a[1][7], a[1][8], a[1][9], a[1][10], a[1][11], a[1][12], a[1][13], a[1][14],
                    a[1][15]::timestamp, a[1][16]::integer, a[1][17]::double precision, 0, 0, 1, a[1][18]::timestamp, a[1][18]::timestamp)
                ON CONFLICT (tenant, key) DO NOTHING
                RETURNING id
            ), q AS (SELECT nextval('audit_events_seq') AS seq FROM o)
            INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
            SELECT q.seq, pg_current_xact_id()::text::bigint, a[1][18]::timestamp, a[1][19], a[1][3], a[1][2],
                'operation.registered', '', a[1][13], a[1][20],
                encode(sha256(convert_to(q.seq::text || ':' || a[1][21], 'UTF8')), 'hex')
            FROM q;
            GET DIAGNOSTICS wrote = ROW_COUNT;
        WHEN 'attempt' THEN
            /* Guarded by state, version and detail_version; the attempt and
               the event follow the guard. Arguments: 2 state_reason, 3 n,
               4 now, 5 operation id, 6 state, 7 version, 8 detail_version,
               9 generation, 10 destination, 11 credential, 12 model,
               13 lease_expires_at, 14 actor, 15 tenant, 16 detail,
               17 event content hash. */
            WITH u AS (
                UPDATE operations SET state = 'in_flight', state_reason = a[1][2], attempt_count = a[1][3]::integer,
                    next_attempt_at = NULL, first_attempt_at = COALESCE(first_attempt_at, a[1][4]::timestamp),
                    version = version + 1, updated_at = a[1][4]::timestamp,
                    probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1
                WHERE id = a[1][5] AND state = a[1][6] AND version = a[1][7]::bigint AND detail_version = a[1][8]::bigint
                RETURNING id
            ), t AS (
                INSERT INTO attempts (operation_id, n, generation, destination, tenant, credential, model, started_at, lease_expires_at)
                SELECT u.id, a[1][3]::integer, a[1][9]::bigint, a[1][10], a[1][15], a[1][11], a[1][12], a[1][4]::timestamp, a[1][13]::timestamp FROM u
            ), q AS (SELECT nextval('audit_events_seq') AS seq FROM u)
            INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
            SELECT q.seq, pg_current_xact_id()::text::bigint, a[1][4]::timestamp, a[1][14], a[1][15], a[1][5],
                'attempt.started', a[1][6], 'in_flight', a[1][16],
                encode(sha256(convert_to(q.seq::text || ':' || a[1][17], 'UTF8')), 'hex')
            FROM q;
            GET DIAGNOSTICS wrote = ROW_COUNT;
        WHEN 'outcome' THEN
            /* The operation guarded as above; the attempt closed only with
               it (fenced by generation); the response as evidence when
               a[1][9] > 0. An attempt found closed while the operation matched
               would be a broken invariant: the cast fails and the batch
               rolls back (counted in subqueries, so the planner cannot
               fold the check away). Arguments: 2 state, 3 state_reason, 4 cost,
               5 retry_at, 6 resource_ref, 7 resource_kind, 8 resource_version,
               9 detail bump, 10 now, 11 operation id, 12 version,
               13 detail_version, 14 result, 15 phase, 16 http_status,
               17 provider_code, 18 provider_request_id, 19 retry_after,
               20 next, 21 outcome hash, 22 attempt n, 23 candidates,
               24 verdict, 25 note, 26 actor, 27 tenant, 28 detail,
               29 event content hash. */
            WITH u AS (
                UPDATE operations SET state = a[1][2], state_reason = a[1][3], cost_spent = cost_spent + a[1][4]::double precision,
                    next_attempt_at = a[1][5]::timestamp, resource_ref = COALESCE(a[1][6], resource_ref),
                    resource_kind = COALESCE(a[1][7], resource_kind), resource_version = COALESCE(a[1][8], resource_version),
                    probe_round = 0, next_probe_at = NULL, probe_owner = NULL, probe_until = NULL,
                    probe_generation = probe_generation + 1, version = version + 1,
                    detail_version = detail_version + a[1][9]::bigint, updated_at = a[1][10]::timestamp
                WHERE id = a[1][11] AND state = 'in_flight' AND version = a[1][12]::bigint AND detail_version = a[1][13]::bigint
                RETURNING id
            ), t AS (
                UPDATE attempts SET finished_at = a[1][10]::timestamp, result = a[1][14], phase = a[1][15],
                    http_status = a[1][16]::integer, provider_code = a[1][17], provider_request_id = a[1][18],
                    retry_after = a[1][19], cost = a[1][4]::double precision, next = a[1][20], next_reason = a[1][3],
                    retry_at = a[1][5]::timestamp, outcome_hash = a[1][21]
                WHERE operation_id = (SELECT id FROM u) AND n = a[1][22]::integer AND generation = a[1][12]::bigint
                    AND finished_at IS NULL
                RETURNING n
            ), e AS (
                INSERT INTO evidence (operation_id, source, authoritative, candidates, verdict, note, observed_at)
                SELECT u.id, 'response', TRUE, a[1][23], a[1][24], a[1][25], a[1][10]::timestamp FROM u WHERE a[1][9]::bigint > 0
                RETURNING id
            ), q AS (SELECT nextval('audit_events_seq') AS seq FROM u
            ), ev AS (
                INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
                SELECT q.seq, pg_current_xact_id()::text::bigint, a[1][10]::timestamp, a[1][26], a[1][27], a[1][11],
                    'attempt.outcome', 'in_flight', a[1][2], a[1][28],
                    encode(sha256(convert_to(q.seq::text || ':' || a[1][29], 'UTF8')), 'hex')
                FROM q
            )
            SELECT (SELECT count(*) FROM u), COALESCE((SELECT id FROM e), 0),
                CASE WHEN (SELECT count(*) FROM t) = (SELECT count(*) FROM u) THEN 0
                     ELSE ((SELECT count(*) FROM t)::text || ' attempts closed for ' || (SELECT count(*) FROM u)::text
                        || ' operations')::integer
                END
            INTO wrote, evidence_id, guard;
        ELSE
            RAISE EXCEPTION 'limbo_fast_batch: unknown call %', a[1][1];
        END CASE;
        ops := wrote;
        RETURN NEXT;
    END LOOP;
END
$$;
