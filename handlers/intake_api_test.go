package handlers_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/static"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestRegisterNFC: an intention typed composed ("café" with U+00E9) or
// decomposed ("cafe" and U+0301) is one intention: one operation, one key,
// 200 on the second call — for the identity fields and the tenant.
func TestRegisterNFC(t *testing.T) {
	t.Parallel()
	composed, decomposed := "caf\u00e9", "cafe\u0301"
	body := func(s string) string {
		return `{"source_ref":"contract-` + s + `","logical_version":"v-` + s + `","action":"create-` + s +
			`","destination":"drive-` + s + `","risk":"compensable_write","payload":{"name":"x"}}`
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		b.token = b.newToken("tenant-" + composed)
		first := b.post("/api/v1/operations", body(composed)).want(t, http.StatusCreated).op(t)
		b.token = b.newToken("tenant-" + decomposed) // the same tenant, once normalised
		second := b.post("/api/v1/operations", body(decomposed)).want(t, http.StatusOK).op(t)
		if second.ID != first.ID || second.Key != first.Key {
			t.Fatalf("decomposed: operation %s key %s; composed: %s key %s", second.ID, second.Key, first.ID, first.Key)
		}
		for name, v := range map[string]string{"tenant": second.Tenant, "source_ref": second.SourceRef,
			"logical_version": second.LogicalVersion, "action": second.Action, "destination": second.Destination} {
			if !strings.Contains(v, composed) {
				t.Errorf("%s = %q, want it stored composed (NFC)", name, v)
			}
		}
	})
}

// TestRegisterDeadlineRFC3339: deadline is RFC 3339 exactly, not what
// time.Time's UnmarshalJSON reads.
func TestRegisterDeadlineRFC3339(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		for i, tc := range []struct {
			deadline string
			want     time.Time // zero: 400 naming deadline
		}{
			{"2031-01-02t03:04:05z", time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)},
			{"2031-01-02T03:04:05.5+01:00", time.Date(2031, 1, 2, 2, 4, 5, 500_000_000, time.UTC)},
			{"2031-01-02T03:04:05,5Z", time.Time{}},
			{"2031-01-02T03:04:05+24:00", time.Time{}},
			{"2031-01-02T03:04:05", time.Time{}},
			{"2031-12-31T23:59:60Z", time.Time{}},
			{"", time.Time{}},
		} {
			res := b.post("/api/v1/operations", registration("deadline-"+string(rune('a'+i)), "drive", review.RiskRead, `"deadline":"`+tc.deadline+`"`))
			if tc.want.IsZero() {
				if p := res.want(t, http.StatusBadRequest).problem(t, "invalid-request"); p.Field != "deadline" {
					t.Errorf("deadline %q: field %q, want deadline", tc.deadline, p.Field)
				}
				continue
			}
			if op := res.want(t, http.StatusCreated).op(t); !op.Deadline.Equal(tc.want) {
				t.Errorf("deadline %q stored as %v, want %v", tc.deadline, op.Deadline, tc.want)
			}
		}
	})
}

// TestInboundStrictJSON: a webhook body is held to the same strict JSON as
// the API — duplicate members, trailing data and invalid UTF-8 are 400 —
// while members Limbo does not read are still allowed.
func TestInboundStrictJSON(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, inboundConfig())
		op := b.ambiguousAt(t, "strict-1", "files")
		now := b.clock.Now()
		for i, tc := range []struct {
			body, field string
		}{
			{`{"operation_id":"` + op.ID + `","operation_id":"op_other"}`, "operation_id"},
			{`{"operation_id":"` + op.ID + `","data":{"ref":"a","ref":"b"}}`, "data.ref"},
			{`{"operation_id":"` + op.ID + `"} {"operation_id":"op_other"}`, ""},
			{`{"operation_id":"` + op.ID + "\",\"note\":\"\xff\"}", "note"},
			{`{"operation_id":7}`, "operation_id"},
		} {
			d := signed(t, "files", filesSecret, "msg_strict_"+string(rune('a'+i)), now, tc.body)
			p := b.deliver(t, d).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if p.Field != tc.field {
				t.Errorf("%s: field %q, want %q (%s)", tc.body, p.Field, tc.field, p.Detail)
			}
		}
		d := signed(t, "files", filesSecret, "msg_strict_ok", now, `{"operation_id":"`+op.ID+`","extra":{"any":["thing"]}}`)
		b.deliver(t, d).want(t, http.StatusOK)
	})
}

// TestHeadOnEveryGetRoute walks the route table: every GET route — API,
// console, probes, metrics, the document, static files — answers HEAD with
// the GET's status and Content-Type, and no body.
func TestHeadOnEveryGetRoute(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		st := storetest.Open(t, engine, store.Options{})
		h := handlers.New(st, nil)
		h.Metrics = metrics.New(st, nil)
		t.Cleanup(func() { h.Metrics.Close() }) // before the store closes
		h.Console = handlers.NewConsole(make([]byte, 64), make([]byte, 32), false, store.SessionPolicy{})
		e := handlers.NewServer(h)
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "admin@example.com", Password: "correct horse battery",
			Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
			t.Fatal(err)
		}
		token, err := st.CreateToken(ctx, review.Operator("test"), "acme", "test")
		if err != nil {
			t.Fatal(err)
		}
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "head-1", LogicalVersion: "v1",
			Action: "a", Destination: "d", Risk: review.RiskRead, Payload: []byte(`{}`), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		asset := ""
		_ = fs.WalkDir(static.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && asset == "" && strings.HasSuffix(p, ".css") {
				asset = p
			}
			return nil
		})
		b := newBrowser(t, srv.URL)
		b.login("admin@example.com")
		n := 0
		for _, r := range e.Routes() {
			if r.Method != http.MethodGet {
				continue
			}
			path := strings.NewReplacer(":id", op.ID, "*", asset).Replace(r.Path)
			answer := func(method string) (*http.Response, []byte) {
				req, _ := http.NewRequest(method, srv.URL+path, nil)
				if strings.HasPrefix(path, "/api/") {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := b.c.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp, body
			}
			get, getBody := answer(http.MethodGet)
			head, headBody := answer(http.MethodHead)
			n++
			switch {
			case head.StatusCode != get.StatusCode:
				t.Errorf("HEAD %s: %d, GET: %d", path, head.StatusCode, get.StatusCode)
			case len(headBody) != 0:
				t.Errorf("HEAD %s: a body of %d bytes", path, len(headBody))
			case head.Header.Get("Content-Type") != get.Header.Get("Content-Type"):
				t.Errorf("HEAD %s: Content-Type %q, GET: %q", path, head.Header.Get("Content-Type"), get.Header.Get("Content-Type"))
			case get.StatusCode == http.StatusOK && len(getBody) == 0:
				t.Errorf("GET %s: 200 without a body", path)
			}
		}
		if n < 15 {
			t.Fatalf("only %d GET routes walked", n)
		}
	})
}
