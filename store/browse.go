package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/limbo-dev/limbo/review"
)

// BrowseFilter selects operations for the operations browser, open and
// settled alike. Empty fields do not filter.
type BrowseFilter struct {
	Tenant      string
	Destination string
	Action      string
	Risk        review.Risk
	Flag        review.Flag
	State       review.State
	// CreatedWithin keeps operations created at most this long ago;
	// CreatedBefore those created at least this long ago.
	CreatedWithin time.Duration
	CreatedBefore time.Duration
	// HasCase: "yes" only operations with an open case, "no" only those
	// without one.
	HasCase string
	// Search is what a person pasted: an operation id (exact), a key (its
	// prefix), or part of a source or resource ref (ASCII letters in either
	// case).
	Search string
}

// BrowseRow is one operation as the browser lists it.
type BrowseRow struct {
	ID          string         `db:"id"`
	Tenant      string         `db:"tenant"`
	Key         string         `db:"key"`
	SourceRef   string         `db:"source_ref"`
	Action      string         `db:"action"`
	Destination string         `db:"destination"`
	Risk        review.Risk    `db:"risk"`
	Flags       string         `db:"flags"`
	State       review.State   `db:"state"`
	ResourceRef sql.NullString `db:"resource_ref"`
	CreatedAt   time.Time      `db:"created_at"`
	// CaseID is the operation's open case, if it has one.
	CaseID sql.NullString `db:"case_id"`
}

// BrowseCountCap bounds each state's count: a state with more operations
// than this shows as "more than BrowseCountCap". Counting a million
// confirmed operations exactly on every page view would cost more than the
// page; past ten thousand, nobody reads the exact figure.
const BrowseCountCap = 10000

// BrowsePage is one page of operations, newest first, with the count of
// each state under the same filter (the state filter aside: the counts are
// the tabs that choose it).
type BrowsePage struct {
	Rows []BrowseRow
	// Next is the keyset cursor of the following page, "" at the end.
	Next string
	// Counts per state, each at most BrowseCountCap+1 (Capped says which
	// reached it); Total is their sum, TotalCapped whether any did.
	Counts      map[review.State]int
	Capped      map[review.State]bool
	Total       int
	TotalCapped bool
}

// BrowseOperations lists the operations in scope (review.Scope.List: nil
// all tenants, empty none) that f selects, newest first (created_at, then
// id), limit at a time after the cursor after (a BrowsePage.Next), with the
// capped count of each state. Invalid input (a filter value that is no
// state, risk or flag, a search or cursor that is not text or not a
// cursor) is review.ErrInvalid, the same on both engines.
func (s *Store) BrowseOperations(ctx context.Context, scope []string, f BrowseFilter, after string, limit int) (*BrowsePage, error) {
	page := &BrowsePage{Counts: map[review.State]int{}, Capped: map[review.State]bool{}}
	where, args, err := s.browseWhere(scope, f)
	if err != nil {
		return nil, err
	}
	if err := s.browseCounts(ctx, page, where, args); err != nil {
		return nil, err
	}
	if f.State != "" {
		where += " AND o.state = ?"
		args = append(args, string(f.State))
	}
	if after != "" {
		at, id, err := parseBrowseCursor(after)
		if err != nil {
			return nil, err
		}
		where += " AND (o.created_at < ? OR (o.created_at = ? AND o.id < ?))"
		args = append(args, at, at, id)
	}
	q := `SELECT o.id, o.tenant, o.key, o.source_ref, o.action, o.destination, o.risk, o.flags, o.state, o.resource_ref, o.created_at,
    c.id AS case_id
FROM operations o LEFT JOIN cases c ON c.operation_id = o.id AND c.status = 'open'
WHERE ` + where + `
ORDER BY o.created_at DESC, o.id DESC LIMIT ?`
	args = append(args, limit+1)
	if err := s.db.SelectContext(ctx, &page.Rows, s.rebind(q), args...); err != nil {
		return nil, fmt.Errorf("store.BrowseOperations: %w", err)
	}
	if len(page.Rows) > limit {
		page.Rows = page.Rows[:limit]
		last := page.Rows[limit-1]
		page.Next = strconv.FormatInt(last.CreatedAt.UnixMicro(), 10) + "." + last.ID
	}
	for i := range page.Rows {
		page.Rows[i].CreatedAt = page.Rows[i].CreatedAt.UTC()
	}
	return page, nil
}

