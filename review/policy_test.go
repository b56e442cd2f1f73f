package review

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

const policyYAML = `
destinations:
  files:
    actions:
      convert_pdf:
        owner: documents-team
        effects: converts one contract version
        duplicate_cost: a second PDF
        key_fields: [contract_id, version]
        evidence: [response, status_lookup]
        risk: compensable_write
        flags: [regulated]
        deadline: 2h
        max_attempts: 3
        cost_budget: 5
        max_wait: 1m
        escalate_on: [budget_exhausted]
        concurrency: 2
        tenants: [acme]
        redact_fields: []
        retention: 0s
        requires_approval: true
        approval_timeout: 1h
      sketchy:
        risk: read
`

func policyConfig(t *testing.T) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestApplyPolicy(t *testing.T) {
	cfg := policyConfig(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	reg := func(mut func(r *Registration)) Registration {
		r := Registration{Tenant: "acme", SourceRef: "c-1", LogicalVersion: "v1", Action: "convert_pdf", Destination: "files", Payload: []byte(`{}`)}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	t.Run("defaults come from the policy", func(t *testing.T) {
		r := reg(nil)
		if err := ApplyPolicy(&r, cfg, now); err != nil {
			t.Fatal(err)
		}
		if r.Risk != RiskCompensableWrite || !slices.Equal(r.Flags, []Flag{FlagRegulated}) || *r.MaxAttempts != 3 ||
			!r.Deadline.Equal(now.Add(2*time.Hour)) || *r.CostBudget != 5 {
			t.Fatalf("got risk %s flags %v attempts %d deadline %s budget %g", r.Risk, r.Flags, *r.MaxAttempts, r.Deadline, *r.CostBudget)
		}
	})
	t.Run("no policy: the safe risk", func(t *testing.T) {
		r := reg(func(r *Registration) { r.Action = "unknown_action" })
		if err := ApplyPolicy(&r, cfg, now); err != nil {
			t.Fatal(err)
		}
		if r.Risk != SafeRisk || r.MaxAttempts != nil || r.Deadline != nil {
			t.Fatalf("got %+v", r)
		}
	})
	refused := []struct {
		name  string
		mut   func(r *Registration)
		want  error
		field string
	}{
		{"a tenant the action is not open to", func(r *Registration) { r.Tenant = "globex" }, ErrForbidden, ""},
		{"a lower risk", func(r *Registration) { r.Risk = RiskRead }, ErrInvalid, `field "risk"`},
		{"more attempts", func(r *Registration) { n := 4; r.MaxAttempts = &n }, ErrInvalid, `field "max_attempts"`},
		{"a later deadline", func(r *Registration) { d := now.Add(3 * time.Hour); r.Deadline = &d }, ErrInvalid, `field "deadline"`},
		{"a larger cost budget", func(r *Registration) { b := 6.0; r.CostBudget = &b }, ErrInvalid, `field "cost_budget"`},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			r := reg(tt.mut)
			err := ApplyPolicy(&r, cfg, now)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v, want %v naming %s", err, tt.want, tt.field)
			}
		})
	}
	t.Run("a higher risk and less are accepted", func(t *testing.T) {
		r := reg(func(r *Registration) { r.Risk = RiskIrreversible; n := 2; r.MaxAttempts = &n })
		if err := ApplyPolicy(&r, cfg, now); err != nil || r.Risk != RiskIrreversible || *r.MaxAttempts != 2 {
			t.Fatalf("err %v risk %s", err, r.Risk)
		}
	})
}

