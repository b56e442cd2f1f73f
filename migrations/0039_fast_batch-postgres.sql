-- limbo_fast_batch: the fast path's group commit (store/batch.go), generated
-- from the attempt cycle's writes and plans in store/writes.go by
-- fastBatchMigration. Do not edit; see TestFastBatchMigrationIsFresh.
--
-- Each argument is an array named for a parameter of the writes, one element
-- per call of the batch; the Go side passes them by name, and leaves out
-- those no call of the batch sets. Call i runs its
-- plan (a_kind[i]) with element i of each: its guarded writes first, and the
-- rest only when each guard matched, so a stale snapshot writes nothing.
-- One row comes back per call, in order: ops, 1 when the call was written
-- (0: the caller takes the ordinary path), and the id of the evidence it
-- wrote (0 if none). A broken invariant raises, which rolls back every call
-- of the batch; the caller then sends each call alone.
DROP FUNCTION IF EXISTS limbo_fast_batch;

CREATE FUNCTION limbo_fast_batch(
    a_kind text[] DEFAULT NULL,
    a_op_id text[] DEFAULT NULL,
    a_tenant text[] DEFAULT NULL,
    a_at timestamp[] DEFAULT NULL,
    a_state text[] DEFAULT NULL,
    a_state_reason text[] DEFAULT NULL,
    a_guard_state text[] DEFAULT NULL,
    a_version bigint[] DEFAULT NULL,
    a_detail_version bigint[] DEFAULT NULL,
    a_key text[] DEFAULT NULL,
    a_source_ref text[] DEFAULT NULL,
    a_logical_version text[] DEFAULT NULL,
    a_action text[] DEFAULT NULL,
    a_destination text[] DEFAULT NULL,
    a_risk text[] DEFAULT NULL,
    a_flags text[] DEFAULT NULL,
    a_payload text[] DEFAULT NULL,
    a_payload_hash text[] DEFAULT NULL,
    a_deadline timestamp[] DEFAULT NULL,
    a_max_attempts integer[] DEFAULT NULL,
    a_cost_budget double precision[] DEFAULT NULL,
    a_n integer[] DEFAULT NULL,
    a_generation bigint[] DEFAULT NULL,
    a_credential text[] DEFAULT NULL,
    a_model text[] DEFAULT NULL,
    a_lease_expires_at timestamp[] DEFAULT NULL,
    a_cost double precision[] DEFAULT NULL,
    a_retry_at timestamp[] DEFAULT NULL,
    a_resource_ref text[] DEFAULT NULL,
    a_resource_kind text[] DEFAULT NULL,
    a_resource_version text[] DEFAULT NULL,
    a_detail_bump bigint[] DEFAULT NULL,
    a_result text[] DEFAULT NULL,
    a_phase text[] DEFAULT NULL,
    a_http_status integer[] DEFAULT NULL,
    a_provider_code text[] DEFAULT NULL,
    a_provider_request_id text[] DEFAULT NULL,
    a_retry_after text[] DEFAULT NULL,
    a_next text[] DEFAULT NULL,
    a_outcome_hash text[] DEFAULT NULL,
    a_source text[] DEFAULT NULL,
    a_authoritative boolean[] DEFAULT NULL,
    a_candidates text[] DEFAULT NULL,
    a_verdict text[] DEFAULT NULL,
    a_note text[] DEFAULT NULL,
    a_observed_at timestamp[] DEFAULT NULL,
    a_ev_at timestamp[] DEFAULT NULL,
    a_ev_actor text[] DEFAULT NULL,
    a_ev_action text[] DEFAULT NULL,
    a_ev_from text[] DEFAULT NULL,
    a_ev_to text[] DEFAULT NULL,
    a_ev_detail text[] DEFAULT NULL,
    a_ev_hash text[] DEFAULT NULL,
    a_dest_limit integer[] DEFAULT NULL,
    a_credential_limit integer[] DEFAULT NULL,
    a_model_limit integer[] DEFAULT NULL,
    a_action_limit integer[] DEFAULT NULL,
    a_retry_floor integer[] DEFAULT NULL,
    a_retry_ratio double precision[] DEFAULT NULL,
    a_retry_window_start timestamp[] DEFAULT NULL
) RETURNS TABLE (ops bigint, evidence_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    wrote bigint; -- not n: attempts has a column n
BEGIN
    -- The destinations of the batch's limited grants first, all of them and
    -- in order, before any operation: the lock order is destinations, then
    -- operations, then cases (docs/scaling.md). Locked call by call, a
    -- batch granting at two destinations held the first one's operation
    -- while it waited for the second destination.
    IF 'attempt_limited' = ANY (a_kind) THEN
        PERFORM 1 FROM destination_locks
        WHERE destination IN (SELECT c.d FROM unnest(a_kind, a_destination) AS c(k, d) WHERE c.k = 'attempt_limited')
        ORDER BY destination COLLATE "C" FOR NO KEY UPDATE;
    END IF;
    FOR i IN 1 .. coalesce(array_length(a_kind, 1), 0) LOOP
        ops := 0;
        evidence_id := 0;
        CASE a_kind[i]
        WHEN 'register' THEN
            INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
                payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
                attempt_count, version, created_at, updated_at)
            VALUES (a_op_id[i], a_tenant[i], a_key[i], a_source_ref[i], a_logical_version[i], a_action[i], a_destination[i], a_risk[i], a_flags[i], a_payload[i],
                a_payload_hash[i], a_state[i], a_state_reason[i], a_deadline[i], a_max_attempts[i], a_cost_budget[i], 0, 0, 1, a_at[i], a_at[i])
            ON CONFLICT (tenant, key) DO NOTHING;
            GET DIAGNOSTICS wrote = ROW_COUNT;
            IF wrote = 1 THEN
                INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
                SELECT q.seq, pg_current_xact_id()::text::bigint, a_ev_at[i]::timestamp, a_ev_actor[i], a_tenant[i], a_op_id[i], a_ev_action[i],
                    a_ev_from[i], a_ev_to[i], a_ev_detail[i], limbo_event_hash(q.seq, a_ev_hash[i]::text)
                FROM (SELECT nextval('audit_events_seq') AS seq) q;
                ops := 1;
            END IF;
        WHEN 'attempt' THEN
            UPDATE operations SET state = 'in_flight', state_reason = a_state_reason[i], attempt_count = a_n[i], next_attempt_at = NULL,
                first_attempt_at = COALESCE(first_attempt_at, a_at[i]), version = version + 1, updated_at = a_at[i],
                probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1
            WHERE id = a_op_id[i] AND state || '' = a_guard_state[i] AND version = a_version[i] AND detail_version = a_detail_version[i];
            GET DIAGNOSTICS wrote = ROW_COUNT;
            IF wrote = 1 THEN
                INSERT INTO attempts (operation_id, n, generation, destination, tenant, credential, model, started_at, lease_expires_at)
                VALUES (a_op_id[i], a_n[i], a_generation[i], a_destination[i], a_tenant[i], a_credential[i], a_model[i], a_at[i], a_lease_expires_at[i]);
                INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
                SELECT q.seq, pg_current_xact_id()::text::bigint, a_ev_at[i]::timestamp, a_ev_actor[i], a_tenant[i], a_op_id[i], a_ev_action[i],
                    a_ev_from[i], a_ev_to[i], a_ev_detail[i], limbo_event_hash(q.seq, a_ev_hash[i]::text)
                FROM (SELECT nextval('audit_events_seq') AS seq) q;
                ops := 1;
            END IF;
        WHEN 'attempt_limited' THEN
            UPDATE destination_locks SET destination = destination WHERE destination = a_destination[i];
            GET DIAGNOSTICS wrote = ROW_COUNT;
            IF wrote = 1 THEN
                UPDATE destination_locks SET destination = destination WHERE destination = a_destination[i]
                    AND (a_dest_limit[i] <= 0 OR (SELECT COUNT(*) FROM attempts WHERE destination = a_destination[i] AND finished_at IS NULL AND lease_expires_at > a_at[i]) < a_dest_limit[i])
                    AND (a_credential_limit[i] <= 0 OR (SELECT COUNT(*) FROM attempts WHERE destination = a_destination[i] AND finished_at IS NULL AND lease_expires_at > a_at[i] AND credential = a_credential[i]) < a_credential_limit[i])
                    AND (a_model_limit[i] <= 0 OR (SELECT COUNT(*) FROM attempts WHERE destination = a_destination[i] AND finished_at IS NULL AND lease_expires_at > a_at[i] AND model = a_model[i]) < a_model_limit[i])
                    AND (a_action_limit[i] <= 0 OR (SELECT COUNT(*) FROM attempts WHERE destination = a_destination[i] AND finished_at IS NULL AND lease_expires_at > a_at[i] AND operation_id IN (SELECT id FROM operations WHERE destination = attempts.destination AND action = a_action[i])) < a_action_limit[i])
                    AND (a_retry_floor[i] < 0 OR (SELECT w.retries < a_retry_floor[i] OR w.retries + 1 <= a_retry_ratio[i] * w.firsts
                        FROM (SELECT COALESCE(SUM(CASE WHEN n = 1 THEN 1 ELSE 0 END), 0) AS firsts,
                    COALESCE(SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END), 0) AS retries
                FROM attempts WHERE destination = a_destination[i] AND tenant = a_tenant[i] AND started_at > a_retry_window_start[i]) w));
                GET DIAGNOSTICS wrote = ROW_COUNT;
                IF wrote = 1 THEN
                    UPDATE operations SET state = 'in_flight', state_reason = a_state_reason[i], attempt_count = a_n[i], next_attempt_at = NULL,
                        first_attempt_at = COALESCE(first_attempt_at, a_at[i]), version = version + 1, updated_at = a_at[i],
                        probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1
                    WHERE id = a_op_id[i] AND state || '' = a_guard_state[i] AND version = a_version[i] AND detail_version = a_detail_version[i];
                    GET DIAGNOSTICS wrote = ROW_COUNT;
                    IF wrote = 1 THEN
                        INSERT INTO attempts (operation_id, n, generation, destination, tenant, credential, model, started_at, lease_expires_at)
                        VALUES (a_op_id[i], a_n[i], a_generation[i], a_destination[i], a_tenant[i], a_credential[i], a_model[i], a_at[i], a_lease_expires_at[i]);
                        INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
                        SELECT q.seq, pg_current_xact_id()::text::bigint, a_ev_at[i]::timestamp, a_ev_actor[i], a_tenant[i], a_op_id[i], a_ev_action[i],
                            a_ev_from[i], a_ev_to[i], a_ev_detail[i], limbo_event_hash(q.seq, a_ev_hash[i]::text)
                        FROM (SELECT nextval('audit_events_seq') AS seq) q;
                        ops := 1;
                    END IF;
                END IF;
            END IF;
        WHEN 'outcome' THEN
            UPDATE operations SET state = a_state[i], state_reason = a_state_reason[i], cost_spent = cost_spent + a_cost[i],
                next_attempt_at = a_retry_at[i], resource_ref = COALESCE(a_resource_ref[i], resource_ref),
                resource_kind = COALESCE(a_resource_kind[i], resource_kind),
                resource_version = COALESCE(a_resource_version[i], resource_version), probe_round = 0, next_probe_at = NULL,
                probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1,
                version = version + 1, detail_version = detail_version + a_detail_bump[i], updated_at = a_at[i]
            WHERE id = a_op_id[i] AND state || '' = 'in_flight' AND version = a_version[i] AND detail_version = a_detail_version[i];
            GET DIAGNOSTICS wrote = ROW_COUNT;
            IF wrote = 1 THEN
                UPDATE attempts SET finished_at = a_at[i], result = a_result[i], phase = a_phase[i], http_status = a_http_status[i],
                    provider_code = a_provider_code[i], provider_request_id = a_provider_request_id[i], retry_after = a_retry_after[i],
                    cost = a_cost[i], next = a_next[i], next_reason = a_state_reason[i], retry_at = a_retry_at[i], outcome_hash = a_outcome_hash[i]
                WHERE operation_id = a_op_id[i] AND n = a_n[i] AND generation = a_generation[i] AND (finished_at IS NULL) IS TRUE;
                GET DIAGNOSTICS wrote = ROW_COUNT;
                IF wrote <> 1 THEN
                    RAISE EXCEPTION 'limbo_fast_batch: broken invariant: UPDATE attempts of operation % touched % rows', a_op_id[i], wrote;
                END IF;
                IF a_detail_bump[i] > 0 THEN
                    INSERT INTO evidence (operation_id, source, authoritative, candidates, verdict, note, observed_at)
                    VALUES (a_op_id[i], a_source[i], a_authoritative[i], a_candidates[i], a_verdict[i], a_note[i], a_observed_at[i])
                    RETURNING id INTO evidence_id;
                END IF;
                INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
                SELECT q.seq, pg_current_xact_id()::text::bigint, a_ev_at[i]::timestamp, a_ev_actor[i], a_tenant[i], a_op_id[i], a_ev_action[i],
                    a_ev_from[i], a_ev_to[i], a_ev_detail[i], limbo_event_hash(q.seq, a_ev_hash[i]::text)
                FROM (SELECT nextval('audit_events_seq') AS seq) q;
                ops := 1;
            END IF;
        ELSE
            RAISE EXCEPTION 'limbo_fast_batch: unknown call %', a_kind[i];
        END CASE;
        RETURN NEXT;
    END LOOP;
END
$$;
