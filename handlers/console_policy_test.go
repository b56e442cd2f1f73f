package handlers_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// /admin/actions shows each action's policy and what it misses; a case
// whose action has no policy says it got the safe defaults, and one whose
// action has a policy names its owner and redacts its fields.
func TestConsoleActionPolicies(t *testing.T) {
	t.Parallel()
	cfg, err := review.ParseConfig([]byte(`
destinations:
  files:
    actions:
      render:
        owner: documents-team
        effects: renders one page
        key_fields: [note]
        redact_fields: [note]
        risk: compensable_write
      upload: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		code, body := adm.get("/admin/actions")
		if code != http.StatusOK {
			t.Fatalf("/admin/actions: %d", code)
		}
		body = html.UnescapeString(body)
		for _, want := range []string{"render", "documents-team", "renders one page", "Missing for production: duplicate_cost", "upload", "not stated"} {
			if !strings.Contains(body, want) {
				t.Errorf("/admin/actions lacks %q", want)
			}
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		if code, _ := rev.get("/admin/actions"); code != http.StatusForbidden {
			t.Errorf("a reviewer reads /admin/actions: %d", code)
		}

		// render has a policy: its owner is named and its note redacted.
		_, page := rev.get("/cases/" + needsReview(t, st, "doc-1"))
		page = html.UnescapeString(page)
		if !strings.Contains(page, "the action's policy, owned by documents-team") || strings.Contains(page, "alert(1)") {
			t.Errorf("case page: policy note or redaction missing")
		}
		// No policy for render at another destination: the safe defaults, said.
		_, page = rev.get("/cases/" + needsReviewOn(t, st, "acme", "drive", "doc-2"))
		if !strings.Contains(html.UnescapeString(page), "no policy for render at drive: safe defaults") {
			t.Errorf("case page does not say the action has no policy")
		}
	})
}
