package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// dependent registers a share link for source that waits for dep to be
// confirmed at version (any version when "").
func (b *bundle) dependent(t *testing.T, source string, dep *review.Operation, version string) *review.Operation {
	t.Helper()
	r := intention(source, review.RiskCompensableWrite, "plain")
	r.Action = "share_link"
	r.After = &review.Dependency{OperationID: dep.ID, ResourceVersion: version}
	return b.register(t, r)
}

// An operation that depends on another gets no attempt until that one is
// confirmed with the version it names: 409 waiting-for-dependency with the
// dependency's state, then a grant naming what the dependency was
// confirmed with. Both engines.
func TestDependentWaitsForItsDependency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		pdf := b.newOp(t, "contract-7", review.RiskCompensableWrite, "plain")
		link := b.dependent(t, "contract-7-link", pdf, "v1")
		if got := b.get(t, link); got.After == nil || got.After.OperationID != pdf.ID || got.After.State != review.Confirmed ||
			got.After.DependencyState != review.Pending {
			t.Fatalf("after = %+v", got.After)
		}
		for _, want := range []review.State{review.Pending, review.InFlight} {
			_, err := b.tryStart(link, "", "")
			w := errAs[*review.DependencyWaitError](t, err)
			if w.Dependency.ID != pdf.ID || w.Dependency.State != want || !strings.Contains(w.Reason, string(want)) {
				t.Fatalf("wait = %+v (%s), want the dependency %s", w.Dependency, w.Reason, want)
			}
			if want == review.Pending {
				b.start(t, pdf)
			}
		}
		b.report(t, pdf, 1, success("pdf-1"))
		g := b.start(t, link)
		if g.After == nil || g.After.Resource == nil || g.After.Resource.Ref != "pdf-1" || g.After.DependencyState != review.Confirmed {
			t.Fatalf("grant after = %+v, want the confirmed pdf-1", g.After)
		}
		evs := b.history(t, link.ID)
		if last := evs[len(evs)-1]; last.Action != "attempt.started" || !strings.Contains(string(last.Detail), "pdf-1") {
			t.Errorf("audit = %s %s, want the grant naming pdf-1", last.Action, last.Detail)
		}
		assertSealed(t, b.s)
	})
}

