package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// The attempt cycle's writes, each written once.
//
// Register, StartAttempt and RecordOutcome write the same rows whichever
// path decides them: the ordinary path (a transaction that reads under a
// lock) and the fast path, whose group commit (batch.go) runs the calls of
// concurrent callers in one transaction — on SQLite in process, on
// PostgreSQL in limbo_fast_batch, one round trip for all. So each
// statement is written here once, with named parameters (:op_id), and what
// a fast call writes is a plan of those statements (registerPlan,
// attemptPlan, outcomePlan). Go binds the parameters by name and runs a
// plan in a transaction (writeCall: the ordinary path, SQLite's batches,
// the bench floors); the body of limbo_fast_batch is
// generated from the same statements and plans (fastBatchFunction), and its
// migration is checked against them (TestFastBatchMigrationIsFresh).

// A guard finds its row by primary key and only then checks the state:
// "state || ''" and "(finished_at IS NULL) IS TRUE" say the same as
// "state" and "finished_at IS NULL" but fit no index. Once ANALYZE has
// seen a ledger of settled operations, a state other than confirmed looks
// rare, and PostgreSQL preferred an index on the state (or a partial index
// of one state) and read every row in that state to find one — a cost that
// grows with the backlog, on every call (TestGuardsFindTheirRowByKey). The
// store's other guarded writes by key do the same.

// param is a named parameter of the cycle's writes. Each is one argument
// of limbo_fast_batch, a_<name>, an array of its PostgreSQL type with one
// element per call.
type param int

const (
	pKind param = iota // the call's plan: register, attempt or outcome
	pOpID
	pTenant
	pAt // now, for every time the call writes
	pState
	pStateReason
	pGuardState // the state the guarded update expects
	pVersion
	pDetailVersion
	pKey
	pSourceRef
	pLogicalVersion
	pAction
	pDestination
	pRisk
	pFlags
	pPayload
	pPayloadHash
	pDeadline
	pMaxAttempts
	pCostBudget
	pN
	pGeneration
	pCredential
	pModel
	pLeaseExpiresAt
	pCost
	pRetryAt
	pResourceRef // NULL: the operation keeps its own
	pResourceKind
	pResourceVersion
	pDetailBump // 1 when the call adds evidence to the operation's details
	pResult
	pPhase
	pHTTPStatus
	pProviderCode
	pProviderRequestID
	pRetryAfter
	pNext
	pOutcomeHash
	pSource
	pAuthoritative
	pCandidates
	pVerdict
	pNote
	pObservedAt
	pEvAt // the audit event, of the call's operation and tenant
	pEvActor
	pEvAction
	pEvFrom
	pEvTo
	pEvDetail
	pEvHash // its content hash (ContentHash); SQL adds the seq
	// A limited grant's concurrency limits (attemptLimitedPlan), 0 for
	// none: the destination's (less what it keeps for priority actions),
	// per credential, per model, per action.
	pDestLimit
	pCredentialLimit
	pModelLimit
	pActionLimit
	// A retry's budget (retryBudget): at most max(floor, ratio × first
	// attempts) retries since the window's start; a floor below 0 for a
	// first attempt, which no budget counts.
	pRetryFloor
	pRetryRatio
	pRetryWindowStart
	nParams
)

// A batch's parameters are a bitmask (batchArgs).
var _ [64 - nParams]struct{}

