package review

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults applied when an operation or the configuration does not say.
const (
	DefaultMaxAttempts = 5
	DefaultDeadline    = 24 * time.Hour
	DefaultLease       = 60 * time.Second
	// DefaultRetryRatio: retries may be at most 10 % of first attempts per
	// destination over the window...
	DefaultRetryRatio = 0.10
	// DefaultRetryFloor: ...but a quiet destination still gets this many
	// retries per window, or one failure would block all retries.
	DefaultRetryFloor  = 10
	DefaultRetryWindow = time.Minute
)

// ErrorClass is how an error status is treated (SPEC "Error classification").
type ErrorClass string

const (
	// ClassRetry: the request was not processed; retry after backoff.
	ClassRetry ErrorClass = "retry"
	// ClassUnknown: the effect may have happened.
	ClassUnknown ErrorClass = "unknown"
	// ClassFail: repeating identical data cannot help.
	ClassFail ErrorClass = "fail"
)

// Config is the parsed configuration file (see limbo.example.yaml).
type Config struct {
	// Destinations by name, as operations name them in `destination`.
	Destinations map[string]Destination `yaml:"destinations"`
	// RetryBudget limits retries per destination over a sliding window.
	RetryBudget RetryBudget `yaml:"retry_budget"`
	// RedactFields are payload members shown redacted on case pages until
	// a person asks (audited) to reveal them: card numbers, emails, …
	RedactFields []string `yaml:"redact_fields"`
	// PayloadRetention is how long an operation's payload is kept once the
	// operation is terminal (0 or absent: for as long as the ledger); an
	// action's retention wins over it. See RetentionFor.
	PayloadRetention time.Duration `yaml:"payload_retention"`
	// PurgeEvery is how often serve's payload-purge loop runs (default
	// DefaultPurgeEvery).
	PurgeEvery time.Duration `yaml:"purge_every"`
	// Webhooks configures the decision webhooks Limbo sends.
	Webhooks Webhooks `yaml:"webhooks"`
	// Audit configures the audit trail's signing key, anchor directory and
	// heartbeat (serve's --audit-key, --audit-anchor and --audit-seal-max
	// win over these).
	Audit AuditConfig `yaml:"audit"`
	// TrustedProxies are the reverse proxies (CIDR ranges) whose
	// X-Forwarded-For names the client; see ParseTrustedProxies. Empty: the
	// connection's peer is the client and forwarding headers are ignored.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Source is the file's text as read (for the read-only admin view).
	Source string `yaml:"-"`
}

// Webhooks configures outbound decision webhooks.
type Webhooks struct {
	// AllowInternal lists the internal targets webhook endpoints may name
	// (CIDRs or host names); every other internal address is refused, and
	// plain http is accepted only for targets listed here.
	AllowInternal AllowList `yaml:"allow_internal"`
}

// AuditConfig is the audit section of the configuration file.
type AuditConfig struct {
	// KeyFile holds the Ed25519 key that signs checkpoints (relative to the
	// configuration file's directory).
	KeyFile string `yaml:"key_file"`
	// AnchorDir receives a copy of every signed checkpoint, outside the
	// database.
	AnchorDir string `yaml:"anchor_dir"`
	// SealMax: a checkpoint at least this often, even when idle.
	SealMax time.Duration `yaml:"seal_max"`
}

// DefaultPurgeEvery is how often the payload purge runs when purge_every
// does not say.
const DefaultPurgeEvery = time.Hour

// RetentionFor is how long the payload of an operation of action at
// destination is kept once the operation is terminal: the action's
// retention when its policy states one (0: forever), else the top-level
// payload_retention (0 or absent: forever). Zero means never purged.
func (c *Config) RetentionFor(destination, action string) time.Duration {
	if c == nil {
		return 0
	}
	if ac, ok := c.Destinations[destination].Actions[action]; ok && ac.Retention != nil {
		return *ac.Retention
	}
	return c.PayloadRetention
}

// MinSealMax is the shortest heartbeat interval: the sealer runs about once
// a second and writes a heartbeat at half the interval.
const MinSealMax = 2 * time.Second

// RetryBudget is the retry budget of each tenant at each destination:
// retries ≤ Ratio × first attempts over Window, but always at least Floor.
// Kept per tenant × destination so one noisy tenant cannot spend another's.
type RetryBudget struct {
	Ratio  float64       `yaml:"ratio"`
	Floor  int           `yaml:"floor"`
	Window time.Duration `yaml:"window"`
}

// Allowed is how many retries the window allows after firsts first attempts.
func (b RetryBudget) Allowed(firsts int64) int64 {
	return max(int64(b.Floor), int64(b.Ratio*float64(firsts)))
}

