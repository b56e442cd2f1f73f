package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// nextEvents waits (up to 5 s) for the subscription's next events.
func nextEvents(t *testing.T, sub *store.Subscription) []store.CaseEvent {
	t.Helper()
	select {
	case <-sub.Ready():
		return sub.Take()
	case <-time.After(5 * time.Second):
		t.Fatal("no case event within 5 s")
		return nil
	}
}

// noEvents checks nothing arrives within a short while (a rolled-back
// change, another tenant's case).
func noEvents(t *testing.T, sub *store.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.Ready():
		if evs := sub.Take(); len(evs) > 0 {
			t.Errorf("%s: got %+v, want no event", what, evs)
		}
	case <-time.After(300 * time.Millisecond):
	}
}

// wantEvent waits for the next event and checks it is kind on c, at
// version, by actor.
func wantEvent(t *testing.T, sub *store.Subscription, c *store.Case, kind store.CaseChange, actor string, version int64) {
	t.Helper()
	evs := nextEvents(t, sub)
	want := store.CaseEvent{CaseID: c.ID, OperationID: c.OperationID, Tenant: c.Tenant, Kind: kind, Actor: actor, Version: version}
	if len(evs) != 1 || evs[0] != want {
		t.Fatalf("events %+v, want exactly %+v", evs, want)
	}
}

