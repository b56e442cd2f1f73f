package store

import (
	"context"
	"fmt"
	"sort"
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
	/* Store.Dashboard: cases open at instant t. */
	countOpenAt = `SELECT COUNT(*) FROM cases WHERE opened_at <= ? AND (resolved_at IS NULL OR resolved_at > ?)`
	/* Store.Dashboard */
	selectResolvedSpans = `SELECT opened_at, resolved_at FROM cases WHERE status = 'resolved' AND resolved_at >= ?`
	/* Store.Dashboard */
	countAmbiguity = `
SELECT destination, COALESCE(SUM(CASE WHEN next = 'reconcile' THEN 1 ELSE 0 END), 0) AS ambiguous, COUNT(*) AS total
FROM attempts WHERE finished_at >= ? GROUP BY destination ORDER BY destination`
	/* Store.Dashboard: reconciliation endings, from the audit trail. */
	countSettled = `SELECT to_state, COUNT(*) AS n FROM audit_events WHERE action = 'reconcile.settled' AND at >= ? GROUP BY to_state`
)

// Dashboard computes queue health over the window ending now, sampling the
// open-case count at points evenly spread over it.
func (s *Store) Dashboard(ctx context.Context, window time.Duration, points int) (*Dashboard, error) {
	now := s.now()
	since := now.Add(-window)
	d := &Dashboard{}
	for i := 0; i < points; i++ {
		t := since.Add(time.Duration(i+1) * window / time.Duration(points))
		var n int
		if err := s.db.GetContext(ctx, &n, s.rebind(countOpenAt), t, t); err != nil {
			return nil, fmt.Errorf("store.Dashboard: %w", err)
		}
		d.OpenOverTime = append(d.OpenOverTime, Point{At: t, Value: n})
	}
	var spans []struct {
		Opened   time.Time `db:"opened_at"`
		Resolved time.Time `db:"resolved_at"`
	}
	if err := s.db.SelectContext(ctx, &spans, s.rebind(selectResolvedSpans), since); err != nil {
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
	if err := s.db.SelectContext(ctx, &rates, s.rebind(countAmbiguity), since); err != nil {
		return nil, fmt.Errorf("store.Dashboard: %w", err)
	}
	for _, r := range rates {
		d.Ambiguity = append(d.Ambiguity, Rate{Destination: r.Destination, Ambiguous: r.Ambiguous, Total: r.Total})
	}
	var settled []struct {
		ToState string `db:"to_state"`
		N       int    `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &settled, s.rebind(countSettled), since); err != nil {
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
	return d, nil
}
