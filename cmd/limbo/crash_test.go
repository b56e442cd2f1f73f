package main

// The crash test: the real limbo binary is killed with SIGKILL while 20
// integrations register operations, start attempts and report outcomes
// through the client package; it is restarted on the same database each
// time. Afterwards every acknowledged operation must exist with the key and
// payload hash the server acknowledged (I1, I6), no key may have two rows,
// every state change must have exactly one audit event, and
// `limbo audit verify` must pass (I5): against the anchor directory every
// instance wrote, and on its own with the age check (the last instance has
// just stopped gracefully, so its final checkpoint is fresh).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/internal/limbobin"
	"github.com/limbo-dev/limbo/internal/testlog"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// crashTenant is the tenant every crash-test operation belongs to.
const crashTenant = "crash"

// crashWorkers is how many integrations run at once.
const crashWorkers = 20

func TestMain(m *testing.M) { limbobin.Main(m) }

func TestCrashRecovery(t *testing.T) {
	bin := limbobin.Path(t)
	kills := 3
	if testing.Short() {
		kills = 1
	}
	for _, engine := range storetest.Engines(t) {
		t.Run(string(engine), func(t *testing.T) {
			crashEngine(t, bin, engine, kills)
		})
	}
}

// crashEngine runs the whole scenario on one engine.
func crashEngine(t *testing.T, bin string, engine store.Engine, kills int) {
	began := time.Now()
	dbURL := storetest.URL(t, engine)

	if out, err := exec.Command(bin, "migrate", "--db", dbURL).CombinedOutput(); err != nil {
		t.Fatalf("limbo migrate: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "token", "create", "--tenant", crashTenant, "--db", dbURL).Output()
	if err != nil {
		t.Fatalf("limbo token create: %v\n%s", err, stderrOf(err))
	}
	token := strings.TrimSpace(string(out))
	if token == "" || strings.ContainsAny(token, " \n") {
		t.Fatalf("limbo token create printed %q, want the token alone", out)
	}

	// One signing key for every instance (PostgreSQL requires one), and
	// one anchor directory that survives the kills.
	keyFile := filepath.Join(t.TempDir(), "audit-key")
	if out, err := exec.Command(bin, "audit", "keygen", "--out", keyFile).Output(); err != nil || !strings.HasPrefix(string(out), "limbo-audit-pub-v1:") {
		t.Fatalf("limbo audit keygen: %v %q\n%s", err, out, stderrOf(err))
	}
	anchorDir := filepath.Join(t.TempDir(), "anchor")
	srv := &server{t: t, bin: bin, db: dbURL, args: []string{"--audit-key", keyFile, "--audit-anchor", anchorDir, "--db-max-conns", fmt.Sprint(storetest.MaxConns)}}
	t.Cleanup(srv.kill) // before storetest drops the database
	srv.start()

	// The clients share one *client.Client, replaced when a restart has to
	// move to another port.
	var cl atomic.Pointer[client.Client]
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: crashWorkers}}
	cl.Store(client.New(srv.url, token, client.WithHTTPClient(hc)))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ledger := &crashLedger{t: t}
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix := &integration{w: w, c: &cl, led: ledger, rng: rand.New(rand.NewPCG(uint64(w), uint64(began.UnixNano())))}
			ix.run(ctx)
		}()
	}

	// Kill after a random short delay (1–2.5 s of load: hundreds of
	// operations, and with 20 busy clients always some requests in flight),
	// restart on the same database, and again.
	rng := rand.New(rand.NewPCG(uint64(began.UnixNano()), 7))
	for k := 1; k <= kills; k++ {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		before := ledger.acked()
		srv.sigkill()
		killed := time.Now()
		if !srv.start() {
			stop()
			wg.Wait()
			t.FailNow()
		}
		cl.Store(client.New(srv.url, token, client.WithHTTPClient(hc)))
		t.Logf("kill %d/%d: SIGKILL after %d acknowledged operations; ready again in %s",
			k, kills, before, time.Since(killed).Round(time.Millisecond))
	}
	time.Sleep(1500 * time.Millisecond) // load on the last instance, then the checks
	stop()
	wg.Wait()

	acks := ledger.all()
	t.Logf("%d operations acknowledged (%d re-registrations, %d outcomes, %d requests with unknown result)",
		len(acks), ledger.reRegs.Load(), ledger.outcomes.Load(), ledger.unknowns.Load())
	t.Logf("unknown results, for example: %q", ledger.samples)
	if len(acks) == 0 {
		t.Fatal("no operation was acknowledged; the scenario did not run")
	}

	// Through the API, on the last server instance.
	checkThroughAPI(t, cl.Load(), acks)

	// A graceful stop seals the audit trail.
	srv.sigterm()

	// Directly in the database.
	checkInDatabase(t, dbURL, acks, ledger.sentKeys())

	// I5: the audit chain holds, complete up to the newest anchored
	// checkpoint, and (without the anchor) its newest checkpoint is fresh.
	for _, extra := range [][]string{{"--anchor", anchorDir}, nil} {
		cmd := exec.Command(bin, append([]string{"audit", "verify", "--db", dbURL, "--audit-key", keyFile}, extra...)...)
		var vout, verr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &vout, &verr
		if err := cmd.Run(); err != nil {
			t.Errorf("I5: limbo audit verify %v: %v\nstdout: %s\nstderr: %s", extra, err, vout.String(), verr.String())
		} else {
			t.Logf("limbo audit verify %v: %s", extra, strings.TrimSpace(vout.String()))
		}
	}
	t.Logf("%s: %d kills, %d operations, %s", engine, kills, len(acks), time.Since(began).Round(100*time.Millisecond))
	if t.Failed() {
		t.Logf("server log (tail):\n%s", srv.logTail(60))
	}
}

