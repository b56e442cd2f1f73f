package handlers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestFragmentOrPage (issue 13): htmx's own requests for a region get the
// region; a boosted request and a history restore — htmx asking for a
// whole page — get the page, as a plain request does. The answer varies on
// all three headers.
func TestFragmentOrPage(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, _ := consoleServer(t, e)
		b := newBrowser(t, srv.URL)
		b.login("reviewer@example.com")
		get := func(hdr map[string]string) (string, http.Header) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := b.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET / with %v: %d", hdr, resp.StatusCode)
			}
			return string(body), resp.Header
		}
		for _, tt := range []struct {
			name  string
			hdr   map[string]string
			whole bool
		}{
			{"a plain request", nil, true},
			{"htmx's poll of the table", map[string]string{"HX-Request": "true"}, false},
			{"a boosted link", map[string]string{"HX-Request": "true", "HX-Boosted": "true"}, true},
			{"a history restore", map[string]string{"HX-Request": "true", "HX-History-Restore-Request": "true"}, true},
		} {
			body, hdr := get(tt.hdr)
			if whole := strings.Contains(body, "<html"); whole != tt.whole {
				t.Errorf("%s: whole page %v, want %v", tt.name, whole, tt.whole)
			}
			if !strings.Contains(body, `id="queue"`) {
				t.Errorf("%s: no queue region in the answer", tt.name)
			}
			if v := hdr.Get("Vary"); !strings.Contains(v, "HX-Boosted") || !strings.Contains(v, "HX-History-Restore-Request") {
				t.Errorf("%s: Vary %q does not name every header the answer depends on", tt.name, v)
			}
		}
	})
}