func TestIntentionKeyRecipe(t *testing.T) {
	fields := []string{"contract_id", "meta.version"}
	canon := func(s string) []byte {
		b, err := Canonicalize([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := Intention(canon(`{"contract_id":583,"meta":{"version":"v7","note":"first"},"title":"A"}`), fields)
	b := Intention(canon(`{"title":"B","meta":{"note":"again","version":"v7"},"contract_id":583}`), fields)
	c := Intention(canon(`{"contract_id":583,"meta":{"version":"v8"}}`), fields)
	if string(a) != `{"contract_id":583,"meta.version":"v7"}` {
		t.Fatalf("intention = %s", a)
	}
	if string(a) != string(b) {
		t.Errorf("irrelevant members changed the intention: %s vs %s", a, b)
	}
	if string(a) == string(c) {
		t.Errorf("a key field changed but the intention did not")
	}
	whole := canon(`{"x":1}`)
	if string(Intention(whole, nil)) != string(whole) || string(Intention(canon(`[1]`), fields)) != "[1]" {
		t.Errorf("without key fields, or for a non-object, the intention is the whole payload")
	}
	if ToolCallKey("run-1", "send", a) != ToolCallKey("run-1", "send", b) || ToolCallKey("run-1", "send", a) == ToolCallKey("run-2", "send", a) {
		t.Errorf("ToolCallKey must follow run, tool and intention only")
	}
	if err := ValidateKey(ToolCallKey("r", "t", a)); err != nil {
		t.Error(err)
	}

	// A registration under a taken key is the same intention when the key
	// fields agree, whatever else differs.
	op := &Operation{SourceRef: "s", LogicalVersion: "v", Action: "a", Destination: "d", Risk: RiskRead,
		Payload: canon(`{"contract_id":583,"meta":{"version":"v7"},"title":"A"}`)}
	op.PayloadHash = PayloadHash(op.Payload)
	r := Registration{SourceRef: "s", LogicalVersion: "v", Action: "a", Destination: "d", Risk: RiskRead,
		Payload: canon(`{"title":"B","contract_id":583,"meta":{"version":"v7"}}`)}
	if d := r.SameIntention(op, PayloadHash(r.Payload), fields); len(d) != 0 {
		t.Errorf("same key fields: diff %v", d)
	}
	if d := r.SameIntention(op, PayloadHash(r.Payload), nil); !slices.Equal(d, []string{"payload"}) {
		t.Errorf("without a recipe the whole payload counts: diff %v", d)
	}
	r.Payload = canon(`{"contract_id":584,"meta":{"version":"v7"}}`)
	if d := r.SameIntention(op, PayloadHash(r.Payload), fields); !slices.Equal(d, []string{"payload"}) {
		t.Errorf("another contract: diff %v", d)
	}
}

func TestLintPolicies(t *testing.T) {
	gaps := LintPolicies(policyConfig(t))
	if len(gaps) != 1 || gaps[0].Action != "sketchy" {
		t.Fatalf("gaps = %+v, want only sketchy", gaps)
	}
	var names []string
	for _, it := range gaps[0].Missing {
		names = append(names, it.Name)
	}
	want := []string{"owner", "effects", "duplicate_cost", "key_fields", "evidence", "deadline", "max_attempts",
		"cost_budget", "max_wait", "escalate_on", "concurrency", "redact_fields", "retention"}
	if !slices.Equal(names, want) {
		t.Errorf("missing = %v, want %v", names, want)
	}
	// An irreversible action without approval is a gap, named.
	cfg, err := ParseConfig([]byte(strings.Replace(policyYAML, "risk: read", "risk: irreversible", 1)))
	if err != nil {
		t.Fatal(err)
	}
	g := LintPolicies(cfg)
	if len(g) != 1 || !slices.ContainsFunc(g[0].Missing, func(it PolicyItem) bool { return it.Name == "requires_approval" }) {
		t.Errorf("an irreversible action without approval: %+v", g)
	}
}

func TestPolicyConfigRefused(t *testing.T) {
	for _, bad := range []string{"risk: maybe", "escalate_on: [payload_mismatch]", "evidence: [rumour]", "key_fields: [a, a]",
		"key_fields: [\".a\"]", "concurrency: -1", "max_attempts: 101", "flags: [urgent]", "cost_budget: -1", "cost_budget: 1e16"} {
		_, err := ParseConfig([]byte("destinations:\n  d:\n    actions:\n      a:\n        " + bad + "\n"))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want invalid", bad, err)
		}
	}
}

func TestDecidePolicyWaitAndEscalation(t *testing.T) {
	cfg := policyConfig(t)
	d := cfg.Destination("files")
	op := testOp(RiskRead)
	op.Action = "convert_pdf"
	// A Retry-After beyond max_wait stops the retries; the policy
	// escalates budget_exhausted, so a person decides.
	in := decideIn(op, d, Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, RetryAfter: "120"})
	got := Decide(in)
	if got.State != NeedsReview || !slices.Equal(got.Escalation, []Reason{ReasonBudgetExhausted}) || !strings.Contains(got.Reason, "max_wait") {
		t.Fatalf("Decide = %s %v (%s)", got.State, got.Escalation, got.Reason)
	}
	checkDecision(t, in, got)
	// Within max_wait it retries.
	in = decideIn(op, d, Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, RetryAfter: "30"})
	if got := Decide(in); got.State != RetryWait {
		t.Fatalf("Decide = %s (%s)", got.State, got.Reason)
	}
	// Without the escalation, the same stop fails the operation.
	op.Action = "other"
	in = decideIn(op, d, Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429})
	in.N = op.MaxAttempts
	if got := Decide(in); got.State != Failed {
		t.Fatalf("Decide = %s (%s)", got.State, got.Reason)
	}
}

