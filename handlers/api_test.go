package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// Every test here runs the real server (handlers.NewServer) over HTTP on a
// fresh database, on SQLite and PostgreSQL. testBundle.do checks what every
// answer must satisfy (no 5xx; errors as problem+json; the OpenAPI
// document describes the answer), so the tests below assert behaviour.

func TestProbes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready"} {
			var body struct {
				Status   string
				Warnings []string
			}
			b.do(request{path: path, token: strp("")}).want(t, http.StatusOK).decode(t, &body)
			if body.Status != want || body.Warnings != nil {
				t.Errorf("%s = %+v, want status %q and no warnings", path, body, want)
			}
		}

		// A warning (a probe credential not set, as serve finds at start)
		// is named, and the instance stays ready: it serves everything, and
		// the destination it concerns goes to review rather than wrong.
		h := handlers.New(b.store, nil)
		h.Warnings = []string{`destination "files": the search probe's credential FILES_API_TOKEN is not set`}
		srv := httptest.NewServer(handlers.NewServer(h))
		t.Cleanup(srv.Close)
		w := &testBundle{t: t, engine: engine, store: b.store, clock: b.clock, srv: srv, token: b.token}
		var body struct {
			Status   string
			Warnings []string
		}
		w.do(request{path: "/readyz", token: strp("")}).want(t, http.StatusOK).decode(t, &body)
		if body.Status != "ready" || !slices.Equal(body.Warnings, h.Warnings) {
			t.Errorf("/readyz with a warning = %+v, want ready, naming it", body)
		}
	})
}

// TestReadyzWarnsWhenSealingStalls: audit events that no checkpoint has
// covered for longer than the sealer's interval are named on /readyz (a
// warning: the instance stays ready), and the warning goes once they are
// sealed.
func TestReadyzWarnsWhenSealingStalls(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil) // its token's creation is an audit event, not sealed
		readyz := func() (body struct {
			Status   string
			Warnings []string
		}) {
			b.do(request{path: "/readyz", token: strp("")}).want(t, http.StatusOK).decode(t, &body)
			return body
		}
		b.clock.Advance(b.store.SealMax() + time.Minute)
		if body := readyz(); body.Status != "ready" || len(body.Warnings) != 1 || !strings.Contains(body.Warnings[0], "audit sealing has stalled") {
			t.Errorf("/readyz with events unsealed past the seal interval = %+v, want ready, warning of it", body)
		}
		if rep := storetest.Sealed(t, b.store); rep.Unsealed != 0 {
			t.Fatalf("%d audit events left unsealed", rep.Unsealed)
		}
		if body := readyz(); body.Status != "ready" || body.Warnings != nil {
			t.Errorf("/readyz once sealed = %+v, want ready, no warning", body)
		}
	})
}

func TestRegisterSameIntentionFiveTimes(t *testing.T) {
	t.Parallel()
	// The same intention five times: member order differs at every depth,
	// whitespace differs, and numbers and strings are spelled differently
	// but canonicalise (RFC 8785) to the same bytes.
	bodies := []string{
		`{"source_ref":"contract-583","logical_version":"v7","action":"transform","destination":"files","risk":"compensable_write","flags":["regulated","financial"],"payload":{"doc":{"id":583,"pages":[1,2,{"a":null,"b":true}]},"format":"pdf","opts":{"dpi":300,"color":false}}}`,
		`{
			"payload": {"opts": {"color": false, "dpi": 300}, "format": "pdf", "doc": {"pages": [1, 2, {"b": true, "a": null}], "id": 583}},
			"risk": "compensable_write", "destination": "files", "action": "transform",
			"logical_version": "v7", "source_ref": "contract-583", "flags": ["financial", "regulated"]
		}`,
		"{\t\"action\":\"transform\",\r\n\"flags\":[\"regulated\",\"financial\"],\"payload\":{\"format\":\"\\u0070df\",\"doc\":{\"id\":583.0,\"pages\":[1.0,2e0,{\"a\":null,\"b\":true}]},\"opts\":{\"dpi\":3e2,\"color\":false}},\"source_ref\":\"contract-583\",\"risk\":\"compensable_write\",\"logical_version\":\"v7\",\"destination\":\"files\"}\n",
		`   {"destination":"files","logical_version":"v7","payload":{"doc":{"pages":[1,2,{"a":null,"b":true}],"id":583},"opts":{"dpi":300,"color":false},"format":"pdf"},"source_ref":"contract-583","risk":"compensable_write","action":"transform","flags":["financial","regulated"]}   `,
		`{"risk":"compensable_write","source_ref":"contract-583","payload":{"format":"pdf","opts":{"color":false,"dpi":300},"doc":{"id":583,"pages":[1,2,{"b":true,"a":null}]}},"logical_version":"v7","action":"transform","flags":["regulated","financial"],"destination":"files"}`,
	}
	const canonical = `{"doc":{"id":583,"pages":[1,2,{"a":null,"b":true}]},"format":"pdf","opts":{"color":false,"dpi":300}}`
	sum := sha256.Sum256([]byte(canonical))
	wantHash := hex.EncodeToString(sum[:])

	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		var first *review.Operation
		for i, body := range bodies {
			want := http.StatusOK
			if i == 0 {
				want = http.StatusCreated
			}
			op := b.post("/api/v1/operations", body).want(t, want).op(t)
			if first == nil {
				first = op
			}
			if op.ID != first.ID || op.Key != first.Key || op.PayloadHash != first.PayloadHash {
				t.Errorf("registration %d: (id, key, hash) = (%s, %s, %s), want (%s, %s, %s)",
					i+1, op.ID, op.Key, op.PayloadHash, first.ID, first.Key, first.PayloadHash)
			}
			if string(op.Payload) != canonical {
				t.Errorf("registration %d: payload = %s, want the canonical %s", i+1, op.Payload, canonical)
			}
			if op.PayloadHash != wantHash {
				t.Errorf("registration %d: payload_hash = %s, want SHA-256 of the canonical payload %s", i+1, op.PayloadHash, wantHash)
			}
			if op.State != review.Pending || op.Tenant != "acme" || len(op.Flags) != 2 {
				t.Errorf("registration %d: state %s, tenant %s, flags %v", i+1, op.State, op.Tenant, op.Flags)
			}
		}
		if want := review.DeriveKey("acme", "contract-583", "transform", "v7"); first.Key != want {
			t.Errorf("key = %s, want the derived key %s", first.Key, want)
		}
		var p page
		b.get("/api/v1/operations").want(t, http.StatusOK).decode(t, &p)
		if len(p.Operations) != 1 {
			t.Errorf("%d operations after 5 registrations of one intention, want 1", len(p.Operations))
		}
		ops, _, err := b.store.ListOperations(context.Background(), "acme", store.OperationFilter{}, "", 100)
		if err != nil || len(ops) != 1 {
			t.Errorf("store holds %d operations (%v), want 1", len(ops), err)
		}
	})
}

func TestRegisterPayloadMismatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)

		// Same derived key (tenant, source_ref, action, version), other payload.
		other := strings.Replace(registration("contract-1", "drive", review.RiskCompensableWrite), `"name":"contract-1"`, `"name":"contract-1 (copy)"`, 1)
		p := b.post("/api/v1/operations", other).want(t, http.StatusUnprocessableEntity).problem(t, "payload-mismatch")
		if p.OperationID != op.ID || p.State != review.Pending {
			t.Errorf("problem names %s (%s), want %s (pending)", p.OperationID, p.State, op.ID)
		}
		if !strings.Contains(p.Detail, "payload") {
			t.Errorf("detail %q does not say what differs", p.Detail)
		}

		// A caller key reused for another intention.
		key := `"key":"order-2024-000001-create"`
		op2 := b.register(t, "order-1", review.RiskIdempotentWrite, key)
		if op2.Key != "order-2024-000001-create" {
			t.Errorf("key = %q, want the caller's", op2.Key)
		}
		p = b.post("/api/v1/operations", registration("order-2", "drive", review.RiskIdempotentWrite, key)).
			want(t, http.StatusUnprocessableEntity).problem(t, "payload-mismatch")
		if p.OperationID != op2.ID {
			t.Errorf("operation_id = %s, want %s", p.OperationID, op2.ID)
		}

		// The same intention with a safety flag added, or one dropped, is
		// not the same intention: 422 naming flags, never 200 with the
		// flag silently lost (issue 12, hole 8).
		flagged := b.register(t, "contract-9", review.RiskCompensableWrite, `"flags":["financial"]`)
		for _, flags := range []string{`"flags":["irreversible"]`, `"flags":["financial","irreversible"]`, `"flags":[]`} {
			p = b.post("/api/v1/operations", registration("contract-9", "drive", review.RiskCompensableWrite, flags)).
				want(t, http.StatusUnprocessableEntity).problem(t, "payload-mismatch")
			if p.OperationID != flagged.ID || !strings.Contains(p.Detail, "flags") {
				t.Errorf("re-registration with %s: %s %q, want a mismatch naming flags", flags, p.OperationID, p.Detail)
			}
		}
		b.post("/api/v1/operations", registration("contract-9", "drive", review.RiskCompensableWrite, `"flags":["financial","financial"]`)).
			want(t, http.StatusOK)
		if got := b.get("/api/v1/operations/"+flagged.ID).want(t, http.StatusOK).op(t); !slices.Equal(got.Flags, []review.Flag{review.FlagFinancial}) {
			t.Errorf("flags now %v, want [financial]", got.Flags)
		}

		// Nothing was overwritten.
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.PayloadHash != op.PayloadHash || got.Version != op.Version {
			t.Errorf("operation changed by a mismatching registration: %+v", got)
		}
	})
}

