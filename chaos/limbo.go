package chaos

// The Limbo under test. Assembled by app, as `limbo serve` assembles it:
// in this process when nothing kills it, or as a `limbo serve` child
// process that the run kills with SIGKILL and restarts on the same
// database (--server-kills).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/simulate"
)

// limbo is the Limbo under test.
type limbo struct {
	url     string
	appCfg  app.Config
	sweeps  record[review.SweepRound]
	outages record[review.Outage]

	// In process.
	app *app.App

	// As a child process: bin serve args…
	bin   string
	args  []string
	mu    sync.Mutex
	cmd   *exec.Cmd
	exits chan struct{}
	log   *slog.Logger
	// childLoops are the loops the child's serving line named.
	childLoops []string
}

// newLimbo prepares the Limbo under test on addr (a free loopback port):
// in process, or — bin set — as `bin serve` with the configuration, key
// and anchor directory written to dir.
func newLimbo(ctx context.Context, bin, dir string, ln net.Listener, cfg app.Config) (*limbo, error) {
	l := &limbo{url: "http://" + ln.Addr().String(), appCfg: cfg, bin: bin, log: cfg.Log}
	l.appCfg.OnSweep = func(start, end time.Time) { l.sweeps.add(review.SweepRound{Start: start, End: end}) }
	if bin == "" {
		l.appCfg.Listener = ln
		a, err := app.New(ctx, l.appCfg)
		if err != nil {
			return nil, err
		}
		l.app = a
		a.Start(ctx)
		return l, nil
	}
	ln.Close() // the child listens there; SO_REUSEADDR lets it
	cfgFile, keyFile := filepath.Join(dir, "limbo.yaml"), filepath.Join(dir, "audit-key")
	if err := os.WriteFile(cfgFile, sandbox.ConfigYAML(cfg.Destinations), 0o600); err != nil {
		return nil, err
	}
	if err := auditkey.WriteFile(keyFile, cfg.AuditKey); err != nil {
		return nil, err
	}
	l.args = []string{"serve", "--addr", strings.TrimPrefix(l.url, "http://"), "--db", cfg.DB,
		"--config", cfgFile, "--audit-key", keyFile, "--audit-anchor", cfg.AnchorDir,
		"--db-max-conns", fmt.Sprint(cfg.MaxConns), "--log-level", "debug"}
	if err := l.start(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// start runs the child and waits until it answers /readyz.
func (l *limbo) start(ctx context.Context) error {
	cmd := exec.Command(l.bin, l.args...)
	// The child's own environment: no LIMBO_DB or key from the parent's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exits := make(chan struct{})
	go func() { l.readLog(stderr); cmd.Wait(); close(exits) }()
	l.mu.Lock()
	l.cmd, l.exits = cmd, exits
	l.mu.Unlock()
	return l.waitReady(ctx, exits)
}

// readLog follows the child's log: the lease-sweep rounds (debug lines)
// for I4; warnings and errors go to the run's log.
func (l *limbo) readLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if start, end, ok := app.ParseSweepLine(line); ok {
			l.sweeps.add(review.SweepRound{Start: start, End: end})
			continue
		}
		if loops, ok := app.ParseServingLine(line); ok {
			l.mu.Lock()
			l.childLoops = loops
			l.mu.Unlock()
		}
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			l.log.Warn("chaos: limbo serve: " + line)
		}
	}
}

func (l *limbo) waitReady(ctx context.Context, exits <-chan struct{}) error {
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(l.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exits:
			return fmt.Errorf("chaos: limbo serve exited before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("chaos: limbo serve not ready within 60 s")
}

// kill SIGKILLs the child — no shutdown, no final seal — and starts it
// again after down, on the same database; the outage is recorded for I4.
func (l *limbo) kill(ctx context.Context, down time.Duration) error {
	l.mu.Lock()
	cmd, exits := l.cmd, l.exits
	l.mu.Unlock()
	from := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	<-exits
	l.log.Info("chaos: limbo serve killed")
	simulate.Pause(ctx, down)
	err := l.start(ctx)
	l.outages.add(review.Outage{From: from, To: time.Now()})
	return err
}

// stop ends Limbo as an operator would (SIGTERM: requests finish, the
// trail is sealed), so the ledger is frozen for the check.
func (l *limbo) stop() {
	if l.app != nil {
		l.app.Close()
		return
	}
	l.mu.Lock()
	cmd, exits := l.cmd, l.exits
	l.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exits:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exits
	}
}

// loops names the background loops the Limbo under test runs.
func (l *limbo) loops() []string {
	if l.app != nil {
		return l.app.Loops()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.childLoops
}

// record is a list that the run's goroutines append to: the sweep
// rounds, the outages.
type record[T any] struct {
	mu    sync.Mutex
	items []T
}

func (r *record[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, v)
}

func (r *record[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}
