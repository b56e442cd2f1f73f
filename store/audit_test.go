package store_test

import (
	"context"
	"crypto/ed25519"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// moves lists an operation's audited state changes as "from→to", and its
// other events by action.
func moves(evs []store.AuditEvent) (changes, others []string) {
	for _, e := range evs {
		if e.ToState == "" && e.FromState == "" {
			others = append(others, e.Action)
			continue
		}
		changes = append(changes, e.FromState+"→"+e.ToState)
	}
	return changes, others
}

// TestAuditOneEventPerStateChange drives operations through most of the
// state machine and checks that each state change left exactly one event,
// and that refused or repeated calls left none.
func TestAuditOneEventPerStateChange(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, keyedConfig())
		noTrace := func(op *review.Operation, call func()) {
			t.Helper()
			before := len(b.history(t, op.ID))
			call()
			if after := len(b.history(t, op.ID)); after != before {
				t.Errorf("%s: audit events %d → %d for a call that changes nothing", op.SourceRef, before, after)
			}
		}

		// A: a 429, a retry after Retry-After, a success.
		a := b.newOp(t, "doc-a", review.RiskIdempotentWrite, "keyed")
		b.start(t, a)
		b.report(t, a, 1, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 429, RetryAfter: "3"})
		b.clk.Advance(2 * time.Second)
		noTrace(a, func() { _, _ = b.tryStart(a, "", "") })
		b.clk.Advance(2 * time.Second)
		b.start(t, a)
		b.report(t, a, 2, success("file-a"))
		noTrace(a, func() { b.report(t, a, 2, success("file-a")) })
		// A different report for attempt 2 is refused but kept (issue 12,
		// hole 4): evidence, audited, no state change.
		_, _ = b.s.RecordOutcome(b.ctx, tenantA, a.ID, 2, httpError(500), "test")
		noTrace(a, func() { _, _ = b.tryStart(a, "", "") })
		noTrace(a, func() { _, _, _ = b.s.Register(b.ctx, intention("doc-a", review.RiskIdempotentWrite, "keyed")) })

		// B: ambiguous, reconciled to absence, retried, accepted, job done.
		bop := b.ambiguous(t, "doc-b")
		mustEvidence := func(ev review.Evidence) {
			t.Helper()
			if _, err := b.s.AddEvidence(b.ctx, tenantA, bop.ID, ev, "integrator"); err != nil {
				t.Fatal(err)
			}
		}
		mustEvidence(review.Evidence{Source: review.SourceMetadataSearch})
		mustEvidence(review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true})
		b.start(t, bop)
		b.report(t, bop, 2, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Job: &review.JobRef{Ref: "job-b"}})
		for _, st := range []review.JobStatus{review.JobRunning, review.JobSucceeded} {
			if _, err := b.s.PutJob(b.ctx, tenantA, bop.ID, review.Job{Ref: "job-b", Status: st}, "integrator"); err != nil {
				t.Fatal(err)
			}
		}

		// C: lease lost, late (failed) report, retried, rejected.
		c := b.newOp(t, "doc-c", review.RiskRead, "plain")
		b.start(t, c)
		b.clk.Advance(2 * review.DefaultLease)
		if _, err := b.s.SweepLeases(b.ctx); err != nil {
			t.Fatal(err)
		}
		_, _ = b.s.RecordOutcome(b.ctx, tenantA, c.ID, 1, httpError(500), "test")
		b.clk.Advance(time.Minute)
		b.start(t, c)
		b.report(t, c, 2, httpError(400))

		// D: the deadline passes while waiting to retry.
		r := intention("doc-d", review.RiskRead, "plain")
		deadline := b.clk.Now().Add(time.Minute)
		r.Deadline = &deadline
		d := b.register(t, r)
		b.start(t, d)
		b.report(t, d, 1, connBeforeSend)
		b.clk.Advance(time.Hour)
		_, _ = b.tryStart(d, "", "")

		tests := []struct {
			op      *review.Operation
			changes []string
			others  []string
		}{
			{a, []string{"→pending", "pending→in_flight", "in_flight→retry_wait", "retry_wait→in_flight", "in_flight→confirmed"},
				[]string{"evidence.recorded"}},
			{bop, []string{"→pending", "pending→in_flight", "in_flight→ambiguous", "ambiguous→retry_wait", "retry_wait→in_flight",
				"in_flight→accepted", "accepted→confirmed"}, []string{"evidence.recorded", "job.updated", "job.updated"}},
			{c, []string{"→pending", "pending→in_flight", "in_flight→retry_wait", "retry_wait→in_flight", "in_flight→failed"},
				[]string{"evidence.recorded"}},
			{d, []string{"→pending", "pending→in_flight", "in_flight→retry_wait", "retry_wait→failed"}, nil},
		}
		for _, tt := range tests {
			hist := b.history(t, tt.op.ID)
			changes, others := moves(hist)
			if !slices.Equal(changes, tt.changes) {
				t.Errorf("%s: audited state changes %v, want %v", tt.op.SourceRef, changes, tt.changes)
			}
			if !slices.Equal(others, tt.others) {
				t.Errorf("%s: other events %v, want %v", tt.op.SourceRef, others, tt.others)
			}
			// Every version bump is a state change, and each is audited.
			got := b.get(t, tt.op)
			if got.Version != int64(len(tt.changes)) {
				t.Errorf("%s: version %d after %d audited states", tt.op.SourceRef, got.Version, len(tt.changes))
			}
			if want := tt.changes[len(tt.changes)-1]; !strings.HasSuffix(want, "→"+string(got.State)) {
				t.Errorf("%s: ends %s, last audited change %s", tt.op.SourceRef, got.State, want)
			}
			for i, ev := range hist {
				if ev.Tenant != tenantA || ev.OperationID != tt.op.ID || ev.Hash == "" || ev.At.IsZero() {
					t.Errorf("%s: event %d = %+v, want tenant, operation, time and hash", tt.op.SourceRef, i, ev)
				}
				if i > 0 && ev.Seq <= hist[i-1].Seq {
					t.Errorf("%s: seqs out of order: %d after %d", tt.op.SourceRef, ev.Seq, hist[i-1].Seq)
				}
			}
		}
		assertSealed(t, b.s)
	})
}

