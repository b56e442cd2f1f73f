package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
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
		// Posting anyway (the page offers no form): refused, nothing decided.
		code, _, _ := rev.decide(caseID, url.Values{"action": {"fail"}, "reason": {"nothing arrived at the destination"}})
		if c, _ := st.GetCase(context.Background(), caseID, nil); code != http.StatusConflict || c.Status != store.CaseOpen {
			t.Fatalf("a decision on a case another holds: %d, case %+v", code, c)
		}
		code, body, _ = rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {"   "}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "A take-over needs a reason") {
			t.Fatalf("a take-over without a reason: %d", code)
		}
		if code, _, _ = rev.post("/cases/"+caseID+"/takeover", url.Values{"csrf": {rev.csrf}, "takeover_reason": {"support is off today"}}); code != http.StatusSeeOther {
			t.Fatalf("take-over: %d", code)
		}
		if _, body = rev.get("/cases/" + caseID); !strings.Contains(body, "You hold this case") || !strings.Contains(body, `class="decision"`) {
			t.Fatalf("after the take-over the reviewer holds the case and may decide")
		}
		if code, _, _ = sup.decide(caseID, url.Values{"action": {"fail"}, "reason": {"I was here first"}}); code != http.StatusConflict {
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

// TestConsoleStaleForm (issue 14, part 3): a decision must carry the
// versions of the case and the operation the reviewer saw. Without them,
// with version=0, or with an operation version that moved on, it is
// refused with a clear message and the typed reason is kept in the form.
func TestConsoleStaleForm(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "doc-stale")
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		_, page := rev.get("/cases/" + caseID)
		caseV, opV := caseVersionField.FindStringSubmatch(page), opVersionField.FindStringSubmatch(page)
		if caseV == nil || opV == nil {
			t.Fatal("the decision form carries no versions")
		}
		reason := "the v6 file is a leftover: nothing to keep"
		for _, tt := range []struct {
			name        string
			version, op string
		}{
			{"no versions", "", ""},
			{"version 0", "0", "0"},
			{"no operation version", caseV[1], ""},
			{"an older operation version", caseV[1], "1"},
		} {
			form := url.Values{"csrf": {rev.csrf}, "action": {"fail"}, "reason": {reason}}
			if tt.version != "" {
				form.Set("version", tt.version)
			}
			if tt.op != "" {
				form.Set("op_version", tt.op)
			}
			code, body, _ := rev.post("/cases/"+caseID+"/decision", form)
			if code != http.StatusConflict || !strings.Contains(body, "reload the case and decide again") || !strings.Contains(body, ">"+reason+"</textarea>") {
				t.Errorf("%s: %d, want 409 telling to reload, the reason kept", tt.name, code)
			}
		}
		if c, _ := st.GetCase(context.Background(), caseID, nil); c.Status != store.CaseOpen {
			t.Fatalf("a stale form decided the case: %+v", c)
		}
		if code, _, _ := rev.decide(caseID, url.Values{"action": {"fail"}, "reason": {reason}}); code != http.StatusSeeOther {
			t.Errorf("the current form: %d, want 303", code)
		}
	})
}

// TestConsoleFormDefaults (issue 14, part 3): on a duplicates case the
// form's defaults follow the recommendation — compensate is checked, the
// resource to undo is the recommended one, and the resource to confirm is
// the one to keep, never the one to undo.
func TestConsoleFormDefaults(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		_, caseID := duplicatesCase(t, st, review.Registration{Tenant: "acme", SourceRef: "folder-7", LogicalVersion: "1", Action: "mkdir",
			Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{"name":"folder-7"}`), Actor: "test"}, "fld-1", "fld-2")
		c, err := st.GetCase(context.Background(), caseID, nil)
		if err != nil || c.RecommendedAction != review.RecommendCompensate {
			t.Fatalf("case %+v, %v: want a recommendation to compensate a duplicate", c, err)
		}
		undo, keep := c.RecommendedRef, "fld-1"
		if undo == "fld-1" {
			keep = "fld-2"
		}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		_, body := sup.get("/cases/" + caseID)
		selected := func(sel string) string {
			i := strings.Index(body, `<select id="`+sel+`"`)
			if i < 0 {
				t.Fatalf("no %s select", sel)
			}
			block := body[i : i+strings.Index(body[i:], "</select>")]
			m := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(block)
			if m == nil {
				return ""
			}
			return m[1]
		}
		if got := selected("confirm_ref"); got != keep {
			t.Errorf("confirm preselects %q, want %q, the one to keep (never %q, the one to undo)", got, keep, undo)
		}
		if got := selected("undo_ref"); got != undo {
			t.Errorf("compensate preselects %q, want %q", got, undo)
		}
		// A duplicate: keep one and undo the other, in one decision.
		if !strings.Contains(body, `value="keep_and_undo" checked`) {
			t.Errorf("keep_and_undo is not preselected on a duplicate")
		}
		if code, _, _ := sup.decide(caseID, url.Values{"action": {review.DecideKeepAndUndo}, "confirm_ref": {keep}, "undo_ref": {undo},
			"compensation": {"delete the extra folder"}, "reason": {"two folders for one mkdir"}}); code != http.StatusSeeOther {
			t.Fatalf("keep_and_undo: %d", code)
		}
		ds, _ := st.CaseDecisions(context.Background(), caseID)
		if len(ds) != 1 || ds[0].ResourceRef != keep || ds[0].UndoRef != undo {
			t.Errorf("decisions %+v, want keep %s and undo %s", ds, keep, undo)
		}
	})
}
