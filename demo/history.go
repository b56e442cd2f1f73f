package demo

// The demo's history and live mix: a week of operations written through
// the ledger's own paths (register, attempts, outcomes, job reports,
// reconciliation rounds, confirm-window looks, decisions) with the store's
// clock set to the moment each step "happened", so the dashboard has a
// week to show, the audit trail is the one those calls write, and every
// role finds work of its own in the queue.
//
// Reconciliation is the real one minus the network: review.Settle and
// review.Watch judge what a stand-in destination (seeder.holds) answers,
// and store.ApplySettlement and store.ApplyWatch write it, as the
// reconciler would have.

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
)

// Clock is the seeding store's clock: the seeder moves it forward as it
// writes, so each row and audit event carries the time its step happened.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now tells the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// set moves the clock to t; never back, so the audit trail's times only
// grow with its sequence.
func (c *Clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// rewind puts the clock back to t, where the history starts.
func (c *Clock) rewind(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// The demo's people: decisions in the history and the live mix are theirs
// (seedDemoUsers makes their accounts). A second reviewer, because a retry
// or an approval of an irreversible action needs two different ones.
const (
	supportUser   = "support@demo.example"
	reviewerUser  = "reviewer@demo.example"
	reviewer2User = "reviewer2@demo.example"
	seedActor     = "cli:demo"
)

// HistoryDays is how far back the history reaches.
const HistoryDays = 7

// MakeResource creates a resource at the destination whose metadata names
// operation opID at version, for op's case (copy tells apart the resources
// one operation gets), and returns it as a search would list it.
type MakeResource func(ctx context.Context, op *review.Operation, opID, version string, copy int) (review.Candidate, error)

// History says what SeedHistory wrote.
type History struct {
	// Skipped: the database holds the history already (a second
	// `serve --demo` on the same database); nothing was written.
	Skipped    bool
	Operations int
	Took       time.Duration
}

// historyMarker is the history's first operation: registered again on a
// database that holds it, it is not created, and the history is not
// written twice.
var historyMarker = review.Registration{Tenant: "demo", SourceRef: "demo-history", LogicalVersion: "1", Action: "create_folder",
	Destination: sandbox.DestinationName, Risk: review.RiskIdempotentWrite, Actor: seedActor,
	Payload: []byte(`{"body":{"name":"demo-history"},"method":"POST","path":"/folders"}`)}

// SeedHistory writes HistoryDays of history ending at end, then the live
// mix of open cases, into st, whose clock must be clk (store.Options.Clock
// = clk.Now) and whose configuration has the demo's sandbox destination
// (New). Nothing else may write to the database meanwhile: the clock is
// the seeder's. It is deterministic, and written once per database.
//
// mk, when set, creates at the destination each resource the live mix's
// cases are about (a file whose metadata names opID at version), so that
// what a person decides on them — an undo — acts on something real; nil
// makes up their refs, as the history's are.
func SeedHistory(ctx context.Context, st *store.Store, clk *Clock, end time.Time, mk MakeResource) (*History, error) {
	started := time.Now()
	start := end.Add(-HistoryDays * 24 * time.Hour)
	clk.rewind(start)
	op, created, err := st.Register(ctx, historyMarker)
	if err != nil {
		return nil, fmt.Errorf("demo history: %w", err)
	}
	if !created {
		clk.set(end)
		return &History{Skipped: true}, nil
	}
	s := &seeder{ctx: ctx, st: st, clk: clk, rng: rand.New(rand.NewPCG(7, 42)), holds: map[string][]review.Candidate{},
		settled: map[string]func(*review.Operation) error{}, mk: mk, end: end}
	s.at(start.Add(time.Second), func() error { return s.attempt(op, success(op, "folder")) })
	s.week(start, end)
	s.live(end)
	for s.q.Len() > 0 {
		st := heap.Pop(&s.q).(*step)
		if st.at.After(end) {
			// A decision nobody has taken yet: the case stays open.
			continue
		}
		clk.set(st.at)
		if err := st.run(); err != nil {
			return nil, fmt.Errorf("demo history at %s: %w", st.at.Format(time.RFC3339), err)
		}
	}
	clk.set(end)
	return &History{Operations: s.ops + 1, Took: time.Since(started)}, nil
}

// seeder runs the steps of every seeded operation in time order.
type seeder struct {
	ctx context.Context
	st  *store.Store
	clk *Clock
	rng *rand.Rand
	q   steps
	n   int // steps scheduled, to keep equal times in order
	ops int
	// sources numbers the history's documents, so no two share a key.
	sources int
	// holds is what the stand-in destination holds for an operation: what
	// its metadata search answers.
	holds map[string][]review.Candidate
	// settled continues an operation's story once a reconciliation round
	// moved it.
	settled map[string]func(*review.Operation) error
	mk      MakeResource
	// end is the history's end: steps after it have not happened yet.
	end time.Time
}

// resource is a resource of op's naming opID at version: made at the
// destination when the seeder can, else made up from ref.
func (s *seeder) resource(op *review.Operation, ref, opID, version string, copy int) (review.Candidate, error) {
	if s.mk != nil {
		return s.mk(s.ctx, op, opID, version, copy)
	}
	return review.Candidate{Ref: ref, Kind: kinds[op.Action], Version: version, OperationID: opID}, nil
}

type step struct {
	at  time.Time
	n   int
	run func() error
}

type steps []*step

func (q steps) Len() int { return len(q) }
func (q steps) Less(i, j int) bool {
	return q[i].at.Before(q[j].at) || (q[i].at.Equal(q[j].at) && q[i].n < q[j].n)
}
func (q steps) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *steps) Push(x any)   { *q = append(*q, x.(*step)) }
func (q *steps) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// at schedules fn at t.
func (s *seeder) at(t time.Time, fn func() error) {
	s.n++
	heap.Push(&s.q, &step{at: t, n: s.n, run: fn})
}

// after schedules fn d after the clock's now.
func (s *seeder) after(d time.Duration, fn func() error) { s.at(s.clk.Now().Add(d), fn) }

// following schedules fn d after the clock's now but no later than the
// history's end: it follows a decision already taken (the undo it
// registered, the release it let out), which must not be left half done —
// a step after the end is dropped, and an undo registered but never tried
// would wait for ever in the demo.
func (s *seeder) following(d time.Duration, fn func() error) {
	s.at(s.byEnd(s.clk.Now().Add(d)), fn)
}

// byEnd is t, or the history's end if t is after it.
func (s *seeder) byEnd(t time.Time) time.Time {
	if t.After(s.end) {
		return s.end
	}
	return t
}

// between is a random duration in [lo, hi).
func (s *seeder) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

// story is how one operation's life goes.
type story int

const (
	clean      story = iota // answered, confirmed
	transient               // a 503, retried, confirmed
	rejected                // a 422: failed
	lostFound               // answer lost; reconciliation finds the effect: confirmed
	lostAbsent              // answer lost; nothing there: retried with the same key (or a reviewer approves the retry)
	duplicate               // answer lost; two resources name it: a person keeps one and undoes the other
	otherVer                // answer lost; the resource found is of another version: a person decides
)

// week writes each day's traffic: fewer operations at the weekend and at
// night, a share of lost answers that reconciliation settles, and the few
// that reach a person, who decides within minutes or hours.
//
// A day here is the 24 hours from d0, which starts at end's time of day,
// not at midnight: the dashboard counts days back from now. Its working
// hours are the ones that fall within it, today's or the day before's,
// and whether it is the weekend is asked of each operation's own time, so
// that whatever the hour the demo starts, the day just gone is a working
// day like the others.
func (s *seeder) week(start, end time.Time) {
	for day := 0; day < HistoryDays; day++ {
		d0 := start.Add(time.Duration(day) * 24 * time.Hour)
		n := 90 + s.rng.IntN(40)
		for i := 0; i < n; i++ {
			// Working hours, mostly.
			t := d0.Add(s.between(0, 24*time.Hour))
			if s.rng.IntN(4) != 0 {
				t = d0.Truncate(24 * time.Hour).Add(7*time.Hour + s.between(0, 12*time.Hour))
				if t.Before(d0) {
					t = t.Add(24 * time.Hour)
				}
			}
			if wd := t.Weekday(); (wd == time.Saturday || wd == time.Sunday) && s.rng.IntN(3) != 0 {
				continue
			}
			if !t.After(start.Add(time.Minute)) || t.After(end.Add(-3*time.Hour)) {
				continue
			}
			s.operation(t, s.pick())
		}
		// An approval or two a day: a press release two reviewers let out,
		// now and then one they refuse.
		for i := 0; i < 1+s.rng.IntN(2); i++ {
			t := d0.Add(8*time.Hour + s.between(0, 9*time.Hour))
			if t.Before(end.Add(-6 * time.Hour)) {
				s.approval(t, s.rng.IntN(6) != 0)
			}
		}
	}
}

// pick draws a story: about 11 % of answers are lost (the demo's sandbox
// loses 10 %), of which reconciliation settles most on its own and about
// one in four reaches a person.
func (s *seeder) pick() story {
	switch r := s.rng.IntN(1000); {
	case r < 785:
		return clean
	case r < 845:
		return transient
	case r < 880:
		return rejected
	case r < 960:
		return lostFound
	case r < 980:
		return lostAbsent
	case r < 992:
		return duplicate
	default:
		return otherVer
	}
}

// actions are the history's operations, with how often each runs.
var historyActions = []struct {
	flavour string
	weight  int
}{
	{"upload_file", 30}, {"create_folder", 12}, {"generate_summary", 10}, {"transform_pdf", 16},
	{"send_email", 14}, {"share_link", 10}, {"charge", 8},
}

func (s *seeder) flavour() simulate.Flavour {
	total := 0
	for _, a := range historyActions {
		total += a.weight
	}
	r := s.rng.IntN(total)
	for _, a := range historyActions {
		if r < a.weight {
			return flavourOf(a.flavour)
		}
		r -= a.weight
	}
	panic("unreachable")
}

var tenantWeights = []string{"acme", "acme", "acme", "globex", "globex", "demo"}

// register registers an operation of fl at the clock's now.
func (s *seeder) register(tenant string, fl simulate.Flavour, source, version string) (*review.Operation, error) {
	var body map[string]any
	if fl.Body != nil {
		body = fl.Body(source, version)
	}
	r := fl.Registration(source, version, body)
	op, created, err := s.st.Register(s.ctx, review.Registration{Tenant: tenant, SourceRef: r.SourceRef, LogicalVersion: r.LogicalVersion,
		Action: r.Action, Destination: r.Destination, Risk: review.Risk(r.Risk), Flags: serverFlags(r.Flags), Payload: r.Payload, Actor: seedActor})
	if err != nil {
		return nil, err
	}
	if !created {
		return nil, fmt.Errorf("%s %s v%s was already registered", fl.Action, source, version)
	}
	s.ops++
	return op, nil
}

// kinds names what each action creates at the destination.
var kinds = map[string]string{"upload_file": "file", "create_folder": "folder", "generate_summary": "file", "transform_pdf": "file",
	"send_email": "email", "share_link": "link", "charge": "charge", "publish_release": "release", "search_files": "search"}

// success is the answer that created ref's resource for op.
func success(op *review.Operation, prefix string) review.Outcome {
	return review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
		Resource: &review.ResourceRef{Ref: resourceRef(op, prefix), Kind: kinds[op.Action], Version: op.LogicalVersion}}
}