func TestRegisterConcurrently(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		body := registration("contract-50", "drive", review.RiskCompensableWrite)
		const n = 50
		type answer struct {
			status int
			id     string
			key    string
			hash   string
		}
		answers := make([]answer, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res := b.post("/api/v1/operations", body)
				var op review.Operation
				_ = json.Unmarshal(res.Body, &op)
				answers[i] = answer{res.Status, op.ID, op.Key, op.PayloadHash}
			}()
		}
		close(start)
		wg.Wait()
		created := 0
		for i, a := range answers {
			switch a.status {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Errorf("caller %d: status %d, want 201 or 200", i, a.status)
			}
			if a.id == "" || a.id != answers[0].id || a.key != answers[0].key || a.hash != answers[0].hash {
				t.Errorf("caller %d got (%s, %s, %s), caller 0 (%s, %s, %s)", i, a.id, a.key, a.hash, answers[0].id, answers[0].key, answers[0].hash)
			}
		}
		if created != 1 {
			t.Errorf("%d callers got 201, want exactly 1", created)
		}
		var p page
		b.get("/api/v1/operations?limit=500").want(t, http.StatusOK).decode(t, &p)
		if len(p.Operations) != 1 {
			t.Errorf("%d operations after %d concurrent registrations, want 1", len(p.Operations), n)
		}
	})
}

func TestRegisterInvalid(t *testing.T) {
	t.Parallel()
	valid := registration("contract-1", "drive", review.RiskCompensableWrite)
	with := func(extra string) string { return strings.TrimSuffix(valid, "}") + "," + extra + "}" }
	without := func(member string) string {
		out := strings.Replace(valid, member+",", "", 1)
		if out == valid {
			panic("member not found: " + member)
		}
		return out
	}
	tests := []struct {
		name  string
		body  string
		field string // named in detail as `"field"`
		exact bool   // and in the problem's field member
	}{
		{"unknown field", with(`"colour":"red"`), "colour", true},
		{"case-folded field", with(`"Max_Attempts":3`), "Max_Attempts", true},
		{"unknown field beside every optional member", with(`"deadline":"2031-01-01T00:00:00Z","max_attempts":2,"cost_budget":1.5,"flags":[],"key":"k-0123456789abcdef","x":{"y":1}`), "x", true},
		{"max_attempts as string", with(`"max_attempts":"3"`), "max_attempts", true},
		{"risk as number", strings.Replace(valid, `"risk":"compensable_write"`, `"risk":3`, 1), "risk", true},
		{"flags as string", with(`"flags":"financial"`), "flags", true},
		{"missing source_ref", without(`"source_ref":"contract-1"`), "source_ref", false},
		{"missing action", without(`"action":"create_folder"`), "action", false},
		{"missing payload", strings.Replace(valid, `,"payload":{"name":"contract-1"}`, "", 1), "payload", true},
		{"null payload", strings.Replace(valid, `{"name":"contract-1"}`, "null", 1), "payload", true},
		{"invalid risk", strings.Replace(valid, `"compensable_write"`, `"dangerous"`, 1), "risk", false},
		{"invalid flag", with(`"flags":["urgent"]`), "flags", false},
		{"duplicate member", with(`"action":"delete_folder"`), "action", true},
		{"duplicate nested member", strings.Replace(valid, `{"name":"contract-1"}`, `{"name":"a","name":"b"}`, 1), "payload.name", true},
		{"caller key too short", with(`"key":"short"`), "key", false},
		{"caller key with control character", with(`"key":"0123456789abcdef\u0001"`), "key", false},
		{"deadline not RFC 3339", with(`"deadline":"tomorrow"`), "deadline", true},
		{"deadline in the past", with(`"deadline":"2001-01-01T00:00:00Z"`), "deadline", false},
		// Year 10000 in UTC: it was stored, answered 500, and broke the
		// tenant's reads and (on SQLite) the deadline sweep.
		{"deadline past year 9999 in UTC", with(`"deadline":"9999-12-31T23:59:59-00:01"`), "deadline", true},
		{"deadline in year 0000", with(`"deadline":"0000-12-31T00:00:00Z"`), "deadline", true},
		{"max_attempts zero", with(`"max_attempts":0`), "max_attempts", false},
		{"max_attempts fractional", with(`"max_attempts":2.5`), "max_attempts", true},
		{"negative cost_budget", with(`"cost_budget":-1`), "cost_budget", false},
		{"cost_budget past the largest", with(`"cost_budget":1e16`), "cost_budget", false},
		{"source_ref too long", strings.Replace(valid, `"source_ref":"contract-1"`, `"source_ref":"`+strings.Repeat("x", 256)+`"`, 1), "source_ref", false},
	}
	bodyOnly := []struct{ name, body, detail string }{
		{"malformed JSON", `{"source_ref": "contract-1", "action": `, "invalid JSON"},
		{"trailing garbage", valid + ` {"x":1}`, "invalid JSON"},
		{"trailing comma", strings.TrimSuffix(valid, "}") + ",}", "invalid JSON"},
		{"not an object", `["contract-1"]`, "expected object"},
		{"empty body", ``, "empty"},
		{"invalid UTF-8", strings.Replace(valid, "contract-1", "contract-\xff", 1), "invalid JSON"},
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := b.on(t).post("/api/v1/operations", tt.body).want(t, http.StatusBadRequest).problem(t, "invalid-request")
				if !strings.Contains(p.Detail, `"`+tt.field+`"`) {
					t.Errorf("detail %q does not name field %q", p.Detail, tt.field)
				}
				if tt.exact && p.Field != tt.field {
					t.Errorf("field = %q, want %q", p.Field, tt.field)
				}
			})
		}
		for _, tt := range bodyOnly {
			t.Run(tt.name, func(t *testing.T) {
				p := b.on(t).do(request{method: http.MethodPost, path: "/api/v1/operations", body: tt.body, contentType: strp("application/json")}).
					want(t, http.StatusBadRequest).problem(t, "invalid-request")
				if !strings.Contains(p.Detail, tt.detail) {
					t.Errorf("detail %q does not contain %q", p.Detail, tt.detail)
				}
			})
		}
		// None of it left a row behind.
		var p page
		b.get("/api/v1/operations").want(t, http.StatusOK).decode(t, &p)
		if len(p.Operations) != 0 {
			t.Errorf("%d operations after invalid registrations", len(p.Operations))
		}
	})
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	padded := paddedRegistration
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		// One byte over, declared in Content-Length: refused before reading.
		b.post("/api/v1/operations", padded(handlers.MaxBodyBytes+1)).
			want(t, http.StatusRequestEntityTooLarge).problem(t, "payload-too-large")
		// Chunked, so only reading finds out.
		body := padded(handlers.MaxBodyBytes + 4096)
		b.do(request{method: http.MethodPost, path: "/api/v1/operations", reader: strings.NewReader(body), length: -1}).
			want(t, http.StatusRequestEntityTooLarge).problem(t, "payload-too-large")
		// Also on the other JSON endpoints, before authentication.
		b.do(request{method: http.MethodPost, path: "/api/v1/operations/op_x/evidence", body: padded(handlers.MaxBodyBytes + 1), token: strp("")}).
			want(t, http.StatusRequestEntityTooLarge)
		// Well under the limit it is accepted; over it, on another route, not.
		op := b.post("/api/v1/operations", padded(900_000)).want(t, http.StatusCreated).op(t)
		g := b.attempt(t, op.ID)
		b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N),
			`{"result":"error","phase":"after_send","http_status":400,"provider_code":"`+strings.Repeat("x", handlers.MaxBodyBytes)+`"}`).
			want(t, http.StatusRequestEntityTooLarge)
	})
}

