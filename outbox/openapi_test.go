package outbox_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/limbo-dev/limbo/outbox"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

// webhookContract is the decision webhook as handlers/openapi.json
// describes it (webhooks.decision.post), compiled with a JSON Schema
// 2020-12 validator: the body's schema, and each header parameter's.
type webhookContract struct {
	body        *jsonschema.Schema
	contentType []string
	headers     map[string]*jsonschema.Schema // required headers, by name
}

func loadWebhookContract(t *testing.T) *webhookContract {
	t.Helper()
	raw, err := os.ReadFile("../handlers/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // nothing outside the document
	const url = "mem://limbo/openapi.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	const at = "#/webhooks/decision/post"
	var op struct {
		Parameters []struct {
			Name, In string
			Required bool
		}
		RequestBody struct {
			Required bool
			Content  map[string]json.RawMessage
		} `json:"requestBody"`
	}
	var whole struct {
		Webhooks map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(whole.Webhooks["decision"]["post"], &op); err != nil {
		t.Fatalf("webhooks.decision.post: %v", err)
	}
	wc := &webhookContract{headers: map[string]*jsonschema.Schema{}}
	for i, p := range op.Parameters {
		if p.In != "header" || !p.Required {
			t.Errorf("webhook parameter %s: in %s, required %v; Limbo sends only headers, always", p.Name, p.In, p.Required)
			continue
		}
		s, err := c.Compile(fmt.Sprintf("%s%s/parameters/%d/schema", url, at, i))
		if err != nil {
			t.Fatalf("header %s: %v", p.Name, err)
		}
		wc.headers[p.Name] = s
	}
	for mt := range op.RequestBody.Content {
		wc.contentType = append(wc.contentType, mt)
	}
	if !op.RequestBody.Required || !slices.Equal(wc.contentType, []string{"application/json"}) {
		t.Errorf("webhook request body: required %v, content %v", op.RequestBody.Required, wc.contentType)
	}
	if wc.body, err = c.Compile(url + at + "/requestBody/content/application~1json/schema"); err != nil {
		t.Fatal(err)
	}
	return wc
}

// check returns what is wrong with one delivery according to the contract.
func (wc *webhookContract) check(h http.Header, body []byte) []string {
	var errs []string
	for name, s := range wc.headers {
		v := h.Values(name)
		if len(v) != 1 {
			errs = append(errs, fmt.Sprintf("header %s: %q, want one value", name, v))
			continue
		}
		if err := s.Validate(v[0]); err != nil {
			errs = append(errs, fmt.Sprintf("header %s %q: %v", name, v[0], err))
		}
	}
	if ct := h.Get("Content-Type"); !slices.Contains(wc.contentType, ct) {
		errs = append(errs, fmt.Sprintf("Content-Type %q, documented %v", ct, wc.contentType))
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return append(errs, "body is not JSON: "+err.Error())
	}
	if err := wc.body.Validate(v); err != nil {
		errs = append(errs, fmt.Sprintf("body %s: %v", body, err))
	}
	return errs
}

// capture is a receiver that keeps every request it verifies.
type capture struct {
	t      *testing.T
	secret string
	v      *env

	mu   sync.Mutex
	reqs []captured
}

type captured struct {
	header http.Header
	body   []byte
}

func (c *capture) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if _, err := webhook.Verify([]string{c.secret}, req.Header, body, c.v.clk.Now(), 0); err != nil || req.Method != http.MethodPost {
		c.t.Errorf("receiver: %s: %v", req.Method, err)
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, captured{req.Header.Clone(), body})
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// inReview registers an operation, leaves its attempt unknown and finds two
// candidates for it: a case a reviewer decides. It returns the case.
func (v *env) inReview(t *testing.T) *store.Case {
	t.Helper()
	v.n++
	ctx, s := v.ctx, v.s
	op, _, err := s.Register(ctx, review.Registration{Tenant: tenant, SourceRef: fmt.Sprintf("doc-%d", v.n), LogicalVersion: "v1",
		Action: "transform", Destination: "plain", Risk: review.RiskCompensableWrite, Actor: "test",
		Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.StartAttempt(ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordOutcome(ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
		t.Fatal(err)
	}
	cands := []review.Candidate{{Ref: "f1", Kind: "file", Version: "v1", OperationID: op.ID}, {Ref: "f2", Kind: "file", Version: "v1", OperationID: op.ID}}
	if _, err := s.AddEvidence(ctx, tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: cands}, "test"); err != nil {
		t.Fatal(err)
	}
	cs, err := s.CasesForOperation(ctx, op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases = %v, %v", cs, err)
	}
	return &cs[0]
}

// TestDecisionWebhookMatchesOpenAPI: what the worker really sends for
// decisions — headers and body, as a receiver gets them — is what the
// webhooks section of handlers/openapi.json describes, for decisions with
// and without their optional members.
func TestDecisionWebhookMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	wc := loadWebhookContract(t)

	// The check is not vacuous: an event with another shape is refused.
	for _, bad := range []string{
		`{"type":"decision.confirm","timestamp":"2030-03-04T09:00:00Z","data":{}}`,
		`{"type":"confirm","timestamp":"2030-03-04T09:00:00Z","data":{}}`,
	} {
		h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"1"},
			"Webhook-Signature": {"v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}
		if errs := wc.check(h, []byte(bad)); len(errs) == 0 {
			t.Errorf("the webhook schema accepts %s", bad)
		}
	}

	v := setup(t, store.SQLite)
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rcv := &capture{t: t, secret: secret, v: v}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	v.endpoint(t, srv.URL+"/hooks", secret)

	decisions := []store.DecisionRequest{
		{Action: review.DecideConfirm, Ref: "f1", Reason: "f1 is it", Actor: "alice@example.com"},
		{Action: review.DecideCompensate, Ref: "f2", Compensation: "delete f2", Reason: "a duplicate", Actor: "bob@example.com"},
		{Action: review.DecideFail, Reason: "customer cancelled", Actor: "alice@example.com"},
	}
	want := map[string]bool{}
	for _, d := range decisions {
		d.CaseID = v.inReview(t).ID
		if _, err := v.s.Decide(v.ctx, d); err != nil {
			t.Fatalf("%s: %v", d.Action, err)
		}
		want["decision."+d.Action] = true
	}
	runOnce(t, outbox.New(v.s, "w1", quiet, nil), len(decisions))

	if len(rcv.reqs) != len(decisions) {
		t.Fatalf("receiver got %d requests, want %d", len(rcv.reqs), len(decisions))
	}
	for _, r := range rcv.reqs {
		for _, e := range wc.check(r.header, r.body) {
			t.Error(e)
		}
		var ev struct {
			Type     string
			Decision store.Decision `json:"data"`
		}
		if err := json.Unmarshal(r.body, &ev); err != nil {
			t.Fatal(err)
		}
		if !want[ev.Type] || ev.Type != "decision."+ev.Decision.Action || ev.Decision.Status != store.DecisionApplied {
			t.Errorf("event %s: decision %s, status %s", ev.Type, ev.Decision.Action, ev.Decision.Status)
		}
		delete(want, ev.Type)
		if ev.Type == "decision.compensate" && (ev.Decision.CompensationID == "" || !strings.Contains(string(r.body), `"compensation":"delete f2"`)) {
			t.Errorf("compensate event without its optional members: %s", r.body)
		}
	}
	if len(want) != 0 {
		t.Errorf("no event for %v", want)
	}
}