// params names each parameter as the statements write it and gives the
// PostgreSQL type limbo_fast_batch declares for it.
var params = [nParams]struct{ name, pgType string }{
	pKind:              {"kind", "text"},
	pOpID:              {"op_id", "text"},
	pTenant:            {"tenant", "text"},
	pAt:                {"at", "timestamp"},
	pState:             {"state", "text"},
	pStateReason:       {"state_reason", "text"},
	pGuardState:        {"guard_state", "text"},
	pVersion:           {"version", "bigint"},
	pDetailVersion:     {"detail_version", "bigint"},
	pKey:               {"key", "text"},
	pSourceRef:         {"source_ref", "text"},
	pLogicalVersion:    {"logical_version", "text"},
	pAction:            {"action", "text"},
	pDestination:       {"destination", "text"},
	pRisk:              {"risk", "text"},
	pFlags:             {"flags", "text"},
	pPayload:           {"payload", "text"},
	pPayloadHash:       {"payload_hash", "text"},
	pDeadline:          {"deadline", "timestamp"},
	pMaxAttempts:       {"max_attempts", "integer"},
	pCostBudget:        {"cost_budget", "double precision"},
	pN:                 {"n", "integer"},
	pGeneration:        {"generation", "bigint"},
	pCredential:        {"credential", "text"},
	pModel:             {"model", "text"},
	pLeaseExpiresAt:    {"lease_expires_at", "timestamp"},
	pCost:              {"cost", "double precision"},
	pRetryAt:           {"retry_at", "timestamp"},
	pResourceRef:       {"resource_ref", "text"},
	pResourceKind:      {"resource_kind", "text"},
	pResourceVersion:   {"resource_version", "text"},
	pDetailBump:        {"detail_bump", "bigint"},
	pResult:            {"result", "text"},
	pPhase:             {"phase", "text"},
	pHTTPStatus:        {"http_status", "integer"},
	pProviderCode:      {"provider_code", "text"},
	pProviderRequestID: {"provider_request_id", "text"},
	pRetryAfter:        {"retry_after", "text"},
	pNext:              {"next", "text"},
	pOutcomeHash:       {"outcome_hash", "text"},
	pSource:            {"source", "text"},
	pAuthoritative:     {"authoritative", "boolean"},
	pCandidates:        {"candidates", "text"},
	pVerdict:           {"verdict", "text"},
	pNote:              {"note", "text"},
	pObservedAt:        {"observed_at", "timestamp"},
	pEvAt:              {"ev_at", "timestamp"},
	pEvActor:           {"ev_actor", "text"},
	pEvAction:          {"ev_action", "text"},
	pEvFrom:            {"ev_from", "text"},
	pEvTo:              {"ev_to", "text"},
	pEvDetail:          {"ev_detail", "text"},
	pEvHash:            {"ev_hash", "text"},
	pDestLimit:         {"dest_limit", "integer"},
	pCredentialLimit:   {"credential_limit", "integer"},
	pModelLimit:        {"model_limit", "integer"},
	pActionLimit:       {"action_limit", "integer"},
	pRetryFloor:        {"retry_floor", "integer"},
	pRetryRatio:        {"retry_ratio", "double precision"},
	pRetryWindowStart:  {"retry_window_start", "timestamp"},
}

// args holds one call's parameters; one left nil is NULL.
type args [nParams]any

// eventArgs sets e's parameters: the audit event a write records.
func (a *args) event(e *AuditEvent) {
	a[pOpID], a[pTenant] = e.OperationID, e.Tenant
	a[pEvAt], a[pEvActor], a[pEvAction], a[pEvFrom], a[pEvTo], a[pEvDetail] = e.At, e.Actor, e.Action, e.FromState, e.ToState, e.Detail
	a[pEvHash] = ContentHash(e)
}

// write is one statement of the cycle, with named parameters.
type write struct {
	// parts are the statement's text around its parameters:
	// parts[0] :params[0] parts[1] … parts[len(params)].
	parts  []string
	params []param
	// query is the statement with "?" placeholders, as the store runs it
	// (rebound to $n on PostgreSQL).
	query string
}

// newWrite parses sql's :name parameters (a "::" cast is not one).
func newWrite(sql string) *write {
	w := &write{}
	var part strings.Builder
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'': // a literal, copied whole
			j := strings.IndexByte(sql[i+1:], '\'')
			if j < 0 {
				panic("store: unterminated literal in " + sql)
			}
			part.WriteString(sql[i : i+j+2])
			i += j + 1
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':':
			part.WriteString("::")
			i++
		case c == ':':
			j := i + 1
			for j < len(sql) && (sql[j] == '_' || sql[j] >= 'a' && sql[j] <= 'z') {
				j++
			}
			w.parts = append(w.parts, part.String())
			part.Reset()
			w.params = append(w.params, paramNamed(sql[i+1:j]))
			i = j - 1
		default:
			part.WriteByte(c)
		}
	}
	w.parts = append(w.parts, part.String())
	w.query = w.render(func(param) string { return "?" })
	return w
}

