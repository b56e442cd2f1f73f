package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// webhookFor is a verified job.completed webhook from destination "plain"
// naming op and one of its resources.
func webhookFor(op *review.Operation, eventID string) store.InboundEvent {
	return store.InboundEvent{Source: "plain", EventID: eventID, OperationID: op.ID,
		Body:       fmt.Sprintf(`{"type":"job.completed","operation_id":%q,"output_ref":"file-7"}`, op.ID),
		Candidates: []review.Candidate{{Ref: "file-7", Version: op.LogicalVersion, OperationID: op.ID}}, Note: "job.completed"}
}

func webhookEvidence(op *review.Operation) []review.Evidence {
	var out []review.Evidence
	for _, e := range op.Evidence {
		if e.Source == review.SourceWebhook {
			out = append(out, e)
		}
	}
	return out
}

// TestInboundDeduplicates: the same event id delivered 10 times — one
// after the other, or all at once — yields one evidence row; a webhook
// never settles the operation on its own.
func TestInboundDeduplicates(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)

		t.Run("sequential", func(t *testing.T) {
			op := b.ambiguous(t, "doc-seq")
			dups := 0
			for i := range 10 {
				dup, err := b.s.Inbound(b.ctx, webhookFor(op, "evt-1"))
				if err != nil {
					t.Fatalf("delivery %d: %v", i, err)
				}
				if dup != (i > 0) {
					t.Errorf("delivery %d: duplicate = %v", i, dup)
				}
				if dup {
					dups++
				}
			}
			if dups != 9 {
				t.Errorf("%d duplicates, want 9", dups)
			}
			got := b.get(t, op)
			evs := webhookEvidence(got)
			if len(evs) != 1 || len(got.Evidence) != 1 {
				t.Fatalf("evidence = %+v, want one webhook row", got.Evidence)
			}
			if ev := evs[0]; ev.Authoritative || ev.Verdict != review.VerdictInconclusive || len(ev.Candidates) != 1 || ev.Candidates[0].Ref != "file-7" {
				t.Errorf("webhook evidence = %+v, want inconclusive, not authoritative, naming file-7", ev)
			}
			// The webhook names exactly this operation's resource, and still
			// only a probe may confirm it.
			wantState(t, got, review.Ambiguous)
			if got.Resource != nil || got.Version != op.Version {
				t.Errorf("a webhook moved the operation: resource %+v, version %d → %d", got.Resource, op.Version, got.Version)
			}
			if n := countRows(t, b.s, `SELECT COUNT(*) FROM inbox WHERE event_id = ?`, "evt-1"); n != 1 {
				t.Errorf("%d inbox rows, want 1", n)
			}
			if n := countActions(b.history(t, op.ID))["evidence.recorded"]; n != 1 {
				t.Errorf("%d evidence.recorded events, want 1", n)
			}
		})

		t.Run("concurrent", func(t *testing.T) {
			op := b.ambiguous(t, "doc-conc")
			var wg sync.WaitGroup
			ready := make(chan struct{})
			dups := make([]bool, 10)
			errs := make([]error, 10)
			for i := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-ready
					dups[i], errs[i] = b.s.Inbound(b.ctx, webhookFor(op, "evt-2"))
				}()
			}
			close(ready)
			wg.Wait()
			fresh := 0
			for i := range 10 {
				if errs[i] != nil {
					t.Errorf("delivery %d: %v", i, errs[i])
				}
				if !dups[i] {
					fresh++
				}
			}
			if fresh != 1 {
				t.Errorf("%d deliveries were not duplicates, want 1", fresh)
			}
			if evs := webhookEvidence(b.get(t, op)); len(evs) != 1 {
				t.Errorf("%d webhook evidence rows, want 1", len(evs))
			}
		})

		t.Run("another event is new evidence", func(t *testing.T) {
			op := b.ambiguous(t, "doc-two")
			for _, id := range []string{"evt-3", "evt-4", "evt-3"} {
				if _, err := b.s.Inbound(b.ctx, webhookFor(op, id)); err != nil {
					t.Fatal(err)
				}
			}
			if evs := webhookEvidence(b.get(t, op)); len(evs) != 2 {
				t.Errorf("%d webhook evidence rows, want 2", len(evs))
			}
		})
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestInboundUnknownOperation: a webhook naming no operation of that
// destination is not found, and nothing is recorded.
func TestInboundUnknownOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.ambiguous(t, "doc-1")
		tests := []struct {
			name string
			ev   store.InboundEvent
		}{
			{"no such operation", store.InboundEvent{Source: "plain", EventID: "evt-x", OperationID: "op_nope", Body: "{}"}},
			{"operation of another destination", func() store.InboundEvent {
				ev := webhookFor(op, "evt-y")
				ev.Source = "mail"
				return ev
			}()},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := b.s.Inbound(b.ctx, tt.ev); !errors.Is(err, review.ErrNotFound) {
					t.Errorf("Inbound = %v, want ErrNotFound", err)
				}
			})
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM inbox`); n != 0 {
			t.Errorf("%d inbox rows, want none", n)
		}
		if got := b.get(t, op); len(got.Evidence) != 0 {
			t.Errorf("evidence = %+v, want none", got.Evidence)
		}
		// The event id was not burnt: the right delivery still counts.
		if dup, err := b.s.Inbound(b.ctx, webhookFor(op, "evt-y")); err != nil || dup {
			t.Errorf("valid delivery after a refused one: duplicate %v, %v", dup, err)
		}
	})
}

// TestInboundTriggersProbe: a webhook makes the reconciler look at an
// ambiguous operation now, not at its scheduled next probe.
func TestInboundTriggersProbe(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.ambiguous(t, "doc-1")
		c := b.claimOne(t, "r1", op)
		st := b.settleClaim(c, failedProbe("HTTP 503"))
		st.NextProbe = b.clk.Now().Add(10 * time.Minute)
		if err := b.s.ApplySettlement(b.ctx, c, st); err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(time.Second)
		if cs := b.claim(t, "r1"); len(cs) != 0 {
			t.Fatalf("claimed before the next probe is due: %v", claimedIDs(cs))
		}
		if _, err := b.s.Inbound(b.ctx, webhookFor(op, "evt-1")); err != nil {
			t.Fatal(err)
		}
		c2 := b.claimOne(t, "r1", op)
		if c2.Round != 1 {
			t.Errorf("claim round %d, want 1", c2.Round)
		}
		// The claim sees the webhook's evidence.
		if evs := webhookEvidence(c2.Op); len(evs) != 1 {
			t.Errorf("claimed operation carries %d webhook rows, want 1", len(evs))
		}

		// On a settled operation a webhook is recorded but schedules nothing.
		done := b.newOp(t, "doc-done", review.RiskCompensableWrite, "plain")
		b.start(t, done)
		wantState(t, b.report(t, done, 1, success("file-1")).Operation, review.Confirmed)
		if _, err := b.s.Inbound(b.ctx, webhookFor(done, "evt-2")); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operations WHERE id = ? AND next_probe_at IS NOT NULL`, done.ID); n != 0 {
			t.Errorf("a webhook scheduled a probe of a confirmed operation")
		}
		got := b.get(t, done)
		wantState(t, got, review.Confirmed)
		if len(webhookEvidence(got)) != 1 {
			t.Errorf("webhook on a confirmed operation not recorded: %+v", got.Evidence)
		}
		if !storetest.Sealed(t, b.s).OK {
			t.Error("audit trail does not verify")
		}
	})
}