// A dependency that can never be met ends its dependent: confirmed for
// another version, failed, or compensated → the dependent fails with that
// reason, on its next attempt request or by the sweep when nobody asks;
// with escalate_on: [dependency_failed] it opens a case instead.
func TestBrokenDependencyEndsTheDependent(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(`
destinations:
  plain:
    actions:
      share_link:
        escalate_on: [dependency_failed]
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		// Confirmed for v1, the link wants v7: asked for, it fails.
		pdf := b.newOp(t, "contract-7", review.RiskCompensableWrite, "plain")
		b.start(t, pdf)
		b.report(t, pdf, 1, success("pdf-1"))
		link := b.dependent(t, "contract-7-link", pdf, "v7")
		_, err := b.tryStart(link, "", "")
		na := errAs[*review.NotAttemptableError](t, err)
		if na.Operation.State != review.Failed || !strings.Contains(na.Operation.StateReason, "confirmed for version v1, not v7") {
			t.Fatalf("dependent = %s (%s)", na.Operation.State, na.Operation.StateReason)
		}
		wantState(t, b.get(t, link), review.Failed)

		// The dependency fails; nobody asks for the dependent's attempt:
		// the sweep ends it, audited.
		other := b.newOp(t, "contract-8", review.RiskCompensableWrite, "plain")
		waiting := b.dependent(t, "contract-8-link", other, "")
		b.start(t, other)
		b.report(t, other, 1, httpError(422))
		wantState(t, b.get(t, other), review.Failed)
		n, err := b.s.SweepDependencies(b.ctx)
		if err != nil || n != 1 {
			t.Fatalf("SweepDependencies = %d, %v; want 1", n, err)
		}
		got := b.get(t, waiting)
		wantState(t, got, review.Failed)
		if !strings.Contains(got.StateReason, "dependency "+other.ID+" failed") {
			t.Errorf("reason = %q", got.StateReason)
		}
		if evs := b.history(t, waiting.ID); evs[len(evs)-1].Action != "operation.dependency_failed" || evs[len(evs)-1].Actor != "system:dependency-sweeper" {
			t.Errorf("audit = %+v", evs[len(evs)-1])
		}
		if n, err := b.s.SweepDependencies(b.ctx); err != nil || n != 0 {
			t.Fatalf("a second sweep = %d, %v; want nothing left", n, err)
		}
		// A dependent still waiting for a pending dependency is left alone.
		third := b.newOp(t, "contract-9", review.RiskCompensableWrite, "plain")
		b.dependent(t, "contract-9-link", third, "")
		if n, err := b.s.SweepDependencies(b.ctx); err != nil || n != 0 {
			t.Fatalf("sweep with a pending dependency = %d, %v", n, err)
		}
		assertSealed(t, b.s)
	})
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		dep := b.newOp(t, "contract-7", review.RiskCompensableWrite, "plain")
		link := b.dependent(t, "contract-7-link", dep, "")
		b.start(t, dep)
		b.report(t, dep, 1, httpError(422))
		_, err := b.tryStart(link, "", "")
		errAs[*review.NotAttemptableError](t, err)
		got := b.get(t, link)
		wantState(t, got, review.NeedsReview)
		cs, err := b.s.CasesForOperation(b.ctx, link.ID)
		if err != nil || len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonDependencyFailed) {
			t.Fatalf("cases = %+v, %v; want one dependency_failed case", cs, err)
		}
		if cs[0].RecommendedAction != review.RecommendFail || cs[0].Rationale != review.RationaleDependencyBroken {
			t.Errorf("recommended %s (%s), want fail: nothing was sent, so nothing is there to probe for", cs[0].RecommendedAction, cs[0].Rationale)
		}
	})
}

// A dependency is the tenant's own operation, named correctly; the same key
// registered again must wait for the same thing.
func TestDependencyRegistration(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		dep := b.newOp(t, "contract-7", review.RiskCompensableWrite, "plain")
		foreign := intention("theirs", review.RiskCompensableWrite, "plain")
		foreign.Tenant = tenantB
		theirs := b.register(t, foreign)
		for _, tc := range []struct {
			after *review.Dependency
			field string
		}{
			{&review.Dependency{OperationID: "op_nope"}, "after.operation_id"},
			{&review.Dependency{OperationID: theirs.ID}, "after.operation_id"},
			{&review.Dependency{OperationID: ""}, "after.operation_id"},
			{&review.Dependency{OperationID: dep.ID, State: review.Failed}, "after.state"},
			{&review.Dependency{OperationID: dep.ID, ResourceVersion: "v\x007"}, "after.resource_version"},
		} {
			r := intention("link", review.RiskCompensableWrite, "plain")
			r.After = tc.after
			_, _, err := b.s.Register(b.ctx, r)
			if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), `field "`+tc.field+`"`) {
				t.Errorf("after %+v: %v, want ErrInvalid naming %s", tc.after, err, tc.field)
			}
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operations WHERE source_ref = 'link'`); n != 0 {
			t.Fatalf("%d refused registrations recorded", n)
		}
		r := intention("link", review.RiskCompensableWrite, "plain")
		r.After = &review.Dependency{OperationID: dep.ID, ResourceVersion: "v1"}
		first := b.register(t, r)
		again, created, err := b.s.Register(b.ctx, r)
		if err != nil || created || again.ID != first.ID {
			t.Fatalf("the same registration again: %v, created %t", err, created)
		}
		r.After = nil
		_, _, err = b.s.Register(b.ctx, r)
		if mm := errAs[*review.PayloadMismatchError](t, err); !slices.Contains(mm.Fields, "after") {
			t.Errorf("mismatch fields = %v, want after", mm.Fields)
		}
	})
}

