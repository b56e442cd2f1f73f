package demo

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSeedHistory: the demo's week of history and live mix, written
// through the ledger into a fresh store, give the dashboard a week to show
// and each role work it may decide; the audit trail verifies; a second
// seeding writes nothing.
func TestSeedHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		cfg := &review.Config{}
		d, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		d.serveSandbox("http://127.0.0.1:9") // no webhooks arrive: nothing listens there
		end := time.Now().UTC().Truncate(time.Second)
		clk := NewClock(end)
		st := storetest.Open(t, engine, store.Options{Config: cfg, Clock: clk.Now})
		h, err := SeedHistory(ctx, st, clk, end, d.sandboxResource)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d operations in %s", engine, h.Operations, h.Took)
		if h.Skipped || h.Operations < 300 {
			t.Fatalf("seeded %+v, want a few hundred operations", h)
		}
		// (How long it took is logged, not asserted: speed is measured in
		// benchmarks, never in timed tests on a shared machine.)

		settledEveryDay(t, st, end)
		supportCase, approvals, retries := roleWork(t, st)
		weekOnTheDashboard(t, st)

		// The trail those calls wrote holds.
		if rep := storetest.Sealed(t, st); !rep.OK {
			t.Fatalf("audit trail: %+v", rep)
		}

		// The live cases' resources are the sandbox's: an undo decided on
		// one acts on something real.
		for _, c := range supportCase {
			op, err := st.OperationByID(ctx, c.OperationID, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range op.Evidence {
				for _, cand := range ev.Candidates {
					if resp, err := http.Get(d.sbURL + "/resources/" + cand.Ref); err != nil || resp.StatusCode != http.StatusOK {
						t.Errorf("case %s names %s, which the sandbox does not hold (%v)", c.ID, cand.Ref, err)
					} else {
						resp.Body.Close()
					}
				}
			}
		}

		// Each role's case is decidable by that role: the decisions apply.
		if c := supportCase[review.ReasonMultipleCands]; c != nil {
			decide(t, st, store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: c.RecommendedRef,
				UndoRef: otherCandidate(t, st, c), Compensation: "delete the copy", Reason: "test: keep one", Actor: supportUser})
		}
		if c := supportCase[review.ReasonVersionMismatch]; c != nil {
			decide(t, st, store.DecisionRequest{CaseID: c.ID, Action: review.DecideFail, Reason: "test: the wrong version", Actor: supportUser})
		}
		for _, c := range approvals {
			decide(t, st, store.DecisionRequest{CaseID: c.ID, Action: review.DecideApprove, Reason: "test: approved", Actor: reviewerUser})
		}
		for _, c := range retries {
			decide(t, st, store.DecisionRequest{CaseID: c.ID, Action: review.DecideApproveRetry, Reason: "test: retry", Actor: reviewerUser})
		}

		// A second seeding on the same database writes nothing.
		again, err := SeedHistory(ctx, st, clk, end, nil)
		if err != nil || !again.Skipped {
			t.Fatalf("second seeding: %+v, %v", again, err)
		}
		if rep := storetest.Sealed(t, st); !rep.OK {
			t.Fatalf("audit trail after the second seeding: %+v", rep)
		}
	})
}

// TestSeedHistoryAtAnyHour: whatever the hour the demo starts, each of the
// last seven days has operations settled in it, each role has its work and
// the dashboard's week means something. Working hours used to be
// drawn on the calendar day each day's slot began, so the slot ending now
// lost today's working hours: at 17:50 UTC on a Sunday, 9 settled "today"
// (CI, both engines). The seeding is the demo's, not a store's: one engine.
func TestSeedHistoryAtAnyHour(t *testing.T) {
	cfg := &review.Config{}
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A Monday at night, before work, mid-morning, late afternoon and in
	// the evening (UTC); a Sunday, a Saturday, the Friday evening an
	// earlier flake of the live mix's cases was reproduced at, and a
	// Saturday evening whose history ended minutes after a keep_and_undo,
	// before the undo was tried (it was left pending: following).
	for _, end := range []string{"2026-12-07T01:10:00Z", "2026-12-07T07:30:00Z", "2026-12-07T10:00:00Z", "2026-12-07T17:50:00Z", "2026-12-07T22:40:00Z",
		"2026-12-06T10:00:00Z", "2026-12-06T17:50:00Z", "2026-12-05T12:00:00Z", "2026-12-04T20:14:00Z",
		"2026-12-12T20:45:00Z"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			end, err := time.Parse(time.RFC3339, end)
			if err != nil {
				t.Fatal(err)
			}
			clk := NewClock(end)
			st := storetest.Open(t, store.SQLite, store.Options{Config: cfg, Clock: clk.Now})
			if _, err := SeedHistory(context.Background(), st, clk, end, nil); err != nil {
				t.Fatal(err)
			}
			settledEveryDay(t, st, end)
			roleWork(t, st)
			weekOnTheDashboard(t, st)
		})
	}
}