// burnSeq leaves an unused sequence number in the audit trail, as a rolled
// back writer does on PostgreSQL. SQLite numbers gap-free, so a placeholder
// row holds the number until release is called after the next event.
func burnSeq(t *testing.T, s *store.Store) (seq int64, release func()) {
	t.Helper()
	if s.Engine() == store.Postgres {
		if err := s.DB().Get(&seq, `SELECT nextval('audit_events_seq')`); err != nil {
			t.Fatal(err)
		}
		return seq, func() {}
	}
	if err := s.DB().Get(&seq, `SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events`); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `INSERT INTO audit_events (seq, txid, at, actor, action, hash) VALUES (?, 0, ?, 'placeholder', 'placeholder', 'x')`, seq, t0)
	return seq, func() { exec(t, s, `DELETE FROM audit_events WHERE seq = ?`, seq) }
}

// auditHistory writes a dozen or so events, with one unused seq among them,
// and seals them all. It returns the unused seq.
func auditHistory(t *testing.T, b *bundle) (gap int64) {
	t.Helper()
	a := b.newOp(t, "doc-a", review.RiskRead, "plain")
	b.start(t, a)
	b.report(t, a, 1, httpError(503))
	b.clk.Advance(time.Second)
	b.start(t, a)
	b.report(t, a, 2, success("file-a"))

	gap, release := burnSeq(t, b.s)
	c := b.newOp(t, "doc-c", review.RiskCompensableWrite, "plain")
	release()
	b.start(t, c)
	b.report(t, c, 1, timeoutAfterSend)
	for _, auth := range []bool{false, true} {
		if _, err := b.s.AddEvidence(b.ctx, tenantA, c.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: auth}, "integrator"); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t, c)
	b.report(t, c, 2, success("file-c"))
	if _, err := b.s.CreateToken(b.ctx, review.Operator("admin@example.com"), tenantA, "ci"); err != nil {
		t.Fatal(err)
	}
	assertSealed(t, b.s)
	return gap
}

