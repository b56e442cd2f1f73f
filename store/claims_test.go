package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// reviewCase leaves a compensable write in needs_review (two candidates)
// and returns its open case.
func (b *bundle) reviewCase(t *testing.T, ref string) *store.Case {
	t.Helper()
	op := b.ambiguous(t, ref)
	ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
		{Ref: "fld-1", Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID},
		{Ref: "fld-2", Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID}}}
	got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, got, review.NeedsReview)
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases %+v, %v", cs, err)
	}
	return &cs[0]
}

// TestClaimsHold (issue 14, part 2): while a claim is live only its holder
// decides; anyone else is refused, naming the holder, until they take the
// case over — explicitly, with a reason, audited, the holder's claim
// ended. Eight reviewers racing a claimed case: only the holder wins.
func TestClaimsHold(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)

		t.Run("only the holder decides; a take-over is explicit and audited", func(t *testing.T) {
			c := b.reviewCase(t, "doc-held")
			if _, err := b.s.ClaimCase(b.ctx, c.ID, review.Principal{Name: "sara@example.com"}, nil); err != nil {
				t.Fatal(err)
			}
			_, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "rita@example.com"))
			if held := errAs[*review.ClaimHeldError](t, err); held.By != "sara@example.com" {
				t.Errorf("refusal names %q, want the holder", held.By)
			}
			if _, err := b.s.ReleaseCase(b.ctx, c.ID, review.Principal{Name: "rita@example.com"}, nil); !errors.Is(err, review.ErrConflict) || !strings.Contains(err.Error(), "sara@example.com") {
				t.Errorf("rita releasing the case Sara holds: %v, want a conflict naming her", err)
			}
			if _, err := b.s.TakeOverCase(b.ctx, c.ID, review.Principal{Name: "rita@example.com"}, "   ", nil); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("a take-over without a reason: %v, want ErrInvalid", err)
			}
			got, err := b.s.TakeOverCase(b.ctx, c.ID, review.Principal{Name: "rita@example.com"}, "  Sara is on leave today  ", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.ClaimedBy != "rita@example.com" {
				t.Errorf("after the take-over the case is held by %q", got.ClaimedBy)
			}
			if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "sara@example.com")); err == nil {
				t.Error("the previous holder decided after the take-over")
			}
			if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "rita@example.com")); err != nil {
				t.Fatalf("the new holder's decision: %v", err)
			}
			var taken *store.AuditEvent
			for _, ev := range b.history(t, c.OperationID) {
				if ev.Action == "case.taken_over" {
					taken = &ev
				}
			}
			if taken == nil || taken.Actor != "rita@example.com" || !strings.Contains(string(taken.Detail), `"from":"sara@example.com"`) ||
				!strings.Contains(string(taken.Detail), `"reason":"Sara is on leave today"`) {
				t.Errorf("take-over audit = %+v", taken)
			}
		})

		t.Run("a case nobody holds is claimed and decided in one step", func(t *testing.T) {
			c := b.reviewCase(t, "doc-free")
			if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideFail, "rita@example.com")); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("eight reviewers race a claimed case: only the holder wins", func(t *testing.T) {
			c := b.reviewCase(t, "doc-race")
			if _, err := b.s.ClaimCase(b.ctx, c.ID, review.Principal{Name: "reviewer-3@example.com"}, nil); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = b.s.Decide(b.ctx, decideReq(c, review.DecideFail, fmt.Sprintf("reviewer-%d@example.com", i)))
				}()
			}
			wg.Wait()
			for i, err := range errs {
				var held *review.ClaimHeldError
				var already *review.AlreadyDecidedError
				switch {
				case i == 3 && err != nil:
					t.Errorf("the holder lost: %v", err)
				case i != 3 && !errors.As(err, &held) && !errors.As(err, &already):
					// Refused either way: held while the holder had not
					// decided yet, already decided once they had.
					t.Errorf("reviewer %d: %v, want refused", i, err)
				}
			}
			if got, _ := b.s.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseResolved || got.ResolvedBy != "reviewer-3@example.com" {
				t.Errorf("case = %+v, want resolved by the holder", got)
			}
		})

		t.Run("reasons are trimmed and bounded", func(t *testing.T) {
			c := b.reviewCase(t, "doc-reason")
			for _, reason := range []string{"      ", "\t\n", strings.Repeat("x", 200_000), "ok\x00no"} {
				req := decideReq(c, review.DecideFail, "rita@example.com")
				req.Reason = reason
				if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, review.ErrInvalid) {
					t.Errorf("reason of %d bytes: %v, want ErrInvalid", len(reason), err)
				}
			}
			req := decideReq(c, review.DecideFail, "rita@example.com")
			req.Reason = "  " + strings.Repeat("é", review.MaxReasonLen) + "\n"
			d, err := b.s.Decide(b.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != strings.Repeat("é", review.MaxReasonLen) {
				t.Errorf("the reason was recorded untrimmed (%d bytes)", len(d.Reason))
			}
		})
		assertSealed(t, b.s)
	})
}

