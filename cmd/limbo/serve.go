package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/handlers"
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

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlags("serve", stderr, &s)
	fs.StringVar(&s.Addr, "addr", envOr("LIMBO_ADDR", "127.0.0.1:8080"), "listen address (env LIMBO_ADDR)")
	fs.StringVar(&s.Config, "config", envOr("LIMBO_CONFIG", ""), "destination configuration file (env LIMBO_CONFIG); see limbo.example.yaml")
	fs.BoolVar(&s.Demo, "demo", false, "create a demo tenant with a token and sample operations, and print how to use them")
	if err := parse(fs, args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := loadConfig(s.Config)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, s.DB, cfg)
	if err != nil {
		return err
	}
	defer st.Close()

	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	if s.Demo {
		if err := seedDemo(ctx, st, url, stdout); err != nil {
			ln.Close()
			return fmt.Errorf("demo: %w", err)
		}
	}

	h := handlers.New(st, log)
	h.Metrics = metrics.New(st, log)
	hashKey, err := st.Secret(ctx, "session_hash_key", 64)
	if err != nil {
		return err
	}
	blockKey, err := st.Secret(ctx, "session_block_key", 32)
	if err != nil {
		return err
	}
	h.Console = handlers.NewConsole(hashKey, blockKey, false, store.SessionPolicy{})
	e := handlers.NewServer(h)
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	host, _ := os.Hostname()
	rec := reconcile.New(st, cfg, fmt.Sprintf("%s/%d", host, os.Getpid()), log)
	rec.Metrics = h.Metrics
	wg.Add(4)
	go func() { defer wg.Done(); rec.Run(workCtx, reconcileEvery) }()
	hooks := outbox.New(st, rec.Owner, log, nil)
	go func() { defer wg.Done(); hooks.Run(workCtx, time.Second) }()
	go func() {
		defer wg.Done()
		every(workCtx, sweepEvery, log, "lease sweep", func(c context.Context) error { _, err := st.SweepLeases(c); return err })
	}()
	go func() {
		defer wg.Done()
		every(workCtx, sealEvery, log, "audit seal", func(c context.Context) error { return st.SealAll(c) })
	}()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("limbo serving", "url", url, "db", st.Engine(), "config", s.Config)

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
	if err := st.SealAll(shutCtx); err != nil {
		log.Error("final seal", "err", err)
	}
	log.Info("limbo stopped")
	return nil
}

// every runs fn on a ticker until ctx ends, logging failures once each.
func every(ctx context.Context, d time.Duration, log *slog.Logger, name string, fn func(context.Context) error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				log.Error(name+" failed", "err", err)
			}
		}
	}
}

// seedDemo creates the demo tenant's token and prints how to use it.
func seedDemo(ctx context.Context, st *store.Store, url string, stdout io.Writer) error {
	token, err := st.CreateToken(ctx, "demo", "demo", "cli:demo")
	if err != nil {
		return err
	}
	if err := seedDemoOperations(ctx, st); err != nil {
		return err
	}
	fmt.Fprintf(stdout, `Limbo is running at %s

Demo tenant "demo", API token (shown once):
  %s

Try:
  export LIMBO_TOKEN=%s
  curl -s -H "Authorization: Bearer $LIMBO_TOKEN" %s/api/v1/operations
`, url, token, token, url)
	return nil
}

// seedDemoOperations runs a few operations through the real ledger so the
// demo shows every kind of ending: confirmed, ambiguous, waiting to retry,
// failed, and an accepted job. Already seeded operations are left alone.
func seedDemoOperations(ctx context.Context, st *store.Store) error {
	demos := []struct {
		source, action string
		risk           review.Risk
		outcome        review.Outcome
	}{
		{"contract-583", "render_pdf", review.RiskCompensableWrite, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
			Resource: &review.ResourceRef{Ref: "file-9f2c", Kind: "file", Version: "7"}}},
		{"contract-584", "create_folder", review.RiskCompensableWrite, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}},
		{"invoice-1204", "send_email", review.RiskIrreversible, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 502}},
		{"summary-77", "generate_summary", review.RiskGenerate, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 429, RetryAfter: "30"}},
		{"contract-585", "render_pdf", review.RiskCompensableWrite, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 422, ProviderCode: "unsupported_font"}},
		{"contract-586", "transform_docx", review.RiskCompensableWrite, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202,
			Job: &review.JobRef{Ref: "job-31", Status: "queued"}}},
	}
	for _, d := range demos {
		op, created, err := st.Register(ctx, review.Registration{Tenant: "demo", SourceRef: d.source, LogicalVersion: "7",
			Action: d.action, Destination: "sandbox", Risk: d.risk, Payload: []byte(`{"source":"` + d.source + `","version":7}`), Actor: "cli:demo"})
		if err != nil {
			return err
		}
		if !created {
			continue
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "demo", OperationID: op.ID, Actor: "cli:demo"})
		if err != nil {
			return err
		}
		if _, err := st.RecordOutcome(ctx, "demo", op.ID, g.N, d.outcome, "cli:demo"); err != nil {
			return err
		}
	}
	return nil
}
