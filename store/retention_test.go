package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func durationPtr(d time.Duration) *time.Duration { return &d }

// retentionConfig: 30 days by default; destination "short" keeps its
// transform payloads a day, "keep" forever (0 stated wins over the default).
func retentionConfig() *review.Config {
	return &review.Config{PayloadRetention: 30 * 24 * time.Hour, Destinations: map[string]review.Destination{
		"short": {Actions: map[string]review.ActionConfig{"transform": {Retention: durationPtr(24 * time.Hour)}}},
		"keep":  {Actions: map[string]review.ActionConfig{"transform": {Retention: durationPtr(0)}}},
	}}
}

// confirmed registers sourceRef at destination and confirms it by its
// first attempt's answer (with a structured output when output is set).
func (b *bundle) confirmed(t *testing.T, sourceRef, destination string, output string) *review.Operation {
	t.Helper()
	risk := review.RiskIdempotentWrite
	if output != "" {
		risk = review.RiskGenerate
	}
	op := b.newOp(t, sourceRef, risk, destination)
	b.start(t, op)
	o := success("res-" + sourceRef)
	if output != "" {
		o.Output = json.RawMessage(output)
	}
	wantState(t, b.report(t, op, 1, o).Operation, review.Confirmed)
	return op
}

// payloadBytesLeft counts the rows of every table that held op's payload or
// what came from it and still holds it.
func payloadBytesLeft(t *testing.T, s *store.Store, opID string) map[string]int {
	return map[string]int{
		"operations":        countRows(t, s, `SELECT COUNT(*) FROM operations WHERE id = ? AND (payload <> '' OR payload_purged_at IS NULL)`, opID),
		"rejected_payloads": countRows(t, s, `SELECT COUNT(*) FROM rejected_payloads WHERE case_id IN (SELECT id FROM cases WHERE operation_id = ?) AND payload <> ''`, opID),
		"evidence":          countRows(t, s, `SELECT COUNT(*) FROM evidence WHERE operation_id = ? AND candidates <> '[]'`, opID),
		"attempt_outputs":   countRows(t, s, `SELECT COUNT(*) FROM attempt_outputs WHERE operation_id = ? AND (output <> '' OR invalid <> '' OR purged_at IS NULL)`, opID),
	}
}

