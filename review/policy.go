package review

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The action policy catalog: what each action's entry in the configuration
// file (destinations.<d>.actions.<a>, ActionConfig) decides, in one place.
// An action without an entry gets SafeRisk and nothing else is assumed.

// SafeRisk is the risk of an operation whose action has no policy and whose
// registration names none: a write that may need undoing, never repeated
// before reconciliation.
const SafeRisk = RiskCompensableWrite

// Policy returns the action's policy at the destination, and whether the
// configuration has one.
func (c *Config) Policy(destination, action string) (ActionConfig, bool) {
	if c == nil {
		return ActionConfig{}, false
	}
	d, ok := c.Destinations[destination]
	if !ok {
		return ActionConfig{}, false
	}
	ac, ok := d.Actions[action]
	return ac, ok
}

// riskRank orders risks from harmless to irreversible.
func riskRank(r Risk) int { return slices.Index(AllRisks(), r) }

// escalatable are the stop reasons a policy may send to a person instead
// of failing the operation.
var escalatable = []Reason{ReasonBudgetExhausted, ReasonDeadlineExpired, ReasonDependencyFailed}

// check validates one action's policy.
func (ac ActionConfig) check() error {
	switch {
	case ac.Risk != "" && !ac.Risk.Valid():
		return fmt.Errorf("risk %q is not one of read, generate, idempotent_write, compensable_write, irreversible", ac.Risk)
	case ac.Deadline < 0 || ac.MaxWait < 0:
		return fmt.Errorf("deadline and max_wait must not be negative")
	case ac.MaxAttempts < 0 || ac.MaxAttempts > MaxAttemptsCap:
		return fmt.Errorf("max_attempts must be between 1 and %d", MaxAttemptsCap)
	case ac.CostBudget != nil && !(*ac.CostBudget >= 0 && *ac.CostBudget <= MaxCost):
		return fmt.Errorf("cost_budget must be between 0 and %g", MaxCost)
	case ac.Concurrency != nil && *ac.Concurrency < 0:
		return fmt.Errorf("concurrency must not be negative")
	case ac.Retention != nil && *ac.Retention < 0:
		return fmt.Errorf("retention must not be negative")
	}
	for _, f := range ac.Flags {
		if !f.Valid() {
			return fmt.Errorf("flag %q is not one of financial, irreversible, regulated", f)
		}
	}
	for _, e := range ac.Evidence {
		if !e.Valid() {
			return fmt.Errorf("evidence %q is not one of response, status_lookup, metadata_search, webhook, reviewer", e)
		}
	}
	for _, r := range ac.EscalateOn {
		if !slices.Contains(escalatable, r) {
			return fmt.Errorf("escalate_on %q: only budget_exhausted, deadline_expired and dependency_failed can be escalated", r)
		}
	}
	seen := map[string]bool{}
	for _, f := range ac.KeyFields {
		if strings.TrimSpace(f) != f || f == "" || strings.Contains(f, "..") || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") {
			return fmt.Errorf("key_fields: %q is not a member path (write order.id)", f)
		}
		if seen[f] {
			return fmt.Errorf("key_fields: %q is listed twice", f)
		}
		seen[f] = true
	}
	for _, t := range ac.Tenants {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("tenants: an empty tenant name")
		}
	}
	return nil
}

