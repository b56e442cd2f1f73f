package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// approvalConfig: "mail" asks for approval before send_email runs (one
// approval, two for a flagged operation, as the policy says), and
// "slow-mail" lets a request wait an hour at most.
func approvalConfig() *review.Config {
	return &review.Config{Destinations: map[string]review.Destination{
		"mail":      {Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true}}},
		"slow-mail": {Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true, ApprovalTimeout: time.Hour}}},
	}}
}

// awaiting registers a send_email to dest, asked for by owner, which
// must wait for approval with its approval case open; it returns both.
func (b *bundle) awaiting(t *testing.T, ref, dest string, flags ...review.Flag) (*review.Operation, *store.Case) {
	t.Helper()
	r := intention(ref, review.RiskIrreversible, dest)
	r.Action, r.Flags, r.RequestedBy = "send_email", flags, "owner@example.com"
	op := b.register(t, r)
	wantState(t, op, review.AwaitingApproval)
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Status != store.CaseOpen || !slices.Contains(cs[0].Reasons, review.ReasonApprovalRequired) ||
		cs[0].RequestedBy != "owner@example.com" || cs[0].ExpiresAt == nil || cs[0].RecommendedAction != review.RecommendReviewPayload {
		t.Fatalf("cases = %+v, want one open approval case asked for by owner@example.com, with an expiry", cs)
	}
	_, err = b.tryStart(op, "", "")
	if na := errAs[*review.NotAttemptableError](t, err); na.Operation.State != review.AwaitingApproval {
		t.Errorf("an attempt before approval: %v", err)
	}
	return op, &cs[0]
}

func (b *bundle) decide(c *store.Case, action, actor string) (*store.Decision, error) {
	return b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: action, Actor: actor, Reason: "read the payload"})
}