// TestBrokenDependencyEndsAnAwaitingApproval: a dependent that awaits
// approval when its dependency fails is not left asking reviewers to
// approve what can never run (and failing, a day later, as "no approval
// was given"): the sweep fails it with the dependency's reason and
// resolves its approval case, audited. When its policy escalates
// dependency_failed, the approval case gains that reason and stays with
// the approvers, once. Both engines.
func TestBrokenDependencyEndsAnAwaitingApproval(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(`
destinations:
  plain:
    actions:
      share_link:
        requires_approval: true
  asked:
    actions:
      share_link:
        requires_approval: true
        escalate_on: [dependency_failed]
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		dep := b.newOp(t, "contract-7", review.RiskCompensableWrite, "plain")
		link := b.dependent(t, "contract-7-link", dep, "")
		r := intention("contract-7-asked", review.RiskCompensableWrite, "asked")
		r.Action, r.After = "share_link", &review.Dependency{OperationID: dep.ID}
		asked := b.register(t, r)
		wantState(t, link, review.AwaitingApproval)
		wantState(t, asked, review.AwaitingApproval)
		b.start(t, dep)
		b.report(t, dep, 1, httpError(422))
		wantState(t, b.get(t, dep), review.Failed)

		n, err := b.s.SweepDependencies(b.ctx)
		if err != nil || n != 1 {
			t.Fatalf("SweepDependencies = %d, %v; want 1", n, err)
		}
		got := b.get(t, link)
		wantState(t, got, review.Failed)
		if !strings.Contains(got.StateReason, "dependency "+dep.ID+" failed") {
			t.Errorf("reason = %q, want the dependency's", got.StateReason)
		}
		cs, err := b.s.CasesForOperation(b.ctx, link.ID)
		if err != nil || len(cs) != 1 || cs[0].Status != store.CaseResolved || cs[0].Resolution != "dependency_failed" {
			t.Fatalf("cases = %+v, %v; want the approval case resolved as dependency_failed", cs, err)
		}
		acts := countActions(b.history(t, link.ID))
		if acts["operation.dependency_failed"] != 1 || acts["case.resolved"] != 1 {
			t.Errorf("audit = %v", acts)
		}

		// Escalated: the approval case says the dependency failed, and
		// the approvers decide; a second sweep changes nothing.
		wantState(t, b.get(t, asked), review.AwaitingApproval)
		cs, err = b.s.CasesForOperation(b.ctx, asked.ID)
		if err != nil || len(cs) != 1 || cs[0].Status != store.CaseOpen ||
			!slices.Contains(cs[0].Reasons, review.ReasonDependencyFailed) || !slices.Contains(cs[0].Reasons, review.ReasonApprovalRequired) {
			t.Fatalf("cases = %+v, %v; want the open approval case naming dependency_failed", cs, err)
		}
		if n, err := b.s.SweepDependencies(b.ctx); err != nil || n != 0 {
			t.Fatalf("a second sweep = %d, %v; want nothing", n, err)
		}
		if again, _ := b.s.CasesForOperation(b.ctx, asked.ID); len(again) != 1 || again[0].Version != cs[0].Version {
			t.Errorf("a second sweep changed the approval case: %+v", again)
		}
		if _, err := b.decide(&cs[0], review.DecideRefuse, "rita@example.com"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.get(t, asked), review.Failed)
		assertSealed(t, b.s)
	})
}

// Dependents lists the operations that wait for one, in the order they
// were registered, with what each has done so far; only within the
// reader's scope, and at most as many as asked. Both engines.
func TestDependents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		pdf := b.newOp(t, "contract-8", review.RiskCompensableWrite, "plain")
		other := b.newOp(t, "contract-9", review.RiskCompensableWrite, "plain")
		link := b.dependent(t, "contract-8-link", pdf, "v1")
		b.clk.Advance(time.Second) // registered later, listed later
		mail := b.dependent(t, "contract-8-mail", pdf, "")
		b.dependent(t, "contract-9-link", other, "")
		if ds, err := b.s.Dependents(b.ctx, nil, other.ID, 10); err != nil || len(ds) != 1 {
			t.Fatalf("Dependents of %s = %+v, %v; want its one", other.ID, ds, err)
		}
		ds, err := b.s.Dependents(b.ctx, []string{tenantA}, pdf.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := []store.Dependent{{ID: link.ID, Action: "share_link", State: review.Pending, AfterVersion: "v1"},
			{ID: mail.ID, Action: "share_link", State: review.Pending}}
		if !slices.Equal(ds, got) {
			t.Errorf("Dependents = %+v, want %+v", ds, got)
		}
		b.start(t, pdf)
		b.report(t, pdf, 1, success("pdf-8"))
		b.start(t, link)
		if ds, _ := b.s.Dependents(b.ctx, nil, pdf.ID, 1); len(ds) != 1 || ds[0].ID != link.ID || ds[0].State != review.InFlight || ds[0].AttemptCount != 1 {
			t.Errorf("Dependents at most 1 = %+v, want %s in flight after its attempt", ds, link.ID)
		}
		for _, scope := range [][]string{{tenantB}, {}} {
			if ds, err := b.s.Dependents(b.ctx, scope, pdf.ID, 10); err != nil || len(ds) != 0 {
				t.Errorf("Dependents in scope %v = %+v, %v; want none", scope, ds, err)
			}
		}
	})
}