// TestBodyLimitIsOneMiB: SPEC says bodies over 1 MiB answer 413, and
// handlers.MaxBodyBytes is 1 << 20; a body of exactly that size must be read.
func TestBodyLimitIsOneMiB(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		body := paddedRegistration(handlers.MaxBodyBytes)
		if len(body) != handlers.MaxBodyBytes {
			t.Fatalf("body has %d bytes", len(body))
		}
		op := b.post("/api/v1/operations", body).want(t, http.StatusCreated).op(t)
		op = b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if len(op.Payload) < handlers.MaxBodyBytes-200 {
			t.Errorf("payload stored with %d bytes", len(op.Payload))
		}
	})
}

// paddedRegistration is a valid registration of exactly size bytes.
func paddedRegistration(size int) string {
	head := `{"source_ref":"big","logical_version":"v1","action":"upload","destination":"drive","risk":"compensable_write","payload":{"pad":"`
	tail := `"}}`
	return head + strings.Repeat("a", size-len(head)-len(tail)) + tail
}

func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		body := registration("contract-1", "drive", review.RiskCompensableWrite)
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "not a media type"} {
			b.do(request{method: http.MethodPost, path: "/api/v1/operations", body: body, contentType: strp(ct)}).
				want(t, http.StatusUnsupportedMediaType).problem(t, "unsupported-media-type")
		}
		// JSON with parameters, problem+json, or no declared type are read.
		b.do(request{method: http.MethodPost, path: "/api/v1/operations", body: body, contentType: strp("application/json; charset=utf-8")}).
			want(t, http.StatusCreated)
		op := b.do(request{method: http.MethodPost, path: "/api/v1/operations", body: body, contentType: strp("")}).
			want(t, http.StatusOK).op(t)

		// An attempt's body is optional: with one, its type is checked.
		b.do(request{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts", body: `credential=a`, contentType: strp("application/x-www-form-urlencoded")}).
			want(t, http.StatusUnsupportedMediaType).problem(t, "unsupported-media-type")
		b.do(request{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts", contentType: strp("text/plain")}).
			want(t, http.StatusCreated)
		for _, path := range []string{"/attempts/1/outcome", "/evidence", "/jobs/job-1"} {
			method := http.MethodPost
			if strings.HasPrefix(path, "/jobs") {
				method = http.MethodPut
			}
			b.do(request{method: method, path: "/api/v1/operations/" + op.ID + path, body: `{}`, contentType: strp("text/plain")}).
				want(t, http.StatusUnsupportedMediaType).problem(t, "unsupported-media-type")
		}
	})
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)
		calls := []request{
			{method: http.MethodPost, path: "/api/v1/operations", body: registration("contract-2", "drive", review.RiskRead)},
			{path: "/api/v1/operations"},
			{path: "/api/v1/operations/" + op.ID},
			{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts"},
			{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts/1/outcome", body: `{"result":"success","phase":"after_send"}`},
			{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/evidence", body: `{"source":"status_lookup"}`},
			{method: http.MethodPut, path: "/api/v1/operations/" + op.ID + "/jobs/j1", body: `{"status":"queued"}`},
			{path: "/api/v1/no-such-route"},
		}
		creds := map[string]request{
			"no token":         {token: strp("")},
			"empty bearer":     {auth: "Bearer "},
			"basic":            {auth: "Basic YWNtZTpzZWNyZXQ="},
			"unknown token":    {auth: "Bearer limbo_" + strings.Repeat("0", 64)},
			"not a token":      {auth: "Bearer hello"},
			"token in scheme":  {auth: b.token},
			"token with comma": {auth: "Bearer " + b.token + ","},
		}
		for name, cred := range creds {
			for _, call := range calls {
				call.token, call.auth = cred.token, cred.auth
				res := b.on(t).do(call).want(t, http.StatusUnauthorized)
				res.problem(t, "unauthorized")
				if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("%s, %s: WWW-Authenticate = %q", name, res.what, got)
				}
			}
		}
		// The scheme is case-insensitive (RFC 9110 §11.1).
		b.do(request{path: "/api/v1/operations/" + op.ID, auth: "bearer " + b.token}).want(t, http.StatusOK)
		// Nothing happened to the operation.
		if got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t); got.State != review.Pending || got.AttemptCount != 0 {
			t.Errorf("after unauthorised calls: state %s, %d attempts", got.State, got.AttemptCount)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		other := b.newToken("globex")
		id := op.ID
		for _, call := range []request{
			{path: "/api/v1/operations/" + id},
			{method: http.MethodPost, path: "/api/v1/operations/" + id + "/attempts"},
			{method: http.MethodPost, path: fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", id, g.N), body: `{"result":"success","phase":"after_send","resource":{"ref":"evil"}}`},
			{method: http.MethodPost, path: "/api/v1/operations/" + id + "/evidence", body: `{"source":"status_lookup","authoritative":true,"candidates":[{"ref":"evil","operation_id":"` + id + `"}]}`},
			{method: http.MethodPut, path: "/api/v1/operations/" + id + "/jobs/job-1", body: `{"status":"succeeded"}`},
		} {
			call.token = &other
			b.do(call).want(t, http.StatusNotFound).problem(t, "not-found")
		}
		var p page
		b.do(request{path: "/api/v1/operations", token: &other}).want(t, http.StatusOK).decode(t, &p)
		if len(p.Operations) != 0 {
			t.Errorf("tenant globex lists %d of acme's operations", len(p.Operations))
		}
		// The same intention in another tenant is another operation.
		theirs := b.do(request{method: http.MethodPost, path: "/api/v1/operations", token: &other,
			body: registration("contract-1", "drive", review.RiskCompensableWrite)}).want(t, http.StatusCreated).op(t)
		if theirs.ID == op.ID || theirs.Key == op.Key || theirs.Tenant != "globex" {
			t.Errorf("globex's operation %s/%s/%s vs acme's %s/%s", theirs.ID, theirs.Key, theirs.Tenant, op.ID, op.Key)
		}
		// acme's operation is untouched.
		got := b.get("/api/v1/operations/"+id).want(t, http.StatusOK).op(t)
		if got.State != review.InFlight || got.AttemptCount != 1 || len(got.Evidence) != 0 || len(got.Jobs) != 0 || got.Version != op.Version+1 {
			t.Errorf("acme's operation changed by globex: state %s, %d attempts, %d evidence, %d jobs, version %d",
				got.State, got.AttemptCount, len(got.Evidence), len(got.Jobs), got.Version)
		}
	})
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)
		b.attempt(t, op.ID)
		outcome := `{"result":"timeout","phase":"after_send"}`
		for _, call := range []request{
			{path: "/api/v1/operations/op_00000000000000000000000000"},
			{method: http.MethodPost, path: "/api/v1/operations/op_nope/attempts"},
			{method: http.MethodPost, path: "/api/v1/operations/op_nope/attempts/1/outcome", body: outcome},
			{method: http.MethodPost, path: "/api/v1/operations/op_nope/evidence", body: `{"source":"status_lookup"}`},
			{method: http.MethodPut, path: "/api/v1/operations/op_nope/jobs/job-1", body: `{"status":"queued"}`},
			{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts/2/outcome", body: outcome},
			{method: http.MethodPost, path: "/api/v1/operations/" + op.ID + "/attempts/99999999999999999999/outcome", body: outcome},
			{path: "/api/v1/operations/" + op.ID + "/attempts/2/output"},
			{path: "/api/v1/cases"},
			{method: http.MethodDelete, path: "/api/v1/cases/x"},
		} {
			b.do(call).want(t, http.StatusNotFound).problem(t, "not-found")
		}
		b.do(request{method: http.MethodDelete, path: "/healthz"}).want(t, http.StatusMethodNotAllowed).problem(t, "method-not-allowed")
		// Outside /api a person is reading: the 404 is an HTML page (see console_test.go).
		b.do(request{path: "/api/v2/nothing"}).want(t, http.StatusNotFound).problem(t, "not-found")
		// The unknown attempt left attempt 1 open.
		if got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t); got.State != review.InFlight {
			t.Errorf("state = %s, want in_flight", got.State)
		}
	})
}

func TestAttemptWhileInFlightOrAwaitingApproval(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"mail": {Lease: review.DefaultLease, Actions: map[string]review.ActionConfig{"create_folder": {RequiresApproval: true}}},
	}}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		if g.N != 1 || g.Key != op.Key || g.OperationID != op.ID || !g.LeaseExpiresAt.Equal(t0.Add(review.DefaultLease)) {
			t.Errorf("grant = %+v, want n=1, key %s, lease until %s", g, op.Key, t0.Add(review.DefaultLease))
		}
		p := b.post("/api/v1/operations/"+op.ID+"/attempts", `{}`).want(t, http.StatusConflict).problem(t, "not-attemptable")
		if p.State != review.InFlight || p.OperationID != op.ID {
			t.Errorf("problem state %s op %s, want in_flight %s", p.State, p.OperationID, op.ID)
		}

		held := b.registerAt(t, "mail-1", "mail", review.RiskIrreversible)
		if held.State != review.AwaitingApproval {
			t.Fatalf("state = %s, want awaiting_approval", held.State)
		}
		// SPEC: 409 awaiting-approval until the approvals are given.
		p = b.post("/api/v1/operations/"+held.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "awaiting-approval")
		if p.State != review.AwaitingApproval {
			t.Errorf("problem state = %s, want awaiting_approval", p.State)
		}
	})
}

