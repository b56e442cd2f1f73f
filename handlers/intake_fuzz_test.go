package handlers_test

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/webhook"
)

// fuzzMethods are the methods FuzzAPIIntake picks from.
var fuzzMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodHead, http.MethodDelete, http.MethodPatch}

// FuzzAPIIntake sends arbitrary requests — method, path, query and body —
// through the real server, on SQLite and on PostgreSQL, and checks what no
// input may change: never a 5xx; every API error is problem+json; every
// answer is one openapi.json documents (and an accepted body is one it
// allows); and both engines give the same status, problem type and field.
// "{id}" in a path stands for an operation that exists, with an attempt in
// flight; a path without the /api/ prefix gets /api/v1/; bodies to
// /api/v1/inbound/… are signed as the "files" destination signs them.
//
// As a plain test it runs the committed corpus (testdata/fuzz/FuzzAPIIntake)
// on every engine; go test -fuzz=FuzzAPIIntake explores from there.
func FuzzAPIIntake(f *testing.F) {
	type target struct {
		b    *testBundle
		opID string
	}
	var targets []target
	for _, engine := range storetest.Engines(f) {
		b := setup(f, engine, inboundConfig())
		res := b.post("/api/v1/operations", registration("fuzz-op", "files", review.RiskCompensableWrite))
		var op review.Operation
		if err := json.Unmarshal(res.Body, &op); err != nil || res.Status != http.StatusCreated {
			f.Fatalf("register: %d %s", res.Status, res.Body)
		}
		if res := b.post("/api/v1/operations/"+op.ID+"/attempts", ""); res.Status != http.StatusCreated {
			f.Fatalf("attempt: %d %s", res.Status, res.Body)
		}
		targets = append(targets, target{b, op.ID})
	}
	f.Add(uint8(1), "/api/v1/operations", "", []byte(`{"source_ref":"a","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{}}`))
	f.Add(uint8(1), "/api/v1/operations", "", []byte(`{"source_ref":"with-attempt","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{},"attempt":true}`))
	// The bulk intake: neighbours that succeed, repeat, mismatch, carry a
	// NUL, are not objects, or ask for an attempt, each answered for
	// itself; invalid UTF-8 anywhere makes the body malformed as a whole.
	f.Add(uint8(1), "/api/v1/operations/batch", "", []byte(`{"operations":[`+
		`{"source_ref":"b1","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{}},`+
		`{"source_ref":"b1","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{"other":1}},`+
		`{"source_ref":"b1","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{}},`+
		`{"source_ref":"b\u0000","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{}},`+
		`"not an object",{},`+
		`{"source_ref":"b2","logical_version":"1","action":"x","destination":"files","risk":"read","payload":{},"attempt":true}]}`))
	f.Add(uint8(1), "/api/v1/operations/batch", "", []byte("{\"operations\":[{\"source_ref\":\"b\xff\",\"logical_version\":\"1\",\"action\":\"x\",\"destination\":\"files\",\"risk\":\"read\",\"payload\":{}}]}"))
	var deliveries atomic.Int64
	f.Fuzz(func(t *testing.T, m uint8, path, query string, body []byte) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		if !strings.HasPrefix(path, "/api/") {
			path = "/api/v1/" + strings.TrimPrefix(path, "/")
		}
		var answers []string
		for _, tg := range targets {
			p := strings.ReplaceAll(path, "{id}", tg.opID)
			target := tg.b.srv.URL + p
			if query != "" {
				target += "?" + query
			}
			if _, err := url.ParseRequestURI(target); err != nil || strings.ContainsAny(target, " \x00\r\n") {
				return // not a request an HTTP client can send
			}
			req, err := http.NewRequest(method, target, strings.NewReader(string(body)))
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+tg.b.token)
			if len(body) > 0 {
				req.Header.Set("Content-Type", "application/json")
			}
			if strings.HasPrefix(p, "/api/v1/inbound/") {
				h, err := webhook.Headers(filesSecret, "msg_fuzz_"+strconv.FormatInt(deliveries.Add(1), 10), tg.b.clock.Now(), body)
				if err != nil {
					t.Fatal(err)
				}
				for k, vs := range h {
					req.Header[k] = vs
				}
			}
			resp, err := tg.b.srv.Client().Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, target, err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			res := &response{Status: resp.StatusCode, Header: resp.Header, Body: data, what: method + " " + p}
			if res.Status >= 500 {
				t.Fatalf("%s (%s) %q: %d: %s", res.what, tg.b.engine, body, res.Status, data)
			}
			var prob handlers.Problem
			if res.Status >= 400 && method != http.MethodHead {
				mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
				if mt != "application/problem+json" || json.Unmarshal(data, &prob) != nil || prob.Type == "" || prob.Status != res.Status {
					t.Fatalf("%s (%s): %d is not a problem: %s %s", res.what, tg.b.engine, res.Status, mt, data)
				}
			}
			if method != http.MethodHead {
				sent := string(body)
				if method == http.MethodGet || method == http.MethodDelete {
					sent = "" // a body nobody reads: not a body the server accepted
				}
				for _, e := range checkAgainstDoc(method, p, sent, res) {
					t.Errorf("%s (%s) %q: %d: answer does not match openapi.json: %s\nbody: %.500s", res.what, tg.b.engine, body, res.Status, e, data)
				}
			}
			answer := strconv.Itoa(res.Status) + " " + prob.Type + " field=" + prob.Field
			if res.Status == http.StatusOK && method == http.MethodPost && p == "/api/v1/operations/batch" {
				// Each registration's answer too: the call's 200 says
				// nothing of them.
				var ans struct {
					Results []struct {
						Status  int               `json:"status"`
						Problem *handlers.Problem `json:"problem"`
					} `json:"results"`
				}
				if err := json.Unmarshal(data, &ans); err != nil {
					t.Fatalf("%s (%s): %v: %s", res.what, tg.b.engine, err, data)
				}
				for _, r := range ans.Results {
					answer += "; " + strconv.Itoa(r.Status)
					if r.Problem != nil {
						answer += " " + r.Problem.Type + " field=" + r.Problem.Field
					}
				}
			}
			answers = append(answers, answer)
		}
		for _, a := range answers[1:] {
			if a != answers[0] {
				t.Fatalf("%s %s?%s %q: engines disagree: %v", method, path, query, body, answers)
			}
		}
	})
}
