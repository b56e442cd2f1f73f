package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// apiTenantWorld is tenant acme's operation, settled by a reviewer (so it
// has attempts, evidence and a decision), seen from tenant globex's token.
type apiTenantWorld struct {
	b      *testBundle
	op     *review.Operation // acme's, as it was before globex's calls
	other  string            // globex's token
	cursor string            // acme's decisions feed cursor
}

// apiTenantProbes: every /api/v1 route a token reaches, called with
// globex's token on what is acme's. Each fails the test when globex read or
// changed anything of acme's. TestTenantIsolationEveryRoute fails for a
// route under /api/v1 without a probe here.
var apiTenantProbes = map[string]func(t *testing.T, w *apiTenantWorld){
	"GET /api/v1/operations/:id": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{path: "/api/v1/operations/" + w.op.ID}).want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"POST /api/v1/operations/:id/attempts": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{method: http.MethodPost, path: "/api/v1/operations/" + w.op.ID + "/attempts"}).want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"POST /api/v1/operations/:id/attempts/:n/outcome": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{method: http.MethodPost, path: "/api/v1/operations/" + w.op.ID + "/attempts/1/outcome",
			body: `{"result":"success","phase":"after_send","resource":{"ref":"evil"}}`}).want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"GET /api/v1/operations/:id/attempts/:n/output": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{path: "/api/v1/operations/" + w.op.ID + "/attempts/1/output"}).want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"POST /api/v1/operations/:id/evidence": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{method: http.MethodPost, path: "/api/v1/operations/" + w.op.ID + "/evidence",
			body: `{"source":"status_lookup","authoritative":true,"candidates":[{"ref":"evil","operation_id":"` + w.op.ID + `"}]}`}).
			want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"PUT /api/v1/operations/:id/jobs/:ref": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{method: http.MethodPut, path: "/api/v1/operations/" + w.op.ID + "/jobs/job-1", body: `{"status":"succeeded"}`}).
			want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"GET /api/v1/operations/:id/decisions": func(t *testing.T, w *apiTenantWorld) {
		w.as(request{path: "/api/v1/operations/" + w.op.ID + "/decisions"}).want(t, http.StatusNotFound).problem(t, "not-found")
	},
	"GET /api/v1/decisions": func(t *testing.T, w *apiTenantWorld) {
		var p struct {
			Decisions []json.RawMessage `json:"decisions"`
		}
		w.as(request{path: "/api/v1/decisions"}).want(t, http.StatusOK).decode(t, &p)
		if len(p.Decisions) != 0 {
			t.Errorf("globex's decisions feed holds %d of acme's decisions", len(p.Decisions))
		}
		// acme's cursor is not globex's: said so, nothing of acme's listed.
		w.as(request{path: "/api/v1/decisions?cursor=" + w.cursor}).want(t, http.StatusBadRequest).problem(t, "invalid-request")
	},
	"GET /api/v1/operations": func(t *testing.T, w *apiTenantWorld) {
		for _, q := range []string{"", "?source_ref=contract-1", "?state=" + string(w.op.State)} {
			var p page
			w.as(request{path: "/api/v1/operations" + q}).want(t, http.StatusOK).decode(t, &p)
			for _, o := range p.Operations {
				if o.ID == w.op.ID || o.Tenant != "globex" {
					t.Errorf("GET /api/v1/operations%s: globex lists %s of %s", q, o.ID, o.Tenant)
				}
			}
		}
	},
	"POST /api/v1/operations": func(t *testing.T, w *apiTenantWorld) {
		// acme's key and payload: globex's own operation (new, or the one
		// the batch probe made), never acme's.
		res := w.as(request{method: http.MethodPost, path: "/api/v1/operations",
			body: registration("contract-1", "drive", review.RiskCompensableWrite, `"key":"`+w.op.Key+`"`)})
		if res.Status != http.StatusCreated {
			res.want(t, http.StatusOK)
		}
		if got := res.op(t); got.ID == w.op.ID || got.Tenant != "globex" {
			t.Errorf("globex registering acme's key got %s of %s", got.ID, got.Tenant)
		}
	},
	"POST /api/v1/operations/batch": func(t *testing.T, w *apiTenantWorld) {
		var res struct {
			Results []struct {
				Status    int               `json:"status"`
				Operation *review.Operation `json:"operation"`
			} `json:"results"`
		}
		w.as(request{method: http.MethodPost, path: "/api/v1/operations/batch",
			body: `{"operations":[` + registration("contract-1", "drive", review.RiskCompensableWrite, `"key":"`+w.op.Key+`-b"`) + `,` +
				registration("contract-1", "drive", review.RiskCompensableWrite, `"key":"`+w.op.Key+`"`) + `]}`}).
			want(t, http.StatusOK).decode(t, &res)
		for i, r := range res.Results {
			if r.Status != http.StatusCreated && r.Status != http.StatusOK || r.Operation == nil || r.Operation.ID == w.op.ID || r.Operation.Tenant != "globex" {
				t.Errorf("batch item %d from globex with acme's key: %d %+v", i, r.Status, r.Operation)
			}
		}
	},
	"GET /api/v1/actions": func(t *testing.T, w *apiTenantWorld) {
		// send_note is open to acme only (policyConfigYAML).
		res := w.as(request{path: "/api/v1/actions"}).want(t, http.StatusOK)
		if strings.Contains(string(res.Body), "send_note") {
			t.Errorf("globex is shown acme's action: %s", res.Body)
		}
	},
}