// TestApprovalBeforeExecution (issue 14, part 1): an action whose policy
// asks for approval waits in awaiting_approval with an approval case; no
// attempt is granted until the approvals are given (two different
// reviewers for an irreversible one, never the person who asked); a
// refusal and a lapsed request fail it, and nothing else moves it.
func TestApprovalBeforeExecution(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, approvalConfig())

		t.Run("two different reviewers approve an irreversible send", func(t *testing.T) {
			op, c := b.awaiting(t, "mail-1", "mail", review.FlagIrreversible)
			if !c.ExpiresAt.Equal(t0.Add(review.DefaultApprovalTimeout)) {
				t.Errorf("expires at %v, want the default %s after registration", c.ExpiresAt, review.DefaultApprovalTimeout)
			}
			if _, err := b.decide(c, review.DecideApprove, "Owner@example.com"); !errors.Is(err, review.ErrOwnRequest) {
				t.Errorf("the requester approves: %v, want ErrOwnRequest", err)
			}
			if _, err := b.decide(c, review.DecideFail, "rita@example.com"); !errors.Is(err, review.ErrInvalidTransition) {
				t.Errorf("fail on an approval case: %v, want ErrInvalidTransition", err)
			}
			d, err := b.decide(c, review.DecideApprove, "rita@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != store.DecisionFirstApproval || d.ToState != string(review.AwaitingApproval) {
				t.Errorf("first approval = %+v", d)
			}
			wantState(t, b.get(t, op), review.AwaitingApproval)
			if _, err := b.tryStart(op, "", ""); err == nil {
				t.Error("an attempt was granted after one approval of two")
			}
			if _, err := b.decide(c, review.DecideApprove, "rita@example.com"); !errors.Is(err, review.ErrSecondApprover) {
				t.Errorf("the same reviewer twice: %v, want ErrSecondApprover", err)
			}
			if d, err = b.decide(c, review.DecideApprove, "marco@example.com"); err != nil {
				t.Fatal(err)
			}
			if d.Status != store.DecisionApplied || d.ToState != string(review.Pending) || d.PayloadHash != op.PayloadHash || d.Key != op.Key {
				t.Errorf("second approval = %+v, want applied, pending, bound to the payload and key", d)
			}
			wantState(t, b.get(t, op), review.Pending)
			if got, _ := b.s.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseResolved || got.Resolution != review.DecideApprove {
				t.Errorf("case after approval = %+v", got)
			}
			// On PostgreSQL the feed lists a decision once every older
			// transaction has ended: other tests' may still be running.
			announced := func() bool {
				feed, _, err := b.s.Decisions(b.ctx, tenantA, "", 100)
				if err != nil {
					t.Fatal(err)
				}
				return slices.ContainsFunc(feed, func(f store.Decision) bool { return f.ID == d.ID && f.Action == review.DecideApprove })
			}
			for wait := time.Now().Add(10 * time.Second); !announced(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(wait) {
					t.Fatal("the decisions feed does not announce the approval")
				}
			}
			b.start(t, op) // granted, once
			if _, err := b.decide(c, review.DecideApprove, "ugo@example.com"); err == nil {
				t.Error("a decision on the resolved approval case was accepted")
			}
		})

		t.Run("one approval is enough when the policy and flags say so", func(t *testing.T) {
			_, c := b.awaiting(t, "mail-2", "mail")
			d, err := b.decide(c, review.DecideApprove, "rita@example.com")
			if err != nil {
				t.Fatal(err)
			}
			// An irreversible risk class counts like the flag: two approvals.
			if d.Status != store.DecisionFirstApproval {
				t.Errorf("an irreversible-risk send approved once: %+v, want a first approval", d)
			}
			r := intention("mail-plain", review.RiskCompensableWrite, "mail")
			r.Action = "send_email"
			plain := b.register(t, r)
			cs, _ := b.s.CasesForOperation(b.ctx, plain.ID)
			if len(cs) != 1 {
				t.Fatalf("cases = %+v", cs)
			}
			if d, err = b.decide(&cs[0], review.DecideApprove, "rita@example.com"); err != nil || d.Status != store.DecisionApplied {
				t.Fatalf("one approval of an unflagged write: %+v, %v", d, err)
			}
			wantState(t, b.get(t, plain), review.Pending)
		})

		t.Run("a refusal fails it", func(t *testing.T) {
			op, c := b.awaiting(t, "mail-3", "mail", review.FlagIrreversible)
			d, err := b.decide(c, review.DecideRefuse, "rita@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != store.DecisionApplied || d.ToState != string(review.Failed) {
				t.Errorf("refusal = %+v", d)
			}
			wantState(t, b.get(t, op), review.Failed)
			_, err = b.tryStart(op, "", "")
			errAs[*review.NotAttemptableError](t, err)
		})

		t.Run("a request that lapsed is not approved before the sweeper ends it", func(t *testing.T) {
			op, c := b.awaiting(t, "mail-5", "slow-mail")
			if _, err := b.decide(c, review.DecideApprove, "rita@example.com"); err != nil {
				t.Fatal(err) // one approval of two
			}
			b.clk.Advance(time.Hour) // lapsed; the sweeper has not run
			if _, err := b.decide(c, review.DecideApprove, "marco@example.com"); !errors.Is(err, review.ErrInvalidTransition) {
				t.Fatalf("the second approval after the request lapsed: %v, want refused", err)
			}
			_, err := b.tryStart(op, "", "")
			errAs[*review.NotAttemptableError](t, err)
			if n, err := b.s.ExpireDeadlines(b.ctx); err != nil || n != 1 {
				t.Fatalf("ExpireDeadlines = %d, %v, want 1", n, err)
			}
			wantState(t, b.get(t, op), review.Failed)
		})

		t.Run("a request that lapses fails, closed", func(t *testing.T) {
			op, c := b.awaiting(t, "mail-4", "slow-mail")
			if !c.ExpiresAt.Equal(b.clk.Now().Add(time.Hour)) {
				t.Errorf("expires at %v, want in an hour", c.ExpiresAt)
			}
			if _, err := b.decide(c, review.DecideApprove, "rita@example.com"); err != nil {
				t.Fatal(err) // one approval of two: still waiting
			}
			if n, err := b.s.ExpireDeadlines(b.ctx); err != nil || n != 0 {
				t.Fatalf("ExpireDeadlines before the expiry = %d, %v", n, err)
			}
			b.clk.Advance(time.Hour)
			if n, err := b.s.ExpireDeadlines(b.ctx); err != nil || n != 1 {
				t.Fatalf("ExpireDeadlines = %d, %v, want 1", n, err)
			}
			got := b.get(t, op)
			wantState(t, got, review.Failed)
			if got.StateReason != "no approval was given before the request expired; the operation will not run" {
				t.Errorf("reason %q", got.StateReason)
			}
			if cs, _ := b.s.GetCase(b.ctx, c.ID, nil); cs.Status != store.CaseResolved || cs.Resolution != "expired" {
				t.Errorf("lapsed case = %+v, want resolved as expired", cs)
			}
			if _, err := b.decide(c, review.DecideApprove, "marco@example.com"); err == nil {
				t.Error("an approval after the request lapsed was accepted")
			}
			acts := countActions(b.history(t, op.ID))
			if acts["operation.approval_expired"] != 1 || acts["case.resolved"] != 1 || acts["case.opened"] != 1 {
				t.Errorf("audit = %v", acts)
			}
		})
		assertSealed(t, b.s)
	})
}

