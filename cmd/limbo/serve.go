package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/demo"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Background intervals: leases are swept and the audit trail sealed about
// once a second, so an expired attempt is closed within lease + 1 s (I4)
// and an event is chained within a second or two.
const (
	sweepEvery     = time.Second
	sealEvery      = time.Second
	reconcileEvery = 500 * time.Millisecond
)

func cmdServe(ctx context.Context, args []string, std stdio) error {
	stdout, stderr := std.out, std.err
	var s settings
	fs := newFlags("serve", std, &s)
	fs.StringVar(&s.Addr, "addr", "127.0.0.1:8080", "listen address")
	cfgPath := configFlag(fs)
	fs.BoolVar(&s.Demo, "demo", false, "run the sandbox destination in process with demo traffic for a few tenants, seed a week of history and open cases for every role (once per database), create a demo tenant with a token and one user per role, and print how to use them; refused on a database holding users or API tokens the demo did not make. The server logs go to a file of its own in "+os.TempDir()+", named when it starts")
	secure := fs.Bool("secure-cookies", false, "mark session cookies Secure: set it when users reach Limbo over HTTPS, e.g. behind a TLS proxy (true or false, as strconv.ParseBool reads them)")
	idle := fs.Duration("session-idle", 30*time.Minute, "a console session ends after this long unused")
	maxAge := fs.Duration("session-max", 12*time.Hour, "a console session ends this long after sign-in, however active")
	keyFile := auditKeyFlag(fs)
	anchorDir := fs.String("audit-anchor", "", "copy every signed audit checkpoint to this directory, outside the database (or audit.anchor_dir)")
	// No environment variable: left set, it would let any start take the
	// trail over, the mistake the key check is there to stop.
	replaceKey := fs.Bool("replace-audit-key", false, "the key that signed the audit trail so far is lost or must be retired: sign from now on with this "+
		"server's key; audited (audit.key_replaced), and audit verify with the new key carries the earlier checkpoints over")
	sealMax := fs.Duration("audit-seal-max", 0, "write an audit checkpoint at least this often, even when idle (0: 60s, or audit.seal_max; at least 2s)")
	proxies := fs.String("trusted-proxies", "", "comma-separated CIDR ranges of the reverse proxies whose X-Forwarded-For (and X-Request-Id) are believed, e.g. 10.0.0.0/8; overrides trusted_proxies in --config; without either, forwarding headers are ignored")
	batches := fs.Int("batch-in-flight", 0, "most registrations of bulk intake calls (POST /api/v1/operations/batch) this instance works on at once, the others waiting their turn; at least 1000, one full batch, at most 100000 (0: 4000). Each 1000 hold about 10 MB, and the batches waiting 16 MiB more, beyond which a batch is refused as busy: raise it when the database has cores to spare and limbo_batch_registrations_waiting stays up")
	bodyTimeout := fs.Duration("body-timeout", handlers.DefaultBodyTimeout, "how long a client may take to send a request's body; a slower one is answered 408 and nothing is changed. A full bulk batch (16 MiB) in a minute needs 300 KB/s")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "the least `level` logged: debug, info, warn or error; debug adds a line per lease-sweep round")
	format := fs.String("log-format", "text", "text (one key=value line per event) or json (one JSON object per line)")
	// Every serve flag reads the environment too: LIMBO_ and its name.
	for name, env := range map[string]string{"addr": "LIMBO_ADDR", "demo": "LIMBO_DEMO", "secure-cookies": "LIMBO_SECURE_COOKIES",
		"session-idle": "LIMBO_SESSION_IDLE", "session-max": "LIMBO_SESSION_MAX", "audit-anchor": "LIMBO_AUDIT_ANCHOR",
		"audit-seal-max": "LIMBO_AUDIT_SEAL_MAX", "trusted-proxies": "LIMBO_TRUSTED_PROXIES", "log-level": "LIMBO_LOG_LEVEL",
		"log-format": "LIMBO_LOG_FORMAT", "batch-in-flight": "LIMBO_BATCH_IN_FLIGHT",
		"body-timeout": "LIMBO_BODY_TIMEOUT"} {
		fs.bindEnv(name, env)
	}
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	s.Config = *cfgPath
	if *idle <= 0 || *maxAge <= 0 || *idle > *maxAge {
		return fmt.Errorf("serve: --session-idle and --session-max must be positive, idle no longer than max")
	}
	if *bodyTimeout <= 0 {
		return fmt.Errorf("serve: --body-timeout must be positive")
	}
	if *batches != 0 {
		if err := handlers.CheckBatchesInFlight(*batches); err != nil {
			return fmt.Errorf("serve: --batch-in-flight: %w", err)
		}
	}
	newHandler, err := logHandler(*format)
	if err != nil {
		return err
	}
	log := slog.New(newHandler(stderr, level))
	var logFile string
	if s.Demo {
		// The demo's traffic and faults log a lot: into a file, so the
		// logins printed at start-up stay on screen; errors show here too.
		f, path, err := demoLog()
		if err != nil {
			return err
		}
		defer f.Close()
		logFile = path
		log = slog.New(slog.NewMultiHandler(newHandler(f, level), newHandler(stderr, slog.LevelError)))
	}
	cfg, err := loadConfig(s.Config)
	if err != nil {
		return err
	}
	// Listen before anything is created: a port in use or a bad --addr
	// must not leave a new database and audit key behind.
	if _, port, err := net.SplitHostPort(s.Addr); strings.TrimSpace(s.Addr) == "" || err == nil && port == "" {
		// net.Listen would take "" as every interface, on a random port.
		return errors.New("serve: --addr: give host:port, such as 127.0.0.1:8080 (0.0.0.0:8080 for every interface)")
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("serve: --addr: %w", err)
	}
	listening := ln
	defer func() {
		if listening != nil {
			listening.Close()
		}
	}()
	audit, err := app.ResolveAudit(cfg, s.Config, s.DB, *keyFile, *anchorDir, *sealMax)
	if err != nil {
		return err
	}
	trusted, err := trustedProxies(*proxies, cfg)
	if err != nil {
		return err
	}
	var sandboxDemo *demo.Demo
	if s.Demo {
		// Before the store opens: the demo adds the sandbox destination to cfg.
		if sandboxDemo, err = demo.New(cfg, log); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer sandboxDemo.Close()
	}
	a, err := app.New(ctx, app.Config{DB: s.DB, MaxConns: s.MaxConns, BatchesInFlight: *batches, BodyTimeout: *bodyTimeout, Listener: ln, Destinations: cfg,
		AuditKey: audit.Key.Key, AuditKeyFrom: audit.From(), ReplaceAuditKey: *replaceKey, AnchorDir: audit.AnchorDir, SealMax: audit.SealMax,
		SecureCookies: *secure, Session: store.SessionPolicy{Idle: *idle, Absolute: *maxAge}, TrustedProxies: trusted, Log: log})
	if err != nil {
		return err
	}
	listening = nil // a.Close closes it
	defer a.Close()
	if err := audit.Keep(log); err != nil {
		return err
	}
	log.Info("audit key", "key_id", auditkey.ID(audit.Key.Key), "from", audit.Key.Where, "config", s.Config)
	return serveUntilDone(ctx, a, sandboxDemo, s.DB, logFile, stdout, log)
}

