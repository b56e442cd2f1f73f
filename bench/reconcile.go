package bench

// reconcile_per_min of `limbo bench`: ambiguous operations whose effect
// did happen at the sandbox, settled by the reconciler's rounds against a
// sandbox that takes --sandbox-delay over every call.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

// benchSandbox is the sandbox destination in process, slowed down.
type benchSandbox struct {
	url string
	cfg *review.Config
	sb  *sandbox.Sandbox
	srv *http.Server
}

// startBenchSandbox serves a sandbox whose every call takes delay: the
// sandbox's own Delay covers mutating requests, and slowProbes the probes
// (GET), which the sandbox never delays by itself.
func startBenchSandbox(delay time.Duration) (*benchSandbox, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		ln.Close()
		return nil, err
	}
	b := &benchSandbox{url: "http://" + ln.Addr().String()}
	// Keys not honoured: a timeout after send is then ambiguous whatever
	// the risk class, and only reconciliation can settle it.
	if b.cfg, err = sandbox.LimboConfig(sandbox.LimboOptions{Base: b.url, Lease: review.DefaultLease, WebhookSecret: secret, RetryRatio: 1}); err != nil {
		ln.Close()
		return nil, err
	}
	b.sb = sandbox.New(sandbox.Options{Delay: delay})
	b.srv = &http.Server{Handler: slowProbes(b.sb.Handler(), delay), ReadHeaderTimeout: 10 * time.Second}
	go b.srv.Serve(ln)
	return b, nil
}

func (b *benchSandbox) close() {
	b.srv.Close()
	b.sb.Close()
}

// slowProbes delays every GET by d before h answers it.
func slowProbes(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// reconcileFigures is what the reconcile run measured.
type reconcileFigures struct {
	perMin           float64
	confirmed        int
	probeConcurrency int
}

// benchReconcileTenant owns the reconcile run's operations.
const benchReconcileTenant = "limbo-bench-reconcile"

// benchReconcile makes k operations ambiguous — registered, attempted,
// created at the sandbox (the effect happened) and reported as a timeout
// after send — then runs reconciler rounds until none is left ambiguous.
// The app's own reconciliation loop runs beside these rounds, as a second
// instance would (claims are disjoint), and may settle some during setup.
// The clock runs from the first round to the end of the last round that
// claimed anything; setup and the final check are not timed.
func benchReconcile(ctx context.Context, st *store.Store, b *benchSandbox, k int, log *slog.Logger) (*reconcileFigures, error) {
	ids, err := makeAmbiguous(ctx, st, b.url, k)
	if err != nil {
		return nil, err
	}
	rec := reconcile.New(st, b.cfg, "limbo-bench/rounds", log)
	g, err := st.Gauges(ctx)
	if err != nil {
		return nil, err
	}
	// Only those still ambiguous when the clock starts count.
	left := g.OperationsByState[string(review.Ambiguous)]
	start := time.Now()
	last := start
	giveUp := start.Add(5 * time.Minute)
	for {
		n, err := rec.RunOnce(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: reconcile: %w", err)
		}
		if n > 0 {
			last = time.Now()
			continue
		}
		g, err := st.Gauges(ctx)
		if err != nil {
			return nil, err
		}
		if g.OperationsByState[string(review.Ambiguous)] == 0 {
			break
		}
		if time.Now().After(giveUp) {
			return nil, fmt.Errorf("bench: reconcile: %d operations still ambiguous after 5 minutes", g.OperationsByState[string(review.Ambiguous)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	f := &reconcileFigures{perMin: float64(left) / max(last.Sub(start), time.Millisecond).Minutes(), probeConcurrency: b.cfg.Destination(sandbox.DestinationName).ProbeConcurrency}
	for _, id := range ids {
		op, err := st.GetOperation(ctx, benchReconcileTenant, id, "")
		if err != nil {
			return nil, err
		}
		if op.State == review.Confirmed {
			f.confirmed++
		}
	}
	return f, nil
}

// makeAmbiguous sets up k ambiguous operations whose effect exists at the
// sandbox, eight at a time (each sandbox call takes the delay).
func makeAmbiguous(ctx context.Context, st *store.Store, sbURL string, k int) ([]string, error) {
	ids := make([]string, k)
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				id, err := makeOneAmbiguous(ctx, st, hc, sbURL, i)
				mu.Lock()
				ids[i] = id
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range k {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("bench: reconcile setup: %w", errors.Join(errs[:1]...))
	}
	return ids, nil
}

func makeOneAmbiguous(ctx context.Context, st *store.Store, hc *http.Client, sbURL string, i int) (string, error) {
	op, _, err := st.Register(ctx, review.Registration{Tenant: benchReconcileTenant, SourceRef: fmt.Sprintf("reconcile/%d", i),
		LogicalVersion: "v1", Action: "create_file", Destination: sandbox.DestinationName, Risk: review.RiskCompensableWrite,
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Actor: "cli:bench"})
	if err != nil {
		return "", err
	}
	g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: benchReconcileTenant, OperationID: op.ID, Actor: "cli:bench"})
	if err != nil {
		return "", err
	}
	body := fmt.Sprintf(`{"name":"reconcile-%d.pdf","metadata":{"operation_id":%q,"logical_version":"v1"}}`, i, op.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sbURL+"/files", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", g.Key)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("sandbox POST /files: %d", resp.StatusCode)
	}
	// The answer "was lost": the integration reports a timeout after send.
	res, err := st.RecordOutcome(ctx, benchReconcileTenant, op.ID, g.N,
		review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "cli:bench")
	if err != nil {
		return "", err
	}
	if res.Next != review.NextReconcile {
		return "", fmt.Errorf("operation %s: next %q after a timeout, want reconcile", op.ID, res.Next)
	}
	return op.ID, nil
}
