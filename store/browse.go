package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

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

// MinRefSearch is the shortest search that is looked for inside source
// and resource refs (a trigram: what both engines' indexes hold). A
// shorter one finds an id or a key prefix only.
const MinRefSearch = 3

// BrowseCountCap bounds each state's count: a state with more operations
// than this shows as "more than BrowseCountCap". Counting a million
// confirmed operations exactly on every page view would cost more than the
// page; past ten thousand, nobody reads the exact figure.
const BrowseCountCap = 10000

// BrowseSearchCountCap bounds the count of a search's matches, all states
// together: under it, each state is counted exactly; over it, the page
// says "more than BrowseSearchCountCap" and counts no state. Counting each
// state to BrowseCountCap would read every match of a common fragment (a
// ninth of the ledger for "src-9") or, for a text shorter than a trigram,
// scan the ledger; a thousand matches are read in a few milliseconds on
// either engine (docs/benchmarks.md, the operations browser).
const BrowseSearchCountCap = 1000

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
	// CountCap is the cap of these counts: BrowseCountCap, or
	// BrowseSearchCountCap under a search.
	CountCap int
	// Uncounted: a search matched more than BrowseSearchCountCap, and the
	// states were not counted (Counts is empty; Total is the cap plus one).
	Uncounted bool
}

