package review

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const fullConfig = `
destinations:
  files:
    honours_keys: true
    key_retention: 24h
    conflict_means_in_progress: true
    quota_codes: [quota_exceeded]
    errors:
      "404": retry
      "502": unknown
    actions:
      convert_pdf:
        errors:
          "422": retry
        requires_approval: false
      delete_folder:
        requires_approval: true
    concurrency: 20
    per_credential: 5
    per_model: 2
    lease: 2m
    search_lag: 30s
    allow_post_search: true
    probes:
      status:
        method: GET
        url: https://files.example.com/v1/jobs/{{.Resource.Ref}}
        auth_header: Authorization
        auth_env: FILES_API_TOKEN
        timeout: 10s
        candidates: $.items
      search:
        method: POST
        url: https://files.example.com/v1/search
        body: '{"operation_id": "{{.ID}}"}'
        timeout: 15s
        candidates: $.results
  mail:
    honours_keys: false
retry_budget:
  ratio: 0.2
  floor: 3
  window: 5m
`

func TestParseConfigFull(t *testing.T) {
	c, err := ParseConfig([]byte(fullConfig))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	want := Destination{
		HonoursKeys:             true,
		KeyRetention:            24 * time.Hour,
		ConflictMeansInProgress: true,
		QuotaCodes:              []string{"quota_exceeded"},
		Errors:                  map[string]ErrorClass{"404": ClassRetry, "502": ClassUnknown},
		Actions: map[string]ActionConfig{
			"convert_pdf":   {Errors: map[string]ErrorClass{"422": ClassRetry}},
			"delete_folder": {RequiresApproval: true},
		},
		Concurrency:     20,
		PerCredential:   5,
		PerModel:        2,
		Lease:           2 * time.Minute,
		SearchLag:       30 * time.Second,
		AllowPostSearch: true,
		Probes: Probes{
			Status: &Probe{Method: "GET", URL: "https://files.example.com/v1/jobs/{{.Resource.Ref}}",
				AuthHeader: "Authorization", AuthEnv: "FILES_API_TOKEN", Timeout: 10 * time.Second, Candidates: "$.items"},
			Search: &Probe{Method: "POST", URL: "https://files.example.com/v1/search", Body: `{"operation_id": "{{.ID}}"}`, Timeout: 15 * time.Second, Candidates: "$.results"},
		},
	}
	if got := c.Destination("files"); !reflect.DeepEqual(got, want) {
		t.Errorf("Destination(files) =\n%+v\nwant\n%+v", got, want)
	}
	mail := c.Destination("mail")
	if mail.HonoursKeys || mail.Lease != DefaultLease {
		t.Errorf("Destination(mail) = %+v, want keys not honoured and the default lease", mail)
	}
	if got, want := c.Budget(), (RetryBudget{Ratio: 0.2, Floor: 3, Window: 5 * time.Minute}); got != want {
		t.Errorf("Budget() = %+v, want %+v", got, want)
	}
	if !c.Destination("files").RequiresApproval("delete_folder") {
		t.Errorf("delete_folder should require approval")
	}
	if c.Destination("files").RequiresApproval("convert_pdf") || c.Destination("files").RequiresApproval("nope") {
		t.Errorf("only delete_folder requires approval")
	}
}