// ApplyPolicy fills a registration from its action's policy before it is
// normalized: the risk when none is named (the policy's, or SafeRisk), the
// policy's flags, and the deadline, attempt and cost budgets when the
// registration leaves them out. It refuses what the policy forbids: a
// tenant the action is not open to (ErrForbidden), a lower risk or a larger
// budget than the policy's (ErrInvalid, naming the field).
func ApplyPolicy(r *Registration, cfg *Config, now time.Time) error {
	ac, ok := cfg.Policy(NFC(r.Destination), NFC(r.Action))
	r.riskDefaulted = r.Risk == ""
	if !ok {
		if r.Risk == "" {
			r.Risk = SafeRisk
		}
		return nil
	}
	if len(ac.Tenants) > 0 && !slices.Contains(ac.Tenants, NFC(r.Tenant)) {
		return fmt.Errorf("%w: action %q at %q is not open to tenant %q (its policy's tenants)", ErrForbidden, r.Action, r.Destination, r.Tenant)
	}
	switch {
	case r.Risk == "" && ac.Risk != "":
		r.Risk = ac.Risk
	case r.Risk == "":
		r.Risk = SafeRisk
	case ac.Risk != "" && r.Risk.Valid() && riskRank(r.Risk) < riskRank(ac.Risk):
		return fmt.Errorf("%w: field \"risk\": the action's policy says %s; a registration may not lower it to %s", ErrInvalid, ac.Risk, r.Risk)
	}
	r.declaredFlags, r.policyFlags = slices.Clone(r.Flags), slices.Clone(ac.Flags)
	r.Flags = append(slices.Clone(r.Flags), ac.Flags...)
	if ac.Deadline > 0 {
		limit := now.Add(ac.Deadline)
		if r.Deadline == nil {
			r.Deadline = &limit
		} else if r.Deadline.After(limit) {
			return fmt.Errorf("%w: field \"deadline\": the action's policy allows at most %s from now", ErrInvalid, ac.Deadline)
		}
	}
	if ac.MaxAttempts > 0 {
		if r.MaxAttempts == nil {
			m := ac.MaxAttempts
			r.MaxAttempts = &m
		} else if *r.MaxAttempts > ac.MaxAttempts {
			return fmt.Errorf("%w: field \"max_attempts\": the action's policy allows at most %d", ErrInvalid, ac.MaxAttempts)
		}
	}
	if ac.CostBudget != nil && *ac.CostBudget > 0 {
		if r.CostBudget == nil {
			b := *ac.CostBudget
			r.CostBudget = &b
		} else if *r.CostBudget > *ac.CostBudget {
			return fmt.Errorf("%w: field \"cost_budget\": the action's policy allows at most %g", ErrInvalid, *ac.CostBudget)
		}
	}
	return nil
}

// Intention is the part of a canonical payload that identifies the
// intention under a key recipe: the canonical JSON object of the key
// fields present, by path ({"order.id":7,"to":"a@example.com"}). Without
// key fields, or for a payload that is not an object, it is the whole
// payload.
func Intention(payload []byte, keyFields []string) []byte {
	if len(keyFields) == 0 {
		return payload
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return payload
	}
	if _, ok := doc.(map[string]any); !ok {
		return payload
	}
	picked := map[string]any{}
	for _, path := range keyFields {
		if v, ok := memberAt(doc, path); ok {
			picked[path] = v
		}
	}
	raw, err := json.Marshal(picked)
	if err != nil {
		return payload
	}
	canonical, err := Canonicalize(raw)
	if err != nil {
		return payload
	}
	return canonical
}

