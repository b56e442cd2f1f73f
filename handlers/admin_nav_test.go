package handlers_test

import (
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestAdminNavMarksThePage: the admin pages' tabs are links apart, each
// in a list item (run together, "API tokens Webhook endpoints" read as
// one), and the tab of the page shown is marked aria-current="page".
func TestAdminNavMarksThePage(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		for _, path := range []string{"/admin/users", "/admin/tokens", "/admin/webhooks", "/admin/destinations", "/admin/actions"} {
			code, body := adm.get(path)
			if code != 200 {
				t.Fatalf("%s: %d", path, code)
			}
			nav := body[strings.Index(body, `<nav class="subnav"`):]
			nav = nav[:strings.Index(nav, "</nav>")]
			if n := strings.Count(nav, "<li>"); n != 5 {
				t.Errorf("%s: %d tabs in list items, want 5:\n%s", path, n, nav)
			}
			if !strings.Contains(nav, `href="`+path+`" aria-current="page"`) || strings.Count(nav, "aria-current") != 1 {
				t.Errorf("%s: its tab is not the one marked current:\n%s", path, nav)
			}
		}
	})
}
