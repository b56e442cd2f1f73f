package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
)

const (
	/* Store.Secret */
	insertSecret = `INSERT INTO app_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`
	/* Store.Secret */
	selectSecret = `SELECT value FROM app_secrets WHERE name = ?`
)

// Secret returns the named random secret of n bytes, creating it on first
// use. Every instance sharing the database gets the same bytes.
func (s *Store) Secret(ctx context.Context, name string, n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, s.rebind(insertSecret), name, hex.EncodeToString(b), s.now()); err != nil {
		return nil, fmt.Errorf("store.Secret: %w", err)
	}
	var v string
	if err := s.db.GetContext(ctx, &v, s.rebind(selectSecret), name); err != nil {
		return nil, fmt.Errorf("store.Secret: %w", err)
	}
	return hex.DecodeString(v)
}

// QueueFilter selects open cases for the review queue.
type QueueFilter struct {
	// Scope limits tenants; nil means all.
	Scope       []string
	Tenant      string
	Destination string
	Action      string
	Reason      string
	Flag        string
	// ClaimedBy shows only cases claimed by this user; Unclaimed only
	// cases nobody holds.
	ClaimedBy string
	Unclaimed bool
	// DecidableBy, when set, shows only the cases that role may decide
	// (review.Role.DecidesCases).
	DecidableBy review.Role
	// MinAge shows only cases open at least this long.
	MinAge time.Duration
	// Search matches tenant, operation id, key, source ref or resource ref.
	Search string
	// After is the keyset cursor of the previous page.
	After string
}

// QueuePage is one page of the queue with counts per reason.
type QueuePage struct {
	Cases    []Case
	Next     string
	Counts   map[string]int
	Total    int
	Filtered bool
}

// Queue lists open cases, most urgent first (priority, then age), with
// keyset pagination and counts per reason over the open cases in scope.
func (s *Store) Queue(ctx context.Context, f QueueFilter, limit int) (*QueuePage, error) {
	now := s.now()
	if f.Scope != nil && len(f.Scope) == 0 {
		return &QueuePage{Counts: map[string]int{}}, nil
	}
	where, args, err := queueWhere(f, now)
	if err != nil {
		return nil, err
	}
	// The operations join is only needed to search by key, source or resource.
	from := " FROM cases c"
	if strings.TrimSpace(f.Search) != "" {
		from += " JOIN operations o ON o.id = c.operation_id"
	}
	base := from + " WHERE c.status = 'open' AND " + where
	page, err := s.queueCounts(ctx, f, base, where, args)
	if err != nil {
		return nil, err
	}
	if f.After != "" {
		p, at, id, err := parseQueueCursor(f.After)
		if err != nil {
			return nil, err
		}
		base += " AND (c.priority < ? OR (c.priority = ? AND (c.opened_at > ? OR (c.opened_at = ? AND c.id > ?))))"
		args = append(args, p, p, at, at, id)
	}
	q := "SELECT " + prefixed("c.", caseColumns) + base + " ORDER BY c.priority DESC, c.opened_at, c.id LIMIT ?"
	args = append(args, limit+1)
	if err := s.db.SelectContext(ctx, &page.Cases, s.rebind(q), args...); err != nil {
		return nil, fmt.Errorf("store.Queue: %w", err)
	}
	if len(page.Cases) > limit {
		page.Cases = page.Cases[:limit]
		last := page.Cases[limit-1]
		page.Next = fmt.Sprintf("%d.%d.%s", last.Priority, last.OpenedAt.UnixMicro(), last.ID)
	}
	for i := range page.Cases {
		page.Cases[i].fill()
	}
	return page, nil
}

