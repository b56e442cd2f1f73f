package store_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSweepsGoPastAPoisonRow: a row that fails every time (here a trigger
// refuses its operation's audit events, so no change to it can commit) is
// skipped by each background sweep — the lease sweep, the deadline sweep,
// the dependency sweep and the payload purge — with its id in a
// *store.SkippedRows, nothing of it written; the rows after it are
// handled in the same round, and a later round handles it once it can be.
// Both engines.
func TestSweepsGoPastAPoisonRow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, retentionConfig())
		day := 24 * time.Hour

		rows := b.sweepable(t)
		leaseP, leaseO, deadlineP, deadlineO, purgeP, purgeO := rows.leaseA, rows.leaseB, rows.deadlineA, rows.deadlineB, rows.purgeA, rows.purgeB
		// Dependencies: both wait for one that failed.
		dep := b.newOp(t, "dependency", review.RiskCompensableWrite, "plain")
		dependP, dependO := b.dependent(t, "depend-poison", dep, ""), b.dependent(t, "depend-other", dep, "")
		b.start(t, dep)
		b.report(t, dep, 1, httpError(422))

		poisoned := []*review.Operation{leaseP, deadlineP, dependP, purgeP}
		ids := make([]string, len(poisoned))
		for i, op := range poisoned {
			ids[i] = "'" + op.ID + "'"
		}
		unpoison := failOn(t, b, e, "audit_events", "NEW.operation_id IN ("+strings.Join(ids, ", ")+")")
		b.clk.Advance(2 * day)

		// skippedOnly requires err to be a *store.SkippedRows naming
		// exactly the rows ids.
		skippedOnly := func(what string, err error, ids ...string) {
			t.Helper()
			var sk *store.SkippedRows
			if !errors.As(err, &sk) || len(sk.Rows) != len(ids) {
				t.Fatalf("%s: %v, want a *store.SkippedRows naming %v", what, err, ids)
			}
			for _, id := range ids {
				if !strings.Contains(err.Error(), id+":") {
					t.Errorf("%s: %v, want it to name %s", what, err, id)
				}
			}
		}
		n, err := b.s.SweepLeases(b.ctx)
		skippedOnly("SweepLeases", err, leaseP.ID+"/1")
		if n != 1 {
			t.Errorf("SweepLeases closed %d, want 1", n)
		}
		n, err = b.s.SweepDependencies(b.ctx)
		skippedOnly("SweepDependencies", err, dependP.ID)
		if n != 1 {
			t.Errorf("SweepDependencies ended %d, want 1", n)
		}
		// The poisoned dependent's deadline (the default, a day) has
		// passed too.
		n, err = b.s.ExpireDeadlines(b.ctx)
		skippedOnly("ExpireDeadlines", err, deadlineP.ID, dependP.ID)
		if n != 1 {
			t.Errorf("ExpireDeadlines ended %d, want 1", n)
		}
		rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		skippedOnly("PurgePayloads", err, purgeP.ID)
		if rep.Operations != 1 || len(rep.IDs) != 1 || rep.IDs[0] != purgeO.ID {
			t.Errorf("PurgePayloads = %+v, want %s purged", rep, purgeO.ID)
		}

		// The rows after the poisoned ones were handled; the poisoned ones
		// are as they were, nothing half-written.
		wantState(t, b.get(t, leaseO), review.Ambiguous)
		wantState(t, b.get(t, deadlineO), review.Failed)
		wantState(t, b.get(t, dependO), review.Failed)
		if left := payloadBytesLeft(t, b.s, purgeO.ID); left["operations"] != 0 {
			t.Errorf("%s's payload is still there", purgeO.ID)
		}
		wantState(t, b.get(t, leaseP), review.InFlight)
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM attempts WHERE operation_id = ? AND finished_at IS NULL`, leaseP.ID); n != 1 {
			t.Errorf("the poisoned attempt was half-closed")
		}
		wantState(t, b.get(t, deadlineP), review.Pending)
		wantState(t, b.get(t, dependP), review.Pending)
		if left := payloadBytesLeft(t, b.s, purgeP.ID); left["operations"] != 1 {
			t.Errorf("%s's payload was purged without its audit event", purgeP.ID)
		}

		// Mended: the next rounds handle them.
		unpoison()
		for _, sweep := range []struct {
			what string
			run  func() (int, error)
		}{
			{"SweepLeases", func() (int, error) { return b.s.SweepLeases(b.ctx) }},
			{"SweepDependencies", func() (int, error) { return b.s.SweepDependencies(b.ctx) }},
			{"ExpireDeadlines", func() (int, error) { return b.s.ExpireDeadlines(b.ctx) }},
			{"PurgePayloads", func() (int, error) {
				rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
				return rep.Operations, err
			}},
		} {
			if n, err := sweep.run(); err != nil || n != 1 {
				t.Errorf("%s once mended: %d, %v; want 1", sweep.what, n, err)
			}
		}
		for _, op := range poisoned {
			if got := b.get(t, op); got.State == review.InFlight || got.State == review.Pending {
				t.Errorf("%s once mended: %s", op.SourceRef, got.State)
			}
		}
		if rep := storetest.Sealed(t, b.s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// TestSweepsStopAtAnUnreachableDatabase: a sweep whose row fails because
// the database cannot be reached (store.IsUnavailable) ends its round
// there, with that error, rather than skip the row and every row after
// it: each would fail the same way, and each was counted as a row at fault
// in limbo_loop_rows_skipped_total and its log line. The next round,
// the database back, handles them all.
//
// On PostgreSQL the outage is a trigger raising admin_shutdown (57P01),
// what a server going down answers, at the first row of each sweep. On
// SQLite, a file in the process, it is what an outage is there: another
// process holding the one write lock past the busy timeout (SQLITE_BUSY).
func TestSweepsStopAtAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, retentionConfig())
		rows := b.sweepable(t)
		leaseA, leaseB, deadlineA, deadlineB, purgeA, purgeB := rows.leaseA, rows.leaseB, rows.deadlineA, rows.deadlineB, rows.purgeA, rows.purgeB
		b.clk.Advance(2 * 24 * time.Hour)
		back := b.outage(t, leaseA.ID, deadlineA.ID, purgeA.ID)
		ended := func(what string, n int, err error) {
			t.Helper()
			var sk *store.SkippedRows
			if !store.IsUnavailable(err) || errors.As(err, &sk) || n != 0 {
				t.Errorf("%s: %d, %v; want nothing done and the database's error, no row skipped", what, n, err)
			}
		}
		n, err := b.s.SweepLeases(b.ctx)
		ended("SweepLeases", n, err)
		n, err = b.s.ExpireDeadlines(b.ctx)
		ended("ExpireDeadlines", n, err)
		rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		ended("PurgePayloads", rep.Operations, err)
		wantState(t, b.get(t, leaseB), review.InFlight)
		wantState(t, b.get(t, deadlineB), review.Pending)
		if left := payloadBytesLeft(t, b.s, purgeB.ID); left["operations"] != 1 {
			t.Errorf("%s was purged past the outage", purgeB.ID)
		}

		// Back: the next rounds handle every row.
		back()
		if n, err := b.s.SweepLeases(b.ctx); err != nil || n != 2 {
			t.Errorf("SweepLeases once back: %d, %v; want 2", n, err)
		}
		if n, err := b.s.ExpireDeadlines(b.ctx); err != nil || n != 2 {
			t.Errorf("ExpireDeadlines once back: %d, %v; want 2", n, err)
		}
		if rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false); err != nil || rep.Operations != 2 {
			t.Errorf("PurgePayloads once back: %+v, %v; want 2", rep, err)
		}
		if rep := storetest.Sealed(t, b.s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// outage makes b's database unreachable for writes of the operations
// ids (PostgreSQL: they fail with admin_shutdown, what a server going
// down answers), or of any (SQLite: another process holds the write lock,
// so each waits out the busy timeout and fails with SQLITE_BUSY); back
// ends it.
func (b *bundle) outage(t *testing.T, ids ...string) (back func()) {
	t.Helper()
	if b.s.Engine() == store.Postgres {
		exec := func(q string) {
			t.Helper()
			if _, err := b.s.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		exec(`CREATE FUNCTION down_at_first() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.operation_id IN ('` + strings.Join(ids, "', '") + `') THEN RAISE EXCEPTION 'the server is shutting down' USING ERRCODE = 'admin_shutdown'; END IF; RETURN NEW; END $$`)
		exec(`CREATE TRIGGER down_at_first BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION down_at_first()`)
		return func() { exec(`DROP TRIGGER down_at_first ON audit_events`) }
	}
	var file string
	if err := b.s.DB().QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil || file == "" {
		t.Fatalf("the SQLite file: %q, %v", file, err)
	}
	// The store's 10 s busy timeout, waited out before each of a
	// transaction's five retries, would make this test take minutes:
	// its connections wait 50 ms instead (quickBusy), and are opened
	// afresh so that each does.
	quickBusy.Store(file, true)
	b.s.DB().SetMaxIdleConns(0)
	other, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(b.ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("the other process's write lock: %v", err)
	}
	return func() {
		if _, err := conn.ExecContext(b.ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		other.Close()
	}
}

// quickBusy holds the SQLite files whose connections wait 50 ms for
// another process's write lock rather than the store's 10 s (outage).
var quickBusy sync.Map

func init() {
	sqlite.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, dsn string) error {
		var quick bool
		quickBusy.Range(func(file, _ any) bool {
			quick = strings.Contains(dsn, file.(string))
			return !quick
		})
		if quick {
			_, err := c.ExecContext(context.Background(), "PRAGMA busy_timeout = 50", nil)
			return err
		}
		return nil
	})
}

// sweepRows are two rows for each of three sweeps, the A one due first:
// attempts whose leases lapse, operations whose deadlines pass, confirmed
// operations a purge takes once their retention is over.
type sweepRows struct{ leaseA, leaseB, deadlineA, deadlineB, purgeA, purgeB *review.Operation }

// sweepable makes b's sweepRows; the clock is moved on by the caller.
func (b *bundle) sweepable(t *testing.T) sweepRows {
	t.Helper()
	var r sweepRows
	r.leaseA = b.newOp(t, "lease-first", review.RiskCompensableWrite, "plain")
	b.start(t, r.leaseA)
	b.clk.Advance(time.Second)
	r.leaseB = b.newOp(t, "lease-second", review.RiskCompensableWrite, "plain")
	b.start(t, r.leaseB)
	withDeadline := func(source string, d time.Duration) *review.Operation {
		reg := intention(source, review.RiskCompensableWrite, "plain")
		at := b.clk.Now().Add(d)
		reg.Deadline = &at
		return b.register(t, reg)
	}
	r.deadlineA, r.deadlineB = withDeadline("deadline-first", time.Hour), withDeadline("deadline-second", 2*time.Hour)
	r.purgeA = b.confirmed(t, "purge-first", "short", "")
	b.clk.Advance(time.Second)
	r.purgeB = b.confirmed(t, "purge-second", "short", "")
	return r
}

// TestClaimsGoPastAnUnreadableOperation: an operation claimed for a probe
// or a look, but that cannot be read back (here its attempt's start is a
// timestamp Go cannot hold), is skipped — named in a *store.SkippedRows —
// and the others claimed with it are returned: before, the whole claim
// failed, round after round, and none of them was probed. Once it reads
// again, its claim lapses with its lease and the next round takes it.
// Both engines.
func TestClaimsGoPastAnUnreadableOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, &review.Config{Destinations: map[string]review.Destination{"files": {SearchLag: time.Minute}}})
		ambA, ambB := b.ambiguous(t, "amb-a"), b.ambiguous(t, "amb-b")
		// Proven absent after a timeout: it waits for its retry, watched
		// for the confirm window (a lagging search may show it late).
		watched := func(source string) *review.Operation {
			op := b.newOp(t, source, review.RiskCompensableWrite, "files")
			b.start(t, op)
			b.report(t, op, 1, timeoutAfterSend)
			return op
		}
		watchA, watchB := watched("watch-a"), watched("watch-b")
		b.clk.Advance(2 * time.Minute) // absence is sure once the search lag passed
		for _, op := range []*review.Operation{watchA, watchB} {
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.RetryWait)
		}
		const poison = `UPDATE attempts SET started_at = 'infinity' WHERE operation_id IN (?, ?)`
		exec(t, b.s, poison, ambA.ID, watchA.ID)
		b.clk.Advance(time.Minute + time.Second) // the first look is due

		skippedOnly := func(what string, err error, id string) {
			t.Helper()
			var sk *store.SkippedRows
			if !errors.As(err, &sk) || len(sk.Rows) != 1 || sk.Rows[0].ID != id {
				t.Errorf("%s: %v, want a *store.SkippedRows naming %s only", what, err, id)
			}
		}
		const lease = time.Second
		cs, err := b.s.ClaimAmbiguous(b.ctx, "r1", 10, lease)
		skippedOnly("ClaimAmbiguous", err, ambA.ID)
		if len(cs) != 1 || cs[0].Op.ID != ambB.ID {
			t.Errorf("ClaimAmbiguous = %v, want %s", claimedIDs(cs), ambB.ID)
		}
		ws, err := b.s.ClaimWatches(b.ctx, 10, lease)
		skippedOnly("ClaimWatches", err, watchA.ID)
		if len(ws) != 1 || ws[0].Op.ID != watchB.ID {
			t.Errorf("ClaimWatches = %+v, want %s", ws, watchB.ID)
		}

		// Mended: once the lease lapses, the next round takes them.
		exec(t, b.s, `UPDATE attempts SET started_at = ? WHERE operation_id IN (?, ?)`, t0, ambA.ID, watchA.ID)
		b.clk.Advance(2 * lease)
		cs, err = b.s.ClaimAmbiguous(b.ctx, "r2", 10, lease)
		if err != nil || !slices.Contains(claimedIDs(cs), ambA.ID) {
			t.Errorf("ClaimAmbiguous once mended = %v, %v; want %s among them", claimedIDs(cs), err, ambA.ID)
		}
		ws, err = b.s.ClaimWatches(b.ctx, 10, lease)
		if err != nil || !slices.ContainsFunc(ws, func(w store.WatchClaim) bool { return w.Op.ID == watchA.ID }) {
			t.Errorf("ClaimWatches once mended = %+v, %v; want %s among them", ws, err, watchA.ID)
		}
	})
}
