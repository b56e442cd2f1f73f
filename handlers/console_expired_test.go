package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleDecisionOnALapsedApproval: a reviewer who sends an approval
// after the request lapsed (the sweeper resolved the case as expired
// while the page was open) is told so in their language: "Scaduto", not
// the stored resolution "expired" in an Italian sentence.
func TestConsoleDecisionOnALapsedApproval(t *testing.T) {
	t.Parallel()
	cfg, err := review.ParseConfig([]byte(`
destinations:
  mail:
    actions:
      notify:
        requires_approval: true
        approval_timeout: 2m
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk, cfg: cfg})
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "n-1", LogicalVersion: "1", Action: "notify",
			Destination: "mail", Risk: review.RiskCompensableWrite, Payload: []byte(`{"to":"a@example.com"}`), Actor: "test"})
		if err != nil || op.State != review.AwaitingApproval {
			t.Fatalf("register: %v, %+v", err, op)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		rev := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		rev.login("reviewer@example.com")
		_, page := rev.get("/cases/" + cs[0].ID)
		form := url.Values{"action": {review.DecideApprove}, "reason": {"letto il payload"}, "csrf": {rev.csrf}}
		setFormVersions(form, page)

		clk.Advance(3 * time.Minute)
		if n, err := st.ExpireDeadlines(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireDeadlines = %d, %v", n, err)
		}
		code, body, _ := rev.post("/cases/"+cs[0].ID+"/decision", form)
		if code != http.StatusConflict {
			t.Fatalf("an approval after the request lapsed: %d, want 409", code)
		}
		if !strings.Contains(body, "è già stato deciso: Scaduto da system:deadline-sweeper") {
			i := strings.Index(body, "già stato deciso")
			t.Errorf("the refusal does not name the expiry in Italian: …%s…", body[max(0, i-100):min(len(body), i+100)])
		}
	})
}
