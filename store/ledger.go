package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/limbo-dev/limbo/review"
)

// Ledger reads what RELIABILITY's invariants are checked on
// (review.CheckInvariants) for the given tenants: their operations with
// attempts, evidence and jobs, the audit trail about them, and which have
// an open case. It reads through the same queries as the API and the
// console; the caller adds what only it knows (acknowledgements, the audit
// verification).
func (s *Store) Ledger(ctx context.Context, tenants []string) (*review.Ledger, error) {
	l := &review.Ledger{OpenCases: map[string]bool{}, Recommendations: map[string]review.Recommendation{}}
	ours := map[string]bool{}
	for _, tenant := range tenants {
		cursor := ""
		for {
			ops, next, err := s.ListOperations(ctx, tenant, OperationFilter{}, cursor, 500)
			if err != nil {
				return nil, fmt.Errorf("store.Ledger: %w", err)
			}
			for _, op := range ops {
				l.Operations = append(l.Operations, op)
				ours[op.ID] = true
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	for after := int64(0); ; {
		evs, err := s.AuditEvents(ctx, after, 5000)
		if err != nil {
			return nil, fmt.Errorf("store.Ledger: %w", err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if ours[e.OperationID] {
				l.Trail = append(l.Trail, TrailEvent(e))
			}
		}
		after = evs[len(evs)-1].Seq
	}
	cases, err := s.OpenCases(ctx, 1<<30)
	if err != nil {
		return nil, fmt.Errorf("store.Ledger: %w", err)
	}
	for _, c := range cases {
		if ours[c.OperationID] {
			l.OpenCases[c.OperationID] = true
			l.Recommendations[c.OperationID] = review.Recommendation{Action: c.RecommendedAction, Ref: c.RecommendedRef, Rationale: c.Rationale}
		}
	}
	return l, nil
}

// TrailEvent is an audit event as the invariants read it: an
// attempt.started event's detail names the attempt it grants.
func TrailEvent(e AuditEvent) review.TrailEvent {
	te := review.TrailEvent{Seq: e.Seq, OperationID: e.OperationID, Action: e.Action,
		FromState: review.State(e.FromState), ToState: review.State(e.ToState)}
	if e.Action == "attempt.started" {
		var d struct {
			N int `json:"n"`
		}
		if json.Unmarshal([]byte(e.Detail), &d) == nil {
			te.N = d.N
		}
	}
	return te
}