// TestPolicyNamesInNFC: a destination, action or tenant the configuration
// writes decomposed is the one registrations name (they are stored in
// NFC): its policy applies. It matched nothing, so an action that needs
// approval ran without one. One name written both ways is refused.
func TestPolicyNamesInNFC(t *testing.T) {
	const nfd, nfc = "cafe\u0301", "caf\u00e9"
	cfg, err := ParseConfig([]byte("destinations:\n  " + nfd + ":\n    actions:\n      pay_" + nfd + ":\n        requires_approval: true\n        tenants: [" + nfd + "]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := validRegistration()
	r.Tenant, r.Destination, r.Action = nfd, nfd, "pay_"+nfd
	p, err := PlanRegistration(r, cfg, classifyNow)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != AwaitingApproval || p.Registration.Destination != nfc {
		t.Errorf("a registration for %q planned %s, want awaiting_approval under the policy", nfc, p.State)
	}
	if _, err := ParseConfig([]byte("destinations:\n  " + nfd + ": {}\n  " + nfc + ": {}\n")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("one destination written both ways: %v", err)
	}
}

// TestPublishedApprovals: GET /api/v1/actions tells an integrator how many
// reviewers an approval takes as deciding it takes: the policy's number,
// at least one, and two where the policy makes the action financial,
// irreversible or regulated (PolicyApprovals). It published the raw
// setting, omitted (0) for an irreversible action that needs two, so an
// agent told its user "one approval" and waited for a second it did not
// expect.
func TestPublishedApprovals(t *testing.T) {
	for _, tt := range []struct {
		name string
		ac   ActionConfig
		want int
	}{
		{"no approval", ActionConfig{}, 0},
		{"one", ActionConfig{RequiresApproval: true}, 1},
		{"three", ActionConfig{RequiresApproval: true, Approvals: 3}, 3},
		{"financial", ActionConfig{RequiresApproval: true, Flags: []Flag{FlagFinancial}}, 2},
		{"irreversible", ActionConfig{RequiresApproval: true, Risk: RiskIrreversible}, 2},
		{"regulated, three", ActionConfig{RequiresApproval: true, Approvals: 3, Flags: []Flag{FlagRegulated}}, 3},
	} {
		if got := (CatalogEntry{Destination: "d", Action: "a", Policy: tt.ac}).Published().Approvals; got != tt.want {
			t.Errorf("%s: approvals published %d, want %d", tt.name, got, tt.want)
		}
	}
}