// settledEveryDay checks that operations were settled (confirmed or
// failed) on each of the HistoryDays days before end, and that every
// operation left open waits for a person, not for the reconciler.
func settledEveryDay(t *testing.T, st *store.Store, end time.Time) {
	t.Helper()
	var perDay [HistoryDays]int
	total := 0
	for _, tenant := range Tenants {
		cursor := ""
		for {
			ops, next, err := st.ListOperations(context.Background(), tenant, store.OperationFilter{}, cursor, 500)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range ops {
				total++
				if op.State == review.Confirmed || op.State == review.Failed {
					if day := int(end.Sub(op.UpdatedAt) / (24 * time.Hour)); day >= 0 && day < HistoryDays {
						perDay[day]++
					}
				}
				if !op.State.Terminal() && op.State != review.NeedsReview && op.State != review.AwaitingApproval {
					t.Errorf("%s %s left %s: the running server's reconciler would probe it", op.ID, op.Action, op.State)
				}
			}
			if cursor = next; next == "" {
				break
			}
		}
	}
	t.Logf("%d operations listed (with the undos decisions registered); settled per day back from %s: %v", total, end.Format(time.RFC3339), perDay)
	for day, n := range perDay {
		if n < 10 {
			t.Errorf("%d operations settled %d days ago, want some every day: %v", n, day, perDay)
		}
	}
}