// server is one limbo serve process at a time on one database.
type server struct {
	t    *testing.T
	bin  string
	db   string
	args []string // more flags for limbo serve
	addr string
	url  string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // from Wait, once done is closed
	log  testlog.Buffer
}

// freeAddr finds a free local port (listen on :0, read it, close).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs limbo serve and waits for /readyz. It keeps the port of the
// previous instance when it can, so clients reconnect where they were.
// It reports false (after logging why) when the server never got ready.
func (s *server) start() bool {
	s.t.Helper()
	for try := 0; try < 3; try++ {
		if s.addr == "" || try > 0 {
			s.addr = freeAddr(s.t)
		}
		s.url = "http://" + s.addr
		fmt.Fprintf(&s.log, "--- limbo serve --addr %s (try %d)\n", s.addr, try+1)
		s.cmd = exec.Command(s.bin, append([]string{"serve", "--addr", s.addr, "--db", s.db}, s.args...)...)
		s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
		if err := s.cmd.Start(); err != nil {
			s.t.Fatalf("start limbo serve: %v", err)
		}
		s.done = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) {
			s.err = cmd.Wait()
			close(done)
		}(s.cmd, s.done)
		if s.waitReady(20 * time.Second) {
			return true
		}
		s.kill()
	}
	s.t.Errorf("limbo serve never became ready on %s\n%s", s.db, s.logTail(40))
	return false
}

// waitReady polls /readyz until it answers 200, the process exits, or d passes.
func (s *server) waitReady(d time.Duration) bool {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return false
		default:
		}
		resp, err := hc.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// sigkill kills the server at once and waits until it is gone.
func (s *server) sigkill() {
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatalf("SIGKILL: %v", err)
	}
	<-s.done
	fmt.Fprintf(&s.log, "--- SIGKILL\n")
}

// sigterm stops the server gracefully and expects exit status 0.
func (s *server) sigterm() {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.kill()
		s.t.Errorf("limbo serve did not stop within 30 s of SIGTERM")
		return
	}
	if s.err != nil {
		s.t.Errorf("limbo serve after SIGTERM: %v (want exit status 0)\n%s", s.err, s.logTail(20))
	}
}

// kill is the cleanup: no process outlives the test.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
	default:
		s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *server) logTail(lines int) string {
	all := strings.Split(strings.TrimRight(s.log.String(), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// ack is what the server acknowledged about one operation.
type ack struct {
	ID, Key, PayloadHash string
	SourceRef            string
	// State is the state the last acknowledged call left the operation in;
	// it is checked only when Settled (no later call went unanswered).
	State    client.State
	Resource *client.ResourceRef
	Settled  bool

	reg     client.Registration // the registration, for re-registering
	payload string              // the same payload, keys reordered and spaced
}

// crashLedger collects acknowledgements from all integrations.
type crashLedger struct {
	t        *testing.T
	mu       sync.Mutex
	acks     []*ack
	sent     map[string]bool // every key a registration was sent with
	errs     int
	samples  []string
	reRegs   atomic.Int64
	outcomes atomic.Int64
	unknowns atomic.Int64
}

func (l *crashLedger) add(a *ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks = append(l.acks, a)
}

func (l *crashLedger) sentKey(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sent == nil {
		l.sent = map[string]bool{}
	}
	l.sent[key] = true
}

func (l *crashLedger) sentKeys() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

func (l *crashLedger) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

func (l *crashLedger) all() []*ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*ack(nil), l.acks...)
}

// unknown counts a request whose result is unknown, and keeps a sample
// of the reasons for the log.
func (l *crashLedger) unknown(err error) {
	if errors.Is(err, context.Canceled) {
		return // the clients are stopping
	}
	l.unknowns.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) < 8 {
		l.samples = append(l.samples, err.Error())
	}
}