func paramNamed(name string) param {
	p, ok := paramByName(name)
	if !ok {
		panic(fmt.Sprintf("store: no parameter :%s", name))
	}
	return p
}

func paramByName(name string) (param, bool) {
	for p, d := range params {
		if d.name == name {
			return param(p), true
		}
	}
	return 0, false
}

// named is the statement as written, its parameters by name, to be part
// of another.
func (w *write) named() string {
	return w.render(func(p param) string { return ":" + params[p].name })
}

// render writes the statement with each parameter as arg spells it.
func (w *write) render(arg func(param) string) string {
	var b strings.Builder
	for i, p := range w.params {
		b.WriteString(w.parts[i])
		b.WriteString(arg(p))
	}
	b.WriteString(w.parts[len(w.params)])
	return b.String()
}

// bind is a's values in the order of w's placeholders.
func (w *write) bind(a *args) []any {
	out := make([]any, len(w.params))
	for i, p := range w.params {
		out[i] = a[p]
	}
	return out
}

// exec runs w in tx with a's values.
func (s *Store) write(ctx context.Context, tx *sqlx.Tx, w *write, a *args) (int64, error) {
	res, err := s.exec(ctx, tx, w.query, w.bind(a)...)
	if err != nil {
		return 0, err
	}
	return rowsAffected(res), nil
}