// Destination is what a destination guarantees and how to treat it.
type Destination struct {
	// HonoursKeys: the destination deduplicates requests by idempotency key.
	// When false, idempotent_write is handled as compensable_write.
	HonoursKeys bool `yaml:"honours_keys"`
	// KeyRetention is how long the destination remembers a key (0: forever).
	// Past it, a retry could create a second effect, so idempotent_write is
	// handled as compensable_write.
	KeyRetention time.Duration `yaml:"key_retention"`
	// ConflictMeansInProgress: a 409 means "same key in progress" and is
	// retried later. Otherwise a 409 is a business error.
	ConflictMeansInProgress bool `yaml:"conflict_means_in_progress"`
	// QuotaCodes are provider codes that, on a 429, mean the quota is
	// exhausted (not transient).
	QuotaCodes []string `yaml:"quota_codes"`
	// Preset fills the defaults of a known kind of provider ("openai":
	// see presets.go); what the file states beside it wins.
	Preset string `yaml:"preset"`
	// HonoursShouldRetry: the provider's x-should-retry header, when an
	// answer carries one, decides retry (true) or fail (false).
	HonoursShouldRetry bool `yaml:"honours_should_retry"`
	// IdempotencyHeader is the header the grant's key travels in
	// (default Idempotency-Key). It is sent only when honours_keys says
	// the destination deduplicates by it.
	IdempotencyHeader string `yaml:"idempotency_header"`
	// Pricing prices a model call's token usage into the attempt's cost,
	// per model ("*": any model not listed), in cost units per million
	// tokens.
	Pricing map[string]ModelPrice `yaml:"pricing"`
	// Errors overrides the class of an HTTP status ("404": retry).
	Errors map[string]ErrorClass `yaml:"errors"`
	// Actions holds per-action overrides.
	Actions map[string]ActionConfig `yaml:"actions"`
	// Concurrency limits in-flight attempts to this destination (0: none).
	Concurrency int `yaml:"concurrency"`
	// PerCredential limits in-flight attempts per credential (0: none).
	PerCredential int `yaml:"per_credential"`
	// PerModel limits in-flight attempts per model (0: none).
	PerModel int `yaml:"per_model"`
	// ReservePriority keeps this many of Concurrency's slots for the
	// operations of actions whose policy says priority: a flood of ordinary
	// work cannot take the last one.
	// (Reconciliation has its own, ProbeConcurrency.)
	ReservePriority int `yaml:"reserve_priority"`
	// Lease is how long an attempt may run before it is presumed lost.
	Lease time.Duration `yaml:"lease"`
	// SearchLag is how long after a write the metadata search may not show it.
	SearchLag time.Duration `yaml:"search_lag"`
	// ConfirmWindow is how long after a proof of absence the destination
	// is still searched for a late write (Window); default 10 × search_lag.
	ConfirmWindow time.Duration `yaml:"confirm_window"`
	// Probes configure reconciliation against this destination.
	Probes Probes `yaml:"probes"`
	// Undo is the call that undoes one of this destination's resources
	// (DELETE {{.Ref}}, say). When set, Limbo's own worker runs the
	// compensations reviewers decide for this destination, through the
	// same ledger an integrator's attempts go through; when not, the
	// integrator runs them.
	Undo *Undo `yaml:"undo"`
	// AllowPostSearch lets the search probe be a POST: for a destination
	// whose search takes its query as a body. Every other probe is a GET.
	AllowPostSearch bool `yaml:"allow_post_search"`
	// WriteAuthEnv names the environment variable holding the credential
	// the integration writes with, when it is known here: the admin
	// destinations page warns when a probe's credential is the same one.
	WriteAuthEnv string `yaml:"write_auth_env"`
	// ProbeConcurrency is the probe traffic reserved for this destination,
	// apart from attempts, so a retry storm cannot starve reconciliation.
	ProbeConcurrency int `yaml:"probe_concurrency"`
	// AllowInternal lists the internal targets (CIDRs or host names) this
	// destination's probes may reach; every other loopback, private,
	// link-local, … address is refused at dial time.
	AllowInternal AllowList `yaml:"allow_internal"`
	// RemovedAllowLinkLocal catches the old allow_link_local key, so that
	// a file still carrying it fails with what to write instead rather
	// than as an unknown key.
	RemovedAllowLinkLocal *bool `yaml:"allow_link_local"`
	// WebhookSecrets verify the destination's signed webhooks at
	// POST /api/v1/inbound/{destination} (several, for key rotation).
	// WebhookSecretEnv names an environment variable holding one more.
	WebhookSecrets   []string `yaml:"webhook_secrets"`
	WebhookSecretEnv string   `yaml:"webhook_secret_env"`
}