// resourceRef is the ref the stand-in destination gives op's effect.
func resourceRef(op *review.Operation, prefix string) string {
	return fmt.Sprintf("%s-%s", prefix, op.ID[len(op.ID)-8:])
}

var lost = review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}

// attempt takes op's next attempt and reports o a moment later.
func (s *seeder) attempt(op *review.Operation, o review.Outcome) error {
	_, err := s.try(op, o)
	return err
}

// try is attempt, answering where the outcome left the operation.
func (s *seeder) try(op *review.Operation, o review.Outcome) (review.State, error) {
	g, err := s.st.StartAttempt(s.ctx, store.AttemptRequest{Tenant: op.Tenant, OperationID: op.ID, Actor: seedActor})
	if err != nil {
		return "", err
	}
	s.clk.set(s.clk.Now().Add(s.between(200*time.Millisecond, 3*time.Second)))
	res, err := s.st.RecordOutcome(s.ctx, op.Tenant, op.ID, g.N, o, seedActor)
	if err != nil {
		return "", err
	}
	return res.Operation.State, nil
}

// operation runs one history operation registered at t.
func (s *seeder) operation(t time.Time, st story) {
	fl := s.flavour()
	tenant := tenantWeights[s.rng.IntN(len(tenantWeights))]
	prefix := "contract"
	switch fl.Action {
	case "charge":
		prefix = "invoice"
	case "send_email":
		prefix = "notice"
	}
	s.sources++
	source := fmt.Sprintf("%s-%d", prefix, 20000+s.sources*7+s.rng.IntN(7))
	version := fmt.Sprint(1 + s.rng.IntN(3))
	if st == otherVer && version == "1" {
		version = "2"
	}
	s.at(t, func() error {
		op, err := s.register(tenant, fl, source, version)
		if err != nil {
			return err
		}
		s.after(s.between(100*time.Millisecond, 2*time.Second), func() error { return s.run(op, st) })
		return nil
	})
}