// TestQueueDecidable (issue 14, part 3): "cases I can decide" shows a
// support user only unflagged cases, a reviewer every case, including
// approval requests, and a manager none.
func TestQueueDecidable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, approvalConfig())
		plain := b.reviewCase(t, "doc-plain")
		_, approval := b.awaiting(t, "mail-q", "mail")
		r := intention("charge-q", review.RiskCompensableWrite, "plain")
		r.Flags = []review.Flag{review.FlagFinancial}
		op := b.register(t, r)
		b.start(t, op)
		b.report(t, op, 1, timeoutAfterSend)
		ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
			{Ref: "chg-1", Version: op.LogicalVersion, OperationID: op.ID}, {Ref: "chg-2", Version: op.LogicalVersion, OperationID: op.ID}}}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator"); err != nil {
			t.Fatal(err)
		}
		cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
		if len(cs) != 1 {
			t.Fatalf("financial cases %+v", cs)
		}
		financial := cs[0]
		for _, tt := range []struct {
			role review.Role
			want []string
		}{
			{review.RoleSupport, []string{plain.ID}},
			{review.RoleReviewer, []string{plain.ID, approval.ID, financial.ID}},
			{review.RoleManager, nil},
		} {
			page, err := b.s.Queue(b.ctx, store.QueueFilter{DecidableBy: tt.role}, 50)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range page.Cases {
				got = append(got, c.ID)
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s decides %v, want %v", tt.role, got, want)
			}
		}
	})
}

// TestActsReadTheUserNow: a reviewer's decision, claim and take-over read
// their grant again under the case's lock, not as the session had it when
// the request began. Disabled, moved off the tenant or demoted meanwhile,
// they change nothing: refused, nothing stored, nothing audited.
func TestActsReadTheUserNow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := review.Operator("admin")
		for i, tt := range []struct {
			name   string
			change store.UserChange
			want   error
		}{
			{"disabled", store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{tenantA}}, Disabled: true}, review.ErrForbidden},
			{"moved off the tenant", store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{tenantB}}}, review.ErrNotFound},
			{"demoted to manager", store.UserChange{Role: review.RoleManager, Scope: review.Scope{Tenants: []string{tenantA}}}, review.ErrForbidden},
		} {
			t.Run(tt.name, func(t *testing.T) {
				u, err := b.s.AddUser(b.ctx, op, store.NewUser{Email: fmt.Sprintf("rev-%d@example.com", i), Password: "correct horse battery",
					Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{tenantA}}})
				if err != nil {
					t.Fatal(err)
				}
				session := u.Principal() // as the request read it, before the change
				c := b.reviewCase(t, fmt.Sprintf("doc-now-%d", i))
				if _, err := b.s.UpdateUser(b.ctx, op, u.ID, tt.change); err != nil {
					t.Fatal(err)
				}
				before, err := b.s.AuditEvents(b.ctx, 0, 100000)
				if err != nil {
					t.Fatal(err)
				}
				req := decideReq(c, review.DecideFail, u.Email)
				req.UserID, req.Scope = u.ID, session.Scope.List()
				if _, err := b.s.Decide(b.ctx, req); !errors.Is(err, tt.want) {
					t.Errorf("decision: %v, want %v", err, tt.want)
				}
				if _, err := b.s.ClaimCase(b.ctx, c.ID, session, session.Scope.List()); !errors.Is(err, tt.want) {
					t.Errorf("claim: %v, want %v", err, tt.want)
				}
				if _, err := b.s.TakeOverCase(b.ctx, c.ID, session, "the holder is away", session.Scope.List()); !errors.Is(err, tt.want) {
					t.Errorf("take-over: %v, want %v", err, tt.want)
				}
				after, err := b.s.AuditEvents(b.ctx, 0, 100000)
				if err != nil {
					t.Fatal(err)
				}
				got, err := b.s.CaseDecisions(b.ctx, c.ID)
				if err != nil || len(got) != 0 || len(after) != len(before) {
					t.Errorf("after the refusals: %d decisions, %d new audit events (%v); want none", len(got), len(after)-len(before), err)
				}
			})
		}
	})
}

