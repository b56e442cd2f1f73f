package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

// Gauges are the ledger's current levels, read for /metrics.
type Gauges struct {
	OperationsByState map[string]int64
	OpenCasesByReason map[string]int64
	// InFlightByDestination counts attempts holding a live lease.
	InFlightByDestination map[string]int64
	// Budgets is each tenant's retry budget at each destination over the
	// sliding window.
	Budgets []RetryBudgetFill
	// OldestOpenCaseAge is how long the oldest open case has been open
	// (0 with none open).
	OldestOpenCaseAge time.Duration
	// OldestUnsealedAuditAge is the age of the first audit event no
	// checkpoint covers yet, in sealing order (0 when all are sealed): how
	// far the sealer lags.
	OldestUnsealedAuditAge time.Duration
	// OutboxPending counts webhook messages still to deliver (due or
	// waiting for their next try); OutboxFailed those given up on.
	OutboxPending, OutboxFailed int64
}

// RetryBudgetFill is one tenant's retry budget at one destination now:
// Retries of Allowed spent over the window, Allowed following from Firsts.
type RetryBudgetFill struct {
	Destination string `db:"destination" json:"destination"`
	Tenant      string `db:"tenant" json:"tenant"`
	Firsts      int64  `db:"firsts" json:"first_attempts"`
	Retries     int64  `db:"retries" json:"retries"`
	Allowed     int64  `db:"-" json:"allowed"`
}

// Left is how many retries the window still allows.
func (f RetryBudgetFill) Left() int64 { return max(f.Allowed-f.Retries, 0) }

// Percent is how full the budget is, 0 to 100.
func (f RetryBudgetFill) Percent() int {
	if f.Allowed <= 0 {
		return 100
	}
	return int(min(100, 100*f.Retries/f.Allowed))
}

const (
	/* Store.Gauges */
	countOpsByState = `SELECT state, COUNT(*) AS n FROM operations GROUP BY state`
	/* Store.Gauges: open cases only, never the whole ledger. */
	selectOpenCaseReasons = `SELECT reasons FROM cases WHERE status = 'open'`
	/* Store.Gauges */
	countInFlight = `SELECT destination, COUNT(*) AS n FROM attempts WHERE finished_at IS NULL AND lease_expires_at > ? GROUP BY destination`
	/* Store.Gauges */
	countWindow = `
SELECT destination, tenant, COALESCE(SUM(CASE WHEN n = 1 THEN 1 ELSE 0 END), 0) AS firsts,
       COALESCE(SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END), 0) AS retries
FROM attempts WHERE started_at > ? AND `
	countWindowGroup = ` GROUP BY destination, tenant ORDER BY destination, tenant`
	/* Store.Gauges: the partial index cases_open_opened reads one row. */
	selectOldestOpenCase = `SELECT opened_at FROM cases WHERE status = 'open' ORDER BY opened_at LIMIT 1`
	/* Store.Gauges (SQLite): seqs commit in order; the first one after the
	   last checkpoint's horizon is the oldest unsealed (primary key). */
	selectOldestUnsealedSQLite = `
SELECT at FROM audit_events
WHERE seq > COALESCE((SELECT horizon FROM audit_checkpoints ORDER BY id DESC LIMIT 1), 0)
ORDER BY seq LIMIT 1`
	/* Store.Gauges (PostgreSQL): events at or above the last horizon's txid
	   are unsealed; the index audit_events_txid reads one row. */
	selectOldestUnsealedPostgres = `
SELECT at FROM audit_events
WHERE txid >= COALESCE((SELECT horizon FROM audit_checkpoints ORDER BY id DESC LIMIT 1), 0)
ORDER BY txid, seq LIMIT 1`
	/* Store.SealLag (SQLite): the end of the newest checkpoints' seq
	   ranges (formatRanges sorts them, so the last range ends highest). */
	selectCoveredTailsSQLite = `SELECT substr(seqs, -40) FROM audit_checkpoints WHERE event_count > 0 ORDER BY id DESC LIMIT ?`
	/* Store.SealLag (PostgreSQL) */
	selectCoveredTailsPostgres = `SELECT right(seqs, 40) FROM audit_checkpoints WHERE event_count > 0 ORDER BY id DESC LIMIT $1`
	/* Store.SealLag: the first event after every seq a checkpoint names (primary key). */
	selectFirstUncovered = `SELECT at FROM audit_events WHERE seq > ? ORDER BY seq LIMIT 1`
	/* Store.Gauges: pending by the partial index outbox_due. */
	countOutboxPending = `SELECT COUNT(*) FROM outbox WHERE status = 'pending'`
	/* Store.Gauges: given-up messages by the partial index outbox_failed. */
	countOutboxFailed = `SELECT COUNT(*) FROM outbox WHERE status = 'failed'`
)

// RetryBudgets reads the retry budget's fill for every tenant by sees and
// every destination it retried at in the window: the numbers StartAttempt
// decides by, shared by every instance because they are the attempts table.
func (s *Store) RetryBudgets(ctx context.Context, by review.Principal) ([]RetryBudgetFill, error) {
	return s.retryBudgets(ctx, by.Scope.List())
}

