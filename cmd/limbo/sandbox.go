package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/limbo-dev/limbo/sandbox"
)

const sandboxUsage = `Usage: limbo sandbox [--addr 127.0.0.1:8090] [fault flags]

Runs the sandbox destination on its own: a small file and transformation API
(POST /folders /files /jobs /links /emails /charges /files/{ref}/versions
/resources/{ref}/move, DELETE /resources/{ref}; probes GET /resources/{ref}
/resources/{ref}/history /jobs/{ref} /search?operation_id= /truth) with
faults injected into mutating requests, and an OpenAI-shaped model
(POST /v1/chat/completions, scripted faults at POST /v1/_faults). Probes are
never faulted.

Flags:
`

// cmdSandbox serves the sandbox destination until ctx ends.
func cmdSandbox(ctx context.Context, args []string, std stdio) error {
	stdout, stderr := std.out, std.err
	fs := newFlagSet("sandbox", std)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	fs.bindEnv("addr", "LIMBO_SANDBOX_ADDR")
	var opts sandbox.Options
	opts.RegisterFlags(fs.FlagSet)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts.Logger = log

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	sb := sandbox.New(opts)
	defer sb.Close()
	srv := &http.Server{Handler: sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	fmt.Fprintf(stdout, "sandbox listening on http://%s\n", ln.Addr())
	log.Info("sandbox faults",
		"loss", opts.Loss, "rate_limited", opts.RateLimited, "unavailable", opts.Unavailable,
		"error_after_commit", opts.ErrorAfterCommit, "delay", opts.Delay, "search_lag", opts.SearchLag,
		"no_key_support", opts.NoKeySupport, "seed", sb.Seed(), "job_duration", opts.JobDuration,
		"job_failures", opts.JobFailures, "webhook_url", opts.WebhookURL)

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
