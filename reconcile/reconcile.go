// Package reconcile is the background worker that settles ambiguous
// operations: it claims them with a fenced lease in the store, probes the
// destination over HTTP as configured (status lookup, then metadata
// search), and applies review.Settle's verdict. Several instances may run
// against one PostgreSQL: claims are disjoint and a late one is fenced.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Reconciler settles ambiguous operations.
type Reconciler struct {
	Store  *store.Store
	Config *review.Config
	Prober *Prober
	// Owner names this reconciler in claims (host and process, say).
	Owner string
	// Lease is how long a claim holds; a round that outlives it is fenced.
	Lease time.Duration
	// Batch is how many operations one round claims.
	Batch int
	Log   *slog.Logger
	// Metrics, when set, counts verdicts and times probes.
	Metrics *metrics.Metrics

	mu   sync.Mutex
	sems map[string]chan struct{}
}

// New returns a reconciler with sensible defaults.
func New(st *store.Store, cfg *review.Config, owner string, log *slog.Logger) *Reconciler {
	if log == nil {
		log = slog.Default()
	}
	p := NewProber(cfg)
	p.log = log
	return &Reconciler{Store: st, Config: cfg, Prober: p, Owner: owner, Lease: 30 * time.Second, Batch: 64, Log: log,
		sems: map[string]chan struct{}{}}
}

// Run reconciles every interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) {
	loop.Drain(ctx, every, r.Log, "reconcile round", r.Batch, r.RunOnce)
}

// RunOnce claims a batch of due ambiguous operations and runs one
// reconciliation round on each, concurrently within each destination's
// reserved probe concurrency. It returns how many it claimed.
//
// Operations that could not be claimed (*store.SkippedRows) do not stop the
// round: the others are reconciled, and the round's error names them.
func (r *Reconciler) RunOnce(ctx context.Context) (int, error) {
	var skipped []error
	// fatal keeps a claim's skipped operations for the round's error, and
	// says whether err is another error, which ends the round.
	fatal := func(err error) bool {
		var sk *store.SkippedRows
		if errors.As(err, &sk) {
			skipped = append(skipped, err)
			return false
		}
		return err != nil
	}
	claims, err := r.Store.ClaimAmbiguous(ctx, r.Owner, r.Batch, r.Lease)
	if fatal(err) {
		return 0, err
	}
	jobs, err := r.Store.ClaimAccepted(ctx, r.Owner, r.Batch, r.Lease)
	if fatal(err) {
		return 0, err
	}
	claims = append(claims, jobs...)
	jobs, err = r.Store.ClaimJobsInReview(ctx, r.Owner, r.Batch, r.Lease)
	if fatal(err) {
		return 0, err
	}
	claims = append(claims, jobs...)
	watches, err := r.Store.ClaimWatches(ctx, r.Batch, r.Lease)
	if fatal(err) {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, c := range watches {
		r.within(ctx, &wg, c.Op.Destination, func() { r.watch(ctx, c) })
	}
	for _, c := range claims {
		r.within(ctx, &wg, c.Op.Destination, func() { r.round(ctx, c) })
	}
	wg.Wait()
	return len(claims) + len(watches), errors.Join(skipped...)
}

// within runs work on its own goroutine, counted in wg, once dest's
// reserved probe concurrency has room (or not at all when ctx ends first).
func (r *Reconciler) within(ctx context.Context, wg *sync.WaitGroup, dest string, work func()) {
	sem := r.sem(dest)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-sem }()
		// A probe's panic is a failed probe (Prober.guardedSend); any
		// other in this operation's work (weighing, applying) ends it
		// here, logged, its claim left to lapse and be taken again,
		// rather than ending the process.
		defer loop.Recover(ctx, r.Log, "reconcile of one operation")
		work()
	}()
}

// watch looks once more for an operation inside its confirm window
// (review.Watch): a destination whose search lags longer than it says
// shows the first write late, next to the retry's.
func (r *Reconciler) watch(ctx context.Context, c store.WatchClaim) {
	dest := r.Config.Destination(c.Op.Destination)
	results := r.Prober.Probe(ctx, c.Op, dest)
	w := review.Watch(c.Op, dest, results, c.Until, r.Store.Now())
	if err := r.Store.ApplyWatch(ctx, c, w); err != nil {
		if !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
			r.Log.Warn("reconcile: confirm window look not applied", "op_id", c.Op.ID, "err", err)
		}
		return
	}
	if len(w.Extra) > 0 {
		r.Log.Warn("confirm window: the destination holds an extra resource for a confirmed operation; case opened",
			"op_id", c.Op.ID, "extra", w.Extra[0].Ref)
	}
}