func TestAttemptBody(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)
		for body, field := range map[string]string{
			`{"credential":"k1","modle":"gpt"}`:   "modle",
			`{"credential":7}`:                    "credential",
			`{"credential":"a","credential":"b"}`: "credential",
		} {
			p := b.post("/api/v1/operations/"+op.ID+"/attempts", body).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if p.Field != field {
				t.Errorf("%s: field = %q, want %q", body, p.Field, field)
			}
		}
		b.post("/api/v1/operations/"+op.ID+"/attempts", `{"credential":`).want(t, http.StatusBadRequest).problem(t, "invalid-request")
		var g grant
		b.post("/api/v1/operations/"+op.ID+"/attempts", `{"credential":"key-1","model":"m-1"}`).want(t, http.StatusCreated).decode(t, &g)
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if len(got.Attempts) != 1 || got.Attempts[0].Credential != "key-1" || got.Attempts[0].Model != "m-1" {
			t.Errorf("attempts = %+v", got.Attempts)
		}
	})
}

func TestTimeoutAfterSendIsAmbiguous(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "folder-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		a := b.outcome(t, op.ID, g.N, `{"result":"timeout","phase":"after_send"}`)
		if a.Next != review.NextReconcile || a.Operation.State != review.Ambiguous || a.RetryAt != nil || a.Reason == "" {
			t.Errorf("outcome answer: next %s, state %s, retry_at %v, reason %q; want reconcile, ambiguous", a.Next, a.Operation.State, a.RetryAt, a.Reason)
		}
		p := b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		if p.State != review.Ambiguous || p.OperationID != op.ID || p.Resource != nil {
			t.Errorf("problem: state %s, operation %s, resource %v; want ambiguous %s", p.State, p.OperationID, p.Resource, op.ID)
		}
		// Still refused later: ambiguity is a state, not a timer.
		b.clock.Advance(48 * time.Hour)
		b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.State != review.Ambiguous || got.AttemptCount != 1 || len(got.Attempts) != 1 {
			t.Errorf("state %s with %d attempts, want ambiguous with 1", got.State, len(got.Attempts))
		}
		at := got.Attempts[0]
		if at.Result != review.ResultTimeout || at.Phase != review.PhaseAfterSend || at.Next != review.NextReconcile || at.FinishedAt == nil {
			t.Errorf("attempt = %+v", at)
		}
	})
}

func TestRetryAfterOnIdempotentWrite(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"payments": {HonoursKeys: true, Lease: review.DefaultLease},
	}}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		op := b.registerAt(t, "invoice-7", "payments", review.RiskIdempotentWrite)
		g1 := b.attempt(t, op.ID)
		a := b.outcome(t, op.ID, g1.N, `{"result":"error","phase":"after_send","http_status":429,"retry_after":"3","provider_request_id":"req-1"}`)
		wantAt := t0.Add(3 * time.Second)
		if a.Next != review.NextRetryAt || a.Operation.State != review.RetryWait || a.RetryAt == nil || !a.RetryAt.Equal(wantAt) {
			t.Fatalf("outcome: next %s, state %s, retry_at %v; want retry_at, retry_wait, %s", a.Next, a.Operation.State, a.RetryAt, wantAt)
		}
		if a.Operation.NextAttemptAt == nil || !a.Operation.NextAttemptAt.Equal(wantAt) {
			t.Errorf("next_attempt_at = %v, want %s", a.Operation.NextAttemptAt, wantAt)
		}

		// One second later the Retry-After has not passed: 429.
		b.clock.Advance(time.Second)
		res := b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusTooManyRequests)
		p := res.problem(t, "retry-later")
		secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 3 {
			t.Errorf("Retry-After = %q, want integer seconds in [1, 3]", res.Header.Get("Retry-After"))
		}
		if secs != 2 || p.RetryAfter != secs {
			t.Errorf("Retry-After %d, problem retry_after %d; want 2 (retry_at − now)", secs, p.RetryAfter)
		}
		// Just before retry_at: still 429, and never Retry-After: 0.
		b.clock.Advance(2*time.Second - time.Millisecond)
		res = b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusTooManyRequests)
		if res.Header.Get("Retry-After") != "1" {
			t.Errorf("Retry-After = %q 1 ms before retry_at, want 1", res.Header.Get("Retry-After"))
		}

		// Past retry_at: attempt 2, same key.
		b.clock.Advance(time.Second)
		var g2 grant
		b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusCreated).decode(t, &g2)
		if g2.N != 2 || g2.Key != g1.Key || g2.Key != op.Key {
			t.Errorf("second grant n=%d key %s, want n=2 key %s", g2.N, g2.Key, g1.Key)
		}
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.State != review.InFlight || len(got.Attempts) != 2 || got.Attempts[0].RetryAfter != "3" || got.Attempts[0].HTTPStatus != 429 {
			t.Errorf("operation: state %s, attempts %+v", got.State, got.Attempts)
		}
	})
}

func TestConcurrencyLimitAnswers429(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"models": {Concurrency: 1, Lease: review.DefaultLease},
	}}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		first := b.registerAt(t, "prompt-1", "models", review.RiskGenerate)
		second := b.registerAt(t, "prompt-2", "models", review.RiskGenerate)
		g := b.attempt(t, first.ID)
		res := b.post("/api/v1/operations/"+second.ID+"/attempts", "").want(t, http.StatusTooManyRequests)
		res.problem(t, "retry-later")
		if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || secs < 1 {
			t.Errorf("Retry-After = %q", res.Header.Get("Retry-After"))
		}
		b.outcome(t, first.ID, g.N, `{"result":"success","phase":"after_send","http_status":200}`)
		b.attempt(t, second.ID)
	})
}

func TestFailedOutcome(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "folder-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		a := b.outcome(t, op.ID, g.N, `{"result":"error","phase":"after_send","http_status":400,"provider_code":"invalid_name"}`)
		if a.Next != review.NextFailed || a.Operation.State != review.Failed {
			t.Errorf("next %s, state %s; want failed, failed", a.Next, a.Operation.State)
		}
		p := b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		if p.State != review.Failed || p.OperationID != op.ID {
			t.Errorf("problem state %s, operation %s", p.State, p.OperationID)
		}

		// A retryable error, then the deadline passes while waiting: the
		// next request for an attempt fails the operation and says so.
		op2 := b.register(t, "folder-2", review.RiskCompensableWrite, `"deadline":"`+t0.Add(time.Hour).Format(time.RFC3339)+`"`)
		g = b.attempt(t, op2.ID)
		if a := b.outcome(t, op2.ID, g.N, `{"result":"error","phase":"after_send","http_status":503}`); a.Next != review.NextRetryAt {
			t.Fatalf("503: next %s, want retry_at", a.Next)
		}
		b.clock.Advance(2 * time.Hour)
		p = b.post("/api/v1/operations/"+op2.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		if p.State != review.Failed || !strings.Contains(p.Detail, "deadline") {
			t.Errorf("after the deadline: state %s, detail %q", p.State, p.Detail)
		}
		if got := b.get("/api/v1/operations/"+op2.ID).want(t, http.StatusOK).op(t); got.State != review.Failed {
			t.Errorf("stored state %s, want failed", got.State)
		}
	})
}

func TestConfirmedOperationReturnsItsResource(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "folder-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		a := b.outcome(t, op.ID, g.N, `{"result":"success","phase":"after_send","http_status":201,"resource":{"ref":"fld_9","kind":"folder","version":"v1"},"cost":0.25}`)
		if a.Next != review.NextDone || a.Operation.State != review.Confirmed || a.Operation.Resource == nil || a.Operation.Resource.Ref != "fld_9" {
			t.Fatalf("next %s, state %s, resource %v", a.Next, a.Operation.State, a.Operation.Resource)
		}
		if len(a.Operation.Evidence) != 1 || a.Operation.Evidence[0].Verdict != review.VerdictConfirms || a.Operation.CostSpent != 0.25 {
			t.Errorf("evidence %+v, cost_spent %v", a.Operation.Evidence, a.Operation.CostSpent)
		}
		p := b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		if p.State != review.Confirmed || p.Resource == nil || *p.Resource != (review.ResourceRef{Ref: "fld_9", Kind: "folder", Version: "v1"}) {
			t.Errorf("problem state %s, resource %+v; want confirmed with fld_9", p.State, p.Resource)
		}
	})
}