var (
	/* Register, registerFast, RegisterMany (SQLite, made multi-row) and
	   registerCompensation: a new key, or nothing when it exists. */
	insertOperation = newWrite(`
INSERT INTO operations (id, tenant, key, source_ref, logical_version, action, destination, risk, flags,
    payload, payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent,
    attempt_count, version, created_at, updated_at)
VALUES (:op_id, :tenant, :key, :source_ref, :logical_version, :action, :destination, :risk, :flags, :payload,
    :payload_hash, :state, :state_reason, :deadline, :max_attempts, :cost_budget, 0, 0, 1, :at, :at)
ON CONFLICT (tenant, key) DO NOTHING`)

	/* StartAttempt and startAttemptFast: guarded by state, version and
	   detail_version (what the fast path's snapshot is). */
	updateOpInFlight = newWrite(`
UPDATE operations SET state = 'in_flight', state_reason = :state_reason, attempt_count = :n, next_attempt_at = NULL,
    first_attempt_at = COALESCE(first_attempt_at, :at), version = version + 1, updated_at = :at,
    probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1
WHERE id = :op_id AND state || '' = :guard_state AND version = :version AND detail_version = :detail_version`)

	/* StartAttempt's checkLimits and startAttemptFast (a limited grant or
	   a retry): the destination's row lock, so that grants counted against
	   its limits and its retry budget are serial across instances; held
	   until the transaction (the batch) commits. An update that changes no
	   value, so that it is a guard on both engines: no row, and the fast
	   path leaves it to the ordinary one, which writes the row. */
	lockDestinationRow = newWrite(`
UPDATE destination_locks SET destination = destination WHERE destination = :destination`)

	/* startAttemptFast, a limited grant, under that lock: a row when every
	   limit has a free slot and a retry is within the retry budget. A
	   statement of its own after the lock's, so that on PostgreSQL it
	   counts with a snapshot taken once the lock is held (in one
	   statement, the count would be of the snapshot from before the
	   wait). retries < max(floor, trunc(ratio × firsts)) is written
	   without rounding, the same on both engines and in Go
	   (RetryBudget.Allowed): retries < floor, or retries + 1 <= ratio ×
	   firsts. */
	withinLimits = newWrite(`
UPDATE destination_locks SET destination = destination WHERE destination = :destination` + limitConds() + `
    AND (:retry_floor < 0 OR (SELECT w.retries < :retry_floor OR w.retries + 1 <= :retry_ratio * w.firsts
        FROM (` + retryWindow.named() + `) w))`)

	/* StartAttempt and startAttemptFast */
	insertAttempt = newWrite(`
INSERT INTO attempts (operation_id, n, generation, destination, tenant, credential, model, started_at, lease_expires_at)
VALUES (:op_id, :n, :generation, :destination, :tenant, :credential, :model, :at, :lease_expires_at)`)

	/* applyOutcome and recordOutcomeFast: fenced by generation; the attempt
	   closes once. */
	finishAttempt = newWrite(`
UPDATE attempts SET finished_at = :at, result = :result, phase = :phase, http_status = :http_status,
    provider_code = :provider_code, provider_request_id = :provider_request_id, retry_after = :retry_after,
    cost = :cost, next = :next, next_reason = :state_reason, retry_at = :retry_at, outcome_hash = :outcome_hash
WHERE operation_id = :op_id AND n = :n AND generation = :generation AND (finished_at IS NULL) IS TRUE`)

	/* applyOutcome and recordOutcomeFast: guarded by state, version and
	   detail_version; the fast path bumps detail_version here for the
	   evidence it inserts (the ordinary path bumps it with the evidence,
	   so passes 0). */
	updateOpOutcome = newWrite(`
UPDATE operations SET state = :state, state_reason = :state_reason, cost_spent = cost_spent + :cost,
    next_attempt_at = :retry_at, resource_ref = COALESCE(:resource_ref, resource_ref),
    resource_kind = COALESCE(:resource_kind, resource_kind),
    resource_version = COALESCE(:resource_version, resource_version), probe_round = 0, next_probe_at = NULL,
    probe_owner = NULL, probe_until = NULL, probe_generation = probe_generation + 1,
    version = version + 1, detail_version = detail_version + :detail_bump, updated_at = :at
WHERE id = :op_id AND state || '' = 'in_flight' AND version = :version AND detail_version = :detail_version`)

	/* insertEvidence and recordOutcomeFast */
	insertEvidence = newWrite(`
INSERT INTO evidence (operation_id, source, authoritative, candidates, verdict, note, observed_at)
VALUES (:op_id, :source, :authoritative, :candidates, :verdict, :note, :observed_at)`)

	/* appendEvent (PostgreSQL): seq from the sequence and the hash
	   finished in SQL by limbo_event_hash (migration 0036, the SQL twin of
	   hashWithSeq), so one round trip. txid lets the sealer wait for
	   transactions still running. */
	insertEventPostgres = newWrite(`
INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
SELECT q.seq, pg_current_xact_id()::text::bigint, :ev_at::timestamp, :ev_actor, :tenant, :op_id, :ev_action,
    :ev_from, :ev_to, :ev_detail, limbo_event_hash(q.seq, :ev_hash::text)
FROM (SELECT nextval('audit_events_seq') AS seq) q`)
	// insertEventReturning is insertEventPostgres as appendEvent runs it.
	insertEventReturning = insertEventPostgres.query + "\nRETURNING seq, hash"
)

// step is one write of a fast call's plan.
type step struct {
	w *write // nil: the call's audit event (appendEvent)
	// rule says what the rows w touched mean.
	rule rowRule
	// when, unless pKind (unset), runs the step only for a positive value
	// of that parameter.
	when param
	// evidenceID: the row w inserts is the call's evidence.
	evidenceID bool
}

type rowRule int

const (
	anyRows rowRule = iota
	// guard: no row means the call's snapshot is stale, or a limit has
	// no room; nothing of the call is written (a plan's guards come before
	// its writes, and the destination lock's update changes no value) and
	// the ordinary path decides.
	guard
	// exactlyOne: any other count is a broken invariant, an error.
	exactlyOne
)