// browseCounts fills page's counts: for each state, the operations where
// selects in it, up to BrowseCountCap+1 of them, in one statement. Each
// arm reads at most the cap's worth of rows of operations_state_created
// (or of the search's own rows), whatever the size of the ledger.
func (s *Store) browseCounts(ctx context.Context, page *BrowsePage, where string, args []any) error {
	var arms []string
	var all []any
	for _, st := range review.AllStates() {
		// The state is a constant of review, not input: written in.
		arms = append(arms, `SELECT '`+string(st)+`' AS state, COUNT(*) AS n FROM (SELECT 1 AS one FROM operations o WHERE o.state = '`+string(st)+`' AND `+where+` LIMIT ?) AS x`)
		all = append(all, args...)
		all = append(all, BrowseCountCap+1)
	}
	var counts []struct {
		State review.State `db:"state"`
		N     int          `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &counts, s.rebind(strings.Join(arms, "\nUNION ALL\n")), all...); err != nil {
		return fmt.Errorf("store.BrowseOperations: counts: %w", err)
	}
	for _, c := range counts {
		page.Counts[c.State] = c.N
		page.Total += c.N
		if c.N > BrowseCountCap {
			page.Capped[c.State], page.TotalCapped = true, true
		}
	}
	return nil
}

// browseWhere is f without its state as SQL conditions on operations o,
// joined by AND, with their arguments; scope comes first.
func (s *Store) browseWhere(scope []string, f BrowseFilter) (string, []any, error) {
	for _, v := range [][2]string{{"tenant", f.Tenant}, {"destination", f.Destination}, {"action", f.Action},
		{"risk", string(f.Risk)}, {"flag", string(f.Flag)}, {"state", string(f.State)}, {"q", f.Search}} {
		// NUL and invalid UTF-8 would be an error on PostgreSQL and a
		// string on SQLite: refused here, the same on both.
		if err := review.CheckText(v[0], review.Identifier, 1000, v[1]); err != nil {
			return "", nil, err
		}
	}
	if f.Risk != "" && !f.Risk.Valid() {
		return "", nil, fmt.Errorf("%w: field \"risk\": not a risk class", review.ErrInvalid)
	}
	if f.Flag != "" && !f.Flag.Valid() {
		return "", nil, fmt.Errorf("%w: field \"flag\": not a flag", review.ErrInvalid)
	}
	if f.State != "" && !f.State.Valid() {
		return "", nil, fmt.Errorf("%w: field \"state\": not a state", review.ErrInvalid)
	}
	if f.CreatedWithin < 0 || f.CreatedBefore < 0 {
		return "", nil, fmt.Errorf("%w: field \"age\": must not be negative", review.ErrInvalid)
	}
	cond, args := inScope("o.tenant", scope)
	where := []string{cond}
	add := func(cond string, vs ...any) {
		where, args = append(where, cond), append(args, vs...)
	}
	if f.Tenant != "" {
		add("o.tenant = ?", f.Tenant)
	}
	if f.Destination != "" {
		add("o.destination = ?", f.Destination)
	}
	if f.Action != "" {
		add("o.action = ?", f.Action)
	}
	if f.Risk != "" {
		add("o.risk = ?", string(f.Risk))
	}
	if f.Flag != "" {
		add("(',' || o.flags || ',') LIKE ?", "%,"+string(f.Flag)+",%")
	}
	now := s.now()
	if f.CreatedWithin > 0 {
		add("o.created_at >= ?", now.Add(-f.CreatedWithin))
	}
	if f.CreatedBefore > 0 {
		add("o.created_at <= ?", now.Add(-f.CreatedBefore))
	}
	switch f.HasCase {
	case "":
	case "yes":
		add("EXISTS (SELECT 1 FROM cases h WHERE h.operation_id = o.id AND h.status = 'open')")
	case "no":
		add("NOT EXISTS (SELECT 1 FROM cases h WHERE h.operation_id = o.id AND h.status = 'open')")
	default:
		return "", nil, fmt.Errorf("%w: field \"has_case\": must be yes or no", review.ErrInvalid)
	}
	if q := strings.TrimSpace(f.Search); q != "" {
		cond, vs := s.searchCond(q)
		add(cond, vs...)
	}
	return strings.Join(where, " AND "), args, nil
}

// searchCond is the search for q as one condition on operations o: the
// id equal to q, the key starting with q (exactly: keys are identifiers),
// or the source or resource ref containing q with ASCII letters in either
// case. Each engine reaches the rows through its own index (migration
// 0032), and both decide with the same rule, so they find the same rows.
func (s *Store) searchCond(q string) (string, []any) {
	part := "%" + escapeLike(asciiLower(q)) + "%"
	if s.engine == Postgres {
		// translate(): the indexed expression, ASCII letters folded.
		return `(o.id = ? OR o.key LIKE ? ESCAPE '\' OR ` + asciiFold("o.source_ref") + ` LIKE ? ESCAPE '\' OR ` +
			asciiFold("o.resource_ref") + ` LIKE ? ESCAPE '\')`, []any{q, escapeLike(q) + "%", part, part}
	}
	// SQLite: GLOB is case-sensitive and uses the key index for its prefix;
	// LIKE folds ASCII letters only, like translate() above.
	refs := `(o.source_ref LIKE ? ESCAPE '\' OR o.resource_ref LIKE ? ESCAPE '\')`
	args := []any{q, escapeGlob(q) + "*", part, part}
	if utf8.RuneCountInString(q) >= 3 {
		// The trigram index narrows to rows containing q, in any case
		// (FTS5 folds more than ASCII); LIKE then decides. A phrase in
		// double quotes is taken literally (its quotes doubled).
		refs = `(o.rowid IN (SELECT rowid FROM operations_search WHERE operations_search MATCH ?) AND ` + refs + `)`
		args = []any{q, escapeGlob(q) + "*", `"` + strings.ReplaceAll(q, `"`, `""`) + `"`, part, part}
	}
	// Shorter than a trigram: LIKE over the rows in order, which the
	// page's LIMIT ends early when they are common.
	return `(o.id = ? OR o.key GLOB ? OR ` + refs + `)`, args
}

// asciiFold is col with ASCII capitals made small, as PostgreSQL indexes
// it (migration 0032).
func asciiFold(col string) string {
	return "translate(" + col + ", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// escapeLike makes s literal in a LIKE pattern with ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// escapeGlob makes s literal in a GLOB pattern (a bracket holds one
// character literally).
func escapeGlob(s string) string {
	return strings.NewReplacer(`*`, `[*]`, `?`, `[?]`, `[`, `[[]`).Replace(s)
}

func parseBrowseCursor(c string) (time.Time, string, error) {
	us, id, ok := strings.Cut(c, ".")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", fmt.Errorf("%w: field \"after\": not a cursor of this list", review.ErrInvalid)
	}
	return time.UnixMicro(n).UTC(), id, nil
}

// OperationIDInScope reports whether id is an operation in scope: the
// browser's search jumps straight to an operation whose id was pasted.
func (s *Store) OperationIDInScope(ctx context.Context, scope []string, id string) (bool, error) {
	if review.TextProblem(review.Identifier, 1000, id) != "" {
		return false, nil
	}
	cond, args := inScope("tenant", scope)
	var n int
	if err := s.db.GetContext(ctx, &n, s.rebind(`SELECT COUNT(*) FROM operations WHERE id = ? AND `+cond), append([]any{id}, args...)...); err != nil {
		return false, fmt.Errorf("store.OperationIDInScope: %w", err)
	}
	return n > 0, nil
}
