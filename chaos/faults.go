package chaos

// The faults the run does to Limbo itself while the integrations work:
// the server killed with SIGKILL and restarted (--server-kills), the
// database stopped at once and started again (--db-restarts). Each comes
// at a random share of the intentions started, so it lands mid-flight.

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/simulate"
)

const (
	faultServerKill = "server kill"
	faultDBRestart  = "database restart"
)

type fault struct {
	at   float64 // share of intentions started
	kind string
	down time.Duration
}

// faults plays the planned faults once.
type faults struct {
	o    Options
	lim  *limbo
	plan []fault

	serverKills, dbRestarts atomic.Int32
	over                    atomic.Bool
	wg                      sync.WaitGroup
	err                     error
}

func newFaults(o Options, lim *limbo, rng *rand.Rand) *faults {
	f := &faults{o: o, lim: lim}
	for range o.ServerKills {
		f.plan = append(f.plan, fault{at: 0.1 + 0.8*rng.Float64(), kind: faultServerKill,
			down: time.Duration(200+rng.IntN(1300)) * time.Millisecond})
	}
	for range o.DBRestarts {
		f.plan = append(f.plan, fault{at: 0.1 + 0.8*rng.Float64(), kind: faultDBRestart,
			down: time.Duration(500+rng.IntN(1500)) * time.Millisecond})
	}
	slices.SortFunc(f.plan, func(a, b fault) int { return cmp.Compare(a.at, b.at) })
	if len(f.plan) == 0 {
		f.over.Store(true)
	}
	return f
}

// start plays the plan as started() (the share of intentions started)
// passes each fault's point.
func (f *faults) start(ctx context.Context, started func() float64) {
	if len(f.plan) == 0 {
		return
	}
	f.wg.Go(func() {
		defer f.over.Store(true)
		for _, ft := range f.plan {
			for started() < ft.at {
				if !simulate.Pause(ctx, 20*time.Millisecond) {
					return
				}
			}
			if err := f.do(ctx, ft); err != nil {
				f.err = fmt.Errorf("chaos: %s: %w", ft.kind, err)
				return
			}
		}
	})
}

func (f *faults) do(ctx context.Context, ft fault) error {
	f.o.Log.Info("chaos: fault", "kind", ft.kind, "at", ft.at, "down", ft.down)
	switch ft.kind {
	case faultServerKill:
		if err := f.lim.kill(ctx, ft.down); err != nil {
			return err
		}
		f.serverKills.Add(1)
	case faultDBRestart:
		from := time.Now()
		if out, err := exec.CommandContext(ctx, f.o.DBStop[0], f.o.DBStop[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v: %s", f.o.DBStop, err, out)
		}
		simulate.Pause(ctx, ft.down)
		// Started even when ctx ended: the database must not stay down.
		out, err := exec.Command(f.o.DBStart[0], f.o.DBStart[1:]...).CombinedOutput()
		f.lim.outages.add(review.Outage{From: from, To: time.Now()})
		if err != nil {
			return fmt.Errorf("%v: %v: %s", f.o.DBStart, err, out)
		}
		f.dbRestarts.Add(1)
	}
	return nil
}

// wait returns once every fault was played, with the first error.
func (f *faults) wait() error {
	f.wg.Wait()
	return f.err
}

// finished reports whether every fault was played (or stopped).
func (f *faults) finished() bool { return f.over.Load() }

// done counts the server kills and database restarts played.
func (f *faults) done() (int, int) { return int(f.serverKills.Load()), int(f.dbRestarts.Load()) }