// ActionConfig is one action's policy at its destination: the catalog
// entry a person answers for (owner, effects, what a duplicate costs), and
// the rules Limbo applies to every operation of it (PolicyFor, policy.go).
// `limbo policy lint` lists the entries missing an item of the production
// checklist (LintPolicies).
type ActionConfig struct {
	Errors map[string]ErrorClass `yaml:"errors"`
	// Owner is who answers for the action (a team or a person).
	Owner string `yaml:"owner"`
	// Effects says what one operation does at the destination.
	Effects string `yaml:"effects"`
	// DuplicateCost is what one duplicate costs: money ("EUR 40") or a
	// note ("the customer gets the email twice").
	DuplicateCost string `yaml:"duplicate_cost"`
	// KeyFields is the key recipe: the payload members (dotted paths) that
	// identify the intention. Two registrations under one key that differ
	// only in other members are the same intention. Empty (stated as []):
	// the whole payload identifies it.
	KeyFields []string `yaml:"key_fields"`
	// Evidence names what confirms an operation of this action: response,
	// status_lookup, metadata_search, webhook or reviewer.
	Evidence []EvidenceSource `yaml:"evidence"`
	// Risk is the action's risk. A registration that names none gets it;
	// one that names a lower one is refused.
	Risk Risk `yaml:"risk"`
	// Flags are added to every operation of the action.
	Flags []Flag `yaml:"flags"`
	// Deadline, MaxAttempts and CostBudget are the defaults, and the
	// limits, of what a registration may ask for.
	Deadline    time.Duration `yaml:"deadline"`
	MaxAttempts int           `yaml:"max_attempts"`
	// CostBudget: 0 stated means none.
	CostBudget *float64 `yaml:"cost_budget"`
	// MaxWait is the longest single wait before a retry: a destination
	// asking for longer (Retry-After) stops the retries.
	MaxWait time.Duration `yaml:"max_wait"`
	// EscalateOn lists the stop reasons (budget_exhausted,
	// deadline_expired) that send an operation to a person instead of
	// failing it.
	EscalateOn []Reason `yaml:"escalate_on"`
	// Concurrency limits this action's attempts in flight (0 stated: no
	// limit beyond the destination's).
	Concurrency *int `yaml:"concurrency"`
	// Priority: the action's operations may use the destination's slots
	// kept by reserve_priority (an on-call page, a payment capture before
	// its authorisation lapses).
	Priority bool `yaml:"priority"`
	// Tenants that may register the action (empty: every tenant).
	Tenants []string `yaml:"tenants"`
	// RedactFields are payload members shown redacted, beside the
	// configuration's redact_fields.
	RedactFields []string `yaml:"redact_fields"`
	// Retention is how long the payload is kept (0 stated: for as long as
	// the ledger).
	Retention *time.Duration `yaml:"retention"`
	// RequiresApproval: operations of this action start awaiting_approval,
	// with an approval case, and run only once approved.
	RequiresApproval bool `yaml:"requires_approval"`
	// Approvals is how many different reviewers must approve (0: one; a
	// financial, irreversible or regulated operation always needs two).
	Approvals int `yaml:"approvals"`
	// ApprovalTimeout is how long an approval may take (0:
	// DefaultApprovalTimeout). Past it, or past the operation's deadline,
	// the operation fails: an approval never given is a refusal.
	ApprovalTimeout time.Duration `yaml:"approval_timeout"`
	// Request is the destination's contract for the action's request
	// (request.go): a registration whose body breaks its schema is refused.
	Request *RequestContract `yaml:"request"`
}

// DefaultApprovalTimeout is how long an operation waits for its approval
// when the action's policy does not say.
const DefaultApprovalTimeout = 24 * time.Hour

// MaxApprovals bounds an action's approvals.
const MaxApprovals = 5

// Probes are the HTTP requests the reconciler sends to settle an ambiguous
// operation. URLs are templates over the operation's fields.
type Probes struct {
	Status *Probe `yaml:"status"`
	Search *Probe `yaml:"search"`
	// Job looks up an accepted operation's job ({{.JobRef}}); its answer
	// names status, output_ref and logical_version.
	Job *Probe `yaml:"job"`
	// History lists a resource's versions ({{.ResourceRef}}): when a
	// search finds the operation's resource at another version, whether
	// this operation's version ever existed there. Candidates is the path
	// of the version list; each names its operation_id and version.
	History *Probe `yaml:"history"`
}

// Probe is one configured HTTP request and how to read its answer.
type Probe struct {
	// Method is GET (the default). A probe is read-only by construction:
	// only a search may be a POST, and only where the destination says
	// allow_post_search (some search APIs take their query as a body).
	Method string `yaml:"method"`
	URL    string `yaml:"url"`
	// Body is a POST search's JSON body, a template over the operation's
	// fields, each escaped as JSON string content
	// ({"operation_id": "{{.ID}}"}).
	Body string `yaml:"body"`
	// AuthHeader is sent with the value of the environment variable AuthEnv.
	// When that variable is unset or empty, the destination's probes are not
	// sent at all (see MissingCredentials): an unauthenticated answer is no
	// evidence.
	AuthHeader string        `yaml:"auth_header"`
	AuthEnv    string        `yaml:"auth_env"`
	Timeout    time.Duration `yaml:"timeout"`
	// Candidates is the JSON path of the candidate list in the answer.
	Candidates string `yaml:"candidates"`
	// Next is the JSON path of the next page's cursor in a search's answer
	// ("$.next"); CursorParam is the query parameter that sends it back.
	// A search is read page by page until the cursor is absent, null or
	// empty, at most MaxSearchPages pages: one that does not end by then
	// proves nothing. Only the search probe pages.
	Next        string `yaml:"next"`
	CursorParam string `yaml:"cursor_param"`
}