func (r *Reconciler) round(ctx context.Context, c store.ProbeClaim) {
	dest := r.Config.Destination(c.Op.Destination)
	if c.Op.State == review.Accepted || c.Op.State == review.NeedsReview {
		r.pollJob(ctx, c, dest)
		return
	}
	results := r.Prober.Probe(ctx, c.Op, dest)
	st := review.Settle(review.SettleInput{Op: c.Op, Destination: dest, LastWrite: c.LastWrite, Results: results,
		Round: c.Round, Now: r.Store.Now()})
	if err := r.Store.ApplySettlement(ctx, c, st); err != nil {
		switch {
		case errors.Is(err, store.ErrFenced):
			// The operation moved on meanwhile (an outcome, a job report):
			// the normal race, not a fault.
			r.Log.Debug("reconcile: settlement fenced", "op_id", c.Op.ID)
		case ctx.Err() == nil:
			r.Log.Warn("reconcile: settlement not applied", "op_id", c.Op.ID, "err", err)
		}
		return
	}
	if m := r.Metrics; m != nil {
		dest := m.Destination(c.Op.Destination)
		for _, res := range results {
			m.ProbeSeconds.WithLabelValues(dest, string(res.Kind)).Observe(res.Took.Seconds())
		}
		verdict := string(st.State)
		if verdict == "" {
			verdict = "inconclusive"
		} else {
			m.AmbiguousSeconds.WithLabelValues(dest).Observe(r.Store.Now().Sub(c.Op.UpdatedAt).Seconds())
		}
		m.Verdicts.WithLabelValues(verdict, dest).Inc()
	}
	if st.State != "" {
		r.Log.Info("reconciled", "op_id", c.Op.ID, "state", st.State, "reason", st.Reason)
	}
}

func (r *Reconciler) sem(dest string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sems[dest]
	if !ok {
		n := r.Config.Destination(dest).ProbeConcurrency
		if n <= 0 {
			n = 4
		}
		s = make(chan struct{}, n)
		r.sems[dest] = s
	}
	return s
}

// pollJob asks the destination how an accepted operation's job is doing
// (or the job the case of one in review waits on) and records the answer;
// a finished job settles an accepted operation, and is put before the
// person deciding one in review. Polls back off from a second to a
// minute; a webhook brings the next one forward.
func (r *Reconciler) pollJob(ctx context.Context, c store.ProbeClaim, dest review.Destination) {
	next := r.Store.Now().Add(min(time.Second<<min(c.Round, 6), time.Minute))
	job, err := r.Prober.Job(ctx, c.Op, dest)
	switch {
	case errors.Is(err, ErrGone):
		// The ledger holds this job; the destination says it does not
		// exist. A person decides what that means.
		polled, _ := review.JobToPoll(c.Op)
		reason := fmt.Sprintf(review.WhyJobGone, polled.Ref, err.Error())
		ev := review.Evidence{Source: review.SourceStatusLookup, Authoritative: true, Verdict: review.VerdictInconclusive,
			Candidates: []review.Candidate{}, Note: reason}
		err = r.Store.ApplyJobGone(ctx, c, ev, reason)
		switch {
		case err == nil:
			r.Log.Info("reconciled", "op_id", c.Op.ID, "state", review.NeedsReview, "reason", reason)
		case errors.Is(err, store.ErrFenced) || errors.Is(err, review.ErrConflict):
			r.Log.Debug("reconcile: job poll fenced", "op_id", c.Op.ID)
		case ctx.Err() == nil:
			r.Log.Warn("reconcile: job poll not applied", "op_id", c.Op.ID, "err", err)
		}
		return
	case err != nil:
		r.Log.Debug("job poll failed", "op_id", c.Op.ID, "err", err)
		job = nil
	}
	if err := r.Store.ApplyJobPoll(ctx, c, job, next); err != nil && ctx.Err() == nil {
		if errors.Is(err, store.ErrFenced) || errors.Is(err, review.ErrConflict) {
			r.Log.Debug("reconcile: job poll fenced", "op_id", c.Op.ID)
			return
		}
		r.Log.Warn("reconcile: job poll not applied", "op_id", c.Op.ID, "err", err)
	}
}

// Check asks op's destination about it now, at a person's word (a check,
// review.Checkable): the probes a round sends, within the destination's
// reserved probe concurrency, read as a round reads them, and — when the
// case waits on a job (review.JobToWaitOn) — the job probe, as a poll
// asks it. It returns the answers to record (review.CheckAnswers) and
// settles nothing; the caller records them (store.RecordCheck). It ends
// early, with ctx's error, when ctx ends while waiting for room.
func (r *Reconciler) Check(ctx context.Context, op *review.Operation) (review.CheckAnswers, error) {
	sem := r.sem(op.Destination)
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return review.CheckAnswers{}, ctx.Err()
	}
	defer func() { <-sem }()
	dest := r.Config.Destination(op.Destination)
	results := r.Prober.Probe(ctx, op, dest)
	if m := r.Metrics; m != nil {
		for _, res := range results {
			m.ProbeSeconds.WithLabelValues(m.Destination(op.Destination), string(res.Kind)).Observe(res.Took.Seconds())
		}
	}
	a := review.CheckAnswers{Evidence: review.CheckEvidence(op, dest, results, r.Store.Now())}
	if _, wait := review.JobToWaitOn(op, nil); wait && dest.Probes.Job != nil {
		// The job the case waits on: a person asking the destination now
		// means about it too, not only in a minute, at the next poll. An
		// answer that fails or does not find the job is left to the
		// polls (pollJob, ApplyJobGone).
		if j, err := r.Prober.Job(ctx, op, dest); err == nil {
			a.Job = j
		}
	}
	return a, nil
}
