package handlers_test

import (
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

const probeCredentialsConfig = `
destinations:
  files:
    write_auth_env: FILES_TOKEN
    probes:
      status:
        url: https://files.example.com/resources/{{.ResourceRef}}
        auth_header: Authorization
        auth_env: FILES_READ_TOKEN
      search:
        url: https://files.example.com/search?operation_id={{.ID}}
        auth_header: Authorization
        auth_env: FILES_SEARCH_TOKEN
  mail:
    undo:
      url: https://mail.example.com/messages/{{.Ref}}
      auth_header: Authorization
      auth_env: MAIL_TOKEN
    probes:
      status:
        url: https://mail.example.com/messages/{{.ResourceRef}}
        auth_header: Authorization
        auth_env: MAIL_TOKEN
`

// The admin destinations page shows which credential each probe uses and
// warns when one is a write credential — by name, or by holding the same
// value under another name.
func TestAdminDestinationsShowProbeCredentials(t *testing.T) {
	t.Setenv("FILES_TOKEN", "secret-write")
	t.Setenv("FILES_READ_TOKEN", "secret-read")
	t.Setenv("FILES_SEARCH_TOKEN", "secret-write")
	t.Setenv("MAIL_TOKEN", "secret-mail")
	cfg, err := review.ParseConfig([]byte(probeCredentialsConfig))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		code, body := adm.get("/admin/destinations")
		if code != 200 {
			t.Fatalf("destinations page: %d", code)
		}
		_, section, _ := strings.Cut(body, `id="probes-h"`)
		section, _, _ = strings.Cut(section, "</section>")
		rows := strings.Split(section, "<li>")[1:] // one item a probe
		if len(rows) != 3 {
			t.Fatalf("%d probe rows, want 3:\n%s", len(rows), section)
		}
		for i, want := range []struct{ env, warning string }{
			{"FILES_READ_TOKEN", ""},
			{"FILES_SEARCH_TOKEN", "FILES_SEARCH_TOKEN holds the same value as the integration&#39;s write credential (FILES_TOKEN)"},
			{"MAIL_TOKEN", "MAIL_TOKEN is also the undo call&#39;s credential (MAIL_TOKEN)"},
		} {
			if !strings.Contains(rows[i], "<code>"+want.env+"</code>") {
				t.Errorf("row %d lacks %s:\n%s", i, want.env, rows[i])
			}
			if got := strings.Contains(rows[i], "Shares a write credential"); got != (want.warning != "") || !strings.Contains(rows[i], want.warning) {
				t.Errorf("row %d: warning %t, want %q:\n%s", i, got, want.warning, rows[i])
			}
		}
		if strings.Contains(body, "secret-") {
			t.Error("the page shows a credential's value")
		}
	})
}