// queueWhere is f as SQL: the conditions, joined by AND, on an open case c
// (and, when f searches, its operation o), with their arguments. It does
// not say the case is open: open_case_counts counts open cases only.
func queueWhere(f QueueFilter, now time.Time) (string, []any, error) {
	scope, args := inScope("c.tenant", f.Scope)
	where := []string{scope}
	add := func(cond string, vs ...any) {
		where, args = append(where, cond), append(args, vs...)
	}
	if f.Tenant != "" {
		add("c.tenant = ?", f.Tenant)
	}
	if f.Destination != "" {
		add("c.destination = ?", f.Destination)
	}
	if f.Action != "" {
		add("c.action = ?", f.Action)
	}
	if f.Reason != "" {
		bit := reasonBit(review.Reason(f.Reason))
		if bit == 0 {
			return "", nil, fmt.Errorf("%w: field \"reason\": not an escalation reason", review.ErrInvalid)
		}
		add("(c.reason_bits & ?) <> 0", bit)
	}
	if f.Flag != "" {
		// Refused as the browser refuses it: PostgreSQL's LIKE is
		// case-sensitive and SQLite's is not, and a flag that is not one
		// decided a bulk decision's cases differently on each.
		if !review.Flag(f.Flag).Valid() {
			return "", nil, fmt.Errorf("%w: field \"flag\": not a flag", review.ErrInvalid)
		}
		add(hasFlag("c.flags", review.Flag(f.Flag)))
	}
	if f.ClaimedBy != "" {
		add("c.claimed_by = ? AND c.claim_until > ?", f.ClaimedBy, now)
	}
	if f.Unclaimed {
		add("(c.claimed_by = '' OR c.claim_until IS NULL OR c.claim_until <= ?)", now)
	}
	if f.DecidableBy != "" {
		switch any, excluded := f.DecidableBy.DecidesCases(); {
		case !any:
			add("1 = 0")
		case len(excluded) > 0:
			add("(c.reason_bits & ?) = 0", reasonBits(excluded))
		}
	}
	if f.MinAge > 0 {
		add("c.opened_at <= ?", now.Add(-f.MinAge))
	}
	if q := strings.TrimSpace(f.Search); q != "" {
		add("(c.tenant = ? OR c.operation_id = ? OR o.key = ? OR o.source_ref = ? OR o.resource_ref = ? OR c.id = ?)", q, q, q, q, q, q)
	}
	return strings.Join(where, " AND "), args, nil
}