// roleWork finds each role's work in the seeded history: support's
// duplicates and versions that differ (one case of each from the live
// mix), reviewers' approvals and irreversible retries, which support may
// not decide.
func roleWork(t *testing.T, st *store.Store) (supportCase map[review.Reason]*store.Case, approvals, retries []store.Case) {
	t.Helper()
	ctx := context.Background()
	// Support: duplicates and versions that differ, which it may decide.
	supportCase = map[review.Reason]*store.Case{}
	for _, r := range []review.Reason{review.ReasonMultipleCands, review.ReasonVersionMismatch} {
		cs := decidable(t, st, review.RoleSupport, r, "")
		if len(cs) == 0 {
			t.Errorf("support has no %s case it may decide", r)
			continue
		}
		// One of the live mix's: a history case still open names
		// made-up refs (its source is contract-… too), and which case
		// the queue lists first depends on the day's priorities.
		for i := range cs {
			if op, err := st.OperationByID(ctx, cs[i].OperationID, nil); err == nil && inLiveMix(op) {
				supportCase[r] = &cs[i]
				break
			}
		}
		if supportCase[r] == nil {
			t.Errorf("support has no %s case of the live mix to decide", r)
		}
	}
	// Reviewers: approvals, and irreversible retries awaiting approve_retry.
	approvals = decidable(t, st, review.RoleReviewer, review.ReasonApprovalRequired, review.DecideApprove)
	retries = decidable(t, st, review.RoleReviewer, review.ReasonIrreversible, review.DecideApproveRetry)
	if len(approvals) == 0 || len(retries) == 0 {
		t.Errorf("reviewers may decide %d approval cases and %d irreversible retries, want some of each", len(approvals), len(retries))
	}
	// That is reviewers' work, not support's.
	for _, c := range append(slices.Clone(approvals), retries...) {
		op, err := st.OperationByID(ctx, c.OperationID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range review.DecisionsAllowed(op.State, c.Reasons) {
			if review.RoleSupport.CanDecide(op, a) {
				t.Errorf("support may %s case %s (%v), seeded for reviewers", a, c.ID, c.Reasons)
			}
		}
	}
	return supportCase, approvals, retries
}

// weekOnTheDashboard checks the dashboard's week: series that mean something.
func weekOnTheDashboard(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	dash, err := st.Dashboard(ctx, nil, HistoryDays*24*time.Hour, 28)
	if err != nil {
		t.Fatal(err)
	}
	open := map[int]bool{}
	for _, p := range dash.OpenOverTime {
		open[p.Value] = true
	}
	amb, att := 0, 0
	for _, r := range dash.Ambiguity {
		amb, att = amb+r.Ambiguous, att+r.Total
	}
	t.Logf("dashboard: open over time %v; resolved %d (p50 %s, p90 %s); ambiguous %d of %d attempts; auto-settled %d, escalated %d, duplicates prevented %d; compensations %d done",
		dash.OpenOverTime, dash.Resolved, dash.ResolveP50, dash.ResolveP90, amb, att, dash.AutoSettled, dash.Escalated, dash.DuplicatesPrevented, dash.CompensationsDone)
	// How many cases the week resolved depends on the hour the seeding
	// ends: 18 to 33 over a week's hours, two hours apart. Fifteen are
	// enough for a median and a 90th percentile that mean something.
	switch {
	case len(open) < 3:
		t.Errorf("open cases over the week take %d values, want a curve: %v", len(open), dash.OpenOverTime)
	case dash.Resolved < 15 || dash.ResolveP50 <= time.Minute || dash.ResolveP90 <= dash.ResolveP50:
		t.Errorf("resolved %d cases, p50 %s, p90 %s: want a spread of resolution times", dash.Resolved, dash.ResolveP50, dash.ResolveP90)
	case att < 300 || amb*100 < att*3 || amb*100 > att*20:
		t.Errorf("ambiguous %d of %d attempts: want a few per cent", amb, att)
	case dash.AutoSettled <= dash.Escalated || dash.Escalated < 5:
		t.Errorf("reconciliation settled %d on its own and escalated %d: want most settled, some escalated", dash.AutoSettled, dash.Escalated)
	case dash.DuplicatesPrevented == 0 || dash.CompensationsDone == 0:
		t.Errorf("duplicates prevented %d, compensations done %d", dash.DuplicatesPrevented, dash.CompensationsDone)
	}
}

// inLiveMix reports whether op is one of the live mix's cases.
func inLiveMix(op *review.Operation) bool {
	return slices.ContainsFunc(liveMix, func(l liveCase) bool { return l.tenant == op.Tenant && l.source == op.SourceRef })
}

// decidable lists the open cases with reason that role may decide (with
// action, when named), as the queue filters them and Role.CanDecide rules.
func decidable(t *testing.T, st *store.Store, role review.Role, reason review.Reason, action string) []store.Case {
	t.Helper()
	page, err := st.Queue(context.Background(), store.QueueFilter{DecidableBy: role, Reason: string(reason)}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Case
	for _, c := range page.Cases {
		op, err := st.OperationByID(context.Background(), c.OperationID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range review.DecisionsAllowed(op.State, c.Reasons) {
			if (action == "" || a == action) && role.CanDecide(op, a) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// otherCandidate is a resource of c's operation besides the recommended one.
func otherCandidate(t *testing.T, st *store.Store, c *store.Case) string {
	t.Helper()
	op, err := st.OperationByID(context.Background(), c.OperationID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range op.Evidence {
		for _, cand := range ev.Candidates {
			if cand.Ref != c.RecommendedRef {
				return cand.Ref
			}
		}
	}
	t.Fatalf("case %s: no second candidate", c.ID)
	return ""
}

func decide(t *testing.T, st *store.Store, r store.DecisionRequest) {
	t.Helper()
	if _, err := st.Decide(context.Background(), r); err != nil {
		t.Errorf("%s decides %s on case %s: %v", r.Actor, r.Action, r.CaseID, err)
	}
}