func TestOutcomeReportedTwice(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "folder-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		path := fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N)
		report := `{"result":"success","phase":"after_send","http_status":201,"resource":{"ref":"fld_1","kind":"folder"}}`
		first := b.outcome(t, op.ID, g.N, report)

		b.clock.Advance(time.Minute)
		// The same report, members reordered and spaced differently.
		var again outcomeAnswer
		b.post(path, `{ "resource": {"kind":"folder", "ref":"fld_1"}, "http_status": 201, "phase": "after_send", "result": "success" }`).
			want(t, http.StatusOK).decode(t, &again)
		if again.Next != first.Next || again.Reason != first.Reason || again.Operation.Version != first.Operation.Version ||
			!again.Operation.UpdatedAt.Equal(first.Operation.UpdatedAt) || len(again.Operation.Evidence) != len(first.Operation.Evidence) {
			t.Errorf("the same report again changed something:\nfirst %+v\nagain %+v", first, again)
		}

		for _, other := range []string{
			`{"result":"timeout","phase":"after_send"}`,
			`{"result":"success","phase":"after_send","http_status":201,"resource":{"ref":"fld_2","kind":"folder"}}`,
		} {
			p := b.post(path, other).want(t, http.StatusConflict).problem(t, "outcome-conflict")
			if p.OperationID != op.ID || p.State != review.Confirmed {
				t.Errorf("problem operation %s state %s", p.OperationID, p.State)
			}
		}
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.Version != first.Operation.Version || got.Resource == nil || got.Resource.Ref != "fld_1" {
			t.Errorf("conflicting reports changed the operation: version %d→%d, resource %v", first.Operation.Version, got.Version, got.Resource)
		}
	})
}

func TestOutcomeInvalid(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "folder-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		path := fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N)
		// Each refusal names its field in detail and, when there is one
		// field to name, in field (the BadRequest response's rule).
		for body, want := range map[string]struct{ word, field string }{
			`{"result":"maybe","phase":"after_send"}`:                                      {"result", "result"},
			`{"result":"unknown","phase":"unknown"}`:                                       {"result", "result"},
			`{"result":"timeout","phase":"sideways"}`:                                      {"phase", "phase"},
			`{"phase":"after_send"}`:                                                       {"result", "result"},
			`{"result":"success","phase":"before_send"}`:                                   {"before", "phase"},
			`{"result":"error","phase":"after_send","http_status":700}`:                    {"http_status", "http_status"},
			`{"result":"error","phase":"after_send","http_status":"500"}`:                  {"http_status", "http_status"},
			`{"result":"error","phase":"before_send","http_status":503}`:                   {"before_send", "phase"},
			`{"result":"success","phase":"after_send","cost":-1}`:                          {"cost", "cost"},
			`{"result":"success","phase":"after_send","cost":1.7e308}`:                     {"cost", "cost"},
			`{"result":"success","phase":"after_send","resource":{"kind":"folder"}}`:       {"resource.ref", "resource.ref"},
			`{"result":"success","phase":"after_send","resource":{"ref":"a","owner":"b"}}`: {"resource.owner", "resource.owner"},
			`{"result":"success","phase":"after_send","job":{"status":"queued"}}`:          {"job.ref", "job.ref"},
			`{"result":"success","phase":"after_send","job":{"ref":"j","status":"done"}}`:  {"job.status", "job.status"},
			`{"result":"error","phase":"after_send","output":{"a":1}}`:                     {"success", "output"},
			`{"result":"success","phase":"after_send","output_invalid":"no"}`:              {"output_invalid", "output"},
			`{"result":"success","phase":"after_send","usage":{"prompt_tokens":-1}}`:       {"prompt_tokens", "usage.prompt_tokens"},
			`{"result":"success","phase":"after_send","usage":{"completion_tokens":-1}}`:   {"completion_tokens", "usage.completion_tokens"},
			`{"result":"success","phase":"after_send","status":200}`:                       {"status", "status"},
			`{"result":"success","phase":"after_send","result":"error"}`:                   {"result", "result"},
			`{"result":"success","phase":"after_send"} trailing`:                           {"invalid JSON", ""},
		} {
			p := b.post(path, body).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if !strings.Contains(p.Detail, want.word) {
				t.Errorf("%s: detail %q does not mention %q", body, p.Detail, want.word)
			}
			if p.Field != want.field {
				t.Errorf("%s: field %q, want %q (detail %q)", body, p.Field, want.field, p.Detail)
			}
		}
		// None was applied: attempt 1 is still open.
		b.outcome(t, op.ID, g.N, `{"result":"connection_error","phase":"before_send"}`)
	})
}

// TestCostSpentStaysFinite: reports each at the largest cost add up to a
// cost spent that is still a number: the operation and its tenant's list
// stay readable, on both engines. (Unbounded, two reports of 1.7e308 made
// it +Inf: a 500 on SQLite for every read after, an overflow on
// PostgreSQL.)
func TestCostSpentStaysFinite(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "costly", review.RiskRead)
		for range 2 {
			b.clock.Advance(10 * time.Minute) // past the backoff
			g := b.attempt(t, op.ID)
			path := fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N)
			b.post(path, `{"result":"error","phase":"after_send","http_status":503,"cost":1.7e308}`).want(t, http.StatusBadRequest)
			b.outcome(t, op.ID, g.N, fmt.Sprintf(`{"result":"error","phase":"after_send","http_status":503,"cost":%g}`, review.MaxCost))
		}
		var got review.Operation
		b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).decode(t, &got)
		if got.CostSpent != 2*review.MaxCost {
			t.Errorf("cost_spent %v, want %v", got.CostSpent, 2*review.MaxCost)
		}
		b.get("/api/v1/operations").want(t, http.StatusOK)
	})
}

// TestLateReportCostCounts: what an attempt closed by the lease sweep
// cost, reported late, is counted: on the attempt, in the operation's cost
// spent, and against its cost budget, which then refuses the next attempt
// (failed: a generate has no effect to fear) instead of granting more.
func TestLateReportCostCounts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "gen-1", review.RiskGenerate, `"cost_budget":5`, `"max_attempts":10`)
		g := b.attempt(t, op.ID)
		b.clock.Advance(review.DefaultLease + time.Second)
		if n, err := b.store.SweepLeases(context.Background()); err != nil || n != 1 {
			t.Fatalf("SweepLeases = %d, %v", n, err)
		}
		b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N),
			`{"result":"error","phase":"after_send","http_status":500,"cost":100}`).want(t, http.StatusConflict).problem(t, "outcome-conflict")
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.CostSpent != 100 || got.Attempts[0].Cost != 100 {
			t.Errorf("cost spent %v, attempt cost %v; want the late report's 100 on both", got.CostSpent, got.Attempts[0].Cost)
		}
		b.clock.Advance(time.Hour) // past any backoff
		b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		if got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t); got.State != review.Failed ||
			!strings.Contains(got.StateReason, "cost budget exhausted (100 of 5 spent)") {
			t.Errorf("after the cost budget was spent: %s (%s), want failed for the cost budget", got.State, got.StateReason)
		}
		// A second, different late report for the same attempt counts no
		// more: the attempt's cost is known.
		b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N),
			`{"result":"error","phase":"after_send","http_status":502,"cost":7}`).want(t, http.StatusConflict)
		if got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t); got.CostSpent != 100 {
			t.Errorf("cost spent %v after a second late report, want 100", got.CostSpent)
		}
	})
}

func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		ctx := context.Background()
		op := b.register(t, "folder-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)

		b.clock.Advance(review.DefaultLease - time.Second)
		if n, err := b.store.SweepLeases(ctx); err != nil || n != 0 {
			t.Fatalf("SweepLeases before expiry = %d, %v; want 0", n, err)
		}
		b.clock.Advance(2 * time.Second) // past t0 + 60 s
		if n, err := b.store.SweepLeases(ctx); err != nil || n != 1 {
			t.Fatalf("SweepLeases = %d, %v; want 1", n, err)
		}
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.State != review.Ambiguous || len(got.Attempts) != 1 {
			t.Fatalf("state %s with %d attempts, want ambiguous with 1", got.State, len(got.Attempts))
		}
		if at := got.Attempts[0]; at.Result != review.ResultUnknown || at.Phase != review.PhaseUnknown || at.FinishedAt == nil || at.Next != review.NextReconcile {
			t.Errorf("attempt = %+v, want result unknown, next reconcile", at)
		}
		b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")

		// A report arriving after the sweep is refused (the integrator
		// learns it was late) and kept as evidence; the destination's word
		// that the effect happened settles the ambiguity (review.Weigh).
		p := b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N),
			`{"result":"success","phase":"after_send","resource":{"ref":"fld_late","kind":"folder"}}`).
			want(t, http.StatusConflict).problem(t, "outcome-conflict")
		if p.State != review.Confirmed {
			t.Errorf("problem state = %s, want confirmed", p.State)
		}
		got = b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "fld_late" || len(got.Evidence) != 1 ||
			got.Evidence[0].Verdict != review.VerdictConfirms || !got.Evidence[0].Authoritative {
			t.Errorf("after a late report: state %s, resource %+v, evidence %+v", got.State, got.Resource, got.Evidence)
		}
	})
}