// BrowseOperations lists the operations in scope (review.Scope.List: nil
// all tenants, empty none) that f selects, newest first (created_at, then
// id), limit at a time after the cursor after (a BrowsePage.Next), with the
// capped count of each state. Invalid input (a filter value that is no
// state, risk or flag, a search or cursor that is not text or not a
// cursor) is review.ErrInvalid, the same on both engines.
func (s *Store) BrowseOperations(ctx context.Context, scope []string, f BrowseFilter, after string, limit int) (*BrowsePage, error) {
	page := &BrowsePage{Counts: map[review.State]int{}, Capped: map[review.State]bool{}, CountCap: BrowseCountCap}
	where, args, err := s.browseWhere(scope, f)
	if err != nil {
		return nil, err
	}
	if q := strings.TrimSpace(f.Search); q == "" {
		if err := s.browseCounts(ctx, page, where, args); err != nil {
			return nil, err
		}
	} else {
		ids, err := s.searchCounts(ctx, page, where, args, q)
		if err != nil {
			return nil, err
		}
		if page.Total == 0 {
			return page, nil // nothing matches: no page to look for
		}
		if ids != nil {
			// Every match is known: the page is among them, by primary key.
			where += " AND o.id IN (?" + strings.Repeat(", ?", len(ids)-1) + ")"
			for _, id := range ids {
				args = append(args, id)
			}
		} else {
			// More matches than the cap: common enough that the newest
			// rows, in order, hold a page soonest.
			cond, vs := s.searchCond(q, true)
			where, args = where+" AND "+cond, append(args, vs...)
		}
	}
	// One state's tab reads the (state, created_at, id) index from the
	// state's newest row or from the cursor. On PostgreSQL the state is
	// written as a range, not an equality: with "state = ?" it may order
	// by time alone, walk the newest rows of every state and drop the
	// others, and the newest are the open ones (150 ms for the confirmed
	// tab at 10,000,000 operations, 500,000 of them open). As a range, the
	// order by state first is one only that index gives. SQLite reads that
	// index for the equality, and for the range sorted every row of the
	// state instead (430 ms at 200,000 operations).
	oneState := f.State != "" && s.engine == Postgres
	switch {
	case oneState:
		where += " AND o.state >= ? AND o.state <= ?"
		args = append(args, string(f.State), string(f.State))
	case f.State != "":
		where += " AND o.state = ?"
		args = append(args, string(f.State))
	}
	if after != "" {
		at, id, err := parseBrowseCursor(after)
		if err != nil {
			return nil, err
		}
		// A row comparison, which both engines read as a range of the
		// (…, created_at, id) indexes: with OR it was a filter, and a page
		// N pages deep walked the N pages before it.
		if oneState {
			where += " AND (o.state, o.created_at, o.id) < (?, ?, ?)"
			args = append(args, string(f.State), at, id)
		} else {
			where += " AND (o.created_at, o.id) < (?, ?)"
			args = append(args, at, id)
		}
	}
	q := browsePage(where, oneState)
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

// browsePage is the query of a browser page under where, newest first;
// oneState: where holds one state as a range, and the order starts with
// it. The open case of each row is looked up for that row alone: joined,
// SQLite first read every open case into a Bloom filter (100 ms per page
// at 10,000,000 operations, 500,000 of them open; 0.1 ms this way).
func browsePage(where string, oneState bool) string {
	order := "o.created_at DESC, o.id DESC"
	if oneState {
		order = "o.state DESC, " + order
	}
	return `SELECT o.id, o.tenant, o.key, o.source_ref, o.action, o.destination, o.risk, o.flags, o.state, o.resource_ref, o.created_at,
    (SELECT c.id FROM cases c WHERE c.operation_id = o.id AND c.status = 'open') AS case_id
FROM operations o
WHERE ` + where + `
ORDER BY ` + order + ` LIMIT ?`
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

// browseWhere is f without its state and search as SQL conditions on operations o,
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
		add(hasFlag("o.flags", f.Flag))
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
	return strings.Join(where, " AND "), args, nil
}

// searchCounts fills page's counts under the search q and the conditions
// where: the matches, at most BrowseSearchCountCap+1 of them read, counted
// by state. The reading stops at the cap whatever the number of matches.
// Under the cap it returns the matches' ids (the page is among them), over
// it none.
func (s *Store) searchCounts(ctx context.Context, page *BrowsePage, where string, args []any, q string) ([]string, error) {
	page.CountCap = BrowseSearchCountCap
	short := utf8.RuneCountInString(q) < 3
	// Shorter than a trigram, no index fits: the rows in order, LIKE on each.
	cond, vs := s.searchCond(q, short)
	matches := `SELECT o.id, o.state FROM operations o WHERE ` + where + ` AND ` + cond
	all := append(append([]any{}, args...), vs...)
	if s.engine == SQLite && !short {
		// "rowid IN (the trigram index's rows)" would read every row the
		// index finds before the first is counted; joined, the index's rows
		// stream and the LIMIT ends them. The rows the id or the key finds
		// and the refs do not come second, so none counts twice.
		part := "%" + escapeLike(asciiLower(q)) + "%"
		refs := `(o.source_ref LIKE ? ESCAPE '\' OR COALESCE(o.resource_ref, '') LIKE ? ESCAPE '\')`
		matches = `SELECT o.id, o.state FROM operations_search t JOIN operations o ON o.rowid = t.rowid
WHERE operations_search MATCH ? AND ` + refs + ` AND ` + where + `
UNION ALL
SELECT o.id, o.state FROM operations o WHERE (o.id = ? OR o.key GLOB ?) AND NOT ` + refs + ` AND ` + where
		all = append([]any{ftsPhrase(q), part, part}, args...)
		all = append(append(all, q, escapeGlob(q)+"*", part, part), args...)
	}
	if s.engine == Postgres && !short {
		common, err := s.commonSearch(ctx, where, args, cond, vs)
		if err != nil {
			return nil, fmt.Errorf("store.BrowseOperations: counts: %w", err)
		}
		if common {
			page.Total, page.TotalCapped, page.Uncounted = BrowseSearchCountCap+1, true, true
			return nil, nil
		}
	}
	var rows []struct {
		ID    string       `db:"id"`
		State review.State `db:"state"`
	}
	qs := s.rebind(`SELECT id, state FROM (` + matches + `) AS m LIMIT ?`)
	all = append(all, BrowseSearchCountCap+1)
	var err error
	if s.engine == Postgres && !short {
		// With a LIMIT, PostgreSQL may prefer a sequential scan when it
		// expects many matches, and read most of the table when they lie
		// at its end (5 s for "src-9" over 1,000,000 operations). The
		// trigram indexes find them in tens of milliseconds at worst.
		err = s.readTx(ctx, func(tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				return err
			}
			return tx.SelectContext(ctx, &rows, qs, all...)
		})
	} else {
		err = s.db.SelectContext(ctx, &rows, qs, all...)
	}
	if err != nil {
		return nil, fmt.Errorf("store.BrowseOperations: counts: %w", err)
	}
	if len(rows) > BrowseSearchCountCap {
		page.Total, page.TotalCapped, page.Uncounted = len(rows), true, true
		return nil, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		page.Counts[r.State]++
		ids[i] = r.ID
	}
	page.Total = len(rows)
	return ids, nil
}