// run carries op through its story from its first attempt.
func (s *seeder) run(op *review.Operation, st story) error {
	ref := resourceRef(op, kinds[op.Action])
	found := review.Candidate{Ref: ref, Kind: kinds[op.Action], Version: op.LogicalVersion, OperationID: op.ID}
	switch st {
	case clean:
		if op.Action == "transform_pdf" {
			return s.job(op)
		}
		return s.attempt(op, success(op, kinds[op.Action]))
	case transient:
		if err := s.attempt(op, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 503}); err != nil {
			return err
		}
		s.retry(op, s.between(20*time.Second, 3*time.Minute), success(op, kinds[op.Action]))
		return nil
	case rejected:
		return s.attempt(op, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 422, ProviderCode: "invalid_request"})
	case lostFound:
		s.holds[op.ID] = []review.Candidate{found}
	case lostAbsent:
		s.holds[op.ID] = []review.Candidate{}
		s.settled[op.ID] = func(now *review.Operation) error {
			if now.State == review.NeedsReview { // irreversible: two reviewers approve the retry
				return s.decideLater(now, s.reviewDelay(), func(c *store.Case) []store.DecisionRequest {
					return []store.DecisionRequest{
						{CaseID: c.ID, Action: review.DecideApproveRetry, Reason: "nothing at the destination after the window: send it once more", Actor: reviewerUser},
						{CaseID: c.ID, Action: review.DecideApproveRetry, Reason: "agreed, the search is authoritative", Actor: reviewer2User},
					}
				}, func(op *review.Operation) error {
					s.retry(op, s.between(time.Minute, 10*time.Minute), success(op, kinds[op.Action]))
					return nil
				})
			}
			s.retry(now, s.between(time.Minute, 8*time.Minute), success(now, kinds[now.Action]))
			return nil
		}
	case duplicate:
		dup := review.Candidate{Ref: ref + "-2", Kind: found.Kind, Version: op.LogicalVersion, OperationID: op.ID}
		s.holds[op.ID] = []review.Candidate{found, dup}
		who := decider(op)
		s.settled[op.ID] = func(now *review.Operation) error {
			return s.decideLater(now, s.reviewDelay(), func(c *store.Case) []store.DecisionRequest {
				return []store.DecisionRequest{{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: found.Ref, UndoRef: dup.Ref,
					Compensation: "delete the second copy at the destination", Reason: "two copies of one request: keep the first", Actor: who}}
			}, s.compensate)
		}
	case otherVer:
		s.holds[op.ID] = []review.Candidate{{Ref: ref, Kind: found.Kind, Version: "1", OperationID: op.ID}}
		s.settled[op.ID] = func(now *review.Operation) error {
			return s.decideLater(now, s.reviewDelay(), func(c *store.Case) []store.DecisionRequest {
				return []store.DecisionRequest{{CaseID: c.ID, Action: review.DecideFail,
					Reason: "the destination holds version 1 only; the integration registers version " + now.LogicalVersion + " again", Actor: decider(now)}}
			}, nil)
		}
	}
	// The answer is lost; reconciliation looks a few minutes later — or,
	// for a read, a generation or a write the key makes safe to repeat,
	// the integration simply retries.
	state, err := s.try(op, lost)
	if err != nil || state != review.Ambiguous {
		delete(s.holds, op.ID)
		delete(s.settled, op.ID)
		if state == review.RetryWait {
			s.retry(op, s.between(20*time.Second, 2*time.Minute), success(op, kinds[op.Action]))
		}
		return err
	}
	s.after(s.between(30*time.Second, 6*time.Minute), s.reconcile)
	return nil
}