// MaxSearchPages bounds how many pages of one search a reconciliation round
// reads. A search with more pages is inconclusive, never absence: what the
// unread pages hold is unknown.
const MaxSearchPages = 20

// SafeDestination is what an unconfigured destination gets: nothing is
// assumed, so keys are not honoured and a 409 is not retried.
func SafeDestination() Destination {
	return Destination{Lease: DefaultLease}
}

// Destination returns the settings for name, or the safe defaults.
func (c *Config) Destination(name string) Destination {
	if c != nil {
		if d, ok := c.Destinations[name]; ok {
			return d
		}
	}
	return SafeDestination()
}

// Budget returns the retry budget with defaults filled in.
func (c *Config) Budget() RetryBudget {
	b := RetryBudget{Ratio: DefaultRetryRatio, Floor: DefaultRetryFloor, Window: DefaultRetryWindow}
	if c == nil {
		return b
	}
	if c.RetryBudget.Ratio > 0 {
		b.Ratio = c.RetryBudget.Ratio
	}
	if c.RetryBudget.Floor > 0 {
		b.Floor = c.RetryBudget.Floor
	}
	if c.RetryBudget.Window > 0 {
		b.Window = c.RetryBudget.Window
	}
	return b
}

// RequiresApproval reports whether operations of action at destination must
// be approved before their first attempt.
func (d Destination) RequiresApproval(action string) bool {
	return d.Actions[action].RequiresApproval
}

// ApprovalsNeeded is how many different reviewers must approve op before
// it runs: the action's policy (at least one), and two for a financial,
// irreversible or regulated operation.
func (d Destination) ApprovalsNeeded(op *Operation) int {
	n := max(d.Actions[op.Action].Approvals, 1)
	if RetryNeedsReviewer(op) || op.HasFlag(FlagRegulated) {
		n = max(n, 2)
	}
	return n
}

// PolicyApprovals is how many different reviewers an approval of the
// action's operations takes under policy ac: its approvals (at least one),
// and two when the policy makes them irreversible, financial or regulated
// (ApprovalsNeeded, for an operation that carries no more flags than its
// policy gives it).
func PolicyApprovals(ac ActionConfig) int {
	n := max(ac.Approvals, 1)
	if needsApprovalPolicy(ac) {
		n = max(n, 2)
	}
	return n
}

// ApprovalExpiry is when an operation registered at now stops waiting for
// its approval: the action's timeout, or its deadline if that comes first.
func (d Destination) ApprovalExpiry(action string, deadline, now time.Time) time.Time {
	t := d.Actions[action].ApprovalTimeout
	if t <= 0 {
		t = DefaultApprovalTimeout
	}
	if at := now.Add(t); deadline.IsZero() || at.Before(deadline) {
		return at
	}
	return deadline
}

// ParseConfig reads a YAML configuration strictly: unknown keys are errors,
// so a typo cannot silently fall back to a default, and so is a second
// document (after a "---"), which would otherwise never be read: its
// destinations silently dropped, its typos unnoticed.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: config: %s", ErrInvalid, yamlProblem(err))
	}
	// A second document would be dropped without a word. An empty one —
	// a file ending in "---", as generated YAML often does, or only a
	// comment after it — drops nothing.
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && emptyDocument(&next) {
			continue
		}
		where := ""
		if err == nil {
			where = fmt.Sprintf(" at line %d", next.Line)
		}
		return nil, fmt.Errorf("%w: config: a second YAML document%s (after a \"---\"): the configuration is one document; remove the \"---\"", ErrInvalid, where)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.Source = string(data)
	return &c, nil
}