// TestLiveCaseChanges: every committed change to a case is published with
// its case, operation, tenant, kind, actor and new version, on both
// engines; a rolled-back one is not; a subscriber hears only the tenants
// of its scope. On PostgreSQL the change is made through a second store
// on the same database: what one instance commits, another hears.
func TestLiveCaseChanges(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		u := storetest.URL(t, e)
		open := func() *store.Store {
			s, err := store.Open(ctx, u, store.Options{Clock: storetest.NewClock(t0).Now, Rand: fixedRand(0.5), AuditKey: storetest.AuditKey,
				MaxConns: storetest.MaxConns, Resolve: storetest.Resolver(nil)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		b := &bundle{ctx: ctx, s: open()} // the instance that writes
		// The instance whose subscribers listen: on PostgreSQL another
		// store on the same database (another connection, another hub);
		// on SQLite, one process, the same store.
		listener := b.s
		if e == store.Postgres {
			listener = open()
		}
		mine, err := listener.Subscribe(ctx, []string{tenantA})
		if err != nil {
			t.Fatal(err)
		}
		defer mine.Close()
		others, err := listener.Subscribe(ctx, []string{tenantB})
		if err != nil {
			t.Fatal(err)
		}
		defer others.Close()
		all, err := listener.Subscribe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer all.Close()

		c := b.reviewCase(t, "live-1") // opened as evidence came in
		wantEvent(t, mine, c, store.ChangeOpened, "integrator", 1)
		wantEvent(t, all, c, store.ChangeOpened, "integrator", 1)
		noEvents(t, others, "tenant B's subscriber, tenant A's case opened")

		if _, err := b.s.ClaimCase(ctx, c.ID, review.Principal{Name: "sara@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		wantEvent(t, mine, c, store.ChangeClaimed, "sara@example.com", 2)
		if _, err := b.s.TakeOverCase(ctx, c.ID, review.Principal{Name: "rita@example.com"}, "Sara is away", nil); err != nil {
			t.Fatal(err)
		}
		wantEvent(t, mine, c, store.ChangeTakenOver, "rita@example.com", 3)
		if _, err := b.s.ReleaseCase(ctx, c.ID, review.Principal{Name: "rita@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		wantEvent(t, mine, c, store.ChangeReleased, "rita@example.com", 4)

		// Refused changes publish nothing (a decision on a stale version),
		// nor does a release that changes nothing (nobody holds the case).
		stale := decideReq(c, review.DecideFail, "rita@example.com")
		stale.CaseVersion = 1
		if _, err := b.s.Decide(ctx, stale); !errors.Is(err, review.ErrStale) {
			t.Fatalf("a stale decision: %v, want ErrStale", err)
		}
		if got, err := b.s.ReleaseCase(ctx, c.ID, review.Principal{Name: "nobody@example.com"}, nil); err != nil || got.Version != 4 {
			t.Fatalf("a release of a case nobody holds: %v, %+v; want nothing changed (version 4)", err, got)
		}
		noEvents(t, mine, "refused changes")
		all.Take() // what `all` heard of the claims above

		// A change rolled back (here by the transaction it ran in failing
		// afterwards) notifies nobody.
		boom := errors.New("boom")
		if err := b.s.WithTx(ctx, func(tx *sqlx.Tx) error {
			if err := store.CaseChangedForTest(ctx, b.s, tx, store.CaseEvent{CaseID: c.ID, OperationID: c.OperationID, Tenant: tenantA,
				Kind: store.ChangeUpdated, Version: 99}); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("WithTx: %v", err)
		}
		noEvents(t, mine, "a rolled-back change")
		noEvents(t, all, "a rolled-back change")

		if _, err := b.s.Decide(ctx, decideReq(c, review.DecideFail, "rita@example.com")); err != nil {
			t.Fatal(err)
		}
		wantEvent(t, mine, c, store.ChangeDecided, "rita@example.com", 5)
		noEvents(t, others, "tenant B's subscriber, tenant A's case decided")

		// Tenant B's own case reaches its subscriber, not tenant A's.
		r := intention("live-b", review.RiskCompensableWrite, "files")
		r.Tenant = tenantB
		opB := b.register(t, r)
		g, err := b.s.StartAttempt(ctx, store.AttemptRequest{Tenant: tenantB, OperationID: opB.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.RecordOutcome(ctx, tenantB, opB.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
			t.Fatal(err)
		}
		ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
			{Ref: "b-1", Kind: "folder", Version: opB.LogicalVersion, OperationID: opB.ID},
			{Ref: "b-2", Kind: "folder", Version: opB.LogicalVersion, OperationID: opB.ID}}}
		if _, err := b.s.AddEvidence(ctx, tenantB, opB.ID, ev, "integrator"); err != nil {
			t.Fatal(err)
		}
		cs, err := b.s.CasesForOperation(ctx, opB.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("tenant B's cases: %+v, %v", cs, err)
		}
		wantEvent(t, others, &cs[0], store.ChangeOpened, "integrator", 1)
		noEvents(t, mine, "tenant A's subscriber, tenant B's case opened")

		// A closed subscription hears nothing more; closing the store ends
		// every subscription.
		mine.Close()
		select {
		case <-mine.Done():
		default:
			t.Error("a closed subscription is not done")
		}
	})
}

// TestLiveSubscriptionEndsWithStore: closing the store ends its
// subscriptions and its listener (no goroutine or connection left behind,
// which -race and the PostgreSQL connection count would show), and a
// closed store refuses new ones.
func TestLiveSubscriptionEndsWithStore(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s, done := storetest.OpenTemp(t, e, store.Options{})
		sub, err := s.Subscribe(ctx, nil)
		if err != nil {
			done()
			t.Fatal(err)
		}
		done() // closes the store
		select {
		case <-sub.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the subscription outlived its store")
		}
		if _, err := s.Subscribe(ctx, nil); !errors.Is(err, store.ErrLiveUnavailable) {
			t.Errorf("Subscribe on a closed store: %v, want ErrLiveUnavailable", err)
		}
	})
}

// TestLiveBacklogResyncs: a subscriber that falls more than the backlog
// behind is not sent a partial list: it is told to resync, once. On
// SQLite the committed events reach the hub all at once, so the test
// is exact; on PostgreSQL they come through the listener one by one, and
// a reader may keep up: every event in order, or a resync.
func TestLiveBacklogResyncs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		b := setup(t, e, nil)
		sub, err := b.s.Subscribe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		const n = 300 // more than the backlog
		if err := b.s.WithTx(ctx, func(tx *sqlx.Tx) error {
			for i := range n {
				if err := store.CaseChangedForTest(ctx, b.s, tx, store.CaseEvent{CaseID: "case_x", Tenant: tenantA, Kind: store.ChangeUpdated, Version: int64(i + 1)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if e == store.SQLite {
			if got := nextEvents(t, sub); len(got) != 1 || got[0].Kind != store.ChangeResync {
				t.Fatalf("after %d events unread: %d taken, want one resync", n, len(got))
			}
			return
		}
		var got []store.CaseEvent
		for {
			got = append(got, nextEvents(t, sub)...)
			last := got[len(got)-1]
			if last.Kind == store.ChangeResync {
				return
			}
			if last.Version == n {
				break
			}
		}
		for i, ev := range got {
			if ev.Version != int64(i+1) {
				t.Fatalf("event %d has version %d: out of order or lost without a resync", i, ev.Version)
			}
		}
	})
}