// A search is common when PostgreSQL's statistics put it in at least
// commonSearchShare of the rows under the filters and at least
// commonSearchRows of them: more than the count's cap, by far.
const (
	commonSearchShare = 0.02
	commonSearchRows  = 5 * BrowseSearchCountCap
)

// commonSearch reports whether the search cond (on the rows where
// selects) is common, as the planner estimates it. Counting it would cost
// more than the page: its trigrams' lists in the index are as long as its
// matches are many (150 ms for a fragment in a ninth of 10,000,000 refs),
// and the index hands over nothing before it has read them all. A common
// search is over the cap without counting, and its page is the newest
// rows in order, which hold a match every fiftieth row or sooner. The
// estimate comes from ANALYZE's sample, in which a text in 2 % of the
// ledger is in about two of the hundred histogram entries the planner
// matches the pattern against; a rarer text is counted.
func (s *Store) commonSearch(ctx context.Context, where string, args []any, cond string, vs []any) (bool, error) {
	estimate := func(q string, args []any) (float64, error) {
		var plan string
		if err := s.db.GetContext(ctx, &plan, s.rebind(`EXPLAIN (FORMAT JSON) SELECT 1 FROM operations o WHERE `+q), args...); err != nil {
			return 0, err
		}
		var p []struct {
			Plan struct {
				Rows float64 `json:"Plan Rows"`
			} `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(plan), &p); err != nil || len(p) != 1 {
			return 0, fmt.Errorf("reading the plan's estimate: %v", err)
		}
		return p[0].Plan.Rows, nil
	}
	all, err := estimate(where, args)
	if err != nil || all < commonSearchRows {
		return false, err
	}
	matches, err := estimate(where+" AND "+cond, append(append([]any{}, args...), vs...))
	if err != nil {
		return false, err
	}
	return matches >= commonSearchRows && matches >= commonSearchShare*all, nil
}

// readTx runs fn in a read-only transaction, rolled back after.
func (s *Store) readTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// searchCond is the search for q as one condition on operations o: the
// id equal to q, the key starting with q (exactly: keys are identifiers),
// or the source or resource ref containing q with ASCII letters in either
// case. Each engine reaches the rows through its own index (migration
// 0032), or with scan through none, and both decide with the same rule, so
// they find the same rows.
func (s *Store) searchCond(q string, scan bool) (string, []any) {
	if utf8.RuneCountInString(q) < MinRefSearch {
		// Too short to find inside a ref: no index holds one or two
		// characters, so a term that matches nothing would read the whole
		// ledger. The id and the key prefix still answer, from their
		// indexes.
		if s.engine == Postgres {
			return `(o.id = ? OR o.key LIKE ? ESCAPE '\')`, []any{q, escapeLike(q) + "%"}
		}
		return `(o.id = ? OR o.key GLOB ?)`, []any{q, escapeGlob(q) + "*"}
	}
	part := "%" + escapeLike(asciiLower(q)) + "%"
	if s.engine == Postgres {
		// translate(): the indexed expression, ASCII letters folded. To
		// scan, the refs are written so that no trigram index fits (|| ''
		// changes no value), and the rows come in the page's order.
		src, res := asciiFold("o.source_ref"), asciiFold("o.resource_ref")
		switch {
		case scan && strings.IndexFunc(q, unicode.IsLetter) < 0:
			// No letter to fold: the refs as they are, which is the same
			// answer without translate()'s cost on every row scanned.
			src, res = "(o.source_ref || '')", "(o.resource_ref || '')"
		case scan:
			src, res = asciiFold("(o.source_ref || '')"), asciiFold("(o.resource_ref || '')")
		case numberRun(q) != "" && numberRun(q) != q:
			// A trigram index reads every trigram's list in full, and
			// refs share their letters: "file-" and ".pdf" are in every
			// row (100 ms for "FILE-345678.PDF" over a million, 0.5 ms
			// for "345678"). The index looks for the run with digits in
			// it (numberRun); the whole text then decides, written so the
			// index does not take it too.
			run := "%" + escapeLike(asciiLower(numberRun(q))) + "%"
			return `(o.id = ? OR o.key LIKE ? ESCAPE '\' OR (` + src + ` LIKE ? ESCAPE '\' AND ` + asciiFold("(o.source_ref || '')") + ` LIKE ? ESCAPE '\') OR (` +
					res + ` LIKE ? ESCAPE '\' AND ` + asciiFold("(o.resource_ref || '')") + ` LIKE ? ESCAPE '\'))`,
				[]any{q, escapeLike(q) + "%", run, part, run, part}
		}
		return `(o.id = ? OR o.key LIKE ? ESCAPE '\' OR ` + src + ` LIKE ? ESCAPE '\' OR ` +
			res + ` LIKE ? ESCAPE '\')`, []any{q, escapeLike(q) + "%", part, part}
	}
	// SQLite: GLOB is case-sensitive and uses the key index for its prefix;
	// LIKE folds ASCII letters only, like translate() above.
	refs := `(o.source_ref LIKE ? ESCAPE '\' OR o.resource_ref LIKE ? ESCAPE '\')`
	args := []any{q, escapeGlob(q) + "*", part, part}
	if !scan {
		// The trigram index narrows to rows containing q, in any case
		// (FTS5 folds more than ASCII); LIKE then decides.
		refs = `(o.rowid IN (SELECT rowid FROM operations_search WHERE operations_search MATCH ?) AND ` + refs + `)`
		args = []any{q, escapeGlob(q) + "*", ftsPhrase(q), part, part}
	}
	// Scanning: LIKE over the rows in the page's order (no index fits an OR with LIKE in it), which the page's
	// LIMIT ends early when they are common.
	return `(o.id = ? OR o.key GLOB ? OR ` + refs + `)`, args
}

// numberRun is the part of q the trigram index looks for on PostgreSQL:
// q's longest run of ASCII letters and digits with a digit in it, of
// three characters at least ("345678" in "FILE-345678.PDF"), or "". The
// part of a ref that sets it apart from the others is its number, and a
// run's own trigrams are each in a few refs in ten thousand. The run
// comes without the characters either side of it: pg_trgm reads a word
// whose ends are written ("-345678.") as starting and ending there, and
// adds the trigrams of a word's start and end ("  3", " 34", "78 "),
// whose lists hold every ref whose number starts with 3 (a ninth of the
// ledger): 10 ms for a search at 10,000,000 operations, against 3 ms for
// the run alone. A run with fewer than three trigrams of its own
// ("-77777", "-7F3A/") keeps its sides, which are then what narrows it.
func numberRun(q string) string {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	from, to := 0, 0
	for i := 0; i < len(q); {
		j := i
		for j < len(q) && alnum(q[j]) {
			j++
		}
		if j-i >= 3 && strings.ContainsAny(q[i:j], "0123456789") && j-i > to-from {
			from, to = i, j
		}
		i = j + 1
	}
	if trigrams(asciiLower(q[from:to])) >= 3 || to == from {
		return q[from:to]
	}
	return q[max(from-1, 0):min(to+1, len(q))]
}

// trigrams is the number of different three-byte parts of s.
func trigrams(s string) int {
	seen := map[string]bool{}
	for i := 0; i+3 <= len(s); i++ {
		seen[s[i:i+3]] = true
	}
	return len(seen)
}

// ftsPhrase is q as an FTS5 phrase, taken literally (its double quotes
// doubled).
func ftsPhrase(q string) string { return `"` + strings.ReplaceAll(q, `"`, `""`) + `"` }

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

// hasFlag is the condition that col, a comma-separated list of flags,
// holds flag, and its argument: flag literal in the pattern (escapeLike),
// so '%', '_' and '\' (PostgreSQL's default LIKE escape, none on SQLite)
// match only themselves on both engines. The callers take only a valid
// flag, lower-case letters, so SQLite's case-blind LIKE finds what
// PostgreSQL's finds.
func hasFlag(col string, flag review.Flag) (string, any) {
	return "(',' || " + col + " || ',') LIKE ? ESCAPE '\\'", "%," + escapeLike(string(flag)) + ",%"
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
	at, inRange := cursorTime(us)
	if !ok || !inRange || id == "" {
		return time.Time{}, "", fmt.Errorf("%w: field \"after\": not a cursor of this list", review.ErrInvalid)
	}
	return at, id, nil
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
