package store_test

import (
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSuccessBesideAnEffectAlreadyNamed: a lookup names file-A as this
// operation's effect while its attempt is in flight; the attempt then
// answers success with file-B. Two resources for one operation and
// version: a person keeps one and undoes the other. The same two pieces
// in the other order — the success first, the lookup after — came to
// that already (an extra effect on the confirmed operation); the order
// they arrive in must not decide whether anyone sees the duplicate.
func TestSuccessBesideAnEffectAlreadyNamed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		lookup := func(op *review.Operation) {
			t.Helper()
			ev := review.Evidence{Source: review.SourceStatusLookup, Authoritative: true,
				Candidates: []review.Candidate{{Ref: "file-A", Kind: "file", Version: "v1", OperationID: op.ID}}}
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator"); err != nil {
				t.Fatal(err)
			}
		}
		caseNamesBoth := func(op *review.Operation) {
			t.Helper()
			cs, _ := b.s.CasesForOperation(b.ctx, op.ID)
			if len(cs) != 1 || cs[0].Status != store.CaseOpen || cs[0].RecommendedAction != review.RecommendCompensate ||
				!strings.Contains(cs[0].Rationale, "file-A") || !strings.Contains(cs[0].Rationale, "file-B") {
				t.Errorf("%s: cases %+v; want one open, undoing one of file-A and file-B", op.SourceRef, cs)
			}
		}
		for _, risk := range []review.Risk{review.RiskCompensableWrite, review.RiskIdempotentWrite} {
			op := b.register(t, intention("doc-lookup-first-"+string(risk), risk, "transform"))
			b.start(t, op)
			lookup(op)
			res := b.report(t, op, 1, success("file-B"))
			wantState(t, res.Operation, review.NeedsReview)
			if res.Next != review.NextReview {
				t.Errorf("the integrator is told %s, want review", res.Next)
			}
			caseNamesBoth(op)

			op = b.register(t, intention("doc-success-first-"+string(risk), risk, "transform"))
			b.start(t, op)
			wantState(t, b.report(t, op, 1, success("file-B")).Operation, review.Confirmed)
			lookup(op)
			caseNamesBoth(op)
		}

		// The same resource named twice is one effect: confirmed.
		op := b.register(t, intention("doc-same", review.RiskCompensableWrite, "transform"))
		b.start(t, op)
		ev := review.Evidence{Source: review.SourceStatusLookup, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "file-B", Kind: "file", Version: "v1", OperationID: op.ID}}}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator"); err != nil {
			t.Fatal(err)
		}
		wantState(t, b.report(t, op, 1, success("file-B")).Operation, review.Confirmed)
		assertSealed(t, b.s)
	})
}