func TestEvidence(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		ambiguous := func(ref string) *review.Operation {
			t.Helper()
			op := b.register(t, ref, review.RiskCompensableWrite)
			g := b.attempt(t, op.ID)
			if a := b.outcome(t, op.ID, g.N, `{"result":"connection_error","phase":"after_send"}`); a.Operation.State != review.Ambiguous {
				t.Fatalf("state %s, want ambiguous", a.Operation.State)
			}
			return op
		}
		cand := func(ref, opID, version string) string {
			return fmt.Sprintf(`{"ref":%q,"kind":"folder","version":%q,"operation_id":%q}`, ref, version, opID)
		}

		op := ambiguous("folder-1")
		// Not authoritative: recorded, nothing settled.
		got := b.post("/api/v1/operations/"+op.ID+"/evidence",
			`{"source":"metadata_search","authoritative":false,"candidates":[`+cand("fld_1", op.ID, "v1")+`]}`).want(t, http.StatusOK).op(t)
		if got.State != review.Ambiguous || len(got.Evidence) != 1 {
			t.Errorf("after non-authoritative evidence: state %s, %d evidence", got.State, len(got.Evidence))
		}
		// A webhook never confirms a write on its own.
		got = b.post("/api/v1/operations/"+op.ID+"/evidence",
			`{"source":"webhook","authoritative":true,"candidates":[`+cand("fld_1", op.ID, "v1")+`]}`).want(t, http.StatusOK).op(t)
		if got.State != review.Ambiguous {
			t.Errorf("after webhook evidence: state %s, want ambiguous", got.State)
		}
		// Exactly one authoritative match confirms.
		got = b.post("/api/v1/operations/"+op.ID+"/evidence",
			`{"source":"metadata_search","authoritative":true,"candidates":[`+cand("fld_1", op.ID, "v1")+`]}`).want(t, http.StatusOK).op(t)
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "fld_1" || len(got.Evidence) != 3 {
			t.Errorf("after authoritative evidence: state %s, resource %v, %d evidence", got.State, got.Resource, len(got.Evidence))
		}
		if v := got.Evidence[2]; v.Verdict != review.VerdictConfirms || v.Source != review.SourceMetadataSearch || !v.Authoritative {
			t.Errorf("evidence = %+v", v)
		}

		// Two candidates: a person decides.
		op2 := ambiguous("folder-2")
		got = b.post("/api/v1/operations/"+op2.ID+"/evidence",
			`{"source":"metadata_search","authoritative":true,"candidates":[`+cand("fld_a", op2.ID, "v1")+`,`+cand("fld_b", op2.ID, "v1")+`]}`).want(t, http.StatusOK).op(t)
		if got.State != review.NeedsReview {
			t.Errorf("two candidates: state %s, want needs_review", got.State)
		}
		p := b.post("/api/v1/operations/"+op2.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
		if p.State != review.NeedsReview {
			t.Errorf("problem state %s, want needs_review", p.State)
		}

		// Authoritative absence: retry with the same key.
		op3 := ambiguous("folder-3")
		got = b.post("/api/v1/operations/"+op3.ID+"/evidence", `{"source":"status_lookup","authoritative":true,"candidates":[]}`).want(t, http.StatusOK).op(t)
		if got.State != review.RetryWait {
			t.Errorf("proven absence: state %s, want retry_wait", got.State)
		}
		if g := b.attempt(t, op3.ID); g.N != 2 || g.Key != op3.Key {
			t.Errorf("grant after absence: n=%d key %s", g.N, g.Key)
		}

		// Invalid evidence.
		for body, word := range map[string]string{
			`{"source":"guess","authoritative":true}`:                     "source",
			`{"source":"reviewer","authoritative":true}`:                  "source",
			`{"authoritative":true}`:                                      "source",
			`{"source":"status_lookup","candidates":[{"kind":"x"}]}`:      "candidates[0].ref",
			`{"source":"status_lookup","candidates":[{"ref":"a","x":1}]}`: "candidates[0].x",
			`{"source":"status_lookup","authoritative":"yes"}`:            "authoritative",
		} {
			p := b.post("/api/v1/operations/"+op2.ID+"/evidence", body).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if !strings.Contains(p.Detail, word) {
				t.Errorf("%s: detail %q does not mention %q", body, p.Detail, word)
			}
		}
		// An unknown source is told the sources the API takes, which are
		// EvidenceRequest's enum: not reviewer, which it refuses.
		for _, body := range []string{`{}`, `{"source":"guess"}`} {
			p := b.post("/api/v1/operations/"+op2.ID+"/evidence", body).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if p.Field != "source" || !strings.HasSuffix(p.Detail, "must be one of response, status_lookup, metadata_search, webhook") {
				t.Errorf("%s: field %q, detail %q", body, p.Field, p.Detail)
			}
		}
	})
}

func TestJobs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-583", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		a := b.outcome(t, op.ID, g.N, `{"result":"success","phase":"after_send","http_status":202,"job":{"ref":"job-1","status":"queued"}}`)
		if a.Next != review.NextDone || a.Operation.State != review.Accepted || len(a.Operation.Jobs) != 1 || a.Operation.Jobs[0].Status != review.JobQueued {
			t.Fatalf("next %s, state %s, jobs %+v; want done, accepted, job-1 queued", a.Next, a.Operation.State, a.Operation.Jobs)
		}
		jobs := "/api/v1/operations/" + op.ID + "/jobs/"
		got := b.put(jobs+"job-1", `{"status":"queued"}`).want(t, http.StatusOK).op(t)
		if got.State != review.Accepted {
			t.Errorf("after queued: state %s", got.State)
		}
		got = b.put(jobs+"job-1", `{"status":"running","input_version":"v1"}`).want(t, http.StatusOK).op(t)
		if got.State != review.Accepted || got.Jobs[0].Status != review.JobRunning {
			t.Errorf("after running: state %s, jobs %+v", got.State, got.Jobs)
		}
		got = b.put(jobs+"job-1", `{"status":"succeeded","output_ref":"pdf-583-v1"}`).want(t, http.StatusOK).op(t)
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "pdf-583-v1" {
			t.Errorf("after succeeded: state %s, resource %v; want confirmed pdf-583-v1", got.State, got.Resource)
		}
		if j := got.Jobs[0]; j.Status != review.JobSucceeded || j.OutputRef != "pdf-583-v1" || j.InputVersion != "v1" {
			t.Errorf("job = %+v", j)
		}
		// The same report again is fine; a finished job cannot change.
		again := b.put(jobs+"job-1", `{"status":"succeeded","output_ref":"pdf-583-v1"}`).want(t, http.StatusOK).op(t)
		if again.Version != got.Version {
			t.Errorf("repeating the job report changed the operation (version %d → %d)", got.Version, again.Version)
		}
		b.put(jobs+"job-1", `{"status":"failed"}`).want(t, http.StatusConflict).problem(t, "conflict")
		// Nor its output or input version: the operation settled on them.
		b.put(jobs+"job-1", `{"status":"succeeded","output_ref":"pdf-583-v2"}`).want(t, http.StatusConflict).problem(t, "conflict")
		b.put(jobs+"job-1", `{"status":"succeeded","input_version":"v2"}`).want(t, http.StatusConflict).problem(t, "conflict")
		if j := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t).Jobs[0]; j.OutputRef != "pdf-583-v1" || j.InputVersion != "v1" {
			t.Errorf("the finished job was rewritten: %+v", j)
		}

		// A job for another version goes to review.
		op2 := b.register(t, "contract-584", review.RiskCompensableWrite)
		g = b.attempt(t, op2.ID)
		b.outcome(t, op2.ID, g.N, `{"result":"success","phase":"after_send","job":{"ref":"job-2"}}`)
		got = b.put("/api/v1/operations/"+op2.ID+"/jobs/job-2", `{"status":"succeeded","input_version":"v0"}`).want(t, http.StatusOK).op(t)
		if got.State != review.NeedsReview {
			t.Errorf("job for another version: state %s, want needs_review", got.State)
		}

		// Invalid job reports.
		for body, word := range map[string]string{
			`{"status":"done"}`:                 "status",
			`{}`:                                "status",
			`{"status":"queued","progress":50}`: "progress",
			`{"status":["queued"]}`:             "status",
		} {
			p := b.put(jobs+"job-9", body).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if !strings.Contains(p.Detail, word) {
				t.Errorf("%s: detail %q does not mention %q", body, p.Detail, word)
			}
		}
		b.put(jobs+strings.Repeat("j", review.MaxFieldLen+1), `{"status":"queued"}`).want(t, http.StatusBadRequest)
	})
}

