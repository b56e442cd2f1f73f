package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// inReview registers r, lets its first attempt time out and escalates it:
// with two candidates naming it (duplicates) unless absent is set, in which
// case the reconciler proves absence (which sends financial and
// irreversible operations to review). It returns the operation and its
// open case.
func (b *bundle) inReview(t testing.TB, r review.Registration, absent bool) (*review.Operation, *store.Case) {
	t.Helper()
	op := b.register(t, r)
	b.start(t, op)
	wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
	if absent {
		op = b.escalate(t, op, found())
	} else {
		got, err := b.s.AddEvidence(b.ctx, r.Tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{mine(op, "fld-1"), mine(op, "fld-2")}}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.NeedsReview)
		op = got
	}
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Status != store.CaseOpen {
		t.Fatalf("cases = %+v, want one open case", cs)
	}
	return op, &cs[0]
}

// seen marks r as made by a reviewer who saw c as it was (the console
// sends the case version with every decision).
func seen(r store.DecisionRequest, c *store.Case) store.DecisionRequest {
	r.CaseVersion = c.Version
	return r
}

// decideReq is a valid request for action on c by actor.
func decideReq(c *store.Case, action, actor string) store.DecisionRequest {
	req := store.DecisionRequest{CaseID: c.ID, Action: action, Actor: actor, Reason: "checked the destination by hand"}
	switch action {
	case review.DecideConfirm:
		req.Ref = "fld-1"
	case review.DecideCompensate:
		req.Ref, req.Compensation = "fld-2", "deleted fld-2 with DELETE /resources/fld-2"
	}
	return req
}