// The fast calls' plans, by kind; limbo_fast_batch has one branch each.
var (
	registerPlan = []step{{w: insertOperation, rule: guard}, {}}
	attemptPlan  = []step{{w: updateOpInFlight, rule: guard}, {w: insertAttempt}, {}}
	// attemptLimitedPlan is a retry, or a first attempt at a destination
	// with concurrency limits: attemptPlan under the destination's lock,
	// when its limits have room and the retry budget allows it.
	attemptLimitedPlan = append([]step{{w: lockDestinationRow, rule: guard}, {w: withinLimits, rule: guard}}, attemptPlan...)
	outcomePlan        = []step{{w: updateOpOutcome, rule: guard}, {w: finishAttempt, rule: exactlyOne},
		{w: insertEvidence, when: pDetailBump, evidenceID: true}, {}}
	plans = []struct {
		kind  string
		steps []step
	}{{"register", registerPlan}, {"attempt", attemptPlan}, {"attempt_limited", attemptLimitedPlan}, {"outcome", outcomePlan}}
)

// openAttempts are the attempts a concurrency limit counts: at the
// destination, unfinished, their lease running.
const openAttempts = `SELECT COUNT(*) FROM attempts WHERE destination = :destination AND finished_at IS NULL AND lease_expires_at > :at`

// limitCounts are the concurrency limits a grant is counted against: the
// parameter holding each (0: none applies) and the open attempts it counts.
// StartAttempt's checkLimits runs each count to say which limit is full;
// withinLimits runs them all in one statement.
var limitCounts = []struct {
	limit param
	count *write
}{
	{pDestLimit, newWrite(openAttempts)},
	{pCredentialLimit, newWrite(openAttempts + ` AND credential = :credential`)},
	{pModelLimit, newWrite(openAttempts + ` AND model = :model`)},
	{pActionLimit, newWrite(openAttempts +
		` AND operation_id IN (SELECT id FROM operations WHERE destination = attempts.destination AND action = :action)`)},
}

// retryWindow counts the first attempts and the retries of the tenant at
// the destination since the retry budget's window started.
var retryWindow = newWrite(`SELECT COALESCE(SUM(CASE WHEN n = 1 THEN 1 ELSE 0 END), 0) AS firsts,
    COALESCE(SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END), 0) AS retries
FROM attempts WHERE destination = :destination AND tenant = :tenant AND started_at > :retry_window_start`)

// limitConds is withinLimits' condition: each limit none or not reached.
func limitConds() string {
	var b strings.Builder
	for _, l := range limitCounts {
		name := ":" + params[l.limit].name
		fmt.Fprintf(&b, "\n    AND (%s <= 0 OR (%s) < %s)", name, l.count.named(), name)
	}
	return b.String()
}

// planOf is the plan of kind.
func planOf(kind string) []step {
	for _, p := range plans {
		if p.kind == kind {
			return p.steps
		}
	}
	panic("store: no plan " + kind)
}

// writeCall runs plan in tx with a's values and records ev, as
// limbo_fast_batch runs it on PostgreSQL. It returns errGuard when the
// guard matched nothing (nothing was written; the caller rolls tx back)
// and the id of the evidence a step inserted.
func (s *Store) writeCall(ctx context.Context, tx *sqlx.Tx, plan []step, a *args, ev *AuditEvent) (evID int64, err error) {
	a.event(ev)
	for _, st := range plan {
		if st.when != pKind && !positive(a[st.when]) {
			continue
		}
		if st.w == nil {
			if err := s.appendEvent(ctx, tx, ev); err != nil {
				return 0, err
			}
			continue
		}
		var n int64
		if st.evidenceID {
			n, evID, err = s.insertReturningID(ctx, tx, st.w, a)
		} else {
			n, err = s.write(ctx, tx, st.w, a)
		}
		if err != nil {
			return 0, err
		}
		switch {
		case st.rule == guard && n == 0:
			return 0, errGuard
		case st.rule != anyRows && n != 1:
			return 0, fmt.Errorf("store: broken invariant: a write of operation %v touched %d rows: %s", a[pOpID], n, st.w.query)
		}
	}
	return evID, nil
}

