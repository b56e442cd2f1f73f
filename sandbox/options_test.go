package sandbox

import (
	"flag"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"issue's chaos mix", Options{Loss: 0.3, RateLimited: 0.1, Unavailable: 0.05, ErrorAfterCommit: 0.05, SearchLag: 2 * time.Second}, true},
		{"all refused", Options{RateLimited: 0.5, Unavailable: 0.5}, true},
		{"negative share", Options{Loss: -0.1}, false},
		{"share above one", Options{Unavailable: 1.5}, false},
		{"refusals above one", Options{RateLimited: 0.6, Unavailable: 0.5}, false},
		{"after-commit above one", Options{Loss: 0.6, ErrorAfterCommit: 0.5}, false},
		{"negative delay", Options{Delay: -time.Second}, false},
		{"every probe faulted", Options{ProbeErrors: 1, ProbeHang: time.Second}, true},
		{"negative probe errors", Options{ProbeErrors: -0.01}, false},
		{"probe errors above one", Options{ProbeErrors: 1.01}, false},
		{"probe errors NaN", Options{ProbeErrors: math.NaN()}, false},
		{"negative probe hang", Options{ProbeErrors: 0.1, ProbeHang: -time.Second}, false},
		{"webhook without secret", Options{WebhookURL: "http://127.0.0.1:1/hook"}, false},
		{"webhook not http", Options{WebhookURL: "ftp://127.0.0.1/", WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, false},
		{"webhook", Options{WebhookURL: "http://127.0.0.1:1/hook", WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, true},
	}
	for _, tt := range tests {
		if err := tt.o.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	var o Options
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	o.RegisterFlags(fs)
	if o.JobDuration != DefaultJobDuration || o.ProbeHang != DefaultProbeHang {
		t.Errorf("job-duration default %v, probe-hang default %v", o.JobDuration, o.ProbeHang)
	}
	err := fs.Parse([]string{"--loss", "0.3", "--rate-limited", "0.1", "--unavailable", "0.05", "--error-after-commit", "0.05",
		"--delay", "10ms", "--search-lag", "2s", "--no-key-support", "--seed", "9", "--job-duration", "1s",
		"--probe-errors", "0.2", "--probe-hang", "3s",
		"--webhook-url", "http://127.0.0.1:9/h", "--webhook-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Loss: 0.3, RateLimited: 0.1, Unavailable: 0.05, ErrorAfterCommit: 0.05, Delay: 10 * time.Millisecond,
		SearchLag: 2 * time.Second, NoKeySupport: true, Seed: 9, JobDuration: time.Second,
		ProbeErrors: 0.2, ProbeHang: 3 * time.Second,
		WebhookURL: "http://127.0.0.1:9/h", WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	if fmt.Sprintf("%+v", o) != fmt.Sprintf("%+v", want) {
		t.Errorf("parsed %+v\nwant   %+v", o, want)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			t.Errorf("--%s has no help", f.Name)
		}
	})
}