func TestListOperations(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		var ids []string
		for i := range 7 {
			b.clock.Advance(time.Millisecond) // ids sort by creation time
			ids = append(ids, b.register(t, fmt.Sprintf("doc-%d", i), review.RiskRead).ID)
		}
		for _, i := range []int{1, 4, 5} {
			b.attempt(t, ids[i])
		}
		pages := func(query string) (got []string, n int) {
			cursor := ""
			for n = 1; n <= 20; n++ {
				q := query
				if cursor != "" {
					q += "&cursor=" + cursor
				}
				var p page
				b.get("/api/v1/operations?"+q).want(t, http.StatusOK).decode(t, &p)
				for _, op := range p.Operations {
					got = append(got, op.ID)
					if op.Attempts == nil || op.Evidence == nil || op.Jobs == nil {
						t.Errorf("listed operation %s lacks attempts/evidence/jobs arrays", op.ID)
					}
				}
				if p.NextCursor == "" {
					return got, n
				}
				cursor = p.NextCursor
			}
			t.Fatalf("%s: no end after 20 pages", query)
			return nil, 0
		}
		got, n := pages("limit=2")
		if strings.Join(got, ",") != strings.Join(ids, ",") || n != 4 {
			t.Errorf("paging by 2 gave %v in %d pages, want %v in 4", got, n, ids)
		}
		got, _ = pages("state=in_flight&limit=2")
		if want := []string{ids[1], ids[4], ids[5]}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("in_flight = %v, want %v", got, want)
		}
		got, _ = pages("state=pending&limit=1")
		if want := []string{ids[0], ids[2], ids[3], ids[6]}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("pending = %v, want %v", got, want)
		}
		got, n = pages("state=confirmed")
		if len(got) != 0 || n != 1 {
			t.Errorf("confirmed = %v", got)
		}
		// Exactly one full page: no cursor to an empty page.
		var p page
		b.get("/api/v1/operations?limit=7").want(t, http.StatusOK).decode(t, &p)
		if len(p.Operations) != 7 || p.NextCursor != "" {
			t.Errorf("limit=7 over 7 operations: %d and cursor %q", len(p.Operations), p.NextCursor)
		}

		for query, field := range map[string]string{
			"state=bogus":            "state",
			"state=IN_FLIGHT":        "state",
			"limit=0":                "limit",
			"limit=501":              "limit",
			"limit=ten":              "limit",
			"state=pending&limit=-3": "limit",
			// Not a cursor this server issued: read as an id, "zzz" would
			// end the list at once, as though it were complete.
			"cursor=zzz":     "cursor",
			"cursor=op_a-b":  "cursor",
			"cursor=case_01": "cursor",
		} {
			p := b.get("/api/v1/operations?"+query).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if p.Field != field {
				t.Errorf("%s: field = %q, want %q", query, p.Field, field)
			}
		}
	})
}