// apiTenantExempt are the /api/v1 routes no token reaches.
var apiTenantExempt = map[string]string{
	"POST /api/v1/inbound/:source": "a destination's signed webhook, no token",
	"GET /api/v1/openapi.json":     "public document",
}

func (w *apiTenantWorld) as(r request) *response {
	r.token = &w.other
	return w.b.do(r)
}

// TestTenantIsolationEveryRoute: SPEC "a token belongs to one tenant" on
// every route of the API — another tenant's ids answer 404 and change
// nothing, its lists and feeds hold nothing of another tenant's, and its
// keys are its own. A route with no probe fails here.
func TestTenantIsolationEveryRoute(t *testing.T) {
	t.Parallel()
	e := handlers.NewServer(handlers.New(nil, nil))
	for _, r := range e.Routes() {
		k := r.Method + " " + r.Path
		if !strings.HasPrefix(r.Path, "/api/v1/") || r.Path == "/api/v1/*" || r.Method == "echo_route_any" || strings.HasSuffix(r.Name, "NotFoundHandler") {
			continue
		}
		if apiTenantProbes[k] == nil && apiTenantExempt[k] == "" {
			t.Errorf("API route %s has no probe in apiTenantProbes (tenant matrix)", k)
		}
	}
	cfg, err := review.ParseConfig([]byte(policyConfigYAML))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		ctx := context.Background()
		b := setup(t, engine, cfg)
		op := b.register(t, "contract-1", review.RiskCompensableWrite)
		g := b.attempt(t, op.ID)
		b.outcome(t, op.ID, g.N, `{"result":"timeout","phase":"after_send"}`)
		b.post("/api/v1/operations/"+op.ID+"/evidence", `{"source":"metadata_search","authoritative":true,"candidates":[`+
			`{"ref":"fld_a","operation_id":"`+op.ID+`"},{"ref":"fld_b","operation_id":"`+op.ID+`"}]}`).want(t, http.StatusOK)
		cs, err := b.store.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		if _, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideApproveRetry,
			Reason: "neither folder is ours", Actor: "alice@example.com"}); err != nil {
			t.Fatal(err)
		}
		var feed struct {
			Decisions  []json.RawMessage `json:"decisions"`
			NextCursor string            `json:"next_cursor"`
		}
		// (On PostgreSQL the feed lists a decision once every transaction
		// older than it has ended, on a server other tests share.)
		for range 100 {
			if b.get("/api/v1/decisions").want(t, http.StatusOK).decode(t, &feed); len(feed.Decisions) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(feed.Decisions) != 1 || feed.NextCursor == "" {
			t.Fatalf("acme's feed: %d decisions, cursor %q", len(feed.Decisions), feed.NextCursor)
		}
		w := &apiTenantWorld{b: b, op: b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t), other: b.newToken("globex"), cursor: feed.NextCursor}
		for k, probe := range apiTenantProbes {
			t.Run(strings.NewReplacer("/", "_", ":", "").Replace(k), func(t *testing.T) { probe(t, w) })
		}
		// acme's operation is as it was.
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if got.Version != w.op.Version || got.State != w.op.State || len(got.Evidence) != len(w.op.Evidence) || len(got.Jobs) != len(w.op.Jobs) || got.AttemptCount != w.op.AttemptCount {
			t.Errorf("acme's operation changed by globex: %+v", got)
		}
	})
}
