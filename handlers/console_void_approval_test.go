package handlers_test

import (
	"context"
	"html"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleVoidApprovalShown: a first approval whose approver was then
// disabled no longer counts (the next decision voids it), but the case
// page still showed it as given — "1 of 2, by rita" — so the next
// reviewer believed theirs would be the last one needed. The page now
// counts only the approvals that stand and says whose no longer counts
// and why, in English and Italian.
func TestConsoleVoidApprovalShown(t *testing.T) {
	t.Parallel()
	cfg, err := review.ParseConfig([]byte(`
destinations:
  mail:
    actions:
      notify:
        requires_approval: true
        approvals: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		rita, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "rita@example.com", Password: "correct horse battery",
			Role: review.RoleReviewer, Scope: review.Scope{All: true}})
		if err != nil {
			t.Fatal(err)
		}
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "n-1", LogicalVersion: "1", Action: "notify",
			Destination: "mail", Risk: review.RiskCompensableWrite, Payload: []byte(`{"to":"a@example.com"}`), Actor: "test"})
		if err != nil || op.State != review.AwaitingApproval {
			t.Fatalf("register: %v, %+v", err, op)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		d, err := st.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideApprove, Actor: "rita@example.com", Reason: "read the payload"})
		if err != nil || d.Status != store.DecisionFirstApproval {
			t.Fatalf("rita's approval: %v, %+v", err, d)
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		_, page := rev.get("/cases/" + cs[0].ID)
		if page = html.UnescapeString(page); !strings.Contains(page, "1 of 2, by rita@example.com") || strings.Contains(page, "no longer counts") {
			t.Fatalf("before rita is disabled, the page does not count her approval")
		}
		if _, err := st.UpdateUser(ctx, review.Operator("admin@example.com"), rita.ID, store.UserChange{Role: rita.Role, Scope: rita.Scope(), Disabled: true}); err != nil {
			t.Fatal(err)
		}
		reviewer, err := st.UserByEmail(ctx, "reviewer@example.com")
		if err != nil {
			t.Fatal(err)
		}
		for _, lang := range []struct{ code, count, void string }{
			{"en", "none yet of 2", "The approval of rita@example.com no longer counts: the approver's account is disabled."},
			{"it", "ancora nessuna su 2", "L'approvazione di rita@example.com non conta più: l'account di chi ha approvato è disattivato."},
		} {
			if err := st.SetLanguage(ctx, reviewer.Principal(), lang.code); err != nil {
				t.Fatal(err)
			}
			_, page := rev.get("/cases/" + cs[0].ID)
			page = html.UnescapeString(page)
			for _, want := range []string{lang.count, lang.void} {
				if !strings.Contains(page, want) {
					t.Errorf("%s: the case page does not say %q", lang.code, want)
				}
			}
		}
	})
}