// errorf reports a failure from a client goroutine, capped so that one
// systematic bug does not bury the log.
func (l *crashLedger) errorf(format string, args ...any) {
	l.mu.Lock()
	l.errs++
	n := l.errs
	l.mu.Unlock()
	switch {
	case n <= 40:
		l.t.Errorf(format, args...)
	case n == 41:
		l.t.Errorf("… further client errors not shown")
	}
}

// integration is one simulated integrating backend.
type integration struct {
	w   int
	c   *atomic.Pointer[client.Client]
	led *crashLedger
	rng *rand.Rand
	own []*ack // acknowledged operations of this integration
}

func (ix *integration) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		if len(ix.own) > 0 && ix.rng.IntN(5) == 0 {
			ix.reRegister(ctx, ix.own[ix.rng.IntN(len(ix.own))])
			continue
		}
		a := ix.register(ctx, i)
		if a == nil {
			continue
		}
		ix.attemptAndReport(ctx, a)
	}
}

// unknownErr reports whether err leaves the request's result unknown
// (connection refused or reset, timeout, or the server failing), so the
// same request is to be sent again.
func unknownErr(err error) bool {
	var p *client.Problem
	if errors.As(err, &p) {
		return p.Status >= 500
	}
	return err != nil
}

// pause is the short wait between tries while the server restarts.
func (ix *integration) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(10+ix.rng.IntN(30)) * time.Millisecond):
	}
}

// newRegistration builds a unique operation: a compensable write,
// sometimes with a caller-supplied key.
func (ix *integration) newRegistration(i int) (client.Registration, string) {
	src := fmt.Sprintf("crash/w%02d/%06d", ix.w, i)
	doc := ix.rng.IntN(1_000_000)
	payload := fmt.Sprintf(`{"document":%d,"source":%q,"target":{"format":"pdf","folder":"w%02d"}}`, doc, src, ix.w)
	reordered := fmt.Sprintf(`{ "target": {"folder": "w%02d", "format": "pdf"}, "source": %q, "document": %d }`, ix.w, src, doc)
	r := client.Registration{
		SourceRef: src, LogicalVersion: "v1", Action: "transform", Destination: "files",
		Risk: client.RiskCompensableWrite, Payload: json.RawMessage(payload),
	}
	if ix.rng.IntN(3) == 0 {
		r.Key = fmt.Sprintf("crash-key-w%02d-%06d", ix.w, i)
	}
	return r, reordered
}

// register sends a new registration until it is acknowledged, treating
// every unknown result as "send it again with the same key". It returns
// nil when the test is stopping or the server refused it.
func (ix *integration) register(ctx context.Context, i int) *ack {
	reg, reordered := ix.newRegistration(i)
	key := reg.Key
	if key == "" {
		key = review.DeriveKey(crashTenant, reg.SourceRef, reg.Action, reg.LogicalVersion)
	}
	ix.led.sentKey(key)
	unknown := false
	for ctx.Err() == nil {
		op, created, err := ix.c.Load().Register(ctx, reg)
		if unknownErr(err) {
			unknown = true
			ix.led.unknown(err)
			ix.pause(ctx)
			continue
		}
		if err != nil {
			ix.led.errorf("register %s: %v", reg.SourceRef, err)
			return nil
		}
		if !created && !unknown {
			ix.led.errorf("register %s: answered 200 (existing operation %s) on the first try of a new source_ref", reg.SourceRef, op.ID)
		}
		if op.ID == "" || op.Key != key || op.PayloadHash == "" || op.State != client.Pending {
			ix.led.errorf("register %s: acknowledged operation %q key %q hash %q state %s; want key %q, state pending",
				reg.SourceRef, op.ID, op.Key, op.PayloadHash, op.State, key)
			return nil
		}
		a := &ack{ID: op.ID, Key: op.Key, PayloadHash: op.PayloadHash, SourceRef: reg.SourceRef,
			State: op.State, Settled: true, reg: reg, payload: reordered}
		ix.led.add(a)
		ix.own = append(ix.own, a)
		return a
	}
	return nil
}