// queueCounts is a queue page without its cases: the counts per reason
// over the filtered open cases (base, from FROM on), never the ledger.
// The filters open_case_counts carries (scope, tenant, destination,
// action, reason, flag) sum its kept counts, a few hundred rows at most;
// the others (claims, age, search) group the open cases themselves by
// their reason bit set. Either way, summed per reason here.
func (s *Store) queueCounts(ctx context.Context, f QueueFilter, base, where string, args []any) (*QueuePage, error) {
	countQ := "SELECT c.reason_bits, COUNT(*) AS n" + base + " GROUP BY c.reason_bits"
	if f.ClaimedBy == "" && !f.Unclaimed && f.MinAge == 0 && strings.TrimSpace(f.Search) == "" {
		countQ = "SELECT c.reason_bits, SUM(c.n) AS n FROM open_case_counts c WHERE " + where + " GROUP BY c.reason_bits"
	}
	var groups []struct {
		Bits int64 `db:"reason_bits"`
		N    int   `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &groups, s.rebind(countQ), args...); err != nil {
		return nil, fmt.Errorf("store.Queue: counts: %w", err)
	}
	page := &QueuePage{Counts: map[string]int{}}
	for _, g := range groups {
		page.Total += g.N
		for i, r := range allReasons {
			if g.Bits&(1<<i) != 0 {
				page.Counts[string(r)] += g.N
			}
		}
	}
	return page, nil
}

func parseQueueCursor(c string) (int, time.Time, string, error) {
	parts := strings.SplitN(c, ".", 3)
	if len(parts) != 3 {
		return 0, time.Time{}, "", fmt.Errorf("%w: field \"after\": not a queue cursor", review.ErrInvalid)
	}
	p, err := strconv.Atoi(parts[0])
	at, ok := cursorTime(parts[1])
	if err != nil || !ok {
		return 0, time.Time{}, "", fmt.Errorf("%w: field \"after\": not a queue cursor", review.ErrInvalid)
	}
	return p, at, parts[2], nil
}

// cursorTime reads a page cursor's time, microseconds since 1970 in UTC,
// and says whether it is one: a number, within years 0001–9999
// (review.InTimeRange), as every time the store keeps is. Beyond them the
// engines part: PostgreSQL refuses a time before 4713 BC (a 500), SQLite
// compares the text and answers a page, and a time in year 10000 sorts
// after every row on one and before them on the other.
func cursorTime(us string) (time.Time, bool) {
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	t := time.UnixMicro(n).UTC()
	return t, review.InTimeRange(t)
}

func prefixed(prefix, cols string) string {
	fields := strings.Split(cols, ",")
	for i, f := range fields {
		fields[i] = prefix + strings.TrimSpace(f)
	}
	return strings.Join(fields, ", ")
}

// ClaimTTL is how long a claim holds a case for one person.
const ClaimTTL = 30 * time.Minute

const (
	/* Store.ClaimCase: free, expired, or already mine. */
	claimCase = `
UPDATE cases SET claimed_by = ?, claim_until = ?, version = version + 1
WHERE id = ? AND status = 'open' AND (claimed_by = '' OR claimed_by = ? OR claim_until IS NULL OR claim_until <= ?)`
	/* Store.ReleaseCase */
	releaseCase = `UPDATE cases SET claimed_by = '', claim_until = NULL, version = version + 1 WHERE id = ? AND status = 'open' AND claimed_by = ?`
)

// ClaimCase gives the case to by for ClaimTTL. A case someone else holds
// is review.ErrConflict; out of scope is review.ErrNotFound. A console user
// (by.UserID) is read again under the case's lock (claimant).
func (s *Store) ClaimCase(ctx context.Context, id string, by review.Principal, scope []string) (*Case, error) {
	return s.claimOrRelease(ctx, id, by, scope, true)
}

// ReleaseCase gives actor's claim up. A case nobody holds is released
// already (nothing changes, nothing is audited); one someone else holds is
// a conflict naming them.
func (s *Store) ReleaseCase(ctx context.Context, id string, by review.Principal, scope []string) (*Case, error) {
	return s.claimOrRelease(ctx, id, by, scope, false)
}

// actingOnCase is by as they may act on a case of tenant now, not as the
// session read them when the request began (actingNow): disabled or moved
// off the tenant (ErrNotFound, as out of scope), they do nothing; the
// caller checks what their role may do. The operator is taken as given.
func (s *Store) actingOnCase(ctx context.Context, tx *sqlx.Tx, by review.Principal, tenant string) (review.Principal, error) {
	if by.UserID == "" {
		return by, nil
	}
	now, err := s.actingNow(ctx, tx, by)
	if err == nil && !now.Scope.Allows(tenant) {
		err = review.ErrNotFound
	}
	return now, err
}

// claimant is the name by claims, releases or takes over case c under
// (actingOnCase); to claim, a console user must still be in a role that
// claims, and that may decide c (review.Role.MayClaim).
func (s *Store) claimant(ctx context.Context, tx *sqlx.Tx, by review.Principal, c *Case, claim bool) (string, error) {
	now, err := s.actingOnCase(ctx, tx, by, c.Tenant)
	switch {
	case err != nil || !claim || by.UserID == "":
	case !now.Role.Can(review.PermClaim):
		err = fmt.Errorf("%w: your role no longer claims cases", review.ErrForbidden)
	case !now.Role.MayClaim(c.Reasons):
		err = fmt.Errorf("%w: your role cannot decide this case, so it does not claim it: a claim would keep those who can from deciding", review.ErrForbidden)
	}
	return now.Name, err
}

func (s *Store) claimOrRelease(ctx context.Context, id string, by review.Principal, scope []string, claim bool) (*Case, error) {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		c, err := s.lockCase(ctx, tx, id)
		if err != nil {
			return err
		}
		if scope != nil && !slices.Contains(scope, c.Tenant) {
			return review.ErrNotFound
		}
		actor, err := s.claimant(ctx, tx, by, c, claim)
		if err != nil {
			return err
		}
		now := s.now()
		q, args, what, kind := releaseCase, []any{id, actor}, "case.released", ChangeReleased
		if claim {
			q, args, what, kind = claimCase, []any{actor, now.Add(ClaimTTL), id, actor, now}, "case.claimed", ChangeClaimed
		}
		res, err := tx.ExecContext(ctx, s.rebind(q), args...)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			switch {
			case c.Status != CaseOpen:
				return &review.AlreadyDecidedError{CaseID: c.ID, By: c.ResolvedBy, Action: c.Resolution, At: deref(c.ResolvedAt)}
			case !claim && review.ClaimHolder(c.ClaimedBy, c.ClaimUntil, now) == "":
				// Nobody holds it (the claim ran out, or was released
				// from another page): released already, nothing changes.
				return nil
			}
			return fmt.Errorf("%w: case is claimed by %s until %s", review.ErrConflict, c.ClaimedBy, deref(c.ClaimUntil).Format(time.RFC3339))
		}
		if err := s.caseChanged(ctx, tx, c.changed(kind, actor)); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: c.Tenant, OperationID: c.OperationID,
			Action: what, Detail: detailJSON(map[string]any{"case_id": c.ID})})
	})
	if err != nil {
		return nil, err
	}
	return s.caseByID(ctx, s.db, id)
}

/* Store.TakeOverCase: guarded by the version read under the lock. */
const takeOverCase = `UPDATE cases SET claimed_by = ?, claim_until = ?, version = version + 1 WHERE id = ? AND status = 'open' AND version = ?`

// TakeOverCase gives an open case to by for ClaimTTL even while
// someone else holds it — explicitly, with a reason (review.NormalizeReason),
// audited as case.taken_over naming the previous holder, whose claim ends.
// A case nobody holds is simply claimed (case.claimed, with the reason).
func (s *Store) TakeOverCase(ctx context.Context, id string, by review.Principal, reason string, scope []string) (*Case, error) {
	reason, err := review.NormalizeReason(reason)
	if err != nil {
		return nil, err
	}
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		c, err := s.lockCase(ctx, tx, id)
		if err != nil {
			return err
		}
		if scope != nil && !slices.Contains(scope, c.Tenant) {
			return review.ErrNotFound
		}
		actor, err := s.claimant(ctx, tx, by, c, true)
		if err != nil {
			return err
		}
		if c.Status != CaseOpen {
			return &review.AlreadyDecidedError{CaseID: c.ID, By: c.ResolvedBy, Action: c.Resolution, At: deref(c.ResolvedAt)}
		}
		now := s.now()
		if _, err := s.exec(ctx, tx, takeOverCase, actor, now.Add(ClaimTTL), c.ID, c.Version); err != nil {
			return err
		}
		action, detail, kind := "case.claimed", map[string]any{"case_id": c.ID, "reason": reason}, ChangeClaimed
		if from := review.ClaimHolder(c.ClaimedBy, c.ClaimUntil, now); from != "" && !strings.EqualFold(from, actor) {
			action, detail["from"], kind = "case.taken_over", from, ChangeTakenOver
		}
		if err := s.caseChanged(ctx, tx, c.changed(kind, actor)); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: actor, Tenant: c.Tenant, OperationID: c.OperationID,
			Action: action, Detail: detailJSON(detail)})
	})
	if err != nil {
		return nil, err
	}
	return s.caseByID(ctx, s.db, id)
}

// CaseDecisions returns the decisions on a case, in order.
func (s *Store) CaseDecisions(ctx context.Context, caseID string) ([]Decision, error) {
	var ds []Decision
	if err := s.db.SelectContext(ctx, &ds, s.rebind(`SELECT `+decisionColumns+` FROM decisions WHERE case_id = ? ORDER BY seq`), caseID); err != nil {
		return nil, fmt.Errorf("store.CaseDecisions: %w", err)
	}
	return ds, nil
}

// OperationByID returns any tenant's operation (console use, after a scope check on its case).
func (s *Store) OperationByID(ctx context.Context, id string, scope []string) (*review.Operation, error) {
	var tenant string
	if err := s.db.GetContext(ctx, &tenant, s.rebind(`SELECT tenant FROM operations WHERE id = ?`), id); err != nil {
		return nil, review.ErrNotFound
	}
	if scope != nil && !slices.Contains(scope, tenant) {
		return nil, review.ErrNotFound
	}
	return s.GetOperation(ctx, tenant, id, "")
}

// reasonBit is r's bit in cases.reason_bits (0 for an unknown reason).
func reasonBit(r review.Reason) int64 {
	for i, x := range allReasons {
		if x == r {
			return 1 << i
		}
	}
	return 0
}

func reasonBits(rs []review.Reason) int64 {
	var b int64
	for _, r := range rs {
		b |= reasonBit(r)
	}
	return b
}

// allReasons are the escalation reasons the queue counts; reason i is bit i
// of cases.reason_bits (review.AllReasons only grows at its end).
var allReasons = review.AllReasons()
