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

// TestConsoleIntake: the console's parameters and forms are held to the
// same rule as the API — NUL, invalid UTF-8 and controls answer a readable
// 400 page naming the field, never a 500, on both engines — and a prose
// field's CRLF line breaks (as browsers send a textarea's) are stored as LF.
func TestConsoleIntake(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "intake-1")
		admin := newBrowser(t, srv.URL)
		admin.login("admin@example.com")
		reviewer := newBrowser(t, srv.URL)
		reviewer.login("reviewer@example.com")

		refused := func(what string, code int, body, field string) {
			t.Helper()
			if code != http.StatusBadRequest || !strings.Contains(body, "<html") || !strings.Contains(body, field) {
				t.Errorf("%s: %d, want a 400 page naming %q: %.300s", what, code, field, body)
			}
		}
		for _, p := range []struct{ path, field string }{
			{"/cases/a%00b", "id"},
			{"/operations/%FF", "id"},
			{"/?tenant=a%00b", "tenant"},
			{"/?q=%C2%85", "q"},
			{"/audit?actor=%FF", "actor"},
			{"/audit?tenant=a%00b", "tenant"},
		} {
			code, body := reviewer.get(p.path)
			refused("GET "+p.path, code, body, p.field)
		}
		code, body, _ := reviewer.decide(caseID, url.Values{"action": {"fail"}, "reason": {"bad\x00reason"}})
		refused("a decision with NUL in its reason", code, body, "reason")
		code, body, _ = admin.post("/admin/webhooks", url.Values{"csrf": {admin.csrf}, "tenant": {"acme"}, "url": {"https://example.com/hook"}, "description": {"x\u0085"}})
		refused("a webhook description with a C1 control", code, body, "description")
		code, body, _ = admin.post("/admin/tokens", url.Values{"csrf": {admin.csrf}, "tenant": {"acme"}, "name": {"\xff"}})
		refused("a token name that is not UTF-8", code, body, "name")
		anon := newBrowser(t, srv.URL)
		anon.get("/login")
		code, body, _ = anon.post("/login", url.Values{"csrf": {anon.csrf}, "email": {"reviewer@example.com\x00"}, "password": {"correct horse battery"}})
		refused("a sign-in with NUL in the email", code, body, "email")

		// Multipart forms are held to the same rules (they were not parsed
		// before, so their fields went past the check); a form over 1 MiB is
		// refused whole.
		code, body, _ = reviewer.postMultipart("/cases/"+caseID+"/decision", url.Values{"csrf": {reviewer.csrf}, "action": {"fail"}, "reason": {"bad\x00reason"}})
		refused("a multipart decision with NUL in its reason", code, body, "reason")
		code, _, _ = reviewer.send("/cases/"+caseID+"/decision", "application/x-www-form-urlencoded",
			strings.NewReader("csrf="+reviewer.csrf+"&action=fail&reason="+strings.Repeat("x", 2<<20)), nil)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("a 2 MiB decision form: %d, want 413", code)
		}

		reviewer.get("/cases/" + caseID)
		if code, body, _ := reviewer.decide(caseID, url.Values{"action": {"fail"},
			"reason": {"first line\r\nsecond line\twith a tab"}}); code != http.StatusSeeOther {
			t.Fatalf("a decision with CRLF in its reason: %d: %.300s", code, body)
		}
		ds, err := st.CaseDecisions(context.Background(), caseID)
		if err != nil || len(ds) != 1 || ds[0].Reason != "first line\nsecond line\twith a tab" {
			t.Fatalf("decisions: %v %+v; want one whose reason has LF for CRLF", err, ds)
		}
	})
}
