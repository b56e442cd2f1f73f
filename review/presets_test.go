package review

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOpenAIPreset(t *testing.T) {
	c, err := ParseConfig([]byte(`
destinations:
  llm:
    preset: openai
    errors: {"409": fail}
    pricing:
      gpt-x: {prompt_per_mtok: 2.5, completion_per_mtok: 10}
      "*": {prompt_per_mtok: 1, completion_per_mtok: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Destination("llm")
	if !d.HonoursShouldRetry || !d.isQuotaCode("billing_hard_limit_reached") || !d.isQuotaCode("insufficient_quota") {
		t.Errorf("preset not applied: %+v", d)
	}
	if d.Errors["409"] != ClassFail {
		t.Errorf("the file's 409 override lost to the preset: %v", d.Errors["409"])
	}
	if d.KeyHeader() != "" {
		t.Errorf("key header %q for a destination that does not honour keys", d.KeyHeader())
	}
	now := time.Now()
	yes, no := true, false
	for _, tt := range []struct {
		o    Outcome
		want Effect
	}{
		{Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 500, ShouldRetry: &yes}, EffectNone},
		{Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 503, ShouldRetry: &no}, EffectRejected},
		{Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 429, ProviderCode: "insufficient_quota", ShouldRetry: &yes}, EffectRejected},
		{Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 500}, EffectUnknown},
	} {
		if got := Classify(tt.o, d, "chat", now).Effect; got != tt.want {
			t.Errorf("Classify(%d should_retry=%v code=%q) = %s, want %s", tt.o.HTTPStatus, tt.o.ShouldRetry, tt.o.ProviderCode, got, tt.want)
		}
	}
	// Without honours_should_retry the header is only a report.
	if got := Classify(Outcome{Result: ResultError, Phase: PhaseAfterSend, HTTPStatus: 500, ShouldRetry: &yes}, SafeDestination(), "chat", now).Effect; got != EffectUnknown {
		t.Errorf("x-should-retry honoured where the destination does not say so: %s", got)
	}
	if got, ok := d.UsageCost(&Usage{Model: "gpt-x", PromptTokens: 1_000_000, CompletionTokens: 100_000}); !ok || got != 3.5 {
		t.Errorf("gpt-x cost %g %v, want 3.5", got, ok)
	}
	if got, ok := d.UsageCost(&Usage{Model: "other", PromptTokens: 500_000, CompletionTokens: 500_000}); !ok || got != 1 {
		t.Errorf("fallback price %g %v, want 1", got, ok)
	}
	if got, ok := SafeDestination().UsageCost(&Usage{Model: "m", PromptTokens: 10}); ok || got != 0 {
		t.Errorf("unpriced usage = %g %v, want 0, not priced", got, ok)
	}
}

func TestPresetConfigErrors(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"destinations:\n  x:\n    preset: anthropic-ish\n", "unknown preset"},
		{"destinations:\n  x:\n    idempotency_header: \"Idem Key\"\n", "not an HTTP header name"},
		{"destinations:\n  x:\n    pricing:\n      m: {prompt_per_mtok: -1}\n", "must be between 0 and 1e+06"},
		{"destinations:\n  x:\n    pricing:\n      m: {completion_per_mtok: 1e7}\n", "must be between 0 and 1e+06"},
		{"destinations:\n  x:\n    pricing:\n      m: {completion_per_mtok: .nan}\n", "must be between 0 and 1e+06"},
		{"destinations:\n  x:\n    concurrency: 2\n    reserve_priority: 2\n", "below concurrency"},
	} {
		_, err := ParseConfig([]byte(tt.yaml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseConfig(%q) = %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

func TestKeyHeader(t *testing.T) {
	if h := (Destination{HonoursKeys: true}).KeyHeader(); h != "Idempotency-Key" {
		t.Errorf("default key header %q", h)
	}
	if h := (Destination{HonoursKeys: true, IdempotencyHeader: "X-Idempotency-Token"}).KeyHeader(); h != "X-Idempotency-Token" {
		t.Errorf("configured key header %q", h)
	}
}