// decider is who decides op's case in the history: support, unless the
// operation is flagged or irreversible (review.Role.CanDecide).
func decider(op *review.Operation) string {
	if len(op.Flags) > 0 || op.Risk == review.RiskIrreversible {
		return reviewerUser
	}
	return supportUser
}

// job runs a transformation: accepted as a job, finished minutes later.
func (s *seeder) job(op *review.Operation) error {
	ref := "job-" + op.ID[len(op.ID)-8:]
	if err := s.attempt(op, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202,
		Job: &review.JobRef{Ref: ref, Status: string(review.JobQueued)}}); err != nil {
		return err
	}
	s.after(s.between(20*time.Second, 4*time.Minute), func() error {
		_, err := s.st.PutJob(s.ctx, op.Tenant, op.ID, review.Job{Ref: ref, Status: review.JobSucceeded,
			InputVersion: op.LogicalVersion, OutputRef: resourceRef(op, "pdf")}, seedActor)
		return err
	})
	return nil
}

// retry takes op's next attempt after d, answered with o; the destination
// then holds its effect, which a confirm-window look finds (and ends).
func (s *seeder) retry(op *review.Operation, d time.Duration, o review.Outcome) {
	s.after(d, func() error {
		err := s.attempt(op, o)
		var wait *review.WaitError
		if errors.As(err, &wait) { // still backing off: try when it may
			s.at(wait.Until.Add(time.Second), func() error { return s.attempt(op, o) })
			err = nil
		}
		if o.Resource != nil {
			s.holds[op.ID] = []review.Candidate{{Ref: o.Resource.Ref, Kind: o.Resource.Kind, Version: o.Resource.Version, OperationID: op.ID}}
		}
		s.after(5*time.Minute, s.watch)
		return err
	})
}

