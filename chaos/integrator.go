package chaos

// The integrations of `limbo chaos`: each is a "process" — a group of
// goroutines with its own context and HTTP clients — that is killed at
// random points (its context cancelled mid-flight, its connections closed)
// and restarted. What survives a kill is what a real integration keeps
// durably: its list of intentions and whether each is finished. A restarted
// integration registers its unfinished intentions again (same key, so the
// same operation) and carries on from the state Limbo holds.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
)

// intention is one business intention of an integration, and what the
// integration remembers about it across kills.
type intention struct {
	flavour simulate.Flavour
	reg     client.Registration
	body    map[string]any

	started  atomic.Bool
	finished atomic.Bool
	// busy: a worker holds it; lookAt: not before this (Unix ns).
	busy   atomic.Bool
	lookAt atomic.Int64
	// life and opID: the life that registered it last, and the operation;
	// only the worker holding busy touches them.
	life int
	opID string

	mu sync.Mutex
	// acks are the distinct acknowledged registrations (operation, key,
	// payload hash): one when all agree, as I6 wants; registers counts
	// them all.
	acks      []review.Ack
	registers int
}

// acknowledge records an acknowledged registration, keeping it when it
// differs from every one before (so a mismatch is never lost, and a
// thousand agreeing answers cost one entry).
func (it *intention) acknowledge(op *client.Operation) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.registers++
	a := review.Ack{Intention: it.reg.SourceRef + " " + it.reg.Action, ID: op.ID, Key: op.Key, PayloadHash: op.PayloadHash}
	if !slices.Contains(it.acks, a) {
		it.acks = append(it.acks, a)
	}
}

// acknowledged returns the distinct acknowledgements and how many
// registrations were acknowledged in all.
func (it *intention) acknowledged() ([]review.Ack, int) {
	it.mu.Lock()
	defer it.mu.Unlock()
	return slices.Clone(it.acks), it.registers
}

// integrator is one simulated integration: one tenant, its intentions.
type integrator struct {
	name       string
	token      string
	limboURL   string
	sandboxURL string
	workers    int
	work       []*intention
	// killAt are the shares of started intentions at which it is killed.
	killAt []float64
	kills  atomic.Int32
	// over: supervise returned (everything finished, or stopped).
	over atomic.Bool
	rng  *rand.Rand
	log  *slog.Logger
}

// newIntegrators builds the integrations, their tenants and tokens, and
// deals ops intentions out among them, cycling through every simulate.Flavour.
// Pairs of intentions share a source at versions 1 and 2: a new version is
// a new key.
func newIntegrators(ctx context.Context, cfg app.Config, o Options, limboURL, sbURL string, rng *rand.Rand) ([]*integrator, error) {
	st, err := app.OpenStore(ctx, cfg.DB, store.Options{Config: cfg.Destinations, MaxConns: cfg.MaxConns}, nil)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	igs := make([]*integrator, o.Integrators)
	// Tenants of this run only: the same intentions registered in an
	// earlier run's tenants would answer with that run's operations.
	run := strconv.FormatInt(time.Now().Unix()%1e6, 36) + strconv.FormatUint(rng.Uint64()%1296, 36)
	for i := range igs {
		tenant := fmt.Sprintf("chaos-%s-%d", run, i+1)
		tok, err := st.CreateToken(ctx, review.Operator("cli:chaos"), tenant, "chaos integration")
		if err != nil {
			return nil, err
		}
		ig := &integrator{name: tenant, token: tok, limboURL: limboURL, sandboxURL: sbURL, workers: o.Workers,
			rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), log: o.Log.With("integration", tenant)}
		for range o.Kills {
			ig.killAt = append(ig.killAt, 0.1+0.8*ig.rng.Float64())
		}
		slices.Sort(ig.killAt)
		igs[i] = ig
	}
	order := rng.Perm(o.Ops)
	for n, i := range order {
		f := simulate.Flavours[i%len(simulate.Flavours)]
		source, version := fmt.Sprintf("doc-%05d", i/2), strconv.Itoa(i%2+1)
		it := &intention{flavour: f}
		if f.Body != nil {
			it.body = f.Body(source, version)
		}
		it.reg = f.Registration(source, version, it.body)
		ig := igs[n%len(igs)]
		ig.work = append(ig.work, it)
	}
	return igs, nil
}

func (ig *integrator) progress() (started, finished int) {
	for _, it := range ig.work {
		if it.started.Load() {
			started++
		}
		if it.finished.Load() {
			finished++
		}
	}
	return
}

// supervise runs the integration's lives: each kill point ends one life
// mid-flight, and a new life starts after a short pause. It returns when
// every intention is finished or ctx ends.
func (ig *integrator) supervise(ctx context.Context) {
	defer ig.over.Store(true)
	for life := 0; ; life++ {
		lifeCtx, kill := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); ig.live(lifeCtx, life+1) }()
		if life < len(ig.killAt) && ig.waitForKillPoint(ctx, done, ig.killAt[life]) {
			// A random point: whatever each worker is doing right now.
			simulate.Pause(ctx, time.Duration(ig.rng.IntN(250))*time.Millisecond)
			kill()
			<-done
			ig.kills.Add(1)
			ig.log.Info("chaos: integration killed", "life", life+1)
			simulate.Pause(ctx, time.Duration(50+ig.rng.IntN(250))*time.Millisecond)
			if ctx.Err() == nil {
				continue
			}
			return
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
		kill()
		<-done
		if _, finished := ig.progress(); finished == len(ig.work) || ctx.Err() != nil {
			return
		}
	}
}

