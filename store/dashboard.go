package store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Dashboard is what managers read about queue health.
type Dashboard struct {
	// OpenOverTime is the number of open cases at each point, oldest first.
	OpenOverTime []Point
	// ResolveP50 and ResolveP90 are times to resolve over the window.
	ResolveP50, ResolveP90 time.Duration
	Resolved               int
	// Ambiguity is the share of outcomes that left an operation ambiguous, per destination.
	Ambiguity []Rate
	// AutoSettled and Escalated count reconciliation endings in the window.
	AutoSettled, Escalated int
	// DuplicatesPrevented counts unknown outcomes reconciliation found
	// already done: a blind retry would have repeated the effect.
	DuplicatesPrevented int
	// Compensations registered in the window: done (confirmed), failed
	// (failed, ambiguous or in review), and pending (anything else).
	CompensationsDone, CompensationsPending, CompensationsFailed int
}

// Point is one sample of a series.
type Point struct {
	At    time.Time
	Value int
}

// Rate is a share per destination.
type Rate struct {
	Destination string
	Ambiguous   int
	Total       int
}

const (
	// Each query below is bounded to the reader's scope: scopeCond is
	// replaced by inScope's condition.
	scopeCond = "/*scope*/ 1 = 1"

	/* Store.Dashboard: cases open at instant t. */
	countOpenAt = `SELECT COUNT(*) FROM cases WHERE opened_at <= ? AND (resolved_at IS NULL OR resolved_at > ?) AND ` + scopeCond
	/* Store.Dashboard */
	selectResolvedSpans = `SELECT opened_at, resolved_at FROM cases WHERE status = 'resolved' AND resolved_at >= ? AND ` + scopeCond
	/* Store.Dashboard: attempts carry no tenant; their operation does. */
	countAmbiguity = `
SELECT a.destination, COALESCE(SUM(CASE WHEN a.next = 'reconcile' THEN 1 ELSE 0 END), 0) AS ambiguous, COUNT(*) AS total
FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.finished_at >= ? AND ` + scopeCond + ` GROUP BY a.destination ORDER BY a.destination`
	/* Store.Dashboard: reconciliation endings, from the audit trail. */
	countSettled = `SELECT to_state, COUNT(*) AS n FROM audit_events WHERE action = 'reconcile.settled' AND at >= ? AND ` + scopeCond + ` GROUP BY to_state`
	/* Store.Dashboard: compensation operations by state. */
	countCompensations = `
SELECT o.state, COUNT(*) AS n FROM compensations c JOIN operations o ON o.id = c.operation_id
WHERE c.created_at >= ? AND c.canceled_by = '' AND ` + scopeCond + ` GROUP BY o.state`
)

// scoped writes scope's condition on col into q in place of scopeCond,
// rebound for the engine, and appends its arguments to args.
func (s *Store) scoped(q, col string, scope []string, args ...any) (string, []any) {
	cond, sargs := inScope(col, scope)
	return s.rebind(strings.Replace(q, scopeCond, cond, 1)), append(args, sargs...)
}

// Dashboard computes queue health over the window ending now for the
// tenants in scope (nil: all), sampling the open-case count at points
// evenly spread over it.
func (s *Store) Dashboard(ctx context.Context, scope []string, window time.Duration, points int) (*Dashboard, error) {
	now := s.now()
	since := now.Add(-window)
	d := &Dashboard{}
	for i := 0; i < points; i++ {
		t := since.Add(time.Duration(i+1) * window / time.Duration(points))
		var n int
		q, args := s.scoped(countOpenAt, "tenant", scope, t, t)
		if err := s.db.GetContext(ctx, &n, q, args...); err != nil {
			return nil, fmt.Errorf("store.Dashboard: %w", err)
		}
		d.OpenOverTime = append(d.OpenOverTime, Point{At: t, Value: n})
	}
	var spans []struct {
		Opened   time.Time `db:"opened_at"`
		Resolved time.Time `db:"resolved_at"`
	}
	q, args := s.scoped(selectResolvedSpans, "tenant", scope, since)
	if err := s.db.SelectContext(ctx, &spans, q, args...); err != nil {
		return nil, fmt.Errorf("store.Dashboard: %w", err)
	}
	ds := make([]time.Duration, len(spans))
	for i, sp := range spans {
		ds[i] = sp.Resolved.Sub(sp.Opened)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	d.Resolved = len(ds)
	if len(ds) > 0 {
		d.ResolveP50 = ds[(len(ds)-1)*50/100]
		d.ResolveP90 = ds[(len(ds)-1)*90/100]
	}
	var rates []struct {
		Destination string `db:"destination"`
		Ambiguous   int    `db:"ambiguous"`
		Total       int    `db:"total"`
	}
	q, args = s.scoped(countAmbiguity, "o.tenant", scope, since)
	if err := s.db.SelectContext(ctx, &rates, q, args...); err != nil {
		return nil, fmt.Errorf("store.Dashboard: %w", err)
	}
	for _, r := range rates {
		d.Ambiguity = append(d.Ambiguity, Rate{Destination: r.Destination, Ambiguous: r.Ambiguous, Total: r.Total})
	}
	var settled []struct {
		ToState string `db:"to_state"`
		N       int    `db:"n"`
	}
	q, args = s.scoped(countSettled, "tenant", scope, since)
	if err := s.db.SelectContext(ctx, &settled, q, args...); err != nil {
		return nil, fmt.Errorf("store.Dashboard: %w", err)
	}
	for _, r := range settled {
		if r.ToState == "needs_review" {
			d.Escalated += r.N
		} else {
			d.AutoSettled += r.N
		}
		if r.ToState == "confirmed" {
			d.DuplicatesPrevented += r.N
		}
	}
	var comps []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	q, args = s.scoped(countCompensations, "o.tenant", scope, since)
	if err := s.db.SelectContext(ctx, &comps, q, args...); err != nil {
		return nil, fmt.Errorf("store.Dashboard: %w", err)
	}
	for _, c := range comps {
		switch c.State {
		case "confirmed":
			d.CompensationsDone += c.N
		case "failed", "ambiguous", "needs_review":
			d.CompensationsFailed += c.N
		default:
			d.CompensationsPending += c.N
		}
	}
	return d, nil
}