// emptyDocument says whether a YAML document holds nothing: no node, or
// only a null.
func emptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode {
		return len(n.Content) == 0 || len(n.Content) == 1 && emptyDocument(n.Content[0])
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// yamlTypeError is one line of a yaml.TypeError: a key the configuration
// does not have, or a value of the wrong type.
var yamlTypeError = regexp.MustCompile("^(line \\d+: )?(?:field (\\S+) not found in type \\S+|cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+))$")

// yamlProblem is a YAML decoding error in the configuration's words: an
// unknown key or a value of the wrong type by line, without the Go types
// the decoder names ("field bogus not found in type review.Config").
func yamlProblem(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	lines := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		m := yamlTypeError.FindStringSubmatch(e)
		switch {
		case m == nil:
			lines[i] = e
		case m[2] != "":
			lines[i] = fmt.Sprintf("%sunknown key %q", m[1], m[2])
		case m[3] == "seq":
			lines[i] = fmt.Sprintf("%sa list is not %s", m[1], yamlKind(m[5]))
		case m[3] == "map":
			lines[i] = fmt.Sprintf("%sa mapping is not %s", m[1], yamlKind(m[5]))
		default:
			lines[i] = fmt.Sprintf("%s%q is not %s", m[1], m[4], yamlKind(m[5]))
		}
	}
	return strings.Join(lines, "; ")
}