// TestStaleDecisionSaysWhy: a decision from a page older than the case is
// refused saying what happened since, and who: another reviewer holds the
// case now, or gave an approval; otherwise it was claimed, released or
// re-assessed.
func TestStaleDecisionSaysWhy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		stale := func(c *store.Case, action, actor string) error {
			req := decideReq(c, action, actor)
			req.CaseVersion = c.Version // as the page showed it
			_, err := b.s.Decide(b.ctx, req)
			return err
		}
		held := b.reviewCase(t, "doc-stale-held")
		if _, err := b.s.ClaimCase(b.ctx, held.ID, review.Principal{Name: "sara@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		var h *review.ClaimHeldError
		if err := stale(held, review.DecideFail, "rita@example.com"); !errors.As(err, &h) || h.By != "sara@example.com" {
			t.Errorf("the case claimed since: %v, want held by sara", err)
		}

		fin := intention("charge-stale", review.RiskCompensableWrite, "plain")
		fin.Flags = []review.Flag{review.FlagFinancial}
		_, approve := b.inReview(t, fin, true)
		if _, err := b.s.Decide(b.ctx, decideReq(approve, review.DecideApproveRetry, "alice@example.com")); err != nil {
			t.Fatal(err)
		}
		if err := stale(approve, review.DecideApproveRetry, "bob@example.com"); !errors.Is(err, review.ErrStale) ||
			!strings.Contains(err.Error(), "alice@example.com gave an approval meanwhile") {
			t.Errorf("an approval given since: %v", err)
		}

		released := b.reviewCase(t, "doc-stale-released")
		if _, err := b.s.ClaimCase(b.ctx, released.ID, review.Principal{Name: "sara@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.ReleaseCase(b.ctx, released.ID, review.Principal{Name: "sara@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := stale(released, review.DecideFail, "rita@example.com"); !errors.Is(err, review.ErrStale) ||
			!strings.Contains(err.Error(), "claimed, released or re-assessed") {
			t.Errorf("claimed and released since: %v", err)
		}
	})
}

// TestClaimOnlyWhatYouMayDecide: a claim keeps everyone else from deciding
// the case, so only a role that may decide it claims it. A support user
// (who decides unflagged operations) posting a claim on an approval case,
// or on a financial operation's case, held it from the reviewers for the
// claim's whole term; the console offered no button, but the route took it.
// Now refused, claim and take-over alike; their own cases they still claim.
func TestClaimOnlyWhatYouMayDecide(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, approvalConfig())
		op := review.Operator("test")
		person := func(email string, role review.Role) review.Principal {
			u, err := b.s.AddUser(b.ctx, op, store.NewUser{Email: email, Password: "correct horse battery", Role: role,
				Scope: review.Scope{Tenants: []string{tenantA}}})
			if err != nil {
				t.Fatal(err)
			}
			return u.Principal()
		}
		support := person("sam@example.com", review.RoleSupport)
		reviewer := person("rita@example.com", review.RoleReviewer)
		_, approval := b.awaiting(t, "mail-1", "mail")
		irreversible := b.newOp(t, "doc-irreversible", review.RiskIrreversible, "plain")
		b.start(t, irreversible)
		b.report(t, irreversible, 1, timeoutAfterSend)
		if _, err := b.s.AddEvidence(b.ctx, tenantA, irreversible.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "doc-1", OperationID: irreversible.ID}, {Ref: "doc-2", OperationID: irreversible.ID}}}, "integrator"); err != nil {
			t.Fatal(err)
		}
		cs, err := b.s.CasesForOperation(b.ctx, irreversible.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("the irreversible operation's cases: %+v, %v", cs, err)
		}
		flagged := &cs[0]
		plain := b.reviewCase(t, "doc-plain")
		for _, c := range []*store.Case{approval, flagged} {
			if _, err := b.s.ClaimCase(b.ctx, c.ID, support, nil); !errors.Is(err, review.ErrForbidden) {
				t.Errorf("support claims case %s (%v): %v, want ErrForbidden", c.ID, c.Reasons, err)
			}
			if _, err := b.s.TakeOverCase(b.ctx, c.ID, support, "I will look at it", nil); !errors.Is(err, review.ErrForbidden) {
				t.Errorf("support takes case %s over: %v, want ErrForbidden", c.ID, err)
			}
			if _, err := b.s.ClaimCase(b.ctx, c.ID, reviewer, nil); err != nil {
				t.Errorf("the reviewer claims case %s: %v", c.ID, err)
			}
		}
		if _, err := b.s.ClaimCase(b.ctx, plain.ID, support, nil); err != nil {
			t.Errorf("support claims a case it decides: %v", err)
		}
	})
}