func (s *Store) retryBudgets(ctx context.Context, scope []string) ([]RetryBudgetFill, error) {
	b := s.cfg.Budget()
	cond, args := inScope("tenant", scope)
	var fs []RetryBudgetFill
	if err := s.db.SelectContext(ctx, &fs, s.rebind(countWindow+cond+countWindowGroup), append([]any{s.now().Add(-b.Window)}, args...)...); err != nil {
		return nil, fmt.Errorf("store.RetryBudgets: %w", err)
	}
	for i := range fs {
		fs[i].Allowed = b.Allowed(fs[i].Firsts)
	}
	return fs, nil
}

// Gauges reads the current levels.
func (s *Store) Gauges(ctx context.Context) (*Gauges, error) {
	g := &Gauges{OperationsByState: map[string]int64{}, OpenCasesByReason: map[string]int64{},
		InFlightByDestination: map[string]int64{}}
	var rows []struct {
		State string `db:"state"`
		N     int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &rows, countOpsByState); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	for _, r := range rows {
		g.OperationsByState[r.State] = r.N
	}
	var reasons []string
	if err := s.db.SelectContext(ctx, &reasons, selectOpenCaseReasons); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	for _, rs := range reasons {
		for _, r := range strings.Split(rs, ",") {
			if r != "" {
				g.OpenCasesByReason[r]++
			}
		}
	}
	now := s.now()
	var inflight []struct {
		Destination string `db:"destination"`
		N           int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &inflight, s.rebind(countInFlight), now); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	for _, r := range inflight {
		g.InFlightByDestination[r.Destination] = r.N
	}
	var err error
	if g.Budgets, err = s.retryBudgets(ctx, nil); err != nil {
		return nil, err
	}
	age := func(q string) (time.Duration, error) {
		var at time.Time
		switch err := s.db.GetContext(ctx, &at, q); {
		case errors.Is(err, sql.ErrNoRows):
			return 0, nil
		case err != nil:
			return 0, fmt.Errorf("store.Gauges: %w", err)
		}
		return max(now.Sub(at), 0), nil
	}
	if g.OldestOpenCaseAge, err = age(selectOldestOpenCase); err != nil {
		return nil, err
	}
	if g.OldestUnsealedAuditAge, err = s.sealLag(ctx, now); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	if err := s.db.GetContext(ctx, &g.OutboxPending, countOutboxPending); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	if err := s.db.GetContext(ctx, &g.OutboxFailed, countOutboxFailed); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	return g, nil
}

// coveredTails is how many of the newest checkpoints with events SealLag
// reads: on PostgreSQL a late-committing event may land, alone, in a
// checkpoint after one that covered higher seqs.
const coveredTails = 8

// SealLag is the age of the oldest audit event no checkpoint covers yet (0
// when all are sealed), by two readings, the larger taken. The sealer's
// own: the events past the newest checkpoint's horizon. And one that does
// not trust the horizon: the events past the highest seq the newest
// checkpoints name. Past a horizon beyond any event (a forged checkpoint
// row; on PostgreSQL, a database restored into another cluster, whose
// transaction ids start lower) the first reading says 0 until the sealer
// rebases (Store.unsealed), or for good if it does not run; the second
// sees the events wait.
func (s *Store) SealLag(ctx context.Context) (time.Duration, error) {
	lag, err := s.sealLag(ctx, s.now())
	if err != nil {
		return 0, fmt.Errorf("store.SealLag: %w", err)
	}
	return lag, nil
}

func (s *Store) sealLag(ctx context.Context, now time.Time) (time.Duration, error) {
	age := func(q string, args ...any) (time.Duration, error) {
		var at time.Time
		switch err := s.db.GetContext(ctx, &at, s.rebind(q), args...); {
		case errors.Is(err, sql.ErrNoRows):
			return 0, nil
		case err != nil:
			return 0, err
		}
		return max(now.Sub(at), 0), nil
	}
	unsealed := selectOldestUnsealedSQLite
	if s.engine == Postgres {
		unsealed = selectOldestUnsealedPostgres
	}
	byHorizon, err := age(unsealed)
	if err != nil {
		return 0, err
	}
	top, err := s.coveredTop(ctx, s.db)
	if err != nil {
		return 0, err
	}
	bySeq, err := age(selectFirstUncovered, top)
	if err != nil {
		return 0, err
	}
	return max(byHorizon, bySeq), nil
}

// coveredTop is the highest seq the newest checkpoints with events name
// (0 with none): every event past it is in no checkpoint.
func (s *Store) coveredTop(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	tails := selectCoveredTailsSQLite
	if s.engine == Postgres {
		tails = selectCoveredTailsPostgres
	}
	var ends []string
	if err := sqlx.SelectContext(ctx, q, &ends, tails, coveredTails); err != nil {
		return 0, err
	}
	var top int64
	for _, e := range ends {
		if i := strings.LastIndexAny(e, ",-"); i >= 0 {
			e = e[i+1:]
		}
		if n, err := strconv.ParseInt(e, 10, 64); err == nil {
			top = max(top, n)
		}
	}
	return top, nil
}