// reRegister sends an acknowledged registration again (its payload with
// reordered keys half the time): I6 wants the same operation back.
func (ix *integration) reRegister(ctx context.Context, a *ack) {
	reg := a.reg
	if ix.rng.IntN(2) == 0 {
		reg.Payload = json.RawMessage(a.payload)
	}
	for ctx.Err() == nil {
		op, created, err := ix.c.Load().Register(ctx, reg)
		if unknownErr(err) {
			ix.led.unknown(err)
			ix.pause(ctx)
			continue
		}
		if err != nil {
			ix.led.errorf("I6: re-register operation %s (%s): %v", a.ID, a.SourceRef, err)
			return
		}
		ix.led.reRegs.Add(1)
		if created || op.ID != a.ID || op.Key != a.Key || op.PayloadHash != a.PayloadHash {
			ix.led.errorf("I6: re-register operation %s (%s): got id %s key %s hash %s created=%v; want id %s key %s hash %s and 200",
				a.ID, a.SourceRef, op.ID, op.Key, op.PayloadHash, created, a.ID, a.Key, a.PayloadHash)
		}
		return
	}
}

// attemptAndReport takes the operation through one attempt (sometimes
// two, after a retryable error) with a mix of outcomes.
func (ix *integration) attemptAndReport(ctx context.Context, a *ack) {
	for round := 0; round < 2 && ctx.Err() == nil; round++ {
		n, ok := ix.startAttempt(ctx, a)
		if !ok {
			return
		}
		o := ix.pickOutcome(a, round)
		res, ok := ix.report(ctx, a, n, o)
		if !ok || res.Next != client.NextRetryAt || res.RetryAt == nil || ix.rng.IntN(2) == 0 {
			return
		}
		// Retry after the backoff when it is short (full jitter, base 500 ms).
		wait := time.Until(*res.RetryAt)
		if wait > 1500*time.Millisecond {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait + 5*time.Millisecond):
		}
	}
}

// pickOutcome mixes the outcomes: success with a resource, timeout after
// send (ambiguous for a compensable write), 503 after send and a failure
// before send (both retry). A second round always succeeds.
func (ix *integration) pickOutcome(a *ack, round int) client.Outcome {
	success := client.Outcome{Result: client.ResultSuccess, Phase: client.PhaseAfterSend, HTTPStatus: 201,
		Resource: &client.ResourceRef{Ref: "file:" + a.SourceRef, Kind: "file", Version: "v1"}}
	if round > 0 {
		return success
	}
	switch p := ix.rng.IntN(100); {
	case p < 45:
		return success
	case p < 65:
		return client.Outcome{Result: client.ResultTimeout, Phase: client.PhaseAfterSend}
	case p < 85:
		return client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 503, RetryAfter: "0"}
	default:
		return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
	}
}

// startAttempt asks for an attempt until the answer is known. When a try
// whose answer was lost did grant it, the operation is in_flight and the
// grant is recovered from the operation itself.
func (ix *integration) startAttempt(ctx context.Context, a *ack) (int, bool) {
	unknown := false
	for ctx.Err() == nil {
		g, err := ix.c.Load().StartAttempt(ctx, a.ID, client.AttemptOptions{})
		if unknownErr(err) {
			unknown = true
			a.Settled = false // the attempt may have been granted
			ix.led.unknown(err)
			ix.pause(ctx)
			continue
		}
		var p *client.Problem
		switch {
		case err == nil:
			a.State, a.Settled = client.InFlight, true
			return g.N, true
		case unknown && errors.As(err, &p) && p.Status == http.StatusConflict && p.State == client.InFlight:
			op, err := ix.get(ctx, a)
			if err != nil || op.State != client.InFlight || op.AttemptCount < 1 {
				return 0, false
			}
			a.State, a.Settled = client.InFlight, true
			return op.AttemptCount, true
		case errors.As(err, &p) && p.Status == http.StatusTooManyRequests:
			return 0, false // a limit says wait; this integration moves on
		default:
			ix.led.errorf("start attempt on operation %s (%s, acknowledged state %s): %v", a.ID, a.SourceRef, a.State, err)
			return 0, false
		}
	}
	return 0, false
}