// TestApprovalFromWhoMayNoLongerDecide: an irreversible send needs two
// people who may decide it now. A first approval whose approver was
// disabled, moved off the tenant or demoted before the second counts no
// more: the second becomes the first (the operation keeps waiting for one
// more), the first is void, and the trail says whose and why.
func TestApprovalFromWhoMayNoLongerDecide(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, approvalConfig())
		root := addUser(t, b.s, "root@example.com", review.RoleAdmin, "*")
		marco := addUser(t, b.s, "marco@example.com", review.RoleReviewer, tenantA)
		ugo := addUser(t, b.s, "ugo@example.com", review.RoleReviewer, tenantA)
		approve := func(c *store.Case, u *store.User) *store.Decision {
			t.Helper()
			d, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideApprove, Actor: u.Email, UserID: u.ID,
				Reason: "read the payload"})
			if err != nil {
				t.Fatalf("%s approves: %v", u.Email, err)
			}
			return d
		}
		for i, tt := range []struct {
			name   string
			change func(u *store.User) store.UserChange
			why    string
		}{
			{"disabled", func(u *store.User) store.UserChange {
				return store.UserChange{Role: u.Role, Scope: u.Scope(), Disabled: true}
			}, "the approver's account is disabled"},
			{"moved off the tenant", func(u *store.User) store.UserChange {
				return store.UserChange{Role: u.Role, Scope: review.Scope{Tenants: []string{tenantB}}}
			}, "the approver no longer holds tenant " + tenantA},
			{"demoted to support", func(u *store.User) store.UserChange {
				return store.UserChange{Role: review.RoleSupport, Scope: u.Scope()}
			}, "the approver's role (support) no longer decides this case"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				rita := addUser(t, b.s, fmt.Sprintf("rita-%d@example.com", i), review.RoleReviewer, tenantA)
				op, c := b.awaiting(t, fmt.Sprintf("gone-%d", i), "mail", review.FlagIrreversible)
				first := approve(c, rita)
				if _, err := b.s.UpdateUser(b.ctx, root.Principal(), rita.ID, tt.change(rita)); err != nil {
					t.Fatal(err)
				}
				second := approve(c, marco)
				if second.Status != store.DecisionFirstApproval {
					t.Fatalf("the approval after %s's was %s, want the first again", rita.Email, second.Status)
				}
				wantState(t, b.get(t, op), review.AwaitingApproval)
				_, ds, err := b.s.OperationDecisions(b.ctx, tenantA, op.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != 2 || ds[0].ID != first.ID || ds[0].Status != store.DecisionVoid || ds[1].Status != store.DecisionFirstApproval {
					t.Fatalf("decisions = %+v, want %s's void and %s's the first approval", ds, rita.Email, marco.Email)
				}
				// A reader of the feed, which lists each decision once,
				// learns it from the decision that voided it.
				if !slices.Equal(ds[1].VoidedApprovals, []string{first.ID}) || len(ds[0].VoidedApprovals) != 0 {
					t.Errorf("voided approvals: %v then %v, want none then %s", ds[0].VoidedApprovals, ds[1].VoidedApprovals, first.ID)
				}
				feed, _ := b.feedAll(t, tenantA, "", 100, 3*i+2) // three decisions in each case before
				if k := slices.IndexFunc(feed, func(d store.Decision) bool { return d.ID == second.ID }); k < 0 ||
					!slices.Equal(feed[k].VoidedApprovals, []string{first.ID}) {
					t.Errorf("the decisions feed does not name %s as voided by %s: %+v", first.ID, second.ID, feed)
				}
				var voided []store.AuditEvent
				for _, ev := range b.history(t, op.ID) {
					if ev.Action == "decision.approval_voided" {
						voided = append(voided, ev)
					}
				}
				if len(voided) != 1 || !strings.Contains(voided[0].Detail, first.ID) || !strings.Contains(voided[0].Detail, rita.Email) ||
					!strings.Contains(voided[0].Detail, tt.why) || !strings.Contains(voided[0].Detail, second.ID) {
					t.Errorf("audit of the voided approval = %+v, want one naming %s, %s, %q and %s", voided, first.ID, rita.Email, tt.why, second.ID)
				}
				if d := approve(c, ugo); d.Status != store.DecisionApplied || d.ToState != string(review.Pending) {
					t.Errorf("a second approval from who may decide: %+v, want applied", d)
				}
				wantState(t, b.get(t, op), review.Pending)
			})
		}
		assertSealed(t, b.s)
	})
}

// TestApprovalsReadWhileAWriterHolds: the case page of a case with a
// first approval checks who gave it (VoidApprovals) in a read
// transaction: a write held elsewhere (another instance's, a sweep's)
// does not hold the page, as it did while the check took SQLite's one
// write lock. Both engines.
func TestApprovalsReadWhileAWriterHolds(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, approvalConfig())
		op, c := b.awaiting(t, "mail-held", "mail", review.FlagIrreversible)
		if _, err := b.decide(c, review.DecideApprove, "rita@example.com"); err != nil {
			t.Fatal(err)
		}
		writer, err := b.s.DB().BeginTx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Rollback()
		if _, err := writer.Exec(b.s.DB().Rebind(`UPDATE tenants SET created_at = created_at WHERE name = ?`), tenantA); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
		defer cancel()
		got := b.get(t, op)
		void, err := b.s.VoidApprovals(ctx, c, got)
		if err != nil || len(void) != 0 {
			t.Errorf("approvals checked while a writer holds: %v, %v; want none void, at once", void, err)
		}
	})
}