// probe is what the stand-in destination answers about op: its search,
// and a status lookup of the resource the ledger knows.
func (s *seeder) probe(op *review.Operation) []review.ProbeResult {
	now := s.clk.Now()
	holds := s.holds[op.ID]
	out := []review.ProbeResult{{Kind: review.ProbeSearch, Candidates: holds, At: now, Took: 40 * time.Millisecond}}
	if ref, _ := review.LookupRef(op); ref != "" {
		r := review.ProbeResult{Kind: review.ProbeStatus, Ref: ref, At: now, Took: 30 * time.Millisecond, NotFound: true}
		for _, c := range holds {
			if c.Ref == ref {
				r.NotFound, r.Candidates = false, []review.Candidate{c}
			}
		}
		out = append(out, r)
	}
	return out
}

// reconcile runs a reconciliation round over every ambiguous operation due.
func (s *seeder) reconcile() error {
	claims, err := s.st.ClaimAmbiguous(s.ctx, "demo-seed", 100, time.Minute)
	if err != nil {
		return err
	}
	dest := cfgDestination(s.st)
	for _, c := range claims {
		st := review.Settle(review.SettleInput{Op: c.Op, Destination: dest, LastWrite: c.LastWrite, Results: s.probe(c.Op),
			Round: c.Round, Now: s.clk.Now()})
		if err := s.st.ApplySettlement(s.ctx, c, st); err != nil {
			return err
		}
		if st.State == "" {
			s.at(st.NextProbe.Add(time.Second), s.reconcile)
			continue
		}
		if next := s.settled[c.Op.ID]; next != nil {
			delete(s.settled, c.Op.ID)
			op, err := s.st.GetOperation(s.ctx, c.Op.Tenant, c.Op.ID, "")
			if err != nil {
				return err
			}
			if err := next(op); err != nil {
				return err
			}
		}
	}
	return nil
}

// cfgDestination is the sandbox destination as the store is configured.
func cfgDestination(st *store.Store) review.Destination {
	return st.Config().Destination(sandbox.DestinationName)
}

// watch takes a look at every watched operation due: the stand-in
// destination holds only the confirmed resource, so the watch ends once
// the window has closed.
func (s *seeder) watch() error {
	claims, err := s.st.ClaimWatches(s.ctx, 100, time.Minute)
	if err != nil {
		return err
	}
	dest := cfgDestination(s.st)
	for _, c := range claims {
		w := review.Watch(c.Op, dest, s.probe(c.Op)[:1], c.Until, s.clk.Now())
		if err := s.st.ApplyWatch(s.ctx, c, w); err != nil {
			return err
		}
		if !w.Next.IsZero() {
			s.at(w.Next, s.watch)
		}
	}
	return nil
}

// reviewDelay is how long a case waits for its decision: mostly within
// the hour or the afternoon, sometimes until the next working day. One
// that would come after the history's end is still open.
func (s *seeder) reviewDelay() time.Duration {
	switch r := s.rng.IntN(10); {
	case r < 5:
		return s.between(8*time.Minute, 90*time.Minute)
	case r < 8:
		return s.between(90*time.Minute, 8*time.Hour)
	default:
		return s.between(14*time.Hour, 40*time.Hour)
	}
}