func TestParseConfigExampleFile(t *testing.T) {
	data, err := os.ReadFile("../limbo.example.yaml")
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("ParseConfig(limbo.example.yaml): %v", err)
	}
	files, ok := c.Destinations["files"]
	if !ok {
		t.Fatalf("example has no destination files: %+v", c.Destinations)
	}
	if ps, err := ParseTrustedProxies(c.TrustedProxies); err != nil || len(ps) == 0 {
		t.Errorf("example trusted_proxies: %v %v", ps, err)
	}
	// Every field is set somewhere in the example, so its documentation is
	// exercised by the parser.
	switch {
	case !files.HonoursKeys, files.KeyRetention == 0, !files.ConflictMeansInProgress, len(files.QuotaCodes) == 0,
		len(files.Errors) == 0, len(files.Actions) == 0, files.Concurrency == 0, files.PerCredential == 0,
		files.Lease == 0, files.SearchLag == 0, files.Probes.Status == nil, files.Probes.Search == nil,
		files.Probes.Job == nil, files.ProbeConcurrency == 0, len(files.WebhookSecrets) == 0, files.WebhookSecretEnv == "",
		files.AllowInternal.Empty():
		t.Errorf("example destination files leaves a field unset: %+v", files)
	}
	for name, p := range map[string]*Probe{"status": files.Probes.Status, "search": files.Probes.Search} {
		if p == nil {
			continue
		}
		if p.Method == "" || p.URL == "" || p.AuthHeader == "" || p.AuthEnv == "" || p.Timeout == 0 || p.Candidates == "" {
			t.Errorf("example probe %s leaves a field unset: %+v", name, p)
		}
	}
	if s := files.Probes.Search; s != nil && (s.Next == "" || s.CursorParam == "") {
		t.Errorf("example search probe does not show paging: %+v", s)
	}
	var approval, actionErrors bool
	for _, a := range files.Actions {
		approval = approval || a.RequiresApproval
		actionErrors = actionErrors || len(a.Errors) > 0
	}
	if !approval || !actionErrors {
		t.Errorf("example actions should show requires_approval and errors: %+v", files.Actions)
	}
	if c.RetryBudget == (RetryBudget{}) {
		t.Errorf("example has no retry_budget")
	}
	if c.Audit.KeyFile == "" || c.Audit.AnchorDir == "" || c.Audit.SealMax != 60*time.Second {
		t.Errorf("example audit section = %+v, want every field shown", c.Audit)
	}
	if got, want := c.Budget(), (RetryBudget{Ratio: DefaultRetryRatio, Floor: DefaultRetryFloor, Window: DefaultRetryWindow}); got != want {
		t.Errorf("example retry_budget = %+v, want the documented defaults %+v", got, want)
	}
}

// probeYAML is a destination with one probe of kind and the extra lines.
func probeYAML(kind, extra string) string {
	return "destinations:\n  files:\n    probes:\n      " + kind + ":\n        url: https://files.example.com/x\n        " + extra
}

// TestParseConfigPaging: a paged search names the cursor's place in the
// answer and the query parameter that sends it back.
func TestParseConfigPaging(t *testing.T) {
	c, err := ParseConfig([]byte(probeYAML("search", "candidates: $.results\n        next: $.meta.next\n        cursor_param: page_token")))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Destination("files").Probes.Search
	if p.Next != "$.meta.next" || p.CursorParam != "page_token" || !slices.Equal(JSONPath(p.Next), []string{"meta", "next"}) {
		t.Errorf("search probe = %+v", p)
	}
}

func TestParseConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // a fragment of the error
	}{
		{"unknown top-level key", "destinatons: {}", "destinatons"},
		{"unknown destination key", "destinations:\n  files:\n    honors_keys: true", "honors_keys"},
		{"unknown action key", "destinations:\n  files:\n    actions:\n      a:\n        require_approval: true", "require_approval"},
		{"unknown probe key", "destinations:\n  files:\n    probes:\n      status:\n        verb: GET", "verb"},
		{"unknown probe kind", "destinations:\n  files:\n    probes:\n      lookup: {}", "lookup"},
		{"unknown retry_budget key", "retry_budget:\n  ratio_pct: 10", "ratio_pct"},
		{"status not a number", "destinations:\n  files:\n    errors:\n      \"5xx\": retry", "5xx"},
		{"status too low", "destinations:\n  files:\n    errors:\n      \"99\": retry", "99"},
		{"status too high", "destinations:\n  files:\n    errors:\n      \"600\": fail", "600"},
		{"bad class", "destinations:\n  files:\n    errors:\n      \"404\": ignore", "ignore"},
		{"empty class", "destinations:\n  files:\n    errors:\n      \"404\": \"\"", "404"},
		{"bad action status", "destinations:\n  files:\n    actions:\n      a:\n        errors:\n          \"abc\": retry", "abc"},
		{"bad action class", "destinations:\n  files:\n    actions:\n      a:\n        errors:\n          \"404\": maybe", "maybe"},
		{"lease too short", "destinations:\n  files:\n    lease: 500ms", "lease"},
		{"negative lease", "destinations:\n  files:\n    lease: -1s", "lease"},
		{"negative concurrency", "destinations:\n  files:\n    concurrency: -1", "limits"},
		{"negative per_credential", "destinations:\n  files:\n    per_credential: -1", "limits"},
		{"negative per_model", "destinations:\n  files:\n    per_model: -2", "limits"},
		{"ratio above 1", "retry_budget:\n  ratio: 1.5", "ratio"},
		{"negative ratio", "retry_budget:\n  ratio: -0.1", "ratio"},
		{"bad duration", "destinations:\n  files:\n    key_retention: one day", "line 3"},
		{"wrong type", "destinations:\n  files:\n    honours_keys: sometimes", "line 3"},
		{"status as a YAML number is rejected, not misread", "destinations:\n  files:\n    errors:\n      4.04: retry", "4.04"},
		{"not a mapping", "- a\n- b", ""},
		{"allow_link_local says what to write instead", "destinations:\n  files:\n    allow_link_local: true", "allow_internal: [169.254.169.254]"},
		{"allow_link_local false too", "destinations:\n  files:\n    allow_link_local: false", "allow_link_local is no longer read"},
		{"allow_internal not a list", "destinations:\n  files:\n    allow_internal: 10.0.0.0/8", "line 3"},
		{"allow_internal bad CIDR", "destinations:\n  files:\n    allow_internal: [10.0.0.0/33]", "10.0.0.0/33"},
		{"allow_internal host bits", "webhooks:\n  allow_internal: [10.0.0.5/8]", "did you mean 10.0.0.0/8"},
		{"allow_internal URL", "webhooks:\n  allow_internal: [\"http://hooks.internal\"]", "plain host name"},
		{"allow_internal port", "webhooks:\n  allow_internal: [\"hooks.internal:8443\"]", "hooks.internal:8443"},
		{"allow_internal wildcard", "webhooks:\n  allow_internal: [\"*.internal\"]", "wildcard"},
		{"allow_internal zone", "webhooks:\n  allow_internal: [\"fe80::1%eth0\"]", "zone"},
		{"unknown webhooks key", "webhooks:\n  allow: [a]", "allow"},
		{"unknown audit key", "audit:\n  anchor: /tmp/a", "anchor"},
		{"heartbeat too short", "audit:\n  seal_max: 1s", "seal_max"},
		{"trusted proxy not a CIDR", "trusted_proxies: [10.0.0.1]", "10.0.0.1"},
		{"trusted proxy garbage", "trusted_proxies: [\"proxy.example.com/24\"]", "proxy.example.com"},
		{"trusted proxy /0 trusts everyone", "trusted_proxies: [0.0.0.0/0]", "every address"},
		{"trusted proxy IPv6 /0", "trusted_proxies: [\"::/0\"]", "every address"},
		{"trusted proxies not a list", "trusted_proxies: 10.0.0.0/8", "line 1"},
		{"auth_env without auth_header", probeYAML("search", "auth_env: TOKEN"), "auth_header and auth_env go together"},
		{"auth_header without auth_env", probeYAML("status", "auth_header: Authorization"), "auth_header and auth_env go together"},
		{"auth_header not a header name", probeYAML("job", "auth_header: \"Bearer x\"\n        auth_env: TOKEN"), "not an HTTP header name"},
		{"next without cursor_param", probeYAML("search", "candidates: $.results\n        next: $.next"), "go together"},
		{"cursor_param without next", probeYAML("search", "candidates: $.results\n        cursor_param: cursor"), "go together"},
		{"next on a status lookup", probeYAML("status", "candidates: $.items\n        next: $.next\n        cursor_param: c"), "page a search"},
		{"next on a job probe", probeYAML("job", "next: $.next\n        cursor_param: c"), "page a search"},
		{"next beside a bare list", probeYAML("search", "candidates: $\n        next: $.next\n        cursor_param: c"), "name a member"},
		{"next not a dot path", probeYAML("search", "candidates: results\n        next: $.links[0]\n        cursor_param: c"), "not a dot path"},
		{"cursor_param not a name", probeYAML("search", "candidates: results\n        next: next\n        cursor_param: \"a&b\""), "not a plain query parameter"},
		{"candidates not a dot path", probeYAML("search", "candidates: $..results"), "not a dot path"},
		{"a second document, never read", "payload_retention: 2160h\n---\npayload_retention: 1s\nbogus: x\n", "second YAML document at line 2"},
		{"destinations after a ---", "payload_retention: 2160h\n---\ndestinations:\n  files:\n    base_url: https://files.example\n", "second YAML document"},
		{"a second document after an empty one", "payload_retention: 2160h\n---\n---\nbogus: x\n", "second YAML document"},
		// Said in the file's words, not the decoder's Go types.
		{"unknown key by line", "destinations:\n  files:\n    honors_keys: true", `line 3: unknown key "honors_keys"`},
		{"a duration without a unit", "destinations:\n  files:\n    lease: 3", `line 3: "3" is not a duration (write it with a unit: 30s, 5m, 2h)`},
		{"a list for a duration", "destinations:\n  files:\n    lease: [1]", "line 3: a list is not a duration"},
		{"text for a number", "destinations:\n  files:\n    actions:\n      a:\n        approvals: x", `line 5: "x" is not a number`},
		{"text for a bool", "destinations:\n  files:\n    honours_keys: sometimes", `line 3: "sometimes" is not true or false`},
		{"a number for a section", "retry_budget: 3", `line 1: "3" is not a mapping of keys`},
		{"a number for a probe", "destinations:\n  files:\n    probes:\n      status: 5", `line 4: "5" is not a mapping of keys`},
		{"a list for a risk", "destinations:\n  files:\n    actions:\n      a:\n        risk: [x]", "line 5: a list is not text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseConfig = %+v, %v; want an error wrapping ErrInvalid", c, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			for _, goSide := range []string{"review.", "time.Duration", "unmarshal", "yaml:"} {
				if strings.Contains(err.Error(), goSide) {
					t.Errorf("error %q speaks of the decoder (%q), not the file", err, goSide)
				}
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies([]string{"10.0.0.0/8", " 192.0.2.7/32", "2001:db8::/32", "172.16.5.4/12"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "172.16.0.0/12"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("range %d = %s, want %s", i, got[i], want[i])
		}
	}
	if got, err := ParseTrustedProxies(nil); err != nil || len(got) != 0 {
		t.Errorf("none: %v %v", got, err)
	}
}

// TestParseConfigStatusKeysMatchClassify: every status key ParseConfig
// accepts must be one Classify can look up, or the override is silently dead.
func TestParseConfigStatusKeysMatchClassify(t *testing.T) {
	for _, key := range []string{`"404"`, `404`, `"+404"`, `"0404"`, `" 404"`, `0x194`} {
		c, err := ParseConfig([]byte("destinations:\n  files:\n    errors:\n      " + key + ": retry\n"))
		if err != nil {
			continue // rejected: fine
		}
		got := Classify(httpErr(404), c.Destination("files"), "upload", classifyNow)
		if got.Effect != EffectNone {
			t.Errorf("errors key %s accepted but ignored: 404 classified %s, want %s", key, got.Effect, EffectNone)
		}
	}
}

func TestParseConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"empty file", ""},
		{"comments only", "# nothing configured\n"},
		{"empty mapping", "{}"},
		{"empty destinations", "destinations: {}\n"},
		{"one document opened with ---", "---\ndestinations: {}\n"},
		{"one document closed with --- (generated YAML)", "destinations: {}\n---\n"},
		{"a comment after the ---", "destinations: {}\n---\n# the end\n"},
		{"an explicit null after the ---", "destinations: {}\n---\n~\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if got := c.Destination("anything"); !reflect.DeepEqual(got, SafeDestination()) {
				t.Errorf("unconfigured destination = %+v, want SafeDestination()", got)
			}
			if got, want := c.Budget(), (RetryBudget{Ratio: 0.1, Floor: 10, Window: time.Minute}); got != want {
				t.Errorf("Budget() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestSafeDestination(t *testing.T) {
	d := SafeDestination()
	if d.HonoursKeys {
		t.Errorf("SafeDestination honours keys")
	}
	if d.ConflictMeansInProgress {
		t.Errorf("SafeDestination retries 409")
	}
	if d.Lease != DefaultLease {
		t.Errorf("SafeDestination lease = %v, want 60s", d.Lease)
	}
	if d.RequiresApproval("anything") {
		t.Errorf("SafeDestination requires approval")
	}
	// What the safe defaults mean for classification.
	if got := EffectiveRisk(RiskIdempotentWrite, d, classifyNow, classifyNow); got != RiskCompensableWrite {
		t.Errorf("idempotent_write on SafeDestination is %s, want %s", got, RiskCompensableWrite)
	}
	if got := Classify(httpErr(409), d, "upload", classifyNow); got.Effect != EffectRejected {
		t.Errorf("409 on SafeDestination = %s, want %s", got.Effect, EffectRejected)
	}
}

func TestConfigNilAndPartial(t *testing.T) {
	var nilCfg *Config
	if got := nilCfg.Destination("x"); !reflect.DeepEqual(got, SafeDestination()) {
		t.Errorf("nil Config Destination = %+v", got)
	}
	if got, want := nilCfg.Budget(), (RetryBudget{Ratio: 0.1, Floor: 10, Window: time.Minute}); got != want {
		t.Errorf("nil Config Budget = %+v, want %+v", got, want)
	}
	tests := []struct {
		name string
		yaml string
		want RetryBudget
	}{
		{"ratio only", "retry_budget:\n  ratio: 0.5", RetryBudget{Ratio: 0.5, Floor: 10, Window: time.Minute}},
		{"floor only", "retry_budget:\n  floor: 2", RetryBudget{Ratio: 0.1, Floor: 2, Window: time.Minute}},
		{"window only", "retry_budget:\n  window: 30s", RetryBudget{Ratio: 0.1, Floor: 10, Window: 30 * time.Second}},
		{"ratio exactly 1", "retry_budget:\n  ratio: 1", RetryBudget{Ratio: 1, Floor: 10, Window: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if got := c.Budget(); got != tt.want {
				t.Errorf("Budget() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseConfigLeaseDefault(t *testing.T) {
	c, err := ParseConfig([]byte("destinations:\n  files:\n    honours_keys: true\n  bare:\n"))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	for _, n := range []string{"files", "bare"} {
		if got := c.Destination(n).Lease; got != DefaultLease {
			t.Errorf("Destination(%s).Lease = %v, want %v", n, got, DefaultLease)
		}
	}
	if c.Destination("bare").HonoursKeys {
		t.Errorf("an empty destination must not honour keys")
	}
}

// TestParseConfigRejectsNegativeValues: a negative duration or limit is a
// typo, and must not silently become a default. A negative key_retention is
// the dangerous one: EffectiveRisk reads it as "keys remembered forever".
func TestParseConfigRejectsNegativeValues(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"negative key_retention", "destinations:\n  files:\n    honours_keys: true\n    key_retention: -24h"},
		{"negative search_lag", "destinations:\n  files:\n    search_lag: -30s"},
		{"negative probe timeout", "destinations:\n  files:\n    probes:\n      status:\n        url: https://x.example/{{.ID}}\n        timeout: -1s"},
		{"negative retry_budget.floor", "retry_budget:\n  floor: -1"},
		{"negative retry_budget.window", "retry_budget:\n  window: -1m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml))
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseConfig accepted it (%+v), want an error wrapping ErrInvalid", c)
			}
		})
	}
}

// TestParseConfig409NeedsKeys: SPEC "409: for a destination that supports
// keys, 'same key in progress' → retry later". A destination that does not
// honour keys cannot mean "same key in progress", and retrying there could
// create a second effect: the configuration must be refused, or the 409 not
// retried.
func TestParseConfig409NeedsKeys(t *testing.T) {
	c, err := ParseConfig([]byte("destinations:\n  files:\n    honours_keys: false\n    conflict_means_in_progress: true\n"))
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseConfig = %v, want an error wrapping ErrInvalid", err)
		}
		return // refused: fine
	}
	for _, risk := range []Risk{RiskCompensableWrite, RiskIrreversible, RiskIdempotentWrite} {
		in := decideIn(testOp(risk), c.Destination("files"), httpErr(409))
		if got := Decide(in); got.State == RetryWait {
			t.Errorf("%s: 409 on a destination that does not honour keys is retried (%s)", risk, got.Reason)
		}
	}
}

// TestParseConfigAllowInternal: CIDRs, single addresses and host names are
// read per destination and for webhooks; names are lower-cased.
func TestParseConfigAllowInternal(t *testing.T) {
	c, err := ParseConfig([]byte(`
destinations:
  files:
    allow_internal: [10.20.0.0/16, 169.254.169.254, "fd00::/8", Files.Internal.]
webhooks:
  allow_internal: [hooks.internal, 127.0.0.1, "::1"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := AllowList{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("169.254.169.254/32"),
		netip.MustParsePrefix("fd00::/8")}, Hosts: []string{"files.internal"}}
	if got := c.Destination("files").AllowInternal; !reflect.DeepEqual(got, want) {
		t.Errorf("files allow_internal = %+v, want %+v", got, want)
	}
	want = AllowList{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")},
		Hosts: []string{"hooks.internal"}}
	if got := c.Webhooks.AllowInternal; !reflect.DeepEqual(got, want) {
		t.Errorf("webhooks allow_internal = %+v, want %+v", got, want)
	}
	if !c.Destination("mail").AllowInternal.Empty() || !(&Config{}).Webhooks.AllowInternal.Empty() {
		t.Error("an unlisted destination or an empty file allows something internal")
	}
}

// TestUndoConfig: a destination's undo call is checked at start — its
// method, a URL naming the resource to undo, template fields that exist,
// the credential pair — and gets its defaults.
func TestUndoConfig(t *testing.T) {
	parse := func(undo string) (*Config, error) {
		return ParseConfig([]byte("destinations:\n  files:\n    undo:\n" + undo))
	}
	cfg, err := parse("      url: https://files.example.com/resources/{{.Ref}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if u := cfg.Destinations["files"].Undo; u.Method != "DELETE" || u.Timeout != DefaultUndoTimeout {
		t.Errorf("defaults: %+v", u)
	}
	for _, bad := range []string{
		"      method: GET\n      url: https://files.example.com/resources/{{.Ref}}\n",
		"      url: https://files.example.com/resources/{{.ID}}\n",
		"      url: https://files.example.com/resources/{{.Reff}}\n",
		"      url: files.example.com/resources/{{.Ref}}\n",
		"      url: https://files.example.com/resources/{{.Ref}}\n      auth_header: Authorization\n",
		"      url: https://files.example.com/resources/{{.Ref}}\n      timeout: -1s\n",
	} {
		if _, err := parse(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("undo %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// A probe is read-only by construction: a GET, or a POST search where the
// destination allows one; nothing else passes the configuration.
func TestProbesAreReadOnly(t *testing.T) {
	base := "destinations:\n  files:\n%s    probes:\n      %s:\n        method: %s\n        url: https://files.example.com/x\n"
	for _, tc := range []struct {
		allow, kind, method string
		ok                  bool
	}{
		{"", "status", "GET", true},
		{"", "history", "GET", true},
		{"", "search", "POST", false},
		{"    allow_post_search: true\n", "search", "POST", true},
		{"    allow_post_search: true\n", "status", "POST", false},
		{"    allow_post_search: true\n", "job", "POST", false},
		{"", "status", "DELETE", false},
		{"", "search", "PUT", false},
		{"", "status", "HEAD", false},
	} {
		_, err := ParseConfig([]byte(fmt.Sprintf(base, tc.allow, tc.kind, tc.method)))
		if (err == nil) != tc.ok {
			t.Errorf("%s %s probe (allow %q): got %v, want ok=%t", tc.method, tc.kind, tc.allow, err, tc.ok)
		}
	}
}