// memberAt follows a dotted path through nested objects.
func memberAt(doc any, path string) (any, bool) {
	v := doc
	for _, name := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// ToolCallKey is the idempotency key of an agent's tool call: SHA-256 over
// the run, the tool and the intention of its canonical arguments (Intention
// under the tool's key fields). A model that proposes the same call again —
// its arguments reordered, or differing only in members the key recipe
// leaves out — gets the same key, and so the same operation.
func ToolCallKey(runID, tool string, intention []byte) string {
	return DeriveKey("agent-run", runID, tool, PayloadHash(intention))
}

// PolicyItem is one item of the production checklist an action's policy
// must answer (LintPolicies).
type PolicyItem struct {
	Name string
	// Missing reports whether ac leaves the item unanswered.
	Missing func(ac ActionConfig) bool
	// Hint says what to write.
	Hint string
}

// PolicyChecklist is the production checklist: every item an action's
// policy states before the action runs in production. Items whose "none"
// is a real answer (cost_budget, concurrency, retention, key_fields,
// escalate_on, redact_fields) must still be stated: 0 or [] says "none"
// on purpose.
var PolicyChecklist = []PolicyItem{
	{"owner", func(ac ActionConfig) bool { return strings.TrimSpace(ac.Owner) == "" }, "who answers for the action"},
	{"effects", func(ac ActionConfig) bool { return strings.TrimSpace(ac.Effects) == "" }, "what one operation does at the destination"},
	{"duplicate_cost", func(ac ActionConfig) bool { return strings.TrimSpace(ac.DuplicateCost) == "" }, "what a duplicate costs, in money or a note"},
	{"key_fields", func(ac ActionConfig) bool { return ac.KeyFields == nil }, "the payload members that identify the intention ([] for the whole payload)"},
	{"evidence", func(ac ActionConfig) bool { return len(ac.Evidence) == 0 }, "what confirms it: response, status_lookup, metadata_search, webhook, reviewer"},
	{"risk", func(ac ActionConfig) bool { return ac.Risk == "" }, "read, generate, idempotent_write, compensable_write or irreversible"},
	{"deadline", func(ac ActionConfig) bool { return ac.Deadline <= 0 }, "how long an operation may take, e.g. 24h"},
	{"max_attempts", func(ac ActionConfig) bool { return ac.MaxAttempts <= 0 }, "how many attempts at most"},
	{"cost_budget", func(ac ActionConfig) bool { return ac.CostBudget == nil }, "the most one operation may spend (0: none)"},
	{"max_wait", func(ac ActionConfig) bool { return ac.MaxWait <= 0 }, "the longest single wait before a retry, e.g. 10m"},
	{"escalate_on", func(ac ActionConfig) bool { return ac.EscalateOn == nil }, "stop reasons that go to a person: budget_exhausted, deadline_expired ([] for none)"},
	{"requires_approval", func(ac ActionConfig) bool { return needsApprovalPolicy(ac) && !ac.RequiresApproval },
		"an irreversible, financial or regulated action waits for a reviewer's approval"},
	{"approval_timeout", func(ac ActionConfig) bool { return ac.RequiresApproval && ac.ApprovalTimeout <= 0 }, "how long an approval may take"},
	{"concurrency", func(ac ActionConfig) bool { return ac.Concurrency == nil }, "attempts of this action in flight at most (0: no limit of its own)"},
	{"redact_fields", func(ac ActionConfig) bool { return ac.RedactFields == nil }, "payload members shown redacted ([] for none)"},
	{"retention", func(ac ActionConfig) bool { return ac.Retention == nil }, "how long the payload is kept (0: as long as the ledger)"},
}

// needsApprovalPolicy: an action whose effect cannot be taken back, or that
// moves money or regulated data, is approved by a person before it runs.
func needsApprovalPolicy(ac ActionConfig) bool {
	return ac.Risk == RiskIrreversible || slices.Contains(ac.Flags, FlagFinancial) ||
		slices.Contains(ac.Flags, FlagIrreversible) || slices.Contains(ac.Flags, FlagRegulated)
}

// PolicyGap is one action whose policy leaves checklist items unanswered.
type PolicyGap struct {
	Destination string
	Action      string
	Missing     []PolicyItem
}

// LintPolicies lists every action in cfg whose policy misses an item of
// PolicyChecklist, by destination and action.
func LintPolicies(cfg *Config) []PolicyGap {
	var gaps []PolicyGap
	for _, e := range Catalog(cfg) {
		if len(e.Missing) > 0 {
			gaps = append(gaps, PolicyGap{Destination: e.Destination, Action: e.Action, Missing: e.Missing})
		}
	}
	return gaps
}

// CatalogEntry is one action of the catalog, as /admin/actions shows it.
type CatalogEntry struct {
	Destination string
	Action      string
	Policy      ActionConfig
	Missing     []PolicyItem
}

// Catalog lists every action policy in cfg, sorted by destination and
// action, with the checklist items each one misses.
func Catalog(cfg *Config) []CatalogEntry {
	if cfg == nil {
		return nil
	}
	var out []CatalogEntry
	for dn, d := range cfg.Destinations {
		for an, ac := range d.Actions {
			e := CatalogEntry{Destination: dn, Action: an, Policy: ac}
			for _, it := range PolicyChecklist {
				if it.Missing(ac) {
					e.Missing = append(e.Missing, it)
				}
			}
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Destination != out[j].Destination {
			return out[i].Destination < out[j].Destination
		}
		return out[i].Action < out[j].Action
	})
	return out
}

// PublishedPolicy is an action's policy as the API tells an integrator
// (GET /api/v1/actions): what the tool-call controller needs to derive
// keys and to know whether a call waits for approval. Durations are in
// seconds; 0 (or absent) means the item is not set. Each is published
// twice: in whole seconds, rounded up so that a set duration never reads
// as 0 (the integer field clients have always read), and exactly, in
// fractional seconds (a 500ms max_wait is 1 and 0.5).
type PublishedPolicy struct {
	Destination      string   `json:"destination"`
	Action           string   `json:"action"`
	Owner            string   `json:"owner,omitempty"`
	Effects          string   `json:"effects,omitempty"`
	DuplicateCost    string   `json:"duplicate_cost,omitempty"`
	Risk             Risk     `json:"risk,omitempty"`
	Flags            []Flag   `json:"flags"`
	KeyFields        []string `json:"key_fields"`
	Evidence         []string `json:"evidence"`
	RequiresApproval bool     `json:"requires_approval"`
	Approvals        int      `json:"approvals,omitempty"`
	ApprovalTimeout  int64    `json:"approval_timeout_seconds,omitempty"`
	ApprovalExact    float64  `json:"approval_timeout_exact_seconds,omitempty"`
	Deadline         int64    `json:"deadline_seconds,omitempty"`
	DeadlineExact    float64  `json:"deadline_exact_seconds,omitempty"`
	MaxAttempts      int      `json:"max_attempts,omitempty"`
	CostBudget       float64  `json:"cost_budget,omitempty"`
	MaxWait          int64    `json:"max_wait_seconds,omitempty"`
	MaxWaitExact     float64  `json:"max_wait_exact_seconds,omitempty"`
	EscalateOn       []Reason `json:"escalate_on"`
	Concurrency      int      `json:"concurrency,omitempty"`
	Priority         bool     `json:"priority"`
}

// Published is e's policy as the API publishes it.
func (e CatalogEntry) Published() PublishedPolicy {
	ac := e.Policy
	p := PublishedPolicy{Destination: e.Destination, Action: e.Action, Owner: ac.Owner, Effects: ac.Effects,
		DuplicateCost: ac.DuplicateCost, Risk: ac.Risk, Flags: nonNil(ac.Flags), KeyFields: nonNil(ac.KeyFields),
		Evidence: []string{}, RequiresApproval: ac.RequiresApproval,
		ApprovalTimeout: wholeSeconds(ac.ApprovalTimeout), ApprovalExact: ac.ApprovalTimeout.Seconds(),
		Deadline: wholeSeconds(ac.Deadline), DeadlineExact: ac.Deadline.Seconds(),
		MaxAttempts: ac.MaxAttempts, MaxWait: wholeSeconds(ac.MaxWait), MaxWaitExact: ac.MaxWait.Seconds(),
		EscalateOn: nonNil(ac.EscalateOn), Priority: ac.Priority}
	if ac.RequiresApproval {
		// As deciding counts them: two for a financial, irreversible or
		// regulated action, whatever the setting says.
		p.Approvals = PolicyApprovals(ac)
	}
	for _, s := range ac.Evidence {
		p.Evidence = append(p.Evidence, string(s))
	}
	if ac.CostBudget != nil {
		p.CostBudget = *ac.CostBudget
	}
	if ac.Concurrency != nil {
		p.Concurrency = *ac.Concurrency
	}
	return p
}

// wholeSeconds is d in whole seconds, rounded up: truncated, a 500ms
// duration would be published as 0, which says "not set".
func wholeSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// OpenTo reports whether tenant may register the action.
func (e CatalogEntry) OpenTo(tenant string) bool {
	return len(e.Policy.Tenants) == 0 || slices.Contains(e.Policy.Tenants, tenant)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
