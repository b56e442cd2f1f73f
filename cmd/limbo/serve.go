package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/outbox"
	"github.com/limbo-dev/limbo/reconcile"
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

// serveAuditSettings is how serve signs and anchors the audit trail.
type serveAuditSettings struct {
	key       *auditKey
	anchorDir string
	sealMax   time.Duration
}

// serveAudit resolves the audit settings: flags first, then the config
// file. Without a key, a SQLite database gets one generated beside it (and
// the log says where, with its public key); PostgreSQL refuses to start,
// since every instance must sign with the same key.
func serveAudit(cfg *review.Config, s settings, keyFile, anchorDir string, sealMax time.Duration, log *slog.Logger) (*serveAuditSettings, error) {
	k, err := findAuditKey(keyFile, cfg, s.Config, s.DB, true)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, fmt.Errorf("serve: %w", errNoAuditKey(s.DB))
	}
	if k.generated {
		log.Warn("generated an audit signing key beside the database; keep a copy outside this machine, or pass --audit-key",
			"file", k.where, "key_id", keyID(k.key), "public_key", encodeAuditPub(k.key.Public().(ed25519.PublicKey)))
	}
	out := &serveAuditSettings{key: k, anchorDir: anchorDir, sealMax: sealMax}
	if out.anchorDir == "" {
		out.anchorDir = besideConfig(cfg.Audit.AnchorDir, s.Config)
	}
	if out.sealMax == 0 {
		out.sealMax = cfg.Audit.SealMax
	}
	if out.sealMax == 0 {
		out.sealMax = store.DefaultSealMax
	}
	if out.sealMax < review.MinSealMax {
		return nil, fmt.Errorf("serve: --audit-seal-max must be at least %s", review.MinSealMax)
	}
	return out, nil
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlags("serve", stderr, &s)
	fs.StringVar(&s.Addr, "addr", envOr("LIMBO_ADDR", "127.0.0.1:8080"), "listen address (env LIMBO_ADDR)")
	fs.StringVar(&s.Config, "config", envOr("LIMBO_CONFIG", ""), "destination configuration file (env LIMBO_CONFIG); see limbo.example.yaml")
	fs.BoolVar(&s.Demo, "demo", false, "run the sandbox destination in process with demo traffic for a few tenants, create a demo tenant with a token and sample operations, and print how to use them")
	secure := fs.Bool("secure-cookies", envOr("LIMBO_SECURE_COOKIES", "") == "1", "mark session cookies Secure: set it when users reach Limbo over HTTPS, e.g. behind a TLS proxy (env LIMBO_SECURE_COOKIES=1)")
	idle := fs.Duration("session-idle", 30*time.Minute, "a console session ends after this long unused")
	maxAge := fs.Duration("session-max", 12*time.Hour, "a console session ends this long after sign-in, however active")
	keyFile := auditKeyFlag(fs)
	anchorDir := fs.String("audit-anchor", envOr("LIMBO_AUDIT_ANCHOR", ""),
		"copy every signed audit checkpoint to this directory, outside the database (env LIMBO_AUDIT_ANCHOR; or audit.anchor_dir)")
	sealMax := fs.Duration("audit-seal-max", 0, "write an audit checkpoint at least this often, even when idle (default 60s, or audit.seal_max; at least 2s)")
	maxConns := fs.Int("db-max-conns", 0, "at most this many database connections, open or idle (env LIMBO_DB_MAX_CONNS; default 0: PostgreSQL 32, SQLite 8)")
	proxies := fs.String("trusted-proxies", envOr("LIMBO_TRUSTED_PROXIES", ""), "comma-separated CIDR ranges of the reverse proxies whose X-Forwarded-For names the client, e.g. 10.0.0.0/8; overrides trusted_proxies in --config; without either, forwarding headers are ignored (env LIMBO_TRUSTED_PROXIES)")
	if v := os.Getenv("LIMBO_DB_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("serve: LIMBO_DB_MAX_CONNS must be a number, got %q", v)
		}
		*maxConns = n // the flag, parsed next, overrides it
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *maxConns < 0 {
		return fmt.Errorf("serve: --db-max-conns must not be negative")
	}
	if *idle <= 0 || *maxAge <= 0 || *idle > *maxAge {
		return fmt.Errorf("serve: --session-idle and --session-max must be positive, idle no longer than max")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := loadConfig(s.Config)
	if err != nil {
		return err
	}
	audit, err := serveAudit(cfg, s, *keyFile, *anchorDir, *sealMax, log)
	if err != nil {
		return err
	}
	trusted, err := trustedProxies(*proxies, cfg)
	if err != nil {
		return err
	}
	var sandboxDemo *demo
	if s.Demo {
		// Before the store opens: the demo adds the sandbox destination to cfg.
		if sandboxDemo, err = newDemo(cfg, log); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer sandboxDemo.close()
	}
	st, err := openStore(ctx, s.DB, store.Options{Config: cfg, AuditKey: audit.key.key, AuditSealMax: audit.sealMax, MaxConns: *maxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	var anchors *anchor.Writer
	if audit.anchorDir != "" {
		// Catch up from the database before serving, then after every seal.
		if anchors, err = anchor.NewWriter(audit.anchorDir, st, log); err != nil {
			return err
		}
		if err := anchors.CatchUp(ctx); err != nil {
			return err
		}
	}
	seal := func(c context.Context) error {
		if err := st.SealAll(c); err != nil {
			return err
		}
		if anchors != nil {
			return anchors.CatchUp(c)
		}
		return nil
	}

	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	if sandboxDemo != nil {
		if err := sandboxDemo.start(ctx, st, url, stdout); err != nil {
			ln.Close()
			return fmt.Errorf("demo: %w", err)
		}
	}

	h := handlers.New(st, log)
	h.Metrics = metrics.New(st, log)
	h.AuditAnchor = audit.anchorDir
	h.TrustedProxies = trusted
	host, _ := os.Hostname()
	rec := reconcile.New(st, cfg, fmt.Sprintf("%s/%d", host, os.Getpid()), log)
	rec.Metrics = h.Metrics
	h.Warnings = probeWarnings(rec.Prober, log)
	hashKey, err := st.Secret(ctx, "session_hash_key", 64)
	if err != nil {
		return err
	}
	blockKey, err := st.Secret(ctx, "session_block_key", 32)
	if err != nil {
		return err
	}
	h.Console = handlers.NewConsole(hashKey, blockKey, *secure, store.SessionPolicy{Idle: *idle, Absolute: *maxAge})
	e := handlers.NewServer(h)
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); rec.Run(workCtx, reconcileEvery) }()
	hooks := outbox.New(st, rec.Owner, log, nil)
	go func() { defer wg.Done(); hooks.Run(workCtx, time.Second) }()
	go func() {
		defer wg.Done()
		loop.Every(workCtx, sweepEvery, log, "lease sweep", func(c context.Context) error {
			if _, err := st.SweepLeases(c); err != nil {
				return err
			}
			_, err := st.ExpireDeadlines(c)
			return err
		})
	}()
	go func() {
		defer wg.Done()
		loop.Every(workCtx, sealEvery, log, "audit seal", seal)
	}()
	if sandboxDemo != nil {
		// The traffic stops at the signal, before the server shuts down.
		trafficCtx, stopTraffic := context.WithCancel(workCtx)
		stopOnSignal := context.AfterFunc(ctx, stopTraffic)
		wg.Add(1)
		go func() { defer wg.Done(); defer stopOnSignal(); sandboxDemo.traffic(trafficCtx, url) }()
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("limbo serving", "url", url, "db", st.Engine(), "config", s.Config, "trusted_proxies", trusted,
		"audit_key", keyID(audit.key.key), "audit_key_from", audit.key.where, "audit_anchor", audit.anchorDir, "audit_seal_max", audit.sealMax)

	select {
	case err := <-serveErr:
		stopWork()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	log.Info("limbo shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("shutdown", "err", err)
	}
	stopWork()
	wg.Wait()
	// Seal what is left so the trail is chained up to the last request.
	if err := seal(shutCtx); err != nil {
		log.Error("final seal", "err", err)
	}
	log.Info("limbo stopped")
	return nil
}

// probeWarnings logs, once at start, every probe whose credential is not
// set, and returns them for /readyz. Such a destination's probes are not
// sent (an unauthenticated answer is no evidence): its ambiguous operations
// go to review until the variable is set and Limbo restarted.
func probeWarnings(p *reconcile.Prober, log *slog.Logger) []string {
	var out []string
	for _, m := range p.MissingCredentials() {
		log.Warn("probe credential not set: this destination's probes are not sent and its ambiguous operations go to review",
			"destination", m.Destination, "probe", m.Probe, "auth_env", m.Env)
		out = append(out, m.String())
	}
	return out
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