// TestDecideTransitions: each decision moves the operation, resolves the
// case (compensate keeps it open: the undo is still to be settled),
// records the decision and audits both.
func TestDecideTransitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		action string
		want   review.State
	}{
		{review.DecideConfirm, review.Confirmed},
		{review.DecideCompensate, review.Compensating},
		{review.DecideFail, review.Failed},
		{review.DecideApproveRetry, review.RetryWait},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			t.Run(tt.action, func(t *testing.T) {
				op, c := b.inReview(t, intention(fmt.Sprintf("doc-%d", i), review.RiskCompensableWrite, "plain"), false)
				b.clk.Advance(time.Second)
				d, err := b.s.Decide(b.ctx, decideReq(c, tt.action, "alice"))
				if err != nil {
					t.Fatalf("Decide: %v", err)
				}
				if d.Status != store.DecisionApplied || d.Action != tt.action || d.Actor != "alice" || d.CaseID != c.ID ||
					d.OperationID != op.ID || d.Tenant != tenantA || d.FromState != string(review.NeedsReview) ||
					d.ToState != string(tt.want) || d.PayloadHash != op.PayloadHash || d.Key != op.Key || d.Reason == "" ||
					!d.DecidedAt.Equal(b.clk.Now()) || d.ID == "" {
					t.Errorf("decision = %+v", d)
				}
				got := b.get(t, op)
				wantState(t, got, tt.want)

				rc, err := b.s.GetCase(b.ctx, c.ID, nil)
				if err != nil {
					t.Fatal(err)
				}
				resolved := 1
				if tt.action == review.DecideCompensate {
					resolved = 0
					if rc.Status != store.CaseOpen || rc.Version <= c.Version {
						t.Errorf("case after compensate = %+v, want open with a new version", rc)
					}
				} else if rc.Status != store.CaseResolved || rc.ResolvedBy != "alice" || rc.Resolution != tt.action ||
					rc.ResolvedAt == nil || !rc.ResolvedAt.Equal(b.clk.Now()) || rc.Version <= c.Version {
					t.Errorf("case after decision = %+v", rc)
				}
				hist := b.history(t, op.ID)
				acts := countActions(hist)
				if acts["decision."+tt.action] != 1 || acts["case.resolved"] != resolved {
					t.Errorf("audit = %v, want one decision.%s and %d case.resolved", acts, tt.action, resolved)
				}
				for _, ev := range hist {
					if ev.Action == "decision."+tt.action && (ev.Actor != "alice" || ev.FromState != string(review.NeedsReview) || ev.ToState != string(tt.want)) {
						t.Errorf("decision event = %+v", ev)
					}
				}

				switch tt.action {
				case review.DecideConfirm:
					// I7: the confirmation rests on the reviewer's evidence.
					last := got.Evidence[len(got.Evidence)-1]
					if got.Resource == nil || got.Resource.Ref != "fld-1" || last.Source != review.SourceReviewer ||
						!last.Authoritative || last.Verdict != review.VerdictConfirms {
						t.Errorf("confirmed with resource %+v and last evidence %+v", got.Resource, last)
					}
				case review.DecideApproveRetry:
					g, err := b.tryStart(op, "", "")
					if err != nil || g.N != 2 || g.Key != op.Key {
						t.Errorf("attempt after approve_retry = %+v, %v; want attempt 2 with the same key", g, err)
					}
				default:
					_, err := b.tryStart(op, "", "")
					errAs[*review.NotAttemptableError](t, err)
				}

				// A second decision is refused, naming the first: on the
				// resolved case by its status; on the case compensate kept
				// open by the version bob saw.
				req := decideReq(c, review.DecideFail, "bob")
				if tt.action == review.DecideCompensate {
					req = seen(req, c)
				}
				_, err = b.s.Decide(b.ctx, req)
				ad := errAs[*review.AlreadyDecidedError](t, err)
				if ad.By != "alice" || ad.Action != tt.action || ad.CaseID != c.ID || ad.At.IsZero() {
					t.Errorf("AlreadyDecidedError = %+v, want alice's %s", ad, tt.action)
				}
			})
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestDecideRefusals: invalid requests, cases out of scope or unknown, and
// a case changed since the reviewer saw it.
func TestDecideRefusals(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, c := b.inReview(t, intention("doc-1", review.RiskCompensableWrite, "plain"), false)
		tests := []struct {
			name string
			req  store.DecisionRequest
			want error
		}{
			{"no reason", store.DecisionRequest{CaseID: c.ID, Action: review.DecideFail, Actor: "alice"}, review.ErrInvalid},
			{"confirm without a ref", store.DecisionRequest{CaseID: c.ID, Action: review.DecideConfirm, Actor: "alice", Reason: "it is there"}, review.ErrInvalid},
			{"unknown action", store.DecisionRequest{CaseID: c.ID, Action: "delete", Actor: "alice", Reason: "gone"}, review.ErrInvalid},
			{"unknown case", decideReq(&store.Case{ID: "case_nope"}, review.DecideFail, "alice"), review.ErrNotFound},
			{"out of scope", func() store.DecisionRequest {
				r := decideReq(c, review.DecideFail, "alice")
				r.Scope = []string{tenantB}
				return r
			}(), review.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := b.s.Decide(b.ctx, tt.req); !errors.Is(err, tt.want) {
					t.Errorf("Decide = %v, want %v", err, tt.want)
				}
			})
		}
		t.Run("stale case version", func(t *testing.T) {
			req := decideReq(c, review.DecideFail, "alice")
			req.CaseVersion = c.Version + 7
			if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, review.ErrStale) {
				t.Errorf("Decide = %v, want ErrStale", err)
			}
		})
		t.Run("stale operation version", func(t *testing.T) {
			req := decideReq(c, review.DecideFail, "alice")
			req.OpVersion = op.Version + 7
			if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, review.ErrStale) || !strings.Contains(err.Error(), "reload") {
				t.Errorf("Decide = %v, want ErrStale telling to reload", err)
			}
		})
		wantState(t, b.get(t, op), review.NeedsReview)
		if rc, _ := b.s.GetCase(b.ctx, c.ID, nil); rc.Status != store.CaseOpen {
			t.Errorf("refused decisions resolved the case: %+v", rc)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions`); n != 0 {
			t.Errorf("%d decisions recorded by refused requests", n)
		}
		// In scope, with the version the reviewer saw: applied.
		req := decideReq(c, review.DecideFail, "alice")
		req.Scope, req.CaseVersion = []string{tenantA}, c.Version
		if _, err := b.s.Decide(b.ctx, req); err != nil {
			t.Fatalf("Decide in scope: %v", err)
		}
	})
}

// TestDecideConcurrently: 2–8 reviewers decide one case at the same
// moment, 20 rounds: exactly one decision applies each round; every other
// reviewer (each sending the case version they saw, as the console does)
// is told who decided what — also when the winner's compensate kept the
// case open.
func TestDecideConcurrently(t *testing.T) {
	t.Parallel()
	actions := []string{review.DecideConfirm, review.DecideCompensate, review.DecideFail, review.DecideApproveRetry}
	targets := map[string]review.State{review.DecideConfirm: review.Confirmed, review.DecideCompensate: review.Compensating,
		review.DecideFail: review.Failed, review.DecideApproveRetry: review.RetryWait}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for round := range 20 {
			deciders := 2 + round%7
			op, c := b.inReview(t, intention(fmt.Sprintf("doc-%d", round), review.RiskCompensableWrite, "plain"), false)
			var wg sync.WaitGroup
			ready := make(chan struct{})
			decs := make([]*store.Decision, deciders)
			errs := make([]error, deciders)
			for i := range deciders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-ready
					decs[i], errs[i] = b.s.Decide(b.ctx, seen(decideReq(c, actions[(i+round)%len(actions)], fmt.Sprintf("reviewer-%d", i)), c))
				}()
			}
			close(ready)
			wg.Wait()

			var winner *store.Decision
			for i, err := range errs {
				if err == nil {
					if winner != nil {
						t.Fatalf("round %d: two decisions applied: %+v and %+v", round, winner, decs[i])
					}
					winner = decs[i]
				}
			}
			if winner == nil {
				t.Fatalf("round %d: no decision applied: %v", round, errs)
			}
			for i, err := range errs {
				if err == nil {
					continue
				}
				var ad *review.AlreadyDecidedError
				if !errors.As(err, &ad) {
					t.Errorf("round %d, reviewer %d: %v, want AlreadyDecidedError", round, i, err)
					continue
				}
				if ad.By != winner.Actor || ad.Action != winner.Action {
					t.Errorf("round %d, reviewer %d: told %s by %s, but %s by %s won", round, i, ad.Action, ad.By, winner.Action, winner.Actor)
				}
			}
			wantState(t, b.get(t, op), targets[winner.Action])
			if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions WHERE case_id = ?`, c.ID); n != 1 {
				t.Errorf("round %d: %d decisions recorded, want 1", round, n)
			}
			resolved := 1
			if winner.Action == review.DecideCompensate {
				resolved = 0
			}
			if n := countActions(b.history(t, op.ID))["case.resolved"]; n != resolved {
				t.Errorf("round %d: %d case.resolved events, want %d", round, n, resolved)
			}
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestDecideFourEyes: approving a retry of a financial or irreversible
// operation takes two different reviewers.
func TestDecideFourEyes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		risk       review.Risk
		flags      []review.Flag
		wantReason review.Reason
	}{
		{"financial", review.RiskCompensableWrite, []review.Flag{review.FlagFinancial}, review.ReasonFinancial},
		{"irreversible flag", review.RiskCompensableWrite, []review.Flag{review.FlagIrreversible}, review.ReasonIrreversible},
		{"irreversible risk", review.RiskIrreversible, nil, review.ReasonIrreversible},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := intention(fmt.Sprintf("charge-%d", i), tt.risk, "plain")
				r.Flags = tt.flags
				op, c := b.inReview(t, r, true)
				if !slices.Contains(c.Reasons, tt.wantReason) || c.RecommendedAction != review.RecommendApproveRetry {
					t.Errorf("case = %v, %s; want reason %s and approve_retry recommended", c.Reasons, c.RecommendedAction, tt.wantReason)
				}

				first, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "alice"))
				if err != nil {
					t.Fatalf("first approval: %v", err)
				}
				if first.Status != store.DecisionFirstApproval || first.ToState != string(review.NeedsReview) ||
					first.PayloadHash != op.PayloadHash || first.Key != op.Key {
					t.Errorf("first approval = %+v", first)
				}
				rc, _ := b.s.GetCase(b.ctx, c.ID, nil)
				if rc.Status != store.CaseOpen || rc.Version <= c.Version {
					t.Errorf("case after the first approval = %+v, want still open with a new version", rc)
				}
				wantState(t, b.get(t, op), review.NeedsReview)
				_, err = b.tryStart(op, "", "")
				errAs[*review.NotAttemptableError](t, err)

				// The same reviewer again: refused, nothing recorded.
				if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "alice")); !errors.Is(err, review.ErrSecondApprover) {
					t.Fatalf("same reviewer twice = %v, want ErrSecondApprover", err)
				}
				wantState(t, b.get(t, op), review.NeedsReview)

				second, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "bob"))
				if err != nil {
					t.Fatalf("second approval: %v", err)
				}
				if second.Status != store.DecisionApplied || second.Actor != "bob" || second.ToState != string(review.RetryWait) {
					t.Errorf("second approval = %+v", second)
				}
				wantState(t, b.get(t, op), review.RetryWait)
				rc, _ = b.s.GetCase(b.ctx, c.ID, nil)
				if rc.Status != store.CaseResolved || rc.ResolvedBy != "bob" {
					t.Errorf("case after the second approval = %+v", rc)
				}
				g, err := b.tryStart(op, "", "")
				if err != nil || g.N != 2 || g.Key != op.Key {
					t.Errorf("attempt after approval = %+v, %v; want attempt 2 with the same key", g, err)
				}
				acts := countActions(b.history(t, op.ID))
				if acts["decision.first_approval"] != 1 || acts["decision.approve_retry"] != 1 || acts["case.resolved"] != 1 {
					t.Errorf("audit = %v", acts)
				}
				if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions WHERE case_id = ?`, c.ID); n != 2 {
					t.Errorf("%d decisions recorded, want the first approval and the applied one", n)
				}
			})
		}
		t.Run("other decisions need one reviewer", func(t *testing.T) {
			r := intention("charge-fail", review.RiskCompensableWrite, "plain")
			r.Flags = []review.Flag{review.FlagFinancial}
			op, c := b.inReview(t, r, true)
			d, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "alice"))
			if err != nil || d.Status != store.DecisionApplied {
				t.Fatalf("fail on a financial case = %+v, %v; want applied", d, err)
			}
			wantState(t, b.get(t, op), review.Failed)
		})
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// feedAll reads tenant's decisions feed from cursor, limit at a time,
// until want decisions arrived (PostgreSQL lists a decision only once
// every older transaction on the server has ended, so it may take a few
// reads) and returns them with the last cursor.
func (b *bundle) feedAll(t testing.TB, tenant, cursor string, limit, want int) ([]store.Decision, string) {
	t.Helper()
	var all []store.Decision
	deadline := time.Now().Add(20 * time.Second)
	for {
		page, next, err := b.s.Decisions(b.ctx, tenant, cursor, limit)
		if err != nil {
			t.Fatalf("Decisions(%s, %q): %v", tenant, cursor, err)
		}
		if len(page) > limit {
			t.Fatalf("page of %d, limit %d", len(page), limit)
		}
		if len(page) == 0 && next != cursor {
			t.Fatalf("empty page moved the cursor %q → %q", cursor, next)
		}
		all = append(all, page...)
		cursor = next
		if len(all) >= want && len(page) == 0 {
			return all, cursor
		}
		if len(page) == 0 {
			if time.Now().After(deadline) {
				return all, cursor
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestDecisionsFeed: the feed lists each applied and first-approval
// decision once, in order, to its own tenant only, page by page.
func TestDecisionsFeed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		_, c1 := b.inReview(t, intention("doc-1", review.RiskCompensableWrite, "plain"), false)
		fin := intention("charge-1", review.RiskCompensableWrite, "plain")
		fin.Flags = []review.Flag{review.FlagFinancial}
		_, c2 := b.inReview(t, fin, true)
		other := intention("doc-b", review.RiskCompensableWrite, "plain")
		other.Tenant = tenantB
		_, cb := b.inReview(t, other, false)

		var want []*store.Decision
		for _, req := range []store.DecisionRequest{
			decideReq(c1, review.DecideConfirm, "alice"),
			decideReq(c2, review.DecideApproveRetry, "alice"),
			decideReq(cb, review.DecideFail, "carol"),
			decideReq(c2, review.DecideApproveRetry, "bob"),
		} {
			b.clk.Advance(time.Second)
			d, err := b.s.Decide(b.ctx, req)
			if err != nil {
				t.Fatalf("Decide(%s by %s): %v", req.Action, req.Actor, err)
			}
			want = append(want, d)
		}
		wantA := []*store.Decision{want[0], want[1], want[3]}

		for _, limit := range []int{1, 2, 100} {
			got, cursor := b.feedAll(t, tenantA, "", limit, len(wantA))
			if len(got) != len(wantA) {
				t.Fatalf("limit %d: feed has %d decisions, want %d: %+v", limit, len(got), len(wantA), got)
			}
			for i, d := range got {
				w := wantA[i]
				if d.ID != w.ID || d.Status != w.Status || d.Action != w.Action || d.Actor != w.Actor || d.Tenant != tenantA ||
					d.CaseID != w.CaseID || d.OperationID != w.OperationID || !d.DecidedAt.Equal(w.DecidedAt) {
					t.Errorf("limit %d: decision %d = %+v, want %+v", limit, i, d, w)
				}
			}
			if got[1].Status != store.DecisionFirstApproval || got[2].Status != store.DecisionApplied {
				t.Errorf("statuses %s, %s; want first_approval then applied", got[1].Status, got[2].Status)
			}
			// Nothing new: the cursor stays and the page is empty.
			if page, next, err := b.s.Decisions(b.ctx, tenantA, cursor, limit); err != nil || len(page) != 0 || next != cursor {
				t.Errorf("after the end: %d decisions, cursor %q → %q, %v", len(page), cursor, next, err)
			}
		}

		gotB, _ := b.feedAll(t, tenantB, "", 10, 1)
		if len(gotB) != 1 || gotB[0].ID != want[2].ID || gotB[0].Tenant != tenantB {
			t.Errorf("tenant B's feed = %+v, want carol's decision alone", gotB)
		}
		if none, _, err := b.s.Decisions(b.ctx, "tenant-nobody", "", 10); err != nil || len(none) != 0 {
			t.Errorf("a tenant without decisions sees %d, %v", len(none), err)
		}

		// A decision made after a reader caught up comes next, once.
		_, cursor := b.feedAll(t, tenantA, "", 100, len(wantA))
		_, c3 := b.inReview(t, intention("doc-3", review.RiskCompensableWrite, "plain"), false)
		late, err := b.s.Decide(b.ctx, decideReq(c3, review.DecideCompensate, "dave"))
		if err != nil {
			t.Fatal(err)
		}
		more, _ := b.feedAll(t, tenantA, cursor, 100, 1)
		if len(more) != 1 || more[0].ID != late.ID {
			t.Errorf("after the cursor: %+v, want dave's decision alone", more)
		}

		// Well formed, but naming no decision of the tenant's: made up,
		// another tenant's, or one kept across a restore from a backup.
		// Read from, it would skip every decision up to it.
		_, cursorB := b.feedAll(t, tenantB, "", 10, 1)
		for _, bad := range []string{"x", "1-", "-1", "a-b", "1", "999999-999999", "0-999999", cursorB} {
			if _, _, err := b.s.Decisions(b.ctx, tenantA, bad, 10); !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), "cursor") {
				t.Errorf("cursor %q: %v, want ErrInvalid naming the cursor", bad, err)
			}
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestOpenCaseCountsFollowCases: the queue's kept counts (open_case_counts)
// equal a count of the open cases after cases open, gain a reason and are
// resolved, and the queue's counts read from them agree with counting the
// cases themselves.
func TestOpenCaseCountsFollowCases(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		check := func(step string) {
			t.Helper()
			type group struct {
				Tenant      string `db:"tenant"`
				Destination string `db:"destination"`
				Action      string `db:"action"`
				Flags       string `db:"flags"`
				Bits        int64  `db:"reason_bits"`
				N           int64  `db:"n"`
			}
			var kept, counted []group
			if err := b.s.DB().Select(&kept, `SELECT tenant, destination, action, flags, reason_bits, n FROM open_case_counts
