package store

import (
	"context"
	"fmt"
	"strings"
)

// Gauges are the ledger's current levels, read for /metrics.
type Gauges struct {
	OperationsByState map[string]int64
	OpenCasesByReason map[string]int64
	// InFlightByDestination counts attempts holding a live lease.
	InFlightByDestination map[string]int64
	// Window counts first attempts and retries per destination over the
	// retry budget's sliding window.
	FirstAttempts map[string]int64
	Retries       map[string]int64
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
SELECT destination, COALESCE(SUM(CASE WHEN n = 1 THEN 1 ELSE 0 END), 0) AS firsts,
       COALESCE(SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END), 0) AS retries
FROM attempts WHERE started_at > ? GROUP BY destination`
)

// Gauges reads the current levels.
func (s *Store) Gauges(ctx context.Context) (*Gauges, error) {
	g := &Gauges{OperationsByState: map[string]int64{}, OpenCasesByReason: map[string]int64{},
		InFlightByDestination: map[string]int64{}, FirstAttempts: map[string]int64{}, Retries: map[string]int64{}}
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
	var win []struct {
		Destination string `db:"destination"`
		Firsts      int64  `db:"firsts"`
		Retries     int64  `db:"retries"`
	}
	if err := s.db.SelectContext(ctx, &win, s.rebind(countWindow), now.Add(-s.cfg.Budget().Window)); err != nil {
		return nil, fmt.Errorf("store.Gauges: %w", err)
	}
	for _, r := range win {
		g.FirstAttempts[r.Destination], g.Retries[r.Destination] = r.Firsts, r.Retries
	}
	return g, nil
}
