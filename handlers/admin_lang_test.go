package handlers_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// headerTransport adds headers to every request a test client sends (a
// browser's Accept-Language, say).
type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return t.base.RoundTrip(r)
}

// withHeader makes b send header k: v on every request from now on.
func (b *browser) withHeader(k, v string) *browser {
	base := b.c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	b.c.Transport = headerTransport{base: base, h: http.Header{http.CanonicalHeaderKey(k): {v}}}
	return b
}

// TestConsoleRefusalsInItalian: a refusal of the admin form (a domain
// sentence from the store), a consoleError (from a handler another file
// owns, and from the CSRF guard) and consoleStatus's own messages render
// in the reader's language, in a layout whose html lang says it; the same
// requests in English read as before.
func TestConsoleRefusalsInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		for _, c := range []struct {
			lang                                    string
			htmlLang, refusal, window, csrf, notFnd string
		}{
			{"it", `<html lang="it">`, "email: non è un indirizzo email", "La finestra è una durata tra 1m e 2160h",
				"Il modulo era scaduto o contraffatto", "Non trovato."},
			{"", `<html lang="en">`, "email: not an email address", "The window is a duration between 1m and 2160h",
				"The form was stale or forged", "Not found."},
		} {
			adm := newBrowser(t, srv.URL)
			if c.lang != "" {
				adm.withHeader("Accept-Language", c.lang)
			}
			adm.login("admin@example.com")
			check := func(what string, code, wantCode int, body string, want ...string) {
				t.Helper()
				body = html.UnescapeString(body)
				if code != wantCode {
					t.Errorf("%s (%q): %d, want %d", what, c.lang, code, wantCode)
				}
				for _, w := range want {
					if !strings.Contains(body, w) {
						t.Errorf("%s (%q): the page lacks %q", what, c.lang, w)
					}
				}
			}
			code, body, _ := adm.post("/admin/users", url.Values{"csrf": {adm.csrf}, "email": {"not-an-email"}, "role": {"support"}, "tenants": {"acme"}})
			check("refused user", code, http.StatusUnprocessableEntity, body, c.htmlLang, c.refusal, `value="not-an-email"`)
			code, body = adm.get("/dashboard?window=forever")
			check("bad dashboard window", code, http.StatusBadRequest, body, c.htmlLang, c.window)
			code, body, _ = adm.post("/admin/tokens", url.Values{"csrf": {"forged"}, "tenant": {"acme"}, "name": {"x"}})
			check("forged CSRF token", code, http.StatusForbidden, body, c.htmlLang, c.csrf)
			code, body = adm.get("/cases/case_nope")
			check("unknown case", code, http.StatusNotFound, body, c.htmlLang, c.notFnd)
		}
	})
}