WHERE n <> 0 ORDER BY tenant, destination, action, flags, reason_bits`); err != nil {
				t.Fatal(err)
			}
			if err := b.s.DB().Select(&counted, `SELECT tenant, destination, action, flags, reason_bits, COUNT(*) AS n FROM cases
WHERE status = 'open' GROUP BY tenant, destination, action, flags, reason_bits ORDER BY tenant, destination, action, flags, reason_bits`); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(kept) != fmt.Sprint(counted) {
				t.Errorf("%s: kept counts %v, open cases %v", step, kept, counted)
			}
			// Served from the kept counts vs grouped over the cases (a claim
			// filter forces the latter; nobody holds a claim here).
			for _, f := range []store.QueueFilter{{}, {Tenant: tenantB}, {Destination: "plain", Flag: "financial"}} {
				kept, err := b.s.Queue(b.ctx, f, 10)
				if err != nil {
					t.Fatal(err)
				}
				f.Unclaimed = true
				counted, err := b.s.Queue(b.ctx, f, 10)
				if err != nil {
					t.Fatal(err)
				}
				if kept.Total != counted.Total || fmt.Sprint(kept.Counts) != fmt.Sprint(counted.Counts) {
					t.Errorf("%s, filter %+v: queue counts %d %v from kept counts, %d %v from the cases", step, f,
						kept.Total, kept.Counts, counted.Total, counted.Counts)
				}
			}
		}
		check("empty")
		var cases []*store.Case
		for i, r := range []review.Registration{
			intention("counts-1", review.RiskCompensableWrite, "plain"),
			intention("counts-2", review.RiskCompensableWrite, "plain"),
			{Tenant: tenantB, SourceRef: "counts-3", LogicalVersion: "v1", Action: "charge", Destination: "plain",
				Risk: review.RiskCompensableWrite, Flags: []review.Flag{review.FlagFinancial}, Actor: "test", Payload: canonical(t, `{"n":3}`)},
		} {
			_, c := b.inReview(t, r, i == 2)
			cases = append(cases, c)
		}
		check("three opened")
		// The same key with another payload: the open case gains a reason.
		r := intention("counts-1", review.RiskCompensableWrite, "plain")
		r.Payload = canonical(t, `{"other":true}`)
		if _, _, err := b.s.Register(b.ctx, r); err == nil {
			t.Fatal("a different payload under the same key was accepted")
		}
		check("a reason added")
		b.confirm(t, cases[1])
		check("one resolved")
	})
}

// TestDecisionBesideUndo: a reviewer decides a case while the undo it
// waits for reports back, many times at once. The undo's report locks the
// compensation, then its parent, then the case; a decision locks the
// parent before the case too, so neither waits for a deadlock to be
// broken. Whichever comes first wins; the other gets a domain answer.
func TestDecisionBesideUndo(t *testing.T) {
	t.Parallel()
	const n = 16
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		cases := make([]*store.Case, n)
		children := make([]*review.Operation, n)
		for i := range cases {
			c := b.reviewCase(t, fmt.Sprintf("undo-beside-%d", i))
			if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideCompensate, Ref: "fld-2",
				Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "two folders for one operation"}); err != nil {
				t.Fatal(err)
			}
			ks, err := b.s.Compensations(b.ctx, c.OperationID)
			if err != nil || len(ks) != 1 {
				t.Fatalf("compensations %+v, %v", ks, err)
			}
			children[i] = &review.Operation{ID: ks[0].OperationID, Tenant: tenantA}
			b.start(t, children[i])
			cases[i] = c
		}
		decided, reported := make([]error, n), make([]error, n)
		atOnce(2*n, func(j int) {
			i := j / 2
			if j%2 == 0 {
				_, decided[i] = b.s.Decide(b.ctx, store.DecisionRequest{CaseID: cases[i].ID, Action: review.DecideCompensationDone,
					Actor: "alice", Reason: "the folder is gone, checked by hand"})
				return
			}
			_, reported[i] = b.s.RecordOutcome(b.ctx, tenantA, children[i].ID, 1, httpError(422), "integrator")
		})
		for i := range cases {
			// After the failed undo, the parent is back in review: the
			// reviewer's "done" no longer fits it.
			if err := decided[i]; err != nil && !errors.Is(err, review.ErrInvalidTransition) {
				t.Errorf("decision %d: %v", i, err)
			}
			if reported[i] != nil {
				t.Errorf("the undo's report %d: %v", i, reported[i])
			}
		}
		noDeadlocks(t, b.s)
		assertSealed(t, b.s)
	})
}

// TestApproveRetryAfterCostSpent: a retry a reviewer approves on an
// operation whose cost budget is spent gets a budget's worth more, as it
// gets one more attempt: the attempt is granted, not refused at once for
// the cost and sent back to review.
func TestApproveRetryAfterCostSpent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		budget := 1.0
		r := intention("doc-cost-retry", review.RiskCompensableWrite, "plain")
		r.CostBudget = &budget
		op := b.register(t, r)
		b.start(t, op)
		o := timeoutAfterSend
		o.Cost = 1.5
		b.report(t, op, 1, o)
		_, err := b.s.AddEvidence(b.ctx, r.Tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{mine(op, "fld-1"), mine(op, "fld-2")}}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) == 0 {
			t.Fatalf("cases %v %v", cs, err)
		}
		c := &cs[len(cs)-1]
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "alice")); err != nil {
			t.Fatalf("approve_retry: %v", err)
		}
		after := b.get(t, op)
		wantState(t, after, review.RetryWait)
		if after.CostBudget == nil || *after.CostBudget != 2.5 {
			t.Errorf("cost budget after the approved retry: %v, want 2.5 (1.5 spent, and the budget of 1 again)", after.CostBudget)
		}
		g, err := b.tryStart(op, "", "")
		if err != nil {
			after := b.get(t, op)
			t.Fatalf("attempt after approve_retry refused: %v; operation now %s (%s)", err, after.State, after.StateReason)
		}
		if g.N != 2 {
			t.Fatalf("grant %+v", g)
		}
	})
}

// TestApprovalBeforeAnUndoDoesNotCount: a first approval of a retry
// given before another reviewer decided to undo the effect (the case
// stays open while the undo is settled) no longer counts once the undo
// failed and the operation is back in review: the retry then needs two
// reviewers who approve it as it is now, not one. The approval is
// recorded as void, and the decision that voided it names it. Both
// engines.
func TestApprovalBeforeAnUndoDoesNotCount(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		r := intention("charge-undo", review.RiskCompensableWrite, "plain")
		r.Flags = []review.Flag{review.FlagFinancial}
		op, c := b.inReview(t, r, false)
		first, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "alice"))
		if err != nil || first.Status != store.DecisionFirstApproval {
			t.Fatalf("first approval = %+v, %v", first, err)
		}
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "bob")); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.Compensating)
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensationFailed, "carol")); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, op), review.NeedsReview)

		d, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "dave"))
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != store.DecisionFirstApproval {
			t.Fatalf("approve_retry after the undo failed = %s (%s), want a first approval: alice approved before the undo was decided", d.Status, d.ToState)
		}
		wantState(t, b.get(t, op), review.NeedsReview)
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions WHERE case_id = ? AND actor = 'alice' AND status = 'void'`, c.ID); n != 1 {
			t.Errorf("alice's approval: %d void, want 1", n)
		}
		var named bool
		for _, ev := range b.history(t, op.ID) {
			named = named || ev.Action == "decision.compensate" && strings.Contains(string(ev.Detail), `"voided_approvals":["alice"]`)
		}
		if !named {
			t.Error("the compensate that voided alice's approval does not name it in the audit trail")
		}
		if d, err = b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "erin")); err != nil || d.Status != store.DecisionApplied {
			t.Fatalf("the second approval after the undo = %+v, %v; want applied", d, err)
		}
		wantState(t, b.get(t, op), review.RetryWait)
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}