// yamlKind says what a value of Go type t is written as in the file.
func yamlKind(t string) string {
	if t == "time.Duration" {
		return "a duration (write it with a unit: 30s, 5m, 2h)"
	}
	switch configKinds[t] {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a mapping of keys"
}

// configKinds is the kind of every type Config holds, by the name the YAML
// decoder gives it ("review.Risk", "[]review.Flag"), for yamlKind.
var configKinds = func() map[string]reflect.Kind {
	kinds := map[string]reflect.Kind{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if _, seen := kinds[t.String()]; seen {
			return
		}
		kinds[t.String()] = t.Kind()
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				walk(t.Field(i).Type)
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	return kinds
}()

// ParseTrustedProxies reads trusted proxy ranges in CIDR notation
// ("10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"). A bare address or a /0
// is refused: /0 would trust every peer, so any client could name its own
// address in X-Forwarded-For and slip past per-address throttling.
func ParseTrustedProxies(ranges []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, r := range ranges {
		r = strings.TrimSpace(r)
		_, n, err := net.ParseCIDR(r)
		if err != nil {
			return nil, fmt.Errorf("%w: trusted_proxies: %q is not a CIDR range (write 192.0.2.7/32 for one address)", ErrInvalid, r)
		}
		if ones, _ := n.Mask.Size(); ones == 0 {
			return nil, fmt.Errorf("%w: trusted_proxies: %q trusts every address; name the proxies' own ranges", ErrInvalid, r)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c *Config) validate() error {
	if err := c.normalizeNames(); err != nil {
		return err
	}
	if _, err := ParseTrustedProxies(c.TrustedProxies); err != nil {
		return err
	}
	if c.RetryBudget.Ratio < 0 || c.RetryBudget.Ratio > 1 {
		return fmt.Errorf("%w: config: retry_budget.ratio must be between 0 and 1", ErrInvalid)
	}
	if c.RetryBudget.Floor < 0 || c.RetryBudget.Window < 0 {
		return fmt.Errorf("%w: config: retry_budget.floor and retry_budget.window must not be negative", ErrInvalid)
	}
	if c.PayloadRetention < 0 || c.PurgeEvery < 0 {
		return fmt.Errorf("%w: config: payload_retention and purge_every must not be negative", ErrInvalid)
	}
	if c.PurgeEvery != 0 && c.PurgeEvery < time.Second {
		return fmt.Errorf("%w: config: purge_every must be at least 1s", ErrInvalid)
	}
	if c.Audit.SealMax != 0 && c.Audit.SealMax < MinSealMax {
		return fmt.Errorf("%w: config: audit.seal_max must be at least %s", ErrInvalid, MinSealMax)
	}
	names := c.destinationNames()
	for _, n := range names {
		d := c.Destinations[n]
		if err := d.applyPreset(n); err != nil {
			return err
		}
		if d.Lease == 0 {
			d.Lease = DefaultLease
		}
		if d.Lease < time.Second {
			return fmt.Errorf("%w: config: destination %q: lease must be at least 1s", ErrInvalid, n)
		}
		if d.Concurrency < 0 || d.PerCredential < 0 || d.PerModel < 0 || d.ReservePriority < 0 {
			return fmt.Errorf("%w: config: destination %q: limits must not be negative", ErrInvalid, n)
		}
		if d.ReservePriority > 0 && d.ReservePriority >= d.Concurrency {
			return fmt.Errorf("%w: config: destination %q: reserve_priority (%d) must be below concurrency (%d), "+
				"which it is a part of", ErrInvalid, n, d.ReservePriority, d.Concurrency)
		}
		if d.RemovedAllowLinkLocal != nil {
			return fmt.Errorf("%w: config: destination %q: allow_link_local is no longer read: remove it, and list the internal "+
				"targets this destination's probes may reach under allow_internal instead, e.g. allow_internal: [169.254.169.254] "+
				"or allow_internal: [10.0.0.0/8, files.internal]", ErrInvalid, n)
		}
		if d.KeyRetention < 0 || d.SearchLag < 0 || d.ConfirmWindow < 0 {
			return fmt.Errorf("%w: config: destination %q: key_retention, search_lag and confirm_window must not be negative", ErrInvalid, n)
		}
		for _, kp := range d.Probes.all() {
			p := kp.probe
			if p.Timeout < 0 {
				return fmt.Errorf("%w: config: destination %q: probe timeout must not be negative", ErrInvalid, n)
			}
			if err := p.check(kp.kind, d.AllowPostSearch); err != nil {
				return fmt.Errorf("%w: config: destination %q: %s probe: %v", ErrInvalid, n, kp.kind, err)
			}
		}
		if err := checkErrors(d.Errors); err != nil {
			return fmt.Errorf("%w: config: destination %q: %v", ErrInvalid, n, err)
		}
		if d.Undo != nil {
			if err := d.Undo.check(); err != nil {
				return fmt.Errorf("%w: config: destination %q: undo: %v", ErrInvalid, n, err)
			}
		}
		for a, ac := range d.Actions {
			if err := checkErrors(ac.Errors); err != nil {
				return fmt.Errorf("%w: config: destination %q action %q: %v", ErrInvalid, n, a, err)
			}
			if ac.Approvals < 0 || ac.Approvals > MaxApprovals || ac.ApprovalTimeout < 0 {
				return fmt.Errorf("%w: config: destination %q action %q: approvals must be between 0 and %d, approval_timeout not negative",
					ErrInvalid, n, a, MaxApprovals)
			}
			if err := ac.check(); err != nil {
				return fmt.Errorf("%w: config: destination %q action %q: %v", ErrInvalid, n, a, err)
			}
			if ac.Request != nil {
				if err := ac.Request.compile(n + "/" + a); err != nil {
					return fmt.Errorf("%w: config: destination %q action %q: %v", ErrInvalid, n, a, err)
				}
			}
		}
		c.Destinations[n] = d
	}
	return nil
}

// normalizeNames writes destination and action names, and the tenants an
// action is open to, in NFC, as a registration's are (Normalize): a name
// typed decomposed ("cafe" and a combining accent, as macOS file names
// spell it) matched no operation, so its destination's configuration and
// its action's policy, approval and retention included, applied to
// nothing, without a word. Two names written differently that are the
// same in NFC are refused.
func (c *Config) normalizeNames() error {
	if len(c.Destinations) == 0 {
		return nil
	}
	dests := make(map[string]Destination, len(c.Destinations))
	for _, n := range c.destinationNames() {
		d := c.Destinations[n]
		if _, dup := dests[NFC(n)]; dup {
			return fmt.Errorf("%w: config: destination %q is named twice (two spellings of one name in Unicode)", ErrInvalid, NFC(n))
		}
		if len(d.Actions) > 0 {
			acts := make(map[string]ActionConfig, len(d.Actions))
			for _, a := range slices.Sorted(maps.Keys(d.Actions)) {
				ac := d.Actions[a]
				if _, dup := acts[NFC(a)]; dup {
					return fmt.Errorf("%w: config: destination %q: action %q is named twice (two spellings of one name in Unicode)", ErrInvalid, NFC(n), NFC(a))
				}
				for i, t := range ac.Tenants {
					ac.Tenants[i] = NFC(t)
				}
				acts[NFC(a)] = ac
			}
			d.Actions = acts
		}
		dests[NFC(n)] = d
	}
	c.Destinations = dests
	return nil
}

// Undo is a destination's undo call: an HTTP request whose URL is a Go
// template over the compensation (UndoFields), sent with the
// compensation's key in the destination's idempotency_header (default
// Idempotency-Key). A 2xx answer means the resource
// is undone; any other answer is classified like an attempt's.
type Undo struct {
	// Method is DELETE (the default) or POST.
	Method     string        `yaml:"method"`
	URL        string        `yaml:"url"`
	AuthHeader string        `yaml:"auth_header"`
	AuthEnv    string        `yaml:"auth_env"`
	Timeout    time.Duration `yaml:"timeout"`
}

// UndoFields are what an undo URL template may name, each URL-escaped:
// {{.Ref}} the resource to undo, {{.ID}} and {{.Key}} the compensation
// operation's, {{.ParentID}} the operation whose effect it undoes, and
// {{.Tenant}}.
type UndoFields struct {
	Ref, ID, Key, ParentID, Tenant string
}

// DefaultUndoTimeout bounds one undo request when the configuration names none.
const DefaultUndoTimeout = 10 * time.Second

// check validates an undo call: method, URL template (run once on sample
// fields, so a misspelt field fails at start, not on the first undo),
// credential pair and timeout.
func (u *Undo) check() error {
	if u.Method == "" {
		u.Method = "DELETE"
	}
	if u.Method != "DELETE" && u.Method != "POST" {
		return fmt.Errorf("method must be DELETE or POST, got %q", u.Method)
	}
	if !strings.HasPrefix(u.URL, "http://") && !strings.HasPrefix(u.URL, "https://") {
		return fmt.Errorf("url must start with http:// or https://, got %q", u.URL)
	}
	t, err := template.New("url").Option("missingkey=error").Parse(u.URL)
	if err != nil {
		return fmt.Errorf("url template: %v", err)
	}
	if err := t.Execute(io.Discard, UndoFields{Ref: "r"}); err != nil {
		return fmt.Errorf("url template: %v", err)
	}
	if !strings.Contains(u.URL, ".Ref") {
		return errors.New("url must name the resource to undo, {{.Ref}}")
	}
	if (u.AuthHeader == "") != (u.AuthEnv == "") {
		return errors.New("auth_header and auth_env go together: name the header and the environment variable holding its value")
	}
	if u.AuthHeader != "" && !validHeaderName(u.AuthHeader) {
		return fmt.Errorf("auth_header %q is not an HTTP header name", u.AuthHeader)
	}
	if u.Timeout < 0 {
		return errors.New("timeout must not be negative")
	}
	if u.Timeout == 0 {
		u.Timeout = DefaultUndoTimeout
	}
	return nil
}

func checkErrors(m map[string]ErrorClass) error {
	for k, v := range m {
		s, err := strconv.Atoi(k)
		// The key must be written exactly as Classify looks it up ("404",
		// not "0404" or "+404"), or the override would never apply.
		if err != nil || s < 100 || s > 599 || strconv.Itoa(s) != k {
			return fmt.Errorf("errors: %q is not an HTTP status", k)
		}
		if v != ClassRetry && v != ClassUnknown && v != ClassFail {
			return fmt.Errorf("errors: %q: class must be retry, unknown or fail, got %q", k, v)
		}
	}
	return nil
}

// check validates a probe's URL template and method, its credential and
// paging settings; kind is "status", "search", "job" or "history".
// postSearch: the destination allows a POST search.
func (p *Probe) check(kind string, postSearch bool) error {
	switch {
	case p.Method == "" || p.Method == "GET":
		if p.Body != "" {
			return errors.New("body is sent only by a POST search")
		}
	case p.Method == "POST" && kind == "search" && postSearch:
		if _, err := template.New("body").Parse(p.Body); err != nil {
			return fmt.Errorf("body template: %v", err)
		}
	case p.Method == "POST" && kind == "search":
		return errors.New("method POST: a probe is read-only, so a search is a GET unless the destination says allow_post_search: true")
	default:
		return fmt.Errorf("method must be GET (a probe only reads), got %q", p.Method)
	}
	if _, err := template.New("url").Parse(p.URL); err != nil {
		return fmt.Errorf("url template: %v", err)
	}
	if !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
		return fmt.Errorf("url must start with http:// or https://, got %q", p.URL)
	}
	// One without the other would send no credential, or send a header
	// nobody set, and the probe would read an unauthenticated answer.
	if (p.AuthHeader == "") != (p.AuthEnv == "") {
		return errors.New("auth_header and auth_env go together: name the header and the environment variable holding its value")
	}
	if p.AuthHeader != "" && !validHeaderName(p.AuthHeader) {
		return fmt.Errorf("auth_header %q is not an HTTP header name", p.AuthHeader)
	}
	if err := checkJSONPath("candidates", p.Candidates); err != nil {
		return err
	}
	if p.Next == "" && p.CursorParam == "" {
		return nil
	}
	switch {
	case kind != "search":
		return errors.New("next and cursor_param page a search; a status or job lookup answers one thing")
	case p.Next == "" || p.CursorParam == "":
		return errors.New("next (where the answer holds the next page's cursor) and cursor_param (the query parameter that sends it) go together")
	case JSONPath(p.Candidates) == nil:
		return errors.New("next needs candidates to name a member of the answer (e.g. $.results): an answer that is itself the list has no room for a cursor")
	case !validQueryName(p.CursorParam):
		return fmt.Errorf("cursor_param %q is not a plain query parameter name", p.CursorParam)
	}
	return checkJSONPath("next", p.Next)
}

// JSONPath splits a dot path of the kind candidates and next hold ("$",
// "", "results", "$.meta.next") into its member names; nil for the answer
// itself.
func JSONPath(path string) []string {
	var out []string
	for _, part := range strings.Split(strings.TrimPrefix(path, "$."), ".") {
		if part != "" && part != "$" {
			out = append(out, part)
		}
	}
	return out
}

// checkJSONPath refuses a path with an empty step ("$..x", "a.") or one
// that is not a dot path at all ("results[0]", "$['a']"): it would never
// name what the operator meant.
func checkJSONPath(field, path string) error {
	if path == "" || path == "$" {
		return nil
	}
	rest := strings.TrimPrefix(path, "$.")
	for _, part := range strings.Split(rest, ".") {
		if part == "" || strings.ContainsAny(part, "[]'\"$*") {
			return fmt.Errorf("%s %q is not a dot path of member names, like $.results", field, path)
		}
	}
	return nil
}

func validHeaderName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

func validQueryName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return s != ""
}

// kindProbe is a configured probe with its kind.
type kindProbe struct {
	kind  string
	probe *Probe
}

// all lists the configured probes, in the order the reconciler sends them.
func (ps Probes) all() []kindProbe {
	var out []kindProbe
	for _, kp := range []kindProbe{{"status", ps.Status}, {"search", ps.Search}, {"job", ps.Job}, {"history", ps.History}} {
		if kp.probe != nil {
			out = append(out, kp)
		}
	}
	return out
}

// MissingCredential is a probe whose credential is not set: its auth_env
// names an environment variable that is unset or empty.
type MissingCredential struct {
	Destination string
	// Probe is "status", "search", "job", "history" or "undo".
	Probe string
	Env   string
}

// String says what is missing and what follows, for logs and /readyz.
func (m MissingCredential) String() string {
	if m.Probe == "undo" {
		return fmt.Sprintf("destination %q: the undo call's credential %s is not set; Limbo does not run this destination's "+
			"compensations, which wait for the integrator to run them", m.Destination, m.Env)
	}
	return fmt.Sprintf("destination %q: the %s probe's credential %s is not set; this destination's probes are not sent, "+
		"so reconciliation against it proves nothing and its ambiguous operations go to review", m.Destination, m.Probe, m.Env)
}

// MissingCredentials lists the environment variables the destination's
// probes name in auth_env that getenv reports unset or empty, once each.
// Any one missing keeps all the destination's probes from being sent.
func (d Destination) MissingCredentials(getenv func(string) string) []string {
	var out []string
	for _, kp := range d.Probes.all() {
		if e := kp.probe.AuthEnv; e != "" && getenv(e) == "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// MissingCredentials lists every configured probe whose credential getenv
// reports unset or empty, by destination name.
func (c *Config) MissingCredentials(getenv func(string) string) []MissingCredential {
	if c == nil {
		return nil
	}
	names := c.destinationNames()
	var out []MissingCredential
	for _, n := range names {
		for _, kp := range c.Destinations[n].Probes.all() {
			if e := kp.probe.AuthEnv; e != "" && getenv(e) == "" {
				out = append(out, MissingCredential{Destination: n, Probe: kp.kind, Env: e})
			}
		}
		if u := c.Destinations[n].Undo; u != nil && u.AuthEnv != "" && getenv(u.AuthEnv) == "" {
			out = append(out, MissingCredential{Destination: n, Probe: "undo", Env: u.AuthEnv})
		}
	}
	return out
}

// ProbeCredential is which credential one of a destination's probes is
// sent with, for the admin destinations page: probes should read with a
// credential of their own, never the one that writes.
type ProbeCredential struct {
	Destination string
	// Probe is "status", "search", "job" or "history".
	Probe       string
	Method, URL string
	// Env names the credential's environment variable ("" for none); Set
	// reports whether it holds a value.
	Env string
	Set bool
	// SharesWrite, when not empty, says how the probe shares a write
	// credential: the integration's (write_auth_env) or the undo call's.
	SharesWrite string
}

// ProbeCredentials lists every configured probe with its credential, by
// destination name, and whether it shares a write credential — by name,
// or by value when two variables hold the same secret.
func (c *Config) ProbeCredentials(getenv func(string) string) []ProbeCredential {
	if c == nil {
		return nil
	}
	names := c.destinationNames()
	var out []ProbeCredential
	for _, n := range names {
		d := c.Destinations[n]
		writes := []struct{ what, env string }{{"the integration's write credential", d.WriteAuthEnv}}
		if d.Undo != nil {
			writes = append(writes, struct{ what, env string }{"the undo call's credential", d.Undo.AuthEnv})
		}
		for _, kp := range d.Probes.all() {
			pc := ProbeCredential{Destination: n, Probe: kp.kind, Method: cmp.Or(kp.probe.Method, "GET"), URL: kp.probe.URL,
				Env: kp.probe.AuthEnv, Set: kp.probe.AuthEnv != "" && getenv(kp.probe.AuthEnv) != ""}
			for _, w := range writes {
				switch {
				case pc.Env == "" || w.env == "":
				case pc.Env == w.env:
					pc.SharesWrite = fmt.Sprintf("%s is also %s (%s)", pc.Env, w.what, w.env)
				case pc.Set && getenv(pc.Env) == getenv(w.env):
					pc.SharesWrite = fmt.Sprintf("%s holds the same value as %s (%s)", pc.Env, w.what, w.env)
				}
				if pc.SharesWrite != "" {
					break
				}
			}
			out = append(out, pc)
		}
	}
	return out
}

// destinationNames lists the configured destinations by name, in order.
func (c *Config) destinationNames() []string {
	return slices.Sorted(maps.Keys(c.Destinations))
}
