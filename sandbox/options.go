package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"time"

	"github.com/limbo-dev/limbo/webhook"
)

// DefaultJobDuration is how long a transformation job takes when Options
// leaves JobDuration at zero.
const DefaultJobDuration = 200 * time.Millisecond

// DefaultProbeHang is how long a probe faulted as a hang is held when
// Options leaves ProbeHang at zero: longer than a probe's default timeout
// (5 s).
const DefaultProbeHang = 6 * time.Second

// Options configures a Sandbox: its faults, its clock and its webhook.
//
// The shares are probabilities per mutating request. RateLimited and
// Unavailable are drawn before any effect and together are at most 1;
// ErrorAfterCommit and Loss are drawn after the effect committed and
// together are at most 1 too (one draw decides which, if either, applies).
// ProbeErrors is a probability per probe request, and JobFailures one per
// transformation job, each drawn from a stream of its own.
type Options struct {
	// Loss is the share of committed (or replayed) requests whose answer is
	// dropped: the connection closes without a byte of answer.
	Loss float64
	// RateLimited is the share answered 429 with Retry-After, before any effect.
	RateLimited float64
	// Unavailable is the share answered 503, before any effect.
	Unavailable float64
	// ErrorAfterCommit is the share of committed (or replayed) requests
	// answered 500 although the effect happened.
	ErrorAfterCommit float64
	// ProbeErrors is the share of probe requests (GET /resources/{ref},
	// GET /search, GET /jobs/{ref}) whose answer is faulted, each as one of
	// three kinds drawn at random: a 500, 502 or 503 with a JSON error body;
	// a hang of ProbeHang; or 200 with garbage (invalid or truncated JSON,
	// or valid JSON of the wrong shape). A faulted probe still reads, and
	// changes, nothing.
	ProbeErrors float64
	// ProbeHang is how long a probe faulted as a hang is held before it is
	// answered 504 (DefaultProbeHang when 0): longer than the probe's
	// timeout, so the prober gives up first. The hang ends as soon as the
	// client goes away or the sandbox closes.
	ProbeHang time.Duration
	// Delay is latency added to every mutating request before it is handled.
	Delay time.Duration
	// SearchLag is how long a new resource stays invisible to metadata search.
	SearchLag time.Duration
	// JobDuration is how long a transformation job takes (DefaultJobDuration when 0).
	JobDuration time.Duration
	// JobFailures is the share of transformation jobs that fail when they
	// finish: the job ends "failed" with no output, so it made nothing
	// (Effect.Failed), though searches and lookups still list it, as a
	// real provider's do. The job's webhook says "failed".
	JobFailures float64
	// NoKeySupport ignores Idempotency-Key: a repeated create really creates a duplicate.
	NoKeySupport bool
	// Seed seeds the fault draws, for reproducible runs; 0 picks one at random
	// (Sandbox.Seed reports it).
	Seed int64
	// WebhookURL receives a signed job.completed event per finished job, if set.
	WebhookURL string
	// WebhookSecret signs those events ("whsec_…"); required with WebhookURL.
	WebhookSecret string
	// Now tells the time (time.Now when nil); tests inject a clock to move
	// resources past the search lag.
	Now func() time.Time
	// Logger receives webhook delivery failures (discarded when nil).
	Logger *slog.Logger
}

// RegisterFlags registers the fault flags on fs, with o's current values as
// defaults. `limbo sandbox` and `limbo chaos` share them.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	if o.JobDuration == 0 {
		o.JobDuration = DefaultJobDuration
	}
	if o.ProbeHang == 0 {
		o.ProbeHang = DefaultProbeHang
	}
	fs.Float64Var(&o.Loss, "loss", o.Loss, "share of committed (or replayed) requests whose answer is dropped, 0–1: the effect happens, the connection closes with no answer")
	fs.Float64Var(&o.RateLimited, "rate-limited", o.RateLimited, "share of mutating requests answered 429 with Retry-After: 1, before any effect, 0–1")
	fs.Float64Var(&o.Unavailable, "unavailable", o.Unavailable, "share of mutating requests answered 503, before any effect, 0–1")
	fs.Float64Var(&o.ErrorAfterCommit, "error-after-commit", o.ErrorAfterCommit, "share of committed (or replayed) requests answered 500 although the effect happened, 0–1")
	fs.Float64Var(&o.ProbeErrors, "probe-errors", o.ProbeErrors, "share of probe requests (status lookup, search, job lookup) whose answer is faulted, 0–1: a 5xx, a hang of --probe-hang, or garbage with 200, one at random; never the truth changed")
	fs.DurationVar(&o.ProbeHang, "probe-hang", o.ProbeHang, "how long a probe faulted as a hang is held (longer than the probe's timeout); it ends when the client leaves")
	fs.DurationVar(&o.Delay, "delay", o.Delay, "latency added to every mutating request, e.g. 300ms")
	fs.DurationVar(&o.SearchLag, "search-lag", o.SearchLag, "how long a new resource stays invisible to metadata search, e.g. 2s")
	fs.BoolVar(&o.NoKeySupport, "no-key-support", o.NoKeySupport, "ignore Idempotency-Key: a repeated create really creates a duplicate")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "randomness seed for the fault draws, for reproducible runs (0: pick one at random)")
	fs.DurationVar(&o.JobDuration, "job-duration", o.JobDuration, "how long a transformation job takes before it ends")
	fs.Float64Var(&o.JobFailures, "job-failures", o.JobFailures, "share of transformation jobs that end failed, with no output, 0–1")
	fs.StringVar(&o.WebhookURL, "webhook-url", o.WebhookURL, "URL that receives a signed job.completed webhook per finished job")
	fs.StringVar(&o.WebhookSecret, "webhook-secret", o.WebhookSecret, "Standard Webhooks secret (whsec_…) that signs those webhooks")
}

// Validate checks the options once, before a sandbox is built from them.
func (o *Options) Validate() error {
	var errs []error
	shares := []struct {
		name string
		v    float64
	}{{"loss", o.Loss}, {"rate-limited", o.RateLimited}, {"unavailable", o.Unavailable}, {"error-after-commit", o.ErrorAfterCommit}, {"probe-errors", o.ProbeErrors}, {"job-failures", o.JobFailures}}
	for _, s := range shares {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			errs = append(errs, fmt.Errorf("--%s %v: a share must lie in [0, 1]", s.name, s.v))
		}
	}
	if o.RateLimited+o.Unavailable > 1 {
		errs = append(errs, fmt.Errorf("--rate-limited + --unavailable = %v: the shares refused before any effect add up to at most 1", o.RateLimited+o.Unavailable))
	}
	if o.Loss+o.ErrorAfterCommit > 1 {
		errs = append(errs, fmt.Errorf("--loss + --error-after-commit = %v: the shares spoiled after commit add up to at most 1", o.Loss+o.ErrorAfterCommit))
	}
	durations := []struct {
		name string
		v    time.Duration
	}{{"delay", o.Delay}, {"search-lag", o.SearchLag}, {"job-duration", o.JobDuration}, {"probe-hang", o.ProbeHang}}
	for _, d := range durations {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("--%s %v: must not be negative", d.name, d.v))
		}
	}
	if o.WebhookURL != "" {
		u, err := url.Parse(o.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--webhook-url %q: want an http(s) URL", o.WebhookURL))
		}
		if _, err := webhook.ParseSecret(o.WebhookSecret); err != nil {
			errs = append(errs, fmt.Errorf("--webhook-secret: required with --webhook-url: %w", err))
		}
	}
	return errors.Join(errs...)
}
