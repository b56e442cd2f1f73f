package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

const policyConfigYAML = `
destinations:
  files:
    honours_keys: true
    actions:
      send_note:
        owner: support
        key_fields: [to, subject]
        risk: compensable_write
        max_attempts: 3
        concurrency: 1
        tenants: [acme]
`

// An action's policy decides what the registration leaves out, refuses
// what it forbids, keys intentions by its recipe, and limits the action's
// attempts in flight — through the API, on both engines.
func TestActionPolicyThroughAPI(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(policyConfigYAML))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		note := func(subject, extra string) string {
			return `{"source_ref":"run-7","logical_version":"1","action":"send_note","destination":"files",` +
				`"key":"run-7-note-0001-abcdef","payload":{"to":"ada@example.com","subject":` + subject + extra + `}}`
		}
		// No risk named: the policy's; no max_attempts: the policy's.
		res := b.post("/api/v1/operations", note(`"hello"`, `,"body":"first draft"`)).want(t, http.StatusCreated)
		op := res.op(t)
		if op.Risk != review.RiskCompensableWrite || op.MaxAttempts != 3 {
			t.Fatalf("risk %s, max_attempts %d", op.Risk, op.MaxAttempts)
		}
		// The same key, differing only in a member the recipe leaves out:
		// the same intention, the stored operation answers.
		again := b.post("/api/v1/operations", note(`"hello"`, `,"body":"second draft, reworded"`)).want(t, http.StatusOK).op(t)
		if again.ID != op.ID {
			t.Fatalf("a reworded body made another operation %s", again.ID)
		}
		// A key field differs: another intention under a taken key.
		b.post("/api/v1/operations", note(`"goodbye"`, ``)).want(t, http.StatusUnprocessableEntity).problem(t, "payload-mismatch")
		// More attempts than the policy allows: refused, naming the field.
		p := b.post("/api/v1/operations", strings.Replace(note(`"x"`, ``), `"key":"run-7-note-0001-abcdef"`, `"key":"run-7-note-0002-abcdef","max_attempts":9`, 1)).
			want(t, http.StatusBadRequest).problem(t, "invalid-request")
		if p.Field != "max_attempts" {
			t.Errorf("field = %q", p.Field)
		}
		// Another tenant may not register the action.
		other := b.newToken("globex")
		ob := *b
		ob.token = other
		ob.post("/api/v1/operations", note(`"hello"`, ``)).want(t, http.StatusForbidden).problem(t, "forbidden")

		// An action without a policy gets the safe risk.
		free := b.post("/api/v1/operations", `{"source_ref":"r","logical_version":"1","action":"free","destination":"files","payload":{}}`).
			want(t, http.StatusCreated).op(t)
		if free.Risk != review.SafeRisk {
			t.Errorf("no policy: risk %s, want %s", free.Risk, review.SafeRisk)
		}

		// The policy is published to its tenant only.
		var acts struct {
			Actions []review.PublishedPolicy `json:"actions"`
		}
		b.get("/api/v1/actions").want(t, http.StatusOK).decode(t, &acts)
		if len(acts.Actions) != 1 || acts.Actions[0].Action != "send_note" || strings.Join(acts.Actions[0].KeyFields, ",") != "to,subject" {
			t.Errorf("actions = %+v", acts.Actions)
		}
		ob.get("/api/v1/actions").want(t, http.StatusOK).decode(t, &acts)
		if len(acts.Actions) != 0 {
			t.Errorf("globex sees %+v", acts.Actions)
		}

		// A run's calls are listed by source_ref.
		var pg page
		b.get("/api/v1/operations?source_ref=run-7").want(t, http.StatusOK).decode(t, &pg)
		if len(pg.Operations) != 1 || pg.Operations[0].ID != op.ID {
			t.Errorf("source_ref=run-7 listed %d operations", len(pg.Operations))
		}
		b.get("/api/v1/operations?source_ref=%00").want(t, http.StatusBadRequest)

		// concurrency 1: a second operation of the action waits while the
		// first one's attempt is in flight.
		second := b.post("/api/v1/operations", strings.Replace(note(`"later"`, ``), "0001", "0003", 1)).want(t, http.StatusCreated).op(t)
		b.attempt(t, op.ID)
		wait := b.post("/api/v1/operations/"+second.ID+"/attempts", "").want(t, http.StatusTooManyRequests).problem(t, "retry-later")
		if !strings.Contains(wait.Detail, "action send_note") {
			t.Errorf("detail %q does not name the action's limit", wait.Detail)
		}
	})
}

// GET /api/v1/actions publishes a sub-second duration without loss: the
// whole-second fields round up (a set duration never reads 0, "not
// set"), and the exact fields say the fraction.
func TestActionsPublishSubSecondDurations(t *testing.T) {
	cfg, err := review.ParseConfig([]byte(`
destinations:
  files:
    honours_keys: true
    actions:
      send_note:
        requires_approval: true
        approval_timeout: 250ms
        deadline: 1500ms
        max_wait: 500ms
      archive:
        deadline: 3s
`))
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, store.SQLite, cfg)
	var acts struct {
		Actions []map[string]any `json:"actions"`
	}
	b.get("/api/v1/actions").want(t, http.StatusOK).decode(t, &acts)
	got := map[string]map[string]any{}
	for _, a := range acts.Actions {
		got[a["action"].(string)] = a
	}
	for action, want := range map[string]map[string]any{
		"send_note": {"approval_timeout_seconds": 1.0, "approval_timeout_exact_seconds": 0.25,
			"deadline_seconds": 2.0, "deadline_exact_seconds": 1.5, "max_wait_seconds": 1.0, "max_wait_exact_seconds": 0.5},
		"archive": {"deadline_seconds": 3.0, "deadline_exact_seconds": 3.0, "approval_timeout_seconds": nil,
			"approval_timeout_exact_seconds": nil, "max_wait_seconds": nil, "max_wait_exact_seconds": nil},
	} {
		for field, v := range want {
			if got[action][field] != v {
				t.Errorf("%s: %s = %v, want %v", action, field, got[action][field], v)
			}
		}
	}
}
