package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleClaimsHold (issue 14, part 2): the reviewer sees who holds a
// case instead of a decision form, is refused (409, the typed reason kept)
// when deciding anyway, and takes the case over with a reason — refused
// without one — after which the holder is the one refused. A manager sees
// no claim button at all.
func TestConsoleClaimsHold(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "doc-held")
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		if code, _, _ := sup.post("/cases/"+caseID+"/claim", url.Values{"csrf": {sup.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("claim: %d", code)
		}

		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		_, body := rev.get("/cases/" + caseID)
		if !strings.Contains(body, "Held by <strong>support@example.com</strong>") || !strings.Contains(body, "Take over") ||
			strings.Contains(body, `class="decision"`) {
			t.Fatalf("the case page for a non-holder must show the holder and a take-over, not a decision form:\n%s", body)
		}
		code, body, _ := rev.post("/cases/"+caseID+"/decision", url.Values{"csrf": {rev.csrf}, "action": {"fail"}, "reason": {"nothing arrived at the destination"}})
		if code != http.StatusConflict || !strings.Contains(body, "held by support@example.com") {
			t.Fatalf("a decision on a case another holds: %d\n%s", code, body)
		}
		code, body, _ = rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {"   "}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "every decision needs a reason") {
			t.Fatalf("a take-over without a reason: %d", code)
		}
		if code, _, _ = rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {"support is off today"}}); code != http.StatusSeeOther {
			t.Fatalf("take-over: %d", code)
		}
		if _, body = rev.get("/cases/" + caseID); !strings.Contains(body, "You hold this case") || !strings.Contains(body, `class="decision"`) {
			t.Fatalf("after the take-over the reviewer holds the case and may decide")
		}
		if code, _, _ = sup.post("/cases/"+caseID+"/decision", url.Values{"csrf": {sup.csrf}, "action": {"fail"}, "reason": {"I was here first"}}); code != http.StatusConflict {
			t.Fatalf("the previous holder decides after the take-over: %d, want 409", code)
		}
		c, _ := st.GetCase(context.Background(), caseID, nil)
		hist, _ := st.OperationHistory(context.Background(), c.OperationID)
		var audited bool
		for _, ev := range hist {
			audited = audited || ev.Action == "case.taken_over" && ev.Actor == "reviewer@example.com" && strings.Contains(string(ev.Detail), "support@example.com")
		}
		if !audited {
			t.Errorf("the take-over is not in the audit trail: %+v", hist)
		}

		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		if _, body = mgr.get("/cases/" + caseID); strings.Contains(body, ">Claim<") || strings.Contains(body, "Take over") {
			t.Errorf("a manager is offered a claim or a take-over")
		}
	})
}