// TestPurgePayloads: payload retention empties, in every table that held
// them, the payloads of operations terminal for their retention (the
// action's, else the default), leaves the key, hash, states and trail, and
// the trail still verifies. A dry run writes nothing; a second purge finds
// nothing; the same key still compares by the hash.
func TestPurgePayloads(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, retentionConfig())
		day := 24 * time.Hour

		old := b.confirmed(t, "old", "svc", "")
		cs := b.mismatch(t, old) // a payload refused under its key, then judged
		if _, err := b.s.Decide(b.ctx, decideReq(cs, review.DecideFail, "alice")); err != nil {
			t.Fatal(err)
		}
		gen := b.confirmed(t, "gen", "svc", `{"answer":"the customer's address"}`)
		short := b.confirmed(t, "short", "short", "")
		keep := b.confirmed(t, "keep", "keep", "")
		pending := b.newOp(t, "pending", review.RiskIdempotentWrite, "svc")
		before := map[string]map[string]int{}
		for _, op := range []*review.Operation{old, gen} {
			before[op.SourceRef] = payloadBytesLeft(t, b.s, op.ID)
		}
		if before["old"]["rejected_payloads"] != 1 || before["old"]["evidence"] == 0 || before["gen"]["attempt_outputs"] != 1 {
			t.Fatalf("the fixture holds no payload-derived rows to purge: %v", before)
		}

		// Two days on: only the action whose retention is a day is due.
		b.clk.Advance(2 * day)
		rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Operations != 1 || len(rep.IDs) != 1 || rep.IDs[0] != short.ID {
			t.Fatalf("after 2 days purged %+v, want only %s (a day's retention beats 30 days)", rep, short.ID)
		}

		// 31 days on, with one operation confirmed just now.
		b.clk.Advance(29 * day)
		recent := b.confirmed(t, "recent", "svc", "")
		events := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events`)
		dry, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), true)
		if err != nil {
			t.Fatal(err)
		}
		if !dry.DryRun || dry.Operations != 2 || dry.RejectedPayloads != 1 || dry.Outputs != 1 || dry.Evidence < 2 {
			t.Fatalf("dry run = %+v, want old and gen with their refused payload, output and evidence", dry)
		}
		if got := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events`); got != events {
			t.Errorf("a dry run wrote %d audit events", got-events)
		}
		for _, op := range []*review.Operation{old, gen} {
			if got := payloadBytesLeft(t, b.s, op.ID); !equalCounts(got, before[op.SourceRef]) {
				t.Errorf("a dry run changed %s: %v, was %v", op.SourceRef, got, before[op.SourceRef])
			}
		}

		rep, err = b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Operations != 2 || rep.RejectedPayloads != dry.RejectedPayloads || rep.Evidence != dry.Evidence || rep.Outputs != dry.Outputs {
			t.Fatalf("purge = %+v, want what the dry run said (%+v)", rep, dry)
		}
		for _, op := range []*review.Operation{old, gen, short} {
			for table, n := range payloadBytesLeft(t, b.s, op.ID) {
				if n != 0 {
					t.Errorf("%s: %d rows of %s still hold its payload or what came from it", op.SourceRef, n, table)
				}
			}
			got := b.get(t, op)
			if got.Payload != nil || got.PayloadPurgedAt == nil || got.PayloadHash != op.PayloadHash || got.Key != op.Key || got.State != review.Confirmed {
				t.Errorf("%s read back: payload %q purged %v hash %s key %s state %s", op.SourceRef, got.Payload, got.PayloadPurgedAt, got.PayloadHash, got.Key, got.State)
			}
			if b, _ := json.Marshal(got); !strings.Contains(string(b), `"payload":null`) || !strings.Contains(string(b), `"payload_purged_at"`) {
				t.Errorf("%s as JSON: %s", op.SourceRef, b)
			}
		}
		// gen's output reads as kept and purged, and when; not as never kept.
		purgedAt := b.clk.Now().UTC().Truncate(time.Microsecond)
		if out, err := b.s.AttemptOutput(b.ctx, tenantA, gen.ID, 1); err != nil || out.Output != nil || out.Invalid != "" ||
			out.PurgedAt == nil || !out.PurgedAt.Equal(purgedAt) {
			t.Errorf("gen's output after the purge: %+v, %v; want kept, purged at %s, its bytes gone", out, err, purgedAt)
		}
		if outs, err := b.s.AttemptOutputs(b.ctx, gen.ID); err != nil || len(outs) != 1 || outs[0].PurgedAt == nil || outs[0].Output != nil {
			t.Errorf("gen's outputs after the purge: %+v, %v; want its one output, purged", outs, err)
		}
		// Nothing of the payload's text is left anywhere but the trail's
		// hashes (the trail never held it).
		for _, table := range []string{"operations", "rejected_payloads", "evidence", "attempt_outputs", "audit_events", "outbox"} {
			for _, text := range []string{`"source":"old"`, `"another":"payload"`, `the customer's address`} {
				if n := countRows(t, b.s, `SELECT COUNT(*) FROM `+table+` t WHERE `+textOf(table)+` LIKE ?`, "%"+text+"%"); n != 0 {
					t.Errorf("%s still holds %q in %d rows", table, text, n)
				}
			}
		}
		for _, op := range []*review.Operation{keep, pending, recent} {
			if got := b.get(t, op); got.PayloadPurgedAt != nil || string(got.Payload) != string(op.Payload) {
				t.Errorf("%s (kept forever, not terminal, or terminal too recently) was purged: %+v", op.SourceRef, got.PayloadPurgedAt)
			}
		}
		var purged []store.AuditEvent
		for _, ev := range b.history(t, old.ID) {
			if ev.Action == "operation.payload_purged" {
				purged = append(purged, ev)
			}
		}
		if len(purged) != 1 || purged[0].Actor != "system:payload-retention" || !strings.Contains(purged[0].Detail, `"rejected_payloads":1`) ||
			!strings.Contains(purged[0].Detail, old.PayloadHash) {
			t.Errorf("old's purge events: %+v", purged)
		}

		// The trail verifies: no hash covers a purged byte.
		assertSealed(t, b.s)

		// Idempotent: nothing is purged twice.
		if again, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false); err != nil || again.Operations != 0 {
			t.Errorf("a second purge = %+v, %v; want nothing", again, err)
		}

		// Evidence that lands after the purge keeps no candidates either
		// (the purge never looks at a purged operation again).
		if _, err := b.s.AddEvidence(b.ctx, tenantA, old.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "res-old", Version: old.LogicalVersion, OperationID: old.ID}}}, "integrator"); err != nil {
			t.Fatal(err)
		}
		if n := payloadBytesLeft(t, b.s, old.ID)["evidence"]; n != 0 {
			t.Errorf("evidence added after the purge keeps its candidates (%d rows)", n)
		}

		// The same key with the same payload is still the same operation
		// (the hash is kept); with another payload it is refused.
		same := intention("old", review.RiskIdempotentWrite, "svc")
		got, created, err := b.s.Register(b.ctx, same)
		if err != nil || created || got.ID != old.ID {
			t.Errorf("the same registration after the purge: %v, created %v, %v", got, created, err)
		}
		other := same
		other.Payload = canonical(t, `{"source":"something else"}`)
		if _, _, err := b.s.Register(b.ctx, other); err == nil {
			t.Error("another payload under a purged operation's key was accepted")
		} else {
			errAs[*review.PayloadMismatchError](t, err)
		}
		// The refused payload is not kept either: the case page shows none
		// beside a purged payload, and the purge never comes back for it.
		if n := payloadBytesLeft(t, b.s, old.ID)["rejected_payloads"]; n != 0 {
			t.Errorf("a payload refused after the purge is kept (%d rows)", n)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM rejected_payloads WHERE case_id IN (SELECT id FROM cases WHERE operation_id = ?)`, old.ID); n != 2 {
			t.Errorf("%d refusals on record, want 2 (its hash kept, as the purge keeps it)", n)
		}
		assertSealed(t, b.s)
	})
}

// textOf is the column of table a leaked payload would be in.
func textOf(table string) string {
	switch table {
	case "operations", "rejected_payloads", "outbox":
		return "t.payload"
	case "evidence":
		return "t.candidates"
	case "attempt_outputs":
		return "t.output"
	}
	return "t.detail"
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRetentionFor: the action's retention wins over the default, 0
// stated keeps forever, and no configuration keeps everything.
func TestRetentionFor(t *testing.T) {
	c := retentionConfig()
	for _, tc := range []struct {
		dest string
		want time.Duration
	}{{"short", 24 * time.Hour}, {"keep", 0}, {"svc", 30 * 24 * time.Hour}} {
		if got := c.RetentionFor(tc.dest, "transform"); got != tc.want {
			t.Errorf("RetentionFor(%s) = %s, want %s", tc.dest, got, tc.want)
		}
	}
	if got := (*review.Config)(nil).RetentionFor("svc", "transform"); got != 0 {
		t.Errorf("no configuration: %s, want 0 (forever)", got)
	}
}

// TestPurgeOnlyWhereRetentionIsSet: without a default, only the actions
// whose policy sets a retention are purged, and never a compensation.
func TestPurgeOnlyWhereRetentionIsSet(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		cfg := retentionConfig()
		cfg.PayloadRetention = 0
		b := setup(t, e, cfg)
		short := b.confirmed(t, "short", "short", "")
		other := b.confirmed(t, "other", "svc", "")
		keep := b.confirmed(t, "keep", "keep", "")
		b.clk.Advance(365 * 24 * time.Hour)
		rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Operations != 1 || rep.IDs[0] != short.ID {
			t.Errorf("purged %+v, want only %s", rep, short.ID)
		}
		for _, op := range []*review.Operation{other, keep} {
			if b.get(t, op).PayloadPurgedAt != nil {
				t.Errorf("%s was purged without a retention", op.SourceRef)
			}
		}
		assertSealed(t, b.s)
	})
}

// TestPurgeWaitsForTheConfirmWindow: an operation confirmed while its
// confirm window is still open (a retry on proven absence) keeps its
// payload and evidence until the watch is over. Purged during the watch,
// the duplicate the watch then finds was recorded without its candidates
// (evidence on a purged operation keeps none), so its case could not name
// the resource to undo. Once the window closes, the purge takes it.
func TestPurgeWaitsForTheConfirmWindow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		dest := review.Destination{SearchLag: time.Hour} // window: 10 h
		b := setup(t, e, &review.Config{PayloadRetention: time.Hour, Destinations: map[string]review.Destination{"files": dest}})
		watched := func(sourceRef string) *review.Operation {
			op := b.newOp(t, sourceRef, review.RiskCompensableWrite, "files")
			b.start(t, op)
			wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
			return op
		}
		dup, quiet := watched("dup"), watched("quiet")
		b.clk.Advance(dest.SearchLag + time.Second)
		for _, op := range []*review.Operation{dup, quiet} {
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
				Candidates: []review.Candidate{}}, "integrator")
			if err != nil || got.State != review.RetryWait {
				t.Fatalf("absence: %v %+v", err, got)
			}
		}
		b.clk.Advance(time.Minute)
		for _, op := range []*review.Operation{dup, quiet} {
			b.start(t, op)
			wantState(t, b.report(t, op, 2, success("res-"+op.SourceRef+"-2")).Operation, review.Confirmed)
		}

		// Two hours on: terminal past the retention, but still watched.
		b.clk.Advance(2 * time.Hour)
		rep, err := b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Operations != 0 {
			t.Fatalf("purged %v while their confirm window is open", rep.IDs)
		}

		// The watch finds the first attempt's folder beside dup's.
		claims, err := b.s.ClaimWatches(b.ctx, 10, time.Minute)
		if err != nil || len(claims) != 2 {
			t.Fatalf("claims: %d, %v", len(claims), err)
		}
		for _, c := range claims {
			var results []review.ProbeResult
			if c.Op.ID == dup.ID {
				results = []review.ProbeResult{{Kind: review.ProbeSearch, Candidates: []review.Candidate{
					{Ref: "res-dup-1", Version: dup.LogicalVersion, OperationID: dup.ID},
					{Ref: "res-dup-2", Version: dup.LogicalVersion, OperationID: dup.ID}}}}
			}
			w := review.Watch(c.Op, dest, results, c.Until, b.clk.Now())
			if c.Op.ID == dup.ID && len(w.Extra) != 1 {
				t.Fatalf("the watch sees %+v, want res-dup-1 as the extra", w.Extra)
			}
			if err := b.s.ApplyWatch(b.ctx, c, w); err != nil {
				t.Fatal(err)
			}
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM evidence WHERE operation_id = ? AND candidates LIKE '%res-dup-1%'`, dup.ID); n != 1 {
			t.Errorf("the duplicate's evidence holds it in %d rows, want 1: its case cannot name what to undo", n)
		}

		// The window closes: quiet's watch ends, and the purge takes it
		// (dup waits for its case).
		b.clk.Advance(10 * time.Hour)
		claims, err = b.s.ClaimWatches(b.ctx, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claims {
			if err := b.s.ApplyWatch(b.ctx, c, review.Watch(c.Op, dest, nil, c.Until, b.clk.Now())); err != nil {
				t.Fatal(err)
			}
		}
		rep, err = b.s.PurgePayloads(b.ctx, b.clk.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Operations != 1 || rep.IDs[0] != quiet.ID {
			t.Fatalf("after the window purged %v, want only %s", rep.IDs, quiet.ID)
		}
		assertSealed(t, b.s)
	})
}