// decideLater has people decide op's open case d from now: each request
// in turn (CaseID filled), then then(op) with the operation as it stands.
func (s *seeder) decideLater(op *review.Operation, d time.Duration, reqs func(*store.Case) []store.DecisionRequest, then func(*review.Operation) error) error {
	s.after(d, func() error {
		c, err := s.openCase(op.ID)
		if err != nil {
			return err
		}
		for i, r := range reqs(c) {
			if i > 0 {
				// The next person decides a little later, by the end.
				s.clk.set(s.byEnd(s.clk.Now().Add(s.between(2*time.Minute, 40*time.Minute))))
			}
			if _, err := s.st.Decide(s.ctx, r); err != nil {
				return fmt.Errorf("%s on %s (%s): %w", r.Action, op.ID, op.Action, err)
			}
		}
		if then == nil {
			return nil
		}
		now, err := s.st.GetOperation(s.ctx, op.Tenant, op.ID, "")
		if err != nil {
			return err
		}
		return then(now)
	})
	return nil
}

// openCase is the open case of operation id.
func (s *seeder) openCase(id string) (*store.Case, error) {
	cs, err := s.st.CasesForOperation(s.ctx, id)
	if err != nil {
		return nil, err
	}
	for i := range cs {
		if cs[i].Status == "open" {
			return &cs[i], nil
		}
	}
	return nil, fmt.Errorf("operation %s has no open case", id)
}

// compensate runs the undo a keep_and_undo decision registered, which
// confirms the operation with the kept resource.
func (s *seeder) compensate(op *review.Operation) error {
	ds, err := s.st.CaseDecisions(s.ctx, mustCase(s, op.ID))
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.CompensationID == "" {
			continue
		}
		undo, err := s.st.GetOperation(s.ctx, op.Tenant, d.CompensationID, "")
		if err != nil {
			return err
		}
		s.following(s.between(time.Minute, 20*time.Minute), func() error {
			return s.attempt(undo, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 200})
		})
	}
	return nil
}

// mustCase is the id of operation id's latest case ("" if none).
func mustCase(s *seeder, id string) string {
	cs, _ := s.st.CasesForOperation(s.ctx, id)
	if len(cs) == 0 {
		return ""
	}
	return cs[len(cs)-1].ID
}

// approval registers a press release awaiting approval at t; two
// reviewers approve it (and it is published) or one refuses it.
func (s *seeder) approval(t time.Time, approve bool) {
	tenant := tenantWeights[s.rng.IntN(len(tenantWeights))]
	s.sources++
	source := fmt.Sprintf("press-release-%d", 100+s.sources)
	s.at(t, func() error {
		op, err := s.registerRelease(tenant, source)
		if err != nil {
			return err
		}
		reqs := func(c *store.Case) []store.DecisionRequest {
			if !approve {
				return []store.DecisionRequest{{CaseID: c.ID, Action: review.DecideRefuse, Reason: "not before the product team signs the wording off", Actor: reviewerUser}}
			}
			return []store.DecisionRequest{
				{CaseID: c.ID, Action: review.DecideApprove, Reason: "wording and date checked with communications", Actor: reviewerUser},
				{CaseID: c.ID, Action: review.DecideApprove, Reason: "approved for publication", Actor: reviewer2User},
			}
		}
		// Within the day the approval waits (approval_timeout).
		return s.decideLater(op, s.between(10*time.Minute, 6*time.Hour), reqs, func(op *review.Operation) error {
			if op.State == review.Pending {
				s.following(s.between(30*time.Second, 5*time.Minute), func() error { return s.attempt(op, success(op, "release")) })
			}
			return nil
		})
	})
}

func (s *seeder) registerRelease(tenant, source string) (*review.Operation, error) {
	op, created, err := s.st.Register(s.ctx, review.Registration{Tenant: tenant, SourceRef: source, LogicalVersion: "1",
		Action: demoApprovalAction, Destination: sandbox.DestinationName, Risk: review.RiskIrreversible, Flags: []review.Flag{review.FlagIrreversible},
		Payload: fmt.Appendf(nil, `{"channel":"newsroom","title":"Release notes %s"}`, source), Actor: seedActor, RequestedBy: seedActor})
	if err != nil {
		return nil, err
	}
	if !created {
		return nil, fmt.Errorf("%s was already registered", source)
	}
	s.ops++
	return op, nil
}