// TestNothingNewLeavesAnOpenFormAsItIs: a webhook that says nothing new,
// two hours after the case was assessed, leaves the case's version as it
// was, so the form a reviewer has open is not refused as stale, and writes
// no case.updated; it only ranks the case afresh in the queue (two hours
// older: a point for its first hour, review's ageSteps). Evidence that changes what the case recommends
// moves it. Before, the webhook alone made the open form stale.
func TestNothingNewLeavesAnOpenFormAsItIs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, c := b.inReview(t, intention("doc-age", review.RiskIrreversible, "plain"), true)
		updated := countActions(b.history(t, op.ID))["case.updated"]
		b.clk.Advance(2 * time.Hour)
		progress := webhookFor(op, "evt-progress")
		progress.Candidates, progress.Body, progress.Note = nil, `{"type":"job.progress"}`, "job.progress"
		if _, err := b.s.Inbound(b.ctx, progress); err != nil {
			t.Fatal(err)
		}
		after, err := b.s.GetCase(b.ctx, c.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != c.Version || after.Priority != c.Priority+1 || countActions(b.history(t, op.ID))["case.updated"] != updated {
			t.Errorf("a webhook with nothing new: version %d → %d, priority %d → %d; want the version as it was, a point older", c.Version, after.Version, c.Priority, after.Priority)
		}
		if _, err := b.s.Decide(b.ctx, seen(decideReq(c, review.DecideFail, "alice"), c)); err != nil {
			t.Errorf("a decision on the form read before the webhook: %v", err)
		}
		wantState(t, b.get(t, op), review.Failed)

		// Evidence that changes the recommendation: the case moves, its
		// priority with it (two hours older).
		op, c = b.inReview(t, intention("doc-age-2", review.RiskIrreversible, "plain"), true)
		b.clk.Advance(2 * time.Hour)
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{mine(op, "fld-1")}}, "integrator"); err != nil {
			t.Fatal(err)
		}
		after, err = b.s.GetCase(b.ctx, c.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if after.Version == c.Version || after.Priority != c.Priority+1 || after.RecommendedAction != review.RecommendConfirm {
			t.Errorf("the case after a search found fld-1: version %d → %d, priority %d → %d, %s; want it moved, a point older, to confirm",
				c.Version, after.Version, c.Priority, after.Priority, after.RecommendedAction)
		}
	})
}