// logHandler makes log handlers of the --log-format kind.
func logHandler(format string) (func(w io.Writer, level slog.Leveler) slog.Handler, error) {
	switch format {
	case "text":
		return func(w io.Writer, l slog.Leveler) slog.Handler {
			return slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})
		}, nil
	case "json":
		return func(w io.Writer, l slog.Leveler) slog.Handler {
			return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
		}, nil
	}
	return nil, fmt.Errorf("serve: --log-format %q: text or json", format)
}

// demoLog is the file `serve --demo` logs to: a new one in the temporary
// directory for each start (limbo-demo-*.log, its path printed), so two
// demos running at once do not write over each other's log.
func demoLog() (*os.File, string, error) {
	f, err := os.CreateTemp("", "limbo-demo-*.log")
	if err != nil {
		return nil, "", fmt.Errorf("serve --demo: the log file: %w", err)
	}
	path := f.Name()
	return f, path, nil
}

// serveUntilDone runs a (and the demo's traffic) until ctx ends or the
// server fails, then stops it. The demo seeds the database at dbURL
// before the server starts, and prints its welcome once it has.
func serveUntilDone(ctx context.Context, a *app.App, d *demo.Demo, dbURL, logFile string, stdout io.Writer, log *slog.Logger) error {
	if d != nil {
		if err := d.Start(ctx, a.Store, dbURL, a.URL); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	a.Start(ctx)
	if d != nil {
		d.Welcome(stdout, logFile)
	}
	// The traffic stops first, before the server shuts down.
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var traffic sync.WaitGroup
	if d != nil {
		traffic.Go(func() { d.Traffic(trafficCtx, a.URL) })
	}
	var failed error
	select {
	case failed = <-a.Failed():
	case <-ctx.Done():
		log.Info("limbo shutting down")
	}
	stopTraffic()
	traffic.Wait()
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.Stop(shutCtx); err != nil {
		log.Error("shutdown", "err", err)
	}
	log.Info("limbo stopped")
	return failed
}

// trustedProxies is the --trusted-proxies list when given, else the
// configuration file's trusted_proxies.
func trustedProxies(list string, cfg *review.Config) ([]*net.IPNet, error) {
	if strings.TrimSpace(list) == "" {
		return review.ParseTrustedProxies(cfg.TrustedProxies)
	}
	ps, err := review.ParseTrustedProxies(strings.Split(list, ","))
	if err != nil {
		return nil, fmt.Errorf("serve: --trusted-proxies: %w", err)
	}
	return ps, nil
}