// events returns the whole trail by seq, and checks that forgeHash still
// computes what the store computes (else the tamper tests prove nothing).
func events(t *testing.T, s *store.Store) map[int64]store.AuditEvent {
	t.Helper()
	evs, err := s.AuditEvents(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]store.AuditEvent{}
	for _, e := range evs {
		if h := forgeHash(e); h != e.Hash {
			t.Fatalf("event %d: the test's copy of the event hash formula is out of date (%s, stored %s)", e.Seq, h, e.Hash)
		}
		out[e.Seq] = e
	}
	return out
}

// checkpoints reads the checkpoint rows as stored.
func checkpoints(t *testing.T, s *store.Store) []store.Checkpoint {
	t.Helper()
	cps, err := s.CheckpointsAfter(context.Background(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// covered expands a checkpoint's "1-3,5" seq ranges.
func covered(t *testing.T, c store.Checkpoint) []int64 {
	t.Helper()
	var out []int64
	if c.Seqs == "" {
		return nil // a heartbeat
	}
	for _, part := range strings.Split(c.Seqs, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			t.Fatalf("checkpoint %d seqs %q", c.ID, c.Seqs)
		}
		z := a
		if isRange {
			if z, err = strconv.ParseInt(hi, 10, 64); err != nil {
				t.Fatalf("checkpoint %d seqs %q", c.ID, c.Seqs)
			}
		}
		for s := a; s <= z; s++ {
			out = append(out, s)
		}
	}
	return out
}

// sealedRun returns the seqs of the first checkpoint covering at least two
// events, so a test can tamper with one that is not the first of its
// checkpoint (on PostgreSQL other tests' transactions decide where seals
// split).
func sealedRun(t *testing.T, s *store.Store) []int64 {
	t.Helper()
	return covered(t, wide(t, s, checkpoints(t, s)))
}

// wide returns the first checkpoint covering at least two events.
func wide(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint {
	t.Helper()
	for _, c := range cps {
		if len(covered(t, c)) >= 2 {
			return c
		}
	}
	t.Fatalf("no checkpoint covers two events: %+v", cps)
	return store.Checkpoint{}
}

// after returns the smallest seq above seq in evs.
func after(t *testing.T, evs map[int64]store.AuditEvent, seq int64) int64 {
	t.Helper()
	next := int64(-1)
	for s := range evs {
		if s > seq && (next < 0 || s < next) {
			next = s
		}
	}
	if next < 0 {
		t.Fatalf("no event after seq %d", seq)
	}
	return next
}

// verifyOpts checks against the test key, at the store's clock.
func verifyOpts(anchors ...store.Checkpoint) store.VerifyOptions {
	return store.VerifyOptions{PublicKey: storetest.AuditKey.Public().(ed25519.PublicKey), Anchors: anchors}
}

// verify checks the trail and requires it broken at seq.
func verify(t *testing.T, s *store.Store, opt store.VerifyOptions, wantSeq int64) *store.VerifyReport {
	t.Helper()
	rep, err := s.VerifyAudit(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.BrokenSeq != wantSeq || rep.Problem == "" {
		t.Errorf("verify = %+v, want broken at seq %d", rep, wantSeq)
	}
	return rep
}

func TestAuditSealedTrailVerifies(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		auditHistory(t, b)
		evs := events(t, b.s)
		rep := assertSealed(t, b.s)
		if rep.Events != int64(len(evs)) || rep.Checkpoints < 1 || rep.BrokenSeq != 0 || rep.Problem != "" {
			t.Errorf("report = %+v, want %d events in at least one checkpoint", rep, len(evs))
		}
		sealed := 0
		for _, c := range checkpoints(t, b.s) {
			sealed += len(covered(t, c))
		}
		if sealed != len(evs) {
			t.Errorf("checkpoints cover %d events, want all %d", sealed, len(evs))
		}
		if c, err := b.s.Seal(b.ctx); err != nil || c != nil {
			t.Errorf("Seal with nothing new = %+v, %v; want nil", c, err)
		}

		// Events after the seal are unsealed, not broken.
		b.newOp(t, "doc-late", review.RiskRead, "plain")
		b.clk.Advance(time.Second)
		b.newOp(t, "doc-later", review.RiskRead, "plain")
		rep, err := b.s.VerifyAudit(b.ctx, verifyOpts())
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || rep.Unsealed != 2 || rep.Events != int64(len(evs))+2 {
			t.Errorf("report after two new events = %+v, want OK with 2 unsealed", rep)
		}
		anchor, err := b.s.LatestCheckpoint(b.ctx)
		if err != nil || anchor == nil {
			t.Fatalf("LatestCheckpoint = %v, %v", anchor, err)
		}
		rep = assertSealed(t, b.s)
		if rep.Events != int64(len(evs))+2 {
			t.Errorf("report = %+v, want %d events", rep, len(evs)+2)
		}
		// An older exported checkpoint still matches a trail that grew.
		if rep, err := b.s.VerifyAudit(b.ctx, verifyOpts(*anchor)); err != nil || !rep.OK || rep.Anchored != anchor.ID {
			t.Errorf("verify against the earlier checkpoint = %+v, %v; want OK", rep, err)
		}
	})
}

// TestAuditTamperDetectedAtSeq edits, deletes, reorders and inserts sealed
// events straight in the database; verification must name the first
// sequence number that no longer holds.
func TestAuditTamperDetectedAtSeq(t *testing.T) {
	t.Parallel()
	type tamper func(t *testing.T, s *store.Store, run []int64, evs map[int64]store.AuditEvent, gap int64) (wantSeq int64)
	swap := func(t *testing.T, s *store.Store, i, j int64) {
		exec(t, s, `UPDATE audit_events SET seq = ? WHERE seq = ?`, -1, i)
		exec(t, s, `UPDATE audit_events SET seq = ? WHERE seq = ?`, i, j)
		exec(t, s, `UPDATE audit_events SET seq = ? WHERE seq = ?`, j, -1)
	}
	tests := []struct {
		name   string
		tamper tamper
	}{
		{"edit a column, hash left alone", func(t *testing.T, s *store.Store, run []int64, _ map[int64]store.AuditEvent, _ int64) int64 {
			exec(t, s, `UPDATE audit_events SET actor = 'mallory' WHERE seq = ?`, run[1])
			return run[1]
		}},
		{"edit the detail and recompute the row hash", func(t *testing.T, s *store.Store, run []int64, evs map[int64]store.AuditEvent, _ int64) int64 {
			ev := evs[run[1]]
			ev.Detail = `{"reason":"nothing happened"}`
			ev.Hash = forgeHash(ev)
			exec(t, s, `UPDATE audit_events SET detail = ?, hash = ? WHERE seq = ?`, ev.Detail, ev.Hash, ev.Seq)
			return run[1]
		}},
		{"copy another event's hash", func(t *testing.T, s *store.Store, run []int64, evs map[int64]store.AuditEvent, _ int64) int64 {
			exec(t, s, `UPDATE audit_events SET hash = ? WHERE seq = ?`, evs[after(t, evs, run[1])].Hash, run[1])
			return run[1]
		}},
		{"delete an event", func(t *testing.T, s *store.Store, run []int64, _ map[int64]store.AuditEvent, _ int64) int64 {
			exec(t, s, `DELETE FROM audit_events WHERE seq = ?`, run[1])
			return run[1]
		}},
		{"delete the last sealed event", func(t *testing.T, s *store.Store, _ []int64, evs map[int64]store.AuditEvent, _ int64) int64 {
			top := slices.Max(slices.Collect(maps.Keys(evs)))
			exec(t, s, `DELETE FROM audit_events WHERE seq = ?`, top)
			return top
		}},
		{"swap two events", func(t *testing.T, s *store.Store, run []int64, evs map[int64]store.AuditEvent, _ int64) int64 {
			swap(t, s, run[1], after(t, evs, run[1]))
			return run[1]
		}},
		{"swap two events and rehash both", func(t *testing.T, s *store.Store, run []int64, evs map[int64]store.AuditEvent, _ int64) int64 {
			j := after(t, evs, run[1])
			swap(t, s, run[1], j)
			for _, seq := range []int64{run[1], j} {
				var ev store.AuditEvent
				if err := s.DB().Get(&ev, s.DB().Rebind(`SELECT seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash
FROM audit_events WHERE seq = ?`), seq); err != nil {
					t.Fatal(err)
				}
				exec(t, s, `UPDATE audit_events SET hash = ? WHERE seq = ?`, forgeHash(ev), seq)
			}
			return run[1]
		}},
		{"insert into an unused seq", func(t *testing.T, s *store.Store, _ []int64, evs map[int64]store.AuditEvent, gap int64) int64 {
			if _, taken := evs[gap]; taken {
				t.Fatalf("seq %d was meant to stay unused", gap)
			}
			neighbour := evs[gap+1]
			fake := neighbour
			fake.Seq, fake.Action, fake.Detail = gap, "operation.confirmed", `{"reason":"trust me"}`
			fake.Hash = forgeHash(fake)
			exec(t, s, `INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, fake.Seq, neighbour.TxID, fake.At, fake.Actor, fake.Tenant, fake.OperationID,
				fake.Action, fake.FromState, fake.ToState, fake.Detail, fake.Hash)
			return gap
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, e store.Engine) {
				b := setup(t, e, nil)
				gap := auditHistory(t, b)
				evs := events(t, b.s)
				run := sealedRun(t, b.s)
				want := tt.tamper(t, b.s, run, evs, gap)
				verify(t, b.s, verifyOpts(), want)
			})
		})
	}
}

// TestAuditCheckpointTamper edits and deletes checkpoint rows, of a trail
// whose first checkpoint covers events, and of one whose first is a
// heartbeat (nothing yet to seal when it was written). The second happens
// on its own on PostgreSQL when a transaction anywhere on the server holds
// xmin back below the first events: the seal may not cover them yet.
// Either way, verification names the first event after the break.
func TestAuditCheckpointTamper(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// tamper changes the trail and returns the checkpoint whose first
		// seq verification must name.
		tamper func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint
	}{
		{"edit the events digest", func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint {
			c := firstCovering(t, cps)
			exec(t, s, `UPDATE audit_checkpoints SET events_digest = ? WHERE id = ?`, strings.Repeat("0", 64), c.ID)
			return c
		}},
		{"edit a short event hash", func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint {
			c := wide(t, s, cps)
			h := c.EventHashes
			exec(t, s, `UPDATE audit_checkpoints SET event_hashes = ? WHERE id = ?`, h[:16]+strings.Repeat("f", 16)+h[32:], c.ID)
			return c
		}},
		{"edit the event count", func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint {
			c := firstCovering(t, cps)
			exec(t, s, `UPDATE audit_checkpoints SET event_count = event_count + 1 WHERE id = ?`, c.ID)
			return c
		}},
		{"unchain the last checkpoint", func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint {
			last := cps[len(cps)-1]
			exec(t, s, `UPDATE audit_checkpoints SET prev_hash = ? WHERE id = ?`, strings.Repeat("a", 64), last.ID)
			return last
		}},
		{"delete the first checkpoint", func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint {
			exec(t, s, `DELETE FROM audit_checkpoints WHERE id = ?`, cps[0].ID)
			return firstCovering(t, cps)
		}},
	}
	for _, tt := range tests {
		for _, heartbeat := range []bool{false, true} {
			name := tt.name
			if heartbeat {
				name += " after a heartbeat"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				checkpointTamper(t, heartbeat, tt.tamper)
			})
		}
	}
}

// firstCovering is the first of cps that covers events.
func firstCovering(t *testing.T, cps []store.Checkpoint) store.Checkpoint {
	t.Helper()
	for _, c := range cps {
		if c.Seqs != "" {
			return c
		}
	}
	t.Fatalf("no checkpoint covers an event: %+v", cps)
	return store.Checkpoint{}
}

// checkpointTamper seals a history in at least two checkpoints, after a
// heartbeat first when heartbeat is set, tampers with them, and checks
// that verification names the first seq of the checkpoint tamper returns.
func checkpointTamper(t *testing.T, heartbeat bool, tamper func(t *testing.T, s *store.Store, cps []store.Checkpoint) store.Checkpoint) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		if heartbeat {
			if c, err := b.s.Seal(b.ctx); err != nil || c == nil || c.Seqs != "" {
				t.Fatalf("the first seal of an empty trail = %+v, %v; want a heartbeat", c, err)
			}
		}
		auditHistory(t, b)
		b.newOp(t, "doc-second-seal", review.RiskRead, "plain")
		assertSealed(t, b.s)
		cps := checkpoints(t, b.s)
		if len(cps) < 2 {
			t.Fatalf("want two checkpoints: %+v", cps)
		}
		c := tamper(t, b.s, cps)
		rep := verify(t, b.s, verifyOpts(), covered(t, c)[0])
		if !strings.Contains(rep.Problem, "checkpoint") && !strings.Contains(rep.Problem, "sealed history") {
			t.Errorf("problem %q does not say what broke", rep.Problem)
		}
	})
}

// TestAuditLateCommit: on PostgreSQL a transaction may take its seq, then
// commit after later transactions have committed and been sealed. Its event
// must not look inserted into sealed history, and the next seal covers it.
func TestAuditLateCommit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		if e != store.Postgres {
			t.Skip("SQLite has one writer: events commit in seq order")
		}
		b := setup(t, e, nil)
		b.newOp(t, "doc-before", review.RiskRead, "plain")
		assertSealed(t, b.s)

		inserted := make(chan int64, 1)
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- b.s.WithTx(b.ctx, func(tx *sqlx.Tx) error {
				ev := store.AuditEvent{At: t0, Actor: "test:slow-writer", Tenant: tenantA, Action: "test.late", Detail: "{}"}
				if err := tx.Get(&ev.Seq, `SELECT nextval('audit_events_seq')`); err != nil {
					return err
				}
				ev.Hash = forgeHash(ev)
				if _, err := tx.Exec(`INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
VALUES ($1, pg_current_xact_id()::text::bigint, $2, $3, $4, '', $5, '', '', $6, $7)`,
					ev.Seq, ev.At, ev.Actor, ev.Tenant, ev.Action, ev.Detail, ev.Hash); err != nil {
					return err
				}
				inserted <- ev.Seq
				<-release
				return nil
			})
		}()
		var late int64
		select {
		case late = <-inserted:
		case err := <-done:
			t.Fatalf("slow writer: %v", err)
		}

		// A later writer takes a higher seq and commits first; a seal runs.
		later := b.newOp(t, "doc-after", review.RiskRead, "plain")
		if hist := b.history(t, later.ID); hist[0].Seq <= late {
			t.Fatalf("later event has seq %d, want above the slow writer's %d", hist[0].Seq, late)
		}
		if err := b.s.SealAll(b.ctx); err != nil {
			t.Fatal(err)
		}
		if rep, err := b.s.VerifyAudit(b.ctx, verifyOpts()); err != nil || !rep.OK {
			t.Fatalf("verify while the slow writer runs = %+v, %v", rep, err)
		}

		close(release)
		if err := <-done; err != nil {
			t.Fatalf("slow writer: %v", err)
		}
		// Committed now, below sealed seqs perhaps, but not "inserted".
		rep, err := b.s.VerifyAudit(b.ctx, verifyOpts())
		if err != nil || !rep.OK || rep.Unsealed < 1 {
			t.Fatalf("verify after the late commit = %+v, %v; want OK with the late event unsealed", rep, err)
		}
		assertSealed(t, b.s)
		found := false
		for _, c := range checkpoints(t, b.s) {
			found = found || slices.Contains(covered(t, c), late)
		}
		if !found {
			t.Errorf("seq %d is in no checkpoint after resealing", late)
		}
	})
}

// TestAuditShownToIsSealed: an event about a console user is shown to
// the managers of the tenants beside it (audit_event_tenants), and its
// detail names them under its hash (shown_to), so verification finds the
// list edited: a tenant struck off (the event hidden from its managers),
// one added, another tenant's event shown beyond it, or an event about
// no user shown to a tenant. Both engines.
func TestAuditShownToIsSealed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		if _, err := b.s.AddUser(b.ctx, review.Operator("admin"), store.NewUser{Email: "ann@example.com", Password: ownerPassword,
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{tenantA, tenantB}}}); err != nil {
			t.Fatal(err)
		}
		// Tenants a collation sorts otherwise than bytes do (ICU puts
		// "alpha_1" before "Beta"): the list is compared as a set.
		if _, err := b.s.AddUser(b.ctx, review.Operator("admin"), store.NewUser{Email: "bob@example.com", Password: ownerPassword,
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"Beta", "alpha_1", "Ünïcode", tenantA}}}); err != nil {
			t.Fatal(err)
		}
		op := b.newOp(t, "doc-1", review.RiskRead, "plain")
		var added, opEvent int64
		for seq, ev := range events(t, b.s) {
			switch {
			case ev.Action == "user.added" && strings.Contains(ev.Detail, "ann@"):
				added = seq
				if !strings.Contains(ev.Detail, `"shown_to":["`+tenantA+`","`+tenantB+`"]`) {
					t.Errorf("user.added detail %s does not name the tenants it is shown to", ev.Detail)
				}
			case ev.OperationID == op.ID:
				opEvent = seq
			}
		}
		opt := verifyOpts()
		opt.SkipAge = true
		if rep, err := b.s.VerifyAudit(b.ctx, opt); err != nil || !rep.OK {
			t.Fatalf("untouched trail: %+v, %v", rep, err)
		}
		for _, tamper := range []struct{ what, do, undo string }{
			{"a tenant struck off", `DELETE FROM audit_event_tenants WHERE seq = ? AND tenant = '` + tenantB + `'`,
				`INSERT INTO audit_event_tenants (seq, tenant) VALUES (?, '` + tenantB + `')`},
			{"a tenant added", `INSERT INTO audit_event_tenants (seq, tenant) VALUES (?, 'tenant-c')`,
				`DELETE FROM audit_event_tenants WHERE seq = ? AND tenant = 'tenant-c'`},
			{"every tenant struck off", `DELETE FROM audit_event_tenants WHERE seq = ?`,
				`INSERT INTO audit_event_tenants (seq, tenant) VALUES (?, '` + tenantA + `'), (?, '` + tenantB + `')`},
		} {
			exec(t, b.s, tamper.do, added)
			if rep := verify(t, b.s, opt, added); !strings.Contains(rep.Problem, "shown to other tenants") {
				t.Errorf("%s: problem %q", tamper.what, rep.Problem)
			}
			args := []any{added}
			if strings.Count(tamper.undo, "?") == 2 {
				args = append(args, added)
			}
			exec(t, b.s, tamper.undo, args...)
			if rep, err := b.s.VerifyAudit(b.ctx, opt); err != nil || !rep.OK {
				t.Fatalf("%s, then mended: %+v, %v", tamper.what, rep, err)
			}
		}
		// Another tenant's event shown to tenant B's managers too.
		exec(t, b.s, `INSERT INTO audit_event_tenants (seq, tenant) VALUES (?, '`+tenantB+`')`, opEvent)
		if rep := verify(t, b.s, opt, opEvent); !strings.Contains(rep.Problem, "shown to other tenants too") {
			t.Errorf("an operation's event shown beyond its tenant: problem %q", rep.Problem)
		}
		exec(t, b.s, `DELETE FROM audit_event_tenants WHERE seq = ?`, opEvent)
		// An event without a tenant that is about no user (a refused
		// sign-in's), shown to tenant B's managers: its detail names no
		// tenants, as the events about users written before shown_to, but
		// its action was never one of theirs.
		for range 6 {
			_, _, _ = b.s.Login(b.ctx, "nobody@example.com", "wrong wrong wrong", "192.0.2.9", store.SessionPolicy{})
			b.clk.Advance(time.Minute)
		}
		var throttled int64
		for seq, ev := range events(t, b.s) {
			if ev.Action == "login.throttled" {
				throttled = seq
			}
		}
		if throttled == 0 {
			t.Fatal("no login.throttled event")
		}
		if rep, err := b.s.VerifyAudit(b.ctx, opt); err != nil || !rep.OK {
			t.Fatalf("after the refusal: %+v, %v", rep, err)
		}
		exec(t, b.s, `INSERT INTO audit_event_tenants (seq, tenant) VALUES (?, '`+tenantB+`')`, throttled)
		if rep := verify(t, b.s, opt, throttled); !strings.Contains(rep.Problem, "is not about a user, yet is shown to tenants") {
			t.Errorf("an event about no user shown to a tenant: problem %q", rep.Problem)
		}
	})
}