// insertReturningID runs w, an INSERT, and returns the id of its row.
func (s *Store) insertReturningID(ctx context.Context, tx *sqlx.Tx, w *write, a *args) (n, id int64, err error) {
	if s.engine == Postgres {
		if err := s.get(ctx, tx, &id, w.query+" RETURNING id", w.bind(a)...); err != nil {
			return 0, 0, err
		}
		return 1, id, nil
	}
	res, err := s.exec(ctx, tx, w.query, w.bind(a)...)
	if err != nil {
		return 0, 0, err
	}
	id, err = res.LastInsertId()
	return rowsAffected(res), id, err
}

func positive(v any) bool {
	switch v := v.(type) {
	case int:
		return v > 0
	case int64:
		return v > 0
	}
	return false
}

// fastBatchMigration is the migration that (re)creates limbo_fast_batch
// from fastBatchFunction. It is generated, never edited: when a write or a
// plan changes, `go test ./store -run TestFastBatchMigrationIsFresh
// -update` writes it as a new migration.
func fastBatchMigration() string {
	return `-- limbo_fast_batch: the fast path's group commit (store/batch.go), generated
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

` + fastBatchFunction()
}

// fastBatchFunction is limbo_fast_batch, generated from the plans: each
// call runs its plan's statements one after the other, as writeCall does,
// the writes after the guards only when each matched. The calls run one after
// the other too, so each sees the ones before it, exactly as if they had
// been sent one by one; only the commit is shared.
func fastBatchFunction() string {
	var b strings.Builder
	b.WriteString("CREATE FUNCTION limbo_fast_batch(\n")
	for p := range nParams {
		sep := ","
		if p == nParams-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    a_%s %s[] DEFAULT NULL%s\n", params[p].name, params[p].pgType, sep)
	}
	b.WriteString(`) RETURNS TABLE (ops bigint, evidence_id bigint)
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
`)
	arg := func(p param) string { return "a_" + params[p].name + "[i]" }
	depth := 3
	line := func(s string) {
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			b.WriteString(strings.Repeat("    ", depth) + l + "\n")
		}
	}
	for _, pl := range plans {
		fmt.Fprintf(&b, "        WHEN '%s' THEN\n", pl.kind)
		if pl.steps[0].rule != guard {
			panic("store: a plan starts with its guard")
		}
		guards := 0 // the IFs the guards opened
		for k, st := range pl.steps {
			if st.rule == guard && guards < k {
				panic("store: a plan's guards come before its other writes")
			}
			w := st.w
			if w == nil {
				w = insertEventPostgres
			}
			if st.when != pKind {
				line(fmt.Sprintf("IF %s > 0 THEN", arg(st.when)))
				depth++
			}
			q := w.render(arg)
			if st.evidenceID {
				q += "\nRETURNING id INTO evidence_id"
			}
			line(q + ";")
			switch st.rule {
			case guard:
				line("GET DIAGNOSTICS wrote = ROW_COUNT;")
				line("IF wrote = 1 THEN")
				depth++
				guards++
			case exactlyOne:
				line("GET DIAGNOSTICS wrote = ROW_COUNT;")
				line("IF wrote <> 1 THEN")
				depth++
				line(fmt.Sprintf("RAISE EXCEPTION 'limbo_fast_batch: broken invariant: %s of operation %% touched %% rows', a_op_id[i], wrote;",
					firstWords(w.query)))
				depth--
				line("END IF;")
			}
			if st.when != pKind {
				depth--
				line("END IF;")
			}
			if k == len(pl.steps)-1 {
				line("ops := 1;")
				for range guards {
					depth--
					line("END IF;")
				}
			}
		}
	}
	b.WriteString(`        ELSE
            RAISE EXCEPTION 'limbo_fast_batch: unknown call %', a_kind[i];
        END CASE;
        RETURN NEXT;
    END LOOP;
END
$$;
`)
	return b.String()
}

// firstWords is a statement's first two words, to name it in a message.
func firstWords(q string) string {
	f := strings.Fields(q)
	return strings.Join(f[:min(2, len(f))], " ")
}