// liveCase is a case of the live mix, open at end: ago before it, its
// story, whether its resource names another operation, whether a first
// reviewer has given their word.
type liveCase struct {
	tenant, action, source, version string
	ago                             time.Duration
	st                              story
	foreign                         bool
	firstApproval                   bool
}

// liveMix are the live mix's cases of lost answers, each with the
// resources mk made (no history source is one of theirs).
var liveMix = []liveCase{
	{"demo", "upload_file", "contract-7741", "3", 2 * time.Hour, duplicate, false, false},
	{"acme", "upload_file", "contract-8120", "1", 5 * time.Hour, duplicate, false, false},
	{"globex", "upload_file", "contract-5530", "2", 35 * time.Minute, duplicate, false, false},
	{"demo", "upload_file", "contract-6402", "2", 4 * time.Hour, otherVer, false, false},
	{"acme", "transform_pdf", "contract-6610", "3", 80 * time.Minute, otherVer, false, false},
	{"globex", "upload_file", "contract-3307", "2", 9 * time.Hour, otherVer, false, false},
	{"demo", "upload_file", "contract-9105", "1", 50 * time.Minute, lostFound, true, false},
	{"demo", "send_email", "notice-4410", "1", 3 * time.Hour, lostAbsent, false, false},
	{"acme", "charge", "invoice-2291", "1", 6 * time.Hour, lostAbsent, false, false},
	{"globex", "share_link", "contract-1188", "2", 90 * time.Minute, lostAbsent, false, true},
	{"acme", "charge", "invoice-2307", "1", 2*time.Hour + 20*time.Minute, duplicate, false, false},
}

// live writes the cases open at end, each role's work: for support,
// duplicates, versions that differ and a resource naming another
// operation, on actions support may decide; for reviewers, press releases
// awaiting approval and irreversible sends whose retry waits for
// approve_retry (one of each with a first reviewer's word given, so a
// second reviewer completes it), and a double charge.
func (s *seeder) live(end time.Time) {
	for _, l := range liveMix {
		s.at(end.Add(-l.ago), func() error {
			op, err := s.register(l.tenant, flavourOf(l.action), l.source, l.version)
			if err != nil {
				return err
			}
			ref := resourceRef(op, kinds[op.Action])
			var holds []review.Candidate
			add := func(opID, version string) error {
				c, err := s.resource(op, fmt.Sprintf("%s-%d", ref, len(holds)+1), opID, version, len(holds)+1)
				holds = append(holds, c)
				return err
			}
			switch {
			case l.foreign: // a file that names another operation: is it this one's?
				err = add("op_06H0DEMOFOREIGNPPPPPPPPPP", op.LogicalVersion)
			case l.st == duplicate:
				if err = add(op.ID, op.LogicalVersion); err == nil {
					err = add(op.ID, op.LogicalVersion)
				}
			case l.st == otherVer:
				err = add(op.ID, "1")
			}
			if err != nil {
				return err
			}
			s.holds[op.ID] = append([]review.Candidate{}, holds...)
			if l.firstApproval {
				s.settled[op.ID] = func(op *review.Operation) error {
					return s.decideLater(op, 25*time.Minute, func(c *store.Case) []store.DecisionRequest {
						return []store.DecisionRequest{{CaseID: c.ID, Action: review.DecideApproveRetry,
							Reason: "search and status lookup agree nothing was published", Actor: reviewer2User}}
					}, nil)
				}
			}
			if err := s.attempt(op, lost); err != nil {
				return err
			}
			s.after(s.between(time.Minute, 4*time.Minute), s.reconcile)
			return nil
		})
	}
	for i, ago := range []time.Duration{3 * time.Hour, 70 * time.Minute, 12 * time.Minute} {
		s.at(end.Add(-ago), func() error {
			op, err := s.registerRelease([]string{"demo", "acme", "demo"}[i], fmt.Sprintf("press-release-%d", 13+i))
			if err != nil || i != 1 {
				return err
			}
			return s.decideLater(op, 20*time.Minute, func(c *store.Case) []store.DecisionRequest {
				return []store.DecisionRequest{{CaseID: c.ID, Action: review.DecideApprove, Reason: "wording checked; one more reviewer, please", Actor: reviewer2User}}
			}, nil)
		})
	}
}
