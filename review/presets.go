package review

import (
	"fmt"
	"slices"
)

// Presets are the defaults a destination of a known kind gets from
// `preset:`. What the file states beside a preset wins over it.
//
// openai (and APIs of its shape): the Stainless SDKs' retry policy as far
// as it is safe for Limbo —
//   - 429 with insufficient_quota or billing_hard_limit_reached: the
//     account is out of money, not busy → failed, no retry;
//   - 429 otherwise, 408, 409 (a lock timeout there): retried after
//     Retry-After / retry-after-ms or backoff;
//   - 5xx: retried for read and generate operations (a second generation
//     is harmless), reconciled for writes — the SDKs retry those blind,
//     Limbo does not;
//   - x-should-retry: true|false, when present, decides.
//
// The idempotency key travels in Idempotency-Key, and only when the file
// says honours_keys: the provider ignores it elsewhere.
var Presets = map[string]func(*Destination){
	"openai": func(d *Destination) {
		for _, c := range []string{"insufficient_quota", "billing_hard_limit_reached"} {
			if !slices.Contains(d.QuotaCodes, c) {
				d.QuotaCodes = append(d.QuotaCodes, c)
			}
		}
		d.HonoursShouldRetry = true
		if _, ok := d.Errors["409"]; !ok {
			if d.Errors == nil {
				d.Errors = map[string]ErrorClass{}
			}
			d.Errors["409"] = ClassRetry
		}
	},
}

// DefaultIdempotencyHeader carries the key when the file names no other.
const DefaultIdempotencyHeader = "Idempotency-Key"

// applyPreset fills d's defaults from its preset and checks what the
// provider boundary's settings say.
func (d *Destination) applyPreset(name string) error {
	if d.Preset != "" {
		fill, ok := Presets[d.Preset]
		if !ok {
			return fmt.Errorf("%w: config: destination %q: unknown preset %q (known: openai)", ErrInvalid, name, d.Preset)
		}
		fill(d)
	}
	if h := d.IdempotencyHeader; h != "" && !validHeaderName(h) {
		return fmt.Errorf("%w: config: destination %q: idempotency_header %q is not an HTTP header name", ErrInvalid, name, h)
	}
	for model, p := range d.Pricing {
		if !(p.Prompt >= 0 && p.Prompt <= MaxPricePerMTok && p.Completion >= 0 && p.Completion <= MaxPricePerMTok) {
			return fmt.Errorf("%w: config: destination %q: pricing for %q must be between 0 and %g per million tokens", ErrInvalid, name, model, float64(MaxPricePerMTok))
		}
	}
	return nil
}

// KeyHeader is the header an attempt's key travels in, or "" when the
// destination does not deduplicate by key (then sending it would only
// suggest a guarantee nobody gives).
func (d Destination) KeyHeader() string {
	if !d.HonoursKeys {
		return ""
	}
	if d.IdempotencyHeader != "" {
		return d.IdempotencyHeader
	}
	return DefaultIdempotencyHeader
}

// ModelPrice is what a million tokens cost, prompt and completion apart.
type ModelPrice struct {
	Prompt     float64 `yaml:"prompt_per_mtok"`
	Completion float64 `yaml:"completion_per_mtok"`
}

// UsageCost prices u by the destination's pricing: the model's own price,
// else "*", else nothing (an unpriced model costs 0, and the attempt's
// reason says so — see PlanOutcome).
func (d Destination) UsageCost(u *Usage) (cost float64, priced bool) {
	if u == nil {
		return 0, true
	}
	p, ok := d.Pricing[u.Model]
	if !ok {
		p, ok = d.Pricing["*"]
	}
	if !ok {
		return 0, u.PromptTokens == 0 && u.CompletionTokens == 0
	}
	return (float64(u.PromptTokens)*p.Prompt + float64(u.CompletionTokens)*p.Completion) / 1e6, true
}