// TestClient drives the API through the Go integration client.
func TestClient(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"payments": {HonoursKeys: true, Lease: review.DefaultLease},
	}}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		ctx := context.Background()
		c := client.New(b.srv.URL, b.token, client.WithHTTPClient(b.srv.Client()))
		reg := client.Registration{SourceRef: "folder-1", LogicalVersion: "v1", Action: "create_folder",
			Destination: "drive", Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"name": "Q3", "parent": "root"}`)}
		op, created, err := c.Register(ctx, reg)
		if err != nil || !created {
			t.Fatalf("Register = %v, created %v", err, created)
		}
		again, created, err := c.Register(ctx, reg)
		if err != nil || created || again.ID != op.ID {
			t.Fatalf("Register again = %v, created %v, id %s (want %s)", err, created, again.ID, op.ID)
		}
		g, err := c.StartAttempt(ctx, op.ID, client.AttemptOptions{Credential: "k1"})
		if err != nil || g.N != 1 || g.Key != op.Key {
			t.Fatalf("StartAttempt = %+v, %v", g, err)
		}
		res, err := c.ReportOutcome(ctx, op.ID, g.N, client.Outcome{Result: client.ResultTimeout, Phase: client.PhaseAfterSend})
		if err != nil || res.Next != client.NextReconcile {
			t.Fatalf("ReportOutcome = %+v, %v", res, err)
		}
		_, err = c.StartAttempt(ctx, op.ID, client.AttemptOptions{})
		var p *client.Problem
		if !client.IsProblem(err, "not-attemptable") || !errors.As(err, &p) || p.State != client.Ambiguous || p.Status != http.StatusConflict {
			t.Fatalf("StartAttempt on ambiguous = %v", err)
		}
		got, err := c.AddEvidence(ctx, op.ID, client.Evidence{Source: client.SourceStatusLookup, Authoritative: true,
			Candidates: []client.Candidate{{Ref: "fld_1", Kind: "folder", Version: "v1", OperationID: op.ID}}})
		if err != nil || got.State != client.Confirmed {
			t.Fatalf("AddEvidence = %v, state %s", err, got.State)
		}
		if got, err = c.Get(ctx, op.ID); err != nil || got.Resource == nil || got.Resource.Ref != "fld_1" {
			t.Fatalf("Get = %v, %+v", err, got)
		}

		// 429 carries Retry-After.
		pay, _, err := c.Register(ctx, client.Registration{SourceRef: "inv-1", LogicalVersion: "v1", Action: "charge",
			Destination: "payments", Risk: client.RiskIdempotentWrite, Payload: json.RawMessage(`{"amount":100}`)})
		if err != nil {
			t.Fatal(err)
		}
		g, _ = c.StartAttempt(ctx, pay.ID, client.AttemptOptions{})
		if res, err = c.ReportOutcome(ctx, pay.ID, g.N, client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend,
			HTTPStatus: 503, RetryAfter: "30"}); err != nil || res.Next != client.NextRetryAt {
			t.Fatalf("ReportOutcome 503 = %+v, %v", res, err)
		}
		_, err = c.StartAttempt(ctx, pay.ID, client.AttemptOptions{})
		if !client.IsProblem(err, "retry-later") || !errors.As(err, &p) || p.RetryAfter != 30*time.Second {
			t.Fatalf("StartAttempt during backoff = %v (retry after %v)", err, p.RetryAfter)
		}

		pg, err := c.List(ctx, client.Confirmed, "", 10)
		if err != nil || len(pg.Operations) != 1 || pg.Operations[0].ID != op.ID {
			t.Fatalf("List confirmed = %+v, %v", pg, err)
		}
		if _, err := client.New(b.srv.URL, "limbo_wrong", client.WithHTTPClient(b.srv.Client())).Get(ctx, op.ID); !client.IsProblem(err, "unauthorized") {
			t.Errorf("wrong token: %v", err)
		}
		if _, err := client.New(b.srv.URL, b.newToken("globex"), client.WithHTTPClient(b.srv.Client())).Get(ctx, op.ID); !client.IsProblem(err, "not-found") {
			t.Errorf("other tenant: %v", err)
		}
		if _, err := c.PutJob(ctx, op.ID, "job-1", client.JobUpdate{Status: "paused"}); !client.IsProblem(err, "invalid-request") {
			t.Errorf("PutJob with a bad status: %v", err)
		}
	})
}

// TestBadAttemptNumber: {n} is declared an integer of at least 1, so
// anything else is a bad path parameter, 400 naming n (a number the
// operation has no attempt for is TestNotFound's 404). Nothing is recorded.
func TestBadAttemptNumber(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	op := b.register(t, "bad-n", review.RiskCompensableWrite)
	b.attempt(t, op.ID)
	for _, n := range []string{"abc", "one", "1.5", "0x1", "0", "-1", "-99999999999999999999"} {
		base := "/api/v1/operations/" + op.ID + "/attempts/" + n
		for _, call := range []request{
			{path: base + "/output"},
			{method: http.MethodPost, path: base + "/outcome", body: `{"result":"success"}`},
		} {
			if p := b.do(call).want(t, http.StatusBadRequest).problem(t, "invalid-request"); p.Field != "n" {
				t.Errorf("%s %s: field %q, want n: %s", call.method, call.path, p.Field, p.Detail)
			}
		}
	}
	if got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t); got.State != review.InFlight {
		t.Errorf("state = %s, want in_flight", got.State)
	}
}

// TestWrongMethodUnderAPI: a path the API serves, asked with a method it
// does not take, answers 405 method-not-allowed with Allow, as the
// document and the routes outside /api do, not a 404 a client could read
// as "no such operation"; an unknown path is still a 404.
func TestWrongMethodUnderAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	op := b.register(t, "wrong-method", review.RiskCompensableWrite)
	for _, c := range []struct {
		method, path, allow string
	}{
		{http.MethodDelete, "/api/v1/operations", "GET, HEAD, POST"},
		{http.MethodPatch, "/api/v1/operations/" + op.ID, "GET, HEAD"},
		{http.MethodDelete, "/api/v1/operations/op_nope", "GET, HEAD"},
		{http.MethodGet, "/api/v1/operations/" + op.ID + "/attempts", "POST"},
		{http.MethodGet, "/api/v1/operations/" + op.ID + "/attempts/1/outcome", "POST"},
		{http.MethodPost, "/api/v1/operations/" + op.ID + "/jobs/job-1", "PUT"},
		{http.MethodPut, "/api/v1/decisions", "GET, HEAD"},
		{http.MethodGet, "/api/v1/inbound/github", "POST"},
	} {
		res := b.do(request{method: c.method, path: c.path}).want(t, http.StatusMethodNotAllowed)
		res.problem(t, "method-not-allowed")
		if got := res.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
	for _, path := range []string{"/api/v1/cases", "/api/v1/operations/" + op.ID + "/nothing", "/api/v1/"} {
		res := b.do(request{method: http.MethodDelete, path: path}).want(t, http.StatusNotFound)
		res.problem(t, "not-found")
		if res.Header.Get("Allow") != "" {
			t.Errorf("DELETE %s: a 404 with Allow %q", path, res.Header.Get("Allow"))
		}
	}
}

// TestErrorAnswersAreProblems sends a spread of bad requests and checks
// the shape shared by every error answer.
func TestErrorAnswersAreProblems(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		seen := map[int]bool{}
		for _, call := range []request{
			{method: http.MethodPost, path: "/api/v1/operations", body: `{`},
			{method: http.MethodPost, path: "/api/v1/operations", body: `{}`, token: strp("")},
			{path: "/api/v1/operations/op_missing"},
			{method: http.MethodPost, path: "/api/v1/operations", body: `{}`, contentType: strp("text/csv")},
			{method: http.MethodPost, path: "/api/v1/operations", reader: io.LimitReader(zeros{}, handlers.MaxBodyBytes+10), length: handlers.MaxBodyBytes + 10},
			{method: http.MethodPatch, path: "/readyz"},
		} {
			res := b.do(call)
			seen[res.Status] = true
			var raw map[string]any
			res.decode(t, &raw)
			for _, k := range []string{"type", "title", "status"} {
				if raw[k] == nil {
					t.Errorf("%s: problem lacks %q: %s", res.what, k, res.Body)
				}
			}
			if res.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: no X-Content-Type-Options: nosniff", res.what)
			}
		}
		for _, code := range []int{400, 401, 404, 405, 413, 415} {
			if !seen[code] {
				t.Errorf("no %d seen", code)
			}
		}
	})
}

// zeros is an endless body of '0' bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// TestLateOutcomeAfterApprovedRetry (issue 12, hole 4): after a reviewer
// approved a retry and attempt 2 was granted, attempt 1's success still
// comes: it answers 409 outcome-conflict (the integrator learns it was
// late), is stored as evidence, and sends the operation back to a person,
// since attempt 2 may repeat the effect; attempt 2's own report is kept too.
func TestLateOutcomeAfterApprovedRetry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-late", review.RiskCompensableWrite)
		g1 := b.attempt(t, op.ID)
		if a := b.outcome(t, op.ID, g1.N, `{"result":"timeout","phase":"after_send"}`); a.Operation.State != review.Ambiguous {
			t.Fatalf("after a timeout: %s", a.Operation.State)
		}
		got := b.post("/api/v1/operations/"+op.ID+"/evidence", `{"source":"metadata_search","authoritative":true,"candidates":[`+
			`{"ref":"fld_a","operation_id":"`+op.ID+`"},{"ref":"fld_b","operation_id":"`+op.ID+`"}]}`).want(t, http.StatusOK).op(t)
		if got.State != review.NeedsReview {
			t.Fatalf("after two candidates: %s", got.State)
		}
		cs, err := b.store.CasesForOperation(context.Background(), op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		if _, err := b.store.Decide(context.Background(), store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideApproveRetry,
			Reason: "neither folder is ours, by hand", Actor: "alice@example.com"}); err != nil {
			t.Fatal(err)
		}
		g2 := b.attempt(t, op.ID)

		p := b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g1.N),
			`{"result":"success","phase":"after_send","resource":{"ref":"fld_late","kind":"folder"}}`).
			want(t, http.StatusConflict).problem(t, "outcome-conflict")
		if !strings.Contains(p.Detail, "kept as evidence") || p.State != review.NeedsReview {
			t.Errorf("problem = %+v, want it to say the report was kept, and the state needs_review", p)
		}
		got = b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		last := got.Evidence[len(got.Evidence)-1]
		if last.Source != review.SourceResponse || !last.Authoritative || last.Verdict != review.VerdictConfirms ||
			len(last.Candidates) != 1 || last.Candidates[0].Ref != "fld_late" {
			t.Fatalf("newest evidence = %+v, want attempt 1's late success kept", last)
		}
		if got.State != review.NeedsReview {
			t.Errorf("state %s after a late success with attempt 2 out, want needs_review", got.State)
		}
		b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g2.N),
			`{"result":"success","phase":"after_send","resource":{"ref":"fld_again","kind":"folder"}}`).
			want(t, http.StatusConflict).problem(t, "outcome-conflict")
		got = b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if last := got.Evidence[len(got.Evidence)-1]; len(last.Candidates) != 1 || last.Candidates[0].Ref != "fld_again" {
			t.Errorf("attempt 2's report was not kept: %+v", last)
		}
		b.post("/api/v1/operations/"+op.ID+"/attempts", "").want(t, http.StatusConflict).problem(t, "not-attemptable")
	})
}

// TestJobOfAnotherRef (issue 12, hole 6): an operation accepted with job-A
// is not settled by a report for job-B, a ref it never reported: 409
// conflict naming both, nothing changed; job-A's success then confirms it.
func TestJobOfAnotherRef(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		op := b.register(t, "contract-job", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		if a := b.outcome(t, op.ID, g.N, `{"result":"success","phase":"after_send","http_status":202,"job":{"ref":"job-A","status":"queued"}}`); a.Operation.State != review.Accepted {
			t.Fatalf("state %s, want accepted", a.Operation.State)
		}
		before := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		p := b.put("/api/v1/operations/"+op.ID+"/jobs/job-B", `{"status":"failed"}`).want(t, http.StatusConflict).problem(t, "conflict")
		if !strings.Contains(p.Detail, "job-B") || !strings.Contains(p.Detail, "job-A") {
			t.Errorf("detail %q does not name the refused ref and the operation's job", p.Detail)
		}
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.State != review.Accepted || got.Version != before.Version || len(got.Jobs) != 1 || got.Jobs[0].Ref != "job-A" {
			t.Fatalf("after job-B's report: state %s, version %d → %d, jobs %+v", got.State, before.Version, got.Version, got.Jobs)
		}
		got = b.put("/api/v1/operations/"+op.ID+"/jobs/job-A", `{"status":"succeeded","output_ref":"pdf-A"}`).want(t, http.StatusOK).op(t)
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "pdf-A" {
			t.Errorf("after job-A succeeded: state %s, resource %v; want confirmed pdf-A", got.State, got.Resource)
		}
	})
}

// TestNullMembersAreAbsent: an optional member sent as null is read as
// though it were left out, as the OpenAPI document says (type [X, "null"]);
// do checks every request and answer against it.
func TestNullMembersAreAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t, store.SQLite, nil)
	for i, m := range []string{`"flags":null`, `"deadline":null`, `"max_attempts":null`, `"cost_budget":null`,
		`"after":null`, `"key":null`, `"risk":null`, `"attempt":null`} {
		b.post("/api/v1/operations", fmt.Sprintf(`{"source_ref":"null-%d","logical_version":"v1","action":"create_folder",`+
			`"destination":"drive","payload":{"a":1},%s}`, i, m)).want(t, http.StatusCreated)
	}
	op := b.register(t, "null-x", review.RiskCompensableWrite)
	g := b.attempt(t, op.ID)
	b.post(fmt.Sprintf("/api/v1/operations/%s/attempts/%d/outcome", op.ID, g.N),
		`{"result":"timeout","phase":"after_send","http_status":null,"resource":null,"cost":null,"job":null,"usage":null}`).want(t, http.StatusOK)
	b.post("/api/v1/operations/"+op.ID+"/evidence", `{"source":"status_lookup","authoritative":null,"candidates":null}`).want(t, http.StatusOK)
}