// report sends an outcome until it is acknowledged; the same outcome sent
// again must be answered 200 unchanged.
func (ix *integration) report(ctx context.Context, a *ack, n int, o client.Outcome) (*client.OutcomeResult, bool) {
	for ctx.Err() == nil {
		res, err := ix.c.Load().ReportOutcome(ctx, a.ID, n, o)
		if unknownErr(err) {
			a.Settled = false // the outcome may have been applied
			ix.led.unknown(err)
			ix.pause(ctx)
			continue
		}
		if err != nil {
			ix.led.errorf("outcome %s/%s for attempt %d of operation %s (%s): %v", o.Result, o.Phase, n, a.ID, a.SourceRef, err)
			return nil, false
		}
		ix.led.outcomes.Add(1)
		if res.Operation == nil || res.Operation.ID != a.ID {
			ix.led.errorf("outcome for operation %s (%s): answer names another operation: %+v", a.ID, a.SourceRef, res.Operation)
			return nil, false
		}
		a.State, a.Settled = res.Operation.State, true
		a.Resource = res.Operation.Resource
		if o.Result == client.ResultSuccess && (a.State != client.Confirmed || a.Resource == nil || a.Resource.Ref != o.Resource.Ref) {
			ix.led.errorf("outcome success for operation %s (%s): state %s resource %+v; want confirmed with %s",
				a.ID, a.SourceRef, a.State, a.Resource, o.Resource.Ref)
		}
		return res, true
	}
	return nil, false
}

func (ix *integration) get(ctx context.Context, a *ack) (*client.Operation, error) {
	for ctx.Err() == nil {
		op, err := ix.c.Load().Get(ctx, a.ID)
		if unknownErr(err) {
			if ctx.Err() == nil {
				ix.pause(ctx)
			}
			continue
		}
		return op, err
	}
	return nil, ctx.Err()
}

// checkThroughAPI reads back every acknowledged operation (I1, I6).
func checkThroughAPI(t *testing.T, c *client.Client, acks []*ack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	work := make(chan *ack)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if failures++; failures <= 40 {
			t.Errorf(format, args...)
		}
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				op, err := c.Get(ctx, a.ID)
				switch {
				case err != nil:
					fail("I1: GET acknowledged operation %s (%s, key %s): %v", a.ID, a.SourceRef, a.Key, err)
				case op.ID != a.ID || op.Key != a.Key || op.PayloadHash != a.PayloadHash:
					fail("I6: operation %s (%s): API answers id %s key %s hash %s; acknowledged key %s hash %s",
						a.ID, a.SourceRef, op.ID, op.Key, op.PayloadHash, a.Key, a.PayloadHash)
				case a.Settled && op.State != a.State:
					fail("I1: operation %s (%s): state %s, but the server acknowledged %s", a.ID, a.SourceRef, op.State, a.State)
				case a.Settled && a.State == client.Confirmed && (op.Resource == nil || *op.Resource != *a.Resource):
					fail("I1: operation %s (%s): resource %+v, acknowledged %+v", a.ID, a.SourceRef, op.Resource, a.Resource)
				}
			}
		}()
	}
	for _, a := range acks {
		work <- a
	}
	close(work)
	wg.Wait()
	if failures > 40 {
		t.Errorf("… %d API check failures in all", failures)
	}
}

// checkInDatabase opens the database directly and checks it with the
// invariants' one statement (review.CheckInvariants): every acknowledged
// operation is there with its key and hash (I1, I6), no key has two rows
// (I6), every state change has exactly one audit event and every attempt
// was granted from an attemptable state (I5, I3), every confirmation rests
// on evidence (I7). This test has no destination, so no truth: I2 and the
// ledger against the truth are the fault test's. Also, no row comes from
// a key nobody sent.
func checkInDatabase(t *testing.T, dbURL string, acks []*ack, sent map[string]bool) {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dbURL, store.Options{MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	defer s.Close()
	l, err := s.Ledger(ctx, []string{crashTenant})
	if err != nil {
		t.Fatalf("store.Ledger: %v", err)
	}
	for _, a := range acks {
		l.Acks = append(l.Acks, review.Ack{Intention: a.SourceRef, ID: a.ID, Key: a.Key, PayloadHash: a.PayloadHash})
	}
	rep := review.CheckInvariants(*l, review.Truth{})
	bad := 0
	for _, v := range rep.Violations {
		if v.Invariant == review.InvOneEffect || v.Invariant == review.LedgerVsTruth {
			continue // no truth here
		}
		if bad++; bad <= 40 {
			t.Errorf("%s", v)
		}
	}
	if rep.Lost > 0 {
		t.Errorf("I1: %d of %d acknowledged operations are missing", rep.Lost, len(acks))
	}
	attempts, finished := 0, 0
	for _, op := range l.Operations {
		if !sent[op.Key] {
			t.Errorf("operation %s (%s) has key %s, which no client sent", op.ID, op.SourceRef, op.Key)
		}
		attempts += len(op.Attempts)
		for _, a := range op.Attempts {
			if a.FinishedAt != nil {
				finished++
			}
		}
	}
	t.Logf("database: %d operations for %d acknowledged (the rest were sent and not yet answered when the clients stopped)", len(l.Operations), len(acks))
	t.Logf("audit: %d operation events; %d attempts, %d finished", len(l.Trail), attempts, finished)
}