// waitForKillPoint waits until the share of started intentions reaches at;
// false when the life ended or ctx did first.
func (ig *integrator) waitForKillPoint(ctx context.Context, done <-chan struct{}, at float64) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if started, _ := ig.progress(); float64(started) >= at*float64(len(ig.work)) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-done:
			return false
		case <-t.C:
		}
	}
}

// live is one life of the integration: fresh HTTP clients, and workers
// taking the unfinished intentions in turn. A worker carries an intention
// as far as it can go now, and moves on while it waits for something else
// (a lease to expire, reconciliation, a job), as an integration with a work
// queue would. It returns when every intention is finished or ctx ends;
// either way its connections are closed.
func (ig *integrator) live(ctx context.Context, life int) {
	limboTr := &http.Transport{MaxIdleConnsPerHost: ig.workers, IdleConnTimeout: 30 * time.Second}
	defer limboTr.CloseIdleConnections()
	c := client.New(ig.limboURL, ig.token, client.WithHTTPClient(&http.Client{Transport: limboTr, Timeout: 10 * time.Second}))
	dest := simulate.DestClient(destSendTimeout)
	defer dest.CloseIdleConnections()

	queue := make(chan *intention)
	go func() {
		defer close(queue)
		for {
			unfinished := false
			for _, it := range ig.work {
				if it.finished.Load() {
					continue
				}
				unfinished = true
				if time.Now().UnixNano() < it.lookAt.Load() || !it.busy.CompareAndSwap(false, true) {
					continue
				}
				select {
				case queue <- it:
				case <-ctx.Done():
					it.busy.Store(false)
					return
				}
			}
			if !unfinished || !simulate.Pause(ctx, 50*time.Millisecond) {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range ig.workers {
		wg.Go(func() {
			for it := range queue {
				it.started.Store(true)
				ig.step(ctx, c, dest, it, life)
				it.busy.Store(false)
			}
		})
	}
	wg.Wait()
}

// step carries one intention as far as it goes now: register it (again,
// after a restart: same key, same operation) or look it up, then act on
// the state Limbo holds, until it is terminal or in review (finished), or
// waits for something else (parked for a while), or ctx ends.
func (ig *integrator) step(ctx context.Context, c *client.Client, dest *http.Client, it *intention, life int) {
	park := func(d time.Duration) { it.lookAt.Store(time.Now().Add(d).UnixNano()) }
	var op *client.Operation
	var err error
	if it.life != life {
		if op, _, err = c.Register(ctx, it.reg); err == nil {
			it.acknowledge(op)
			it.life, it.opID = life, op.ID
		}
	} else {
		op, err = c.Get(ctx, it.opID)
	}
	if err != nil {
		ig.trouble(ctx, "register", it, err)
		park(200 * time.Millisecond)
		return
	}
	for ctx.Err() == nil {
		switch op.State {
		case client.Pending, client.RetryWait:
			res, err := c.Do(ctx, op.ID, client.AttemptOptions{}, simulate.Sender(dest, ig.sandboxURL, it.flavour, op, it.body))
			if err == nil {
				op = res.Operation
				continue
			}
			if !client.IsProblem(err, "not-attemptable") {
				ig.trouble(ctx, "attempt", it, err)
			}
			park(200 * time.Millisecond)
			return
		case client.Accepted:
			next, err := simulate.FollowJob(ctx, c, dest, ig.sandboxURL, op)
			if err != nil {
				ig.trouble(ctx, "job", it, err)
			}
			if err != nil || next.State == client.Accepted {
				park(100 * time.Millisecond)
				return
			}
			op = next
		case client.InFlight, client.Ambiguous:
			// An attempt of an earlier life waits for its lease to expire;
			// reconciliation settles the ambiguous.
			park(300 * time.Millisecond)
			return
		default:
			// Terminal, in review or awaiting approval: nothing left for
			// the integration to do.
			it.finished.Store(true)
			return
		}
	}
}

// trouble logs an unexpected error (not the kill's own) and pauses.
func (ig *integrator) trouble(ctx context.Context, what string, it *intention, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	ig.log.Warn("chaos: integration error", "step", what, "source_ref", it.reg.SourceRef, "action", it.reg.Action, "err", err)
}

// runIntegrators runs every integration until all intentions are finished,
// or until settle has passed since the last one started and the last kill
// was done. It reports whether everything finished in time.
func runIntegrators(ctx context.Context, igs []*integrator, settle time.Duration, log *slog.Logger, f *faults) bool {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, ig := range igs {
		wg.Go(func() { ig.supervise(runCtx) })
	}
	f.start(ctx, func() float64 { return startedShare(igs) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var settleFrom time.Time
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return allFinished(igs)
		case <-ctx.Done():
			stop()
			<-done
			return false
		case <-t.C:
		}
		if settleFrom.IsZero() && allStarted(igs) && f.finished() {
			settleFrom = time.Now()
		}
		if !settleFrom.IsZero() && time.Since(settleFrom) > settle {
			log.Warn("chaos: operations still unsettled after --settle; stopping the integrations", "settle", settle)
			stop()
			<-done
			return allFinished(igs)
		}
	}
}

// startedShare is the share of every integration's intentions started.
func startedShare(igs []*integrator) float64 {
	started, all := 0, 0
	for _, ig := range igs {
		s, _ := ig.progress()
		started, all = started+s, all+len(ig.work)
	}
	return float64(started) / float64(max(all, 1))
}

func allStarted(igs []*integrator) bool {
	for _, ig := range igs {
		if ig.over.Load() {
			continue
		}
		if started, _ := ig.progress(); started < len(ig.work) || int(ig.kills.Load()) < len(ig.killAt) {
			return false
		}
	}
	return true
}

func allFinished(igs []*integrator) bool {
	for _, ig := range igs {
		if _, finished := ig.progress(); finished < len(ig.work) {
			return false
		}
	}
	return true
}
