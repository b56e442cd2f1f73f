package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestEvidenceSettlesAmbiguity follows SPEC's reconciliation rule on an
// ambiguous operation: exactly one matching candidate confirms, proven
// absence retries with the same key, anything else goes to a person.
func TestEvidenceSettlesAmbiguity(t *testing.T) {
	t.Parallel()
	match := func(op *review.Operation, ref string) review.Candidate {
		return review.Candidate{Ref: ref, Kind: "file", Version: op.LogicalVersion, OperationID: op.ID}
	}
	tests := []struct {
		name          string
		source        review.EvidenceSource
		authoritative bool
		candidates    func(op *review.Operation) []review.Candidate
		want          review.State
		verdict       review.Verdict
		escalation    review.Reason
	}{
		{"authoritative search finds exactly one", review.SourceMetadataSearch, true,
			func(op *review.Operation) []review.Candidate { return []review.Candidate{match(op, "file-1")} },
			review.Confirmed, review.VerdictConfirms, ""},
		{"authoritative status lookup finds it", review.SourceStatusLookup, true,
			func(op *review.Operation) []review.Candidate { return []review.Candidate{match(op, "file-1")} },
			review.Confirmed, review.VerdictConfirms, ""},
		{"authoritative search finds nothing", review.SourceMetadataSearch, true,
			func(*review.Operation) []review.Candidate { return nil },
			review.RetryWait, review.VerdictRefutes, ""},
		{"two candidates", review.SourceMetadataSearch, true,
			func(op *review.Operation) []review.Candidate {
				return []review.Candidate{match(op, "file-1"), match(op, "file-2")}
			},
			review.NeedsReview, review.VerdictInconclusive, review.ReasonMultipleCands},
		{"candidate for another version", review.SourceMetadataSearch, true,
			func(op *review.Operation) []review.Candidate {
				c := match(op, "file-1")
				c.Version = "v0"
				return []review.Candidate{c}
			},
			review.NeedsReview, review.VerdictInconclusive, review.ReasonVersionMismatch},
		{"candidate of another operation", review.SourceMetadataSearch, true,
			func(op *review.Operation) []review.Candidate {
				c := match(op, "file-1")
				c.OperationID = "op_someone_else"
				return []review.Candidate{c}
			},
			review.NeedsReview, review.VerdictInconclusive, review.ReasonNoDedupEvidence},
		{"webhook never confirms", review.SourceWebhook, true,
			func(op *review.Operation) []review.Candidate { return []review.Candidate{match(op, "file-1")} },
			review.Ambiguous, review.VerdictConfirms, ""},
		{"webhook never proves absence", review.SourceWebhook, true,
			func(*review.Operation) []review.Candidate { return nil },
			review.Ambiguous, review.VerdictRefutes, ""},
		{"non-authoritative match", review.SourceMetadataSearch, false,
			func(op *review.Operation) []review.Candidate { return []review.Candidate{match(op, "file-1")} },
			review.Ambiguous, review.VerdictConfirms, ""},
		{"non-authoritative absence", review.SourceMetadataSearch, false,
			func(*review.Operation) []review.Candidate { return nil },
			review.Ambiguous, review.VerdictInconclusive, ""},
		{"non-authoritative crowd", review.SourceStatusLookup, false,
			func(op *review.Operation) []review.Candidate {
				return []review.Candidate{match(op, "file-1"), match(op, "file-2")}
			},
			review.Ambiguous, review.VerdictInconclusive, ""},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				op := b.ambiguous(t, fmt.Sprintf("doc-%d", i))
				events := len(b.history(t, op.ID))
				ev := review.Evidence{Source: tt.source, Authoritative: tt.authoritative, Candidates: tt.candidates(op)}
				got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator")
				if err != nil {
					t.Fatal(err)
				}
				wantState(t, got, tt.want)
				if len(got.Evidence) != 1 {
					t.Fatalf("evidence = %+v, want the one just added", got.Evidence)
				}
				stored := got.Evidence[0]
				if stored.Source != tt.source || stored.Authoritative != tt.authoritative || stored.Verdict != tt.verdict ||
					len(stored.Candidates) != len(ev.Candidates) || stored.ObservedAt.IsZero() {
					t.Errorf("stored evidence = %+v, want source %s, verdict %s, %d candidates", stored, tt.source, tt.verdict, len(ev.Candidates))
				}
				hist := b.history(t, op.ID)
				// One event for the evidence or its transition; a move to
				// needs_review also opens a case, audited on its own.
				wantEvents := events + 1
				if tt.want == review.NeedsReview {
					wantEvents++
					if last := hist[len(hist)-1]; last.Action != "case.opened" {
						t.Fatalf("last event = %+v, want case.opened", last)
					}
					hist = hist[:len(hist)-1]
				}
				if len(hist)+boolInt(tt.want == review.NeedsReview) != wantEvents {
					t.Fatalf("audit events %d → %d, want %d", events, len(hist), wantEvents)
				}
				lastEv := hist[len(hist)-1]
				if tt.want == review.Ambiguous {
					if lastEv.FromState != "" || lastEv.ToState != "" || got.Version != op.Version {
						t.Errorf("evidence that settles nothing moved the operation: %+v, version %d → %d", lastEv, op.Version, got.Version)
					}
				} else if lastEv.FromState != string(review.Ambiguous) || lastEv.ToState != string(tt.want) || got.Version != op.Version+1 {
					t.Errorf("last event = %+v, version %d → %d; want one audited move ambiguous → %s", lastEv, op.Version, got.Version, tt.want)
				}
				if tt.escalation != "" && !strings.Contains(lastEv.Detail, string(tt.escalation)) {
					t.Errorf("event detail %s does not name %s", lastEv.Detail, tt.escalation)
				}

				switch tt.want {
				case review.Confirmed:
					want := review.ResourceRef{Ref: "file-1", Kind: "file", Version: "v1"}
					if got.Resource == nil || *got.Resource != want {
						t.Errorf("resource = %+v, want %+v", got.Resource, want)
					}
					_, err := b.tryStart(op, "", "")
					errAs[*review.NotAttemptableError](t, err)
				case review.RetryWait:
					// Proven absence: retry now, with the same key.
					g, err := b.tryStart(op, "", "")
					if err != nil || g.N != 2 || g.Key != op.Key {
						t.Errorf("attempt after proven absence = %+v, %v; want attempt 2 with key %s", g, err, op.Key)
					}
				default:
					if got.Resource != nil {
						t.Errorf("resource = %+v, want none", got.Resource)
					}
					_, err := b.tryStart(op, "", "")
					errAs[*review.NotAttemptableError](t, err)
				}
			})
		}
		assertSealed(t, b.s)
	})
}

// TestEvidenceAbsenceWithoutBudget: absence proven after the last allowed
// attempt ends the operation as failed, not retry_wait.
func TestEvidenceAbsenceWithoutBudget(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		one := 1
		r := intention("doc-1", review.RiskCompensableWrite, "files")
		r.MaxAttempts = &one
		op := b.register(t, r)
		b.start(t, op)
		wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
		got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Failed)
	})
}

// TestEvidenceOnSettledOperations: evidence is always recorded, but only an
// ambiguous operation is moved by it.
func TestEvidenceOnSettledOperations(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		pending := b.newOp(t, "doc-pending", review.RiskCompensableWrite, "files")
		inFlight := b.newOp(t, "doc-in-flight", review.RiskCompensableWrite, "files")
		b.start(t, inFlight)
		for _, op := range []*review.Operation{pending, inFlight} {
			ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
				Candidates: []review.Candidate{{Ref: "file-1", Version: "v1", OperationID: op.ID}}}
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			if before := b.get(t, op); got.State != before.State || len(got.Evidence) != 1 {
				t.Errorf("%s: state %s, %d evidence rows; want it unchanged with the evidence kept", op.SourceRef, got.State, len(got.Evidence))
			}
		}
		// The in-flight attempt's own outcome still applies: evidence did
		// not move the generation it was granted under.
		res := b.report(t, inFlight, 1, success("file-1"))
		wantState(t, res.Operation, review.Confirmed)
	})
}

// TestEvidenceOfAnExtraEffect: evidence submitted about a confirmed
// compensable write that names a second resource for its operation and
// version opens a case for the duplicate (I2), as the confirm window's
// probes do; the operation stays confirmed. Evidence naming only the
// confirmed resource, or a look that is not authoritative, opens nothing
// (a signed webhook's claim does: TestWebhookClaimsADuplicate).
func TestEvidenceOfAnExtraEffect(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "doc-extra", review.RiskCompensableWrite, "files")
		b.start(t, op)
		wantState(t, b.report(t, op, 1, success("file-1")).Operation, review.Confirmed)
		match := func(ref string) review.Candidate {
			return review.Candidate{Ref: ref, Version: op.LogicalVersion, OperationID: op.ID}
		}
		for _, ev := range []review.Evidence{
			{Source: review.SourceStatusLookup, Authoritative: true, Candidates: []review.Candidate{match("file-1")}},
			{Source: review.SourceWebhook, Authoritative: true, Candidates: []review.Candidate{match("file-1")}},
			{Source: review.SourceMetadataSearch, Authoritative: false, Candidates: []review.Candidate{match("file-1"), match("file-2")}},
		} {
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, ev, "integrator")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != review.Confirmed || openCases(t, b, op.ID) != 0 {
				t.Fatalf("%s evidence (authoritative %v) naming %v: %s with %d open cases; want confirmed, no case",
					ev.Source, ev.Authoritative, ev.Candidates, got.State, openCases(t, b, op.ID))
			}
		}
		got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{match("file-1"), match("file-2")}}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != review.Confirmed || openCases(t, b, op.ID) != 1 {
			t.Fatalf("a search naming file-2 beside the confirmed file-1: %s with %d open cases; want confirmed with one case", got.State, openCases(t, b, op.ID))
		}
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c := cs[len(cs)-1]; !slices.Contains(c.Reasons, review.ReasonMultipleCands) || c.RecommendedRef != "file-2" {
			t.Errorf("the case: reasons %v, recommends %s %s; want multiple_candidates and the undo of file-2", c.Reasons, c.RecommendedAction, c.RecommendedRef)
		}
		var audited bool
		for _, ev := range b.history(t, op.ID) {
			audited = audited || ev.Action == "evidence.extra_effect" && strings.Contains(string(ev.Detail), "file-2")
		}
		if !audited {
			t.Error("no evidence.extra_effect event naming file-2")
		}
		// The same look again: the one case stays.
		if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{match("file-1"), match("file-2")}}, "integrator"); err != nil {
			t.Fatal(err)
		}
		if n := openCases(t, b, op.ID); n != 1 {
			t.Errorf("the same look again: %d open cases, want one", n)
		}
		assertSealed(t, b.s)
	})
}

func TestEvidenceValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   review.Evidence
		want string
	}{
		{"unknown source", review.Evidence{Source: "gossip", Authoritative: true}, "source"},
		{"reviewer source", review.Evidence{Source: review.SourceReviewer, Authoritative: true}, "source"},
		{"candidate without ref", review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{{Ref: "file-1"}, {Kind: "file"}}}, "candidates[1].ref"},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.ambiguous(t, "doc-1")
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, tt.ev, "integrator")
				if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("AddEvidence = %v, want ErrInvalid naming %s", err, tt.want)
				}
			})
		}
		if got := b.get(t, op); got.State != review.Ambiguous || len(got.Evidence) != 0 {
			t.Errorf("refused evidence left a trace: %s, %+v", got.State, got.Evidence)
		}
		if _, err := b.s.AddEvidence(b.ctx, tenantA, "op_missing", review.Evidence{Source: review.SourceWebhook}, "integrator"); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("AddEvidence(unknown operation) = %v, want ErrNotFound", err)
		}
		actions := []string{}
		for _, ev := range b.history(t, op.ID) {
			actions = append(actions, ev.Action)
		}
		if slices.Contains(actions, "evidence.recorded") {
			t.Errorf("refused evidence was audited: %v", actions)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestEvidenceWeighedTogether: the issue 12 sequences through the store,
// where evidence used to be judged one piece at a time (both engines).
func TestEvidenceWeighedTogether(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{"lagging": {SearchLag: 30 * time.Second}}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		add := func(op *review.Operation, src review.EvidenceSource, cs ...review.Candidate) *review.Operation {
			t.Helper()
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: src, Authoritative: true, Candidates: cs}, "test")
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		match := func(op *review.Operation) review.Candidate {
			return review.Candidate{Ref: "file-" + op.SourceRef, Kind: "file", Version: op.LogicalVersion, OperationID: op.ID}
		}

		// Hole 1: ambiguous → an authoritative empty search → retry_wait;
		// then a status lookup naming this operation's resource. It was
		// stored as "confirms" and the state stayed retry_wait; attempt 2
		// was granted. Now the two disagree, and a person decides.
		op := b.ambiguous(t, "hole-1")
		if got := add(op, review.SourceMetadataSearch); got.State != review.RetryWait {
			t.Fatalf("after an empty search: %s, want retry_wait", got.State)
		}
		got := add(op, review.SourceStatusLookup, match(op))
		wantState(t, got, review.NeedsReview)
		if _, err := b.tryStart(op, "", ""); errAs[*review.NotAttemptableError](t, err) == nil {
			t.Fatal("an attempt was granted after the lookup found the effect")
		}
		if cs, _ := b.s.CasesForOperation(b.ctx, op.ID); len(cs) != 1 || !slices.Contains(cs[0].Reasons, review.ReasonSourcesDisagree) {
			t.Errorf("cases: %+v, want one for sources_disagree", cs)
		}

		// The same lookup on a retry_wait operation with no contradiction
		// confirms it: attempts stop.
		op = b.ambiguous(t, "found-later")
		exec(t, b.s, `UPDATE operations SET state = 'retry_wait' WHERE id = ?`, op.ID) // as an approve_retry leaves it
		got = add(op, review.SourceStatusLookup, match(op))
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != "file-found-later" {
			t.Errorf("resource = %+v", got.Resource)
		}

		// Hole 2: on a destination with a 30 s search lag, an integrator's
		// empty search one second after the timeout proved absence.
		lagged := b.newOp(t, "hole-2", review.RiskCompensableWrite, "lagging")
		b.start(t, lagged)
		b.report(t, lagged, 1, timeoutAfterSend)
		b.clk.Advance(time.Second)
		wantState(t, add(lagged, review.SourceMetadataSearch), review.Ambiguous)
		b.clk.Advance(30 * time.Second)
		wantState(t, add(lagged, review.SourceMetadataSearch), review.RetryWait)

		// Hole 9 (API path): a response naming the resource, then an empty
		// search: the effect is not outweighed.
		op = b.ambiguous(t, "hole-9")
		wantState(t, add(op, review.SourceResponse, match(op)), review.Confirmed)
		op2 := b.ambiguous(t, "hole-9b")
		if _, err := b.s.Inbound(b.ctx, webhookFor(op2, "evt-9b")); err != nil {
			t.Fatal(err)
		}
		wantState(t, add(op2, review.SourceMetadataSearch), review.NeedsReview)
	})
}

// TestWebhookClaimStopsARetry: a signed webhook reporting an effect for a
// retry_wait operation sends it back to reconciliation before any retry.
func TestWebhookClaimStopsARetry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.ambiguous(t, "claimed")
		got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "test")
		if err != nil || got.State != review.RetryWait {
			t.Fatalf("after an empty search: %v %v", got.State, err)
		}
		if _, err := b.s.Inbound(b.ctx, webhookFor(op, "evt-claim")); err != nil {
			t.Fatal(err)
		}
		// The claim and the earlier absence disagree: a person decides.
		wantState(t, b.get(t, op), review.NeedsReview)
		if _, err := b.tryStart(op, "", ""); errAs[*review.NotAttemptableError](t, err) == nil {
			t.Fatal("an attempt was granted after the webhook reported the effect")
		}
	})
}

// TestWebhookClaimsADuplicate: a signed webhook naming, for a confirmed
// operation, a second resource of its operation and version is the
// destination's word of a duplicate (a second charge, a second file): it
// opens a case for a person (I2), recommending a look and the undo of the
// resource it names, with the operation left confirmed. Before, it was
// kept as evidence and nobody was asked to look. A webhook naming the
// confirmed resource opens nothing; the same claim again keeps the one
// case; the way out is the word that it is undone, or not there. That
// word is remembered as an undo Limbo made would be: the same event
// delivered again, a new one naming the resource, or a search listing it
// opens nothing; a third resource opens a case again.
func TestWebhookClaimsADuplicate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, &review.Config{Destinations: map[string]review.Destination{"plain": {SearchLag: 2 * time.Second}}})
		op := b.newOp(t, "doc-webhook-dup", review.RiskCompensableWrite, "plain")
		b.start(t, op)
		wantState(t, b.report(t, op, 1, success("file-1")).Operation, review.Confirmed)
		claim := func(eventID, ref string) {
			t.Helper()
			ev := webhookFor(op, eventID)
			ev.Candidates = []review.Candidate{{Ref: ref, Version: op.LogicalVersion, OperationID: op.ID}}
			if _, err := b.s.Inbound(b.ctx, ev); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, op), review.Confirmed)
		}
		claim("evt-same", "file-1")
		if n := openCases(t, b, op.ID); n != 0 {
			t.Fatalf("a webhook naming the confirmed file-1: %d open cases, want none", n)
		}
		claim("evt-dup", "file-2")
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || cs[0].Status != store.CaseOpen {
			t.Fatalf("a webhook naming file-2 beside the confirmed file-1: cases %+v, %v; want one open", cs, err)
		}
		c := cs[0]
		if !slices.Contains(c.Reasons, review.ReasonMultipleCands) || c.RecommendedAction != review.RecommendCompensate ||
			c.RecommendedRef != "file-2" || c.Rationale != fmt.Sprintf(review.RationaleClaimedDuplicate, "file-2", "file-1") {
			t.Errorf("the case: reasons %v, recommends %s %s (%s); want multiple_candidates, a look and the undo of file-2",
				c.Reasons, c.RecommendedAction, c.RecommendedRef, c.Rationale)
		}
		if got := review.DecisionsAllowed(review.Confirmed, c.Reasons); !slices.Equal(got, []string{review.DecideCompensate, review.DecideCompensationDone}) {
			t.Errorf("decisions on the case: %v; want compensate and compensation_done", got)
		}
		var audited bool
		for _, ev := range b.history(t, op.ID) {
			audited = audited || ev.Action == "evidence.extra_effect" && strings.Contains(string(ev.Detail), "file-2") &&
				strings.Contains(string(ev.Detail), "evt-dup")
		}
		if !audited {
			t.Error("no evidence.extra_effect event naming file-2 and the webhook's event")
		}
		claim("evt-dup-again", "file-2")
		if n := openCases(t, b, op.ID); n != 1 {
			t.Errorf("the same claim again: %d open cases, want the one", n)
		}
		// The destination can be searched: the reconciler looks, once its
		// lag has passed. Its search shows both; the case now says so.
		b.clk.Advance(3 * time.Second)
		claims, err := b.s.ClaimWatches(b.ctx, 10, time.Minute)
		if err != nil || len(claims) != 1 || claims[0].Op.ID != op.ID {
			t.Fatalf("watches after the claim: %+v, %v; want the confirmed operation looked for", claims, err)
		}
		match := func(ref string) review.Candidate {
			return review.Candidate{Ref: ref, Version: op.LogicalVersion, OperationID: op.ID}
		}
		w := review.Watch(claims[0].Op, review.Destination{SearchLag: 2 * time.Second},
			[]review.ProbeResult{{Kind: review.ProbeSearch, Candidates: []review.Candidate{match("file-1"), match("file-2")}}}, claims[0].Until, b.clk.Now())
		if err := b.s.ApplyWatch(b.ctx, claims[0], w); err != nil {
			t.Fatal(err)
		}
		cs, err = b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 || cs[0].Status != store.CaseOpen || cs[0].RecommendedRef != "file-2" ||
			cs[0].Rationale != fmt.Sprintf(review.RationaleDuplicates, 2, "file-1", "file-2") {
			t.Fatalf("the case after the search showed file-2: %+v, %v; want the one case, now on what the search showed", cs, err)
		}
		c = cs[0]
		// The way out: a person looked, and says it is undone (or was
		// never there); the operation stays confirmed with file-1.
		done := decideReq(&c, review.DecideCompensationDone, "rita@example.com")
		done.Ref, done.Reason = "file-2", "no file-2 at the destination"
		if _, err := b.s.Decide(b.ctx, done); err != nil {
			t.Fatalf("compensation_done on file-2: %v", err)
		}
		got := b.get(t, op)
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != "file-1" {
			t.Errorf("resource %+v; want file-1 kept", got.Resource)
		}
		if n := openCases(t, b, op.ID); n != 0 {
			t.Errorf("%d open cases after the word, want none", n)
		}
		// The same event delivered again is the same word: nothing new.
		claim("evt-dup", "file-2")
		if n := openCases(t, b, op.ID); n != 0 {
			t.Errorf("the same event delivered again after the word: %d open cases, want none", n)
		}
		// The word is remembered: file-2 is answered for, as if Limbo had
		// undone it. A new event naming it (the provider's report of the
		// refund a person made) and a search still listing it (a deleted
		// file some destinations keep listing) open nothing. Before, each
		// opened the case again, and every word led back to it.
		if got := b.get(t, op); !slices.Contains(got.Undone, "file-2") {
			t.Errorf("undone after the word: %v, want file-2", got.Undone)
		}
		claim("evt-dup-late", "file-2")
		if n := openCases(t, b, op.ID); n != 0 {
			t.Errorf("a new event naming file-2 after the word: %d open cases, want none", n)
		}
		if _, err := b.s.AddEvidence(b.ctx, op.Tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
			Candidates: []review.Candidate{match("file-1"), match("file-2")}}, "test"); err != nil {
			t.Fatal(err)
		}
		if n := openCases(t, b, op.ID); n != 0 {
			t.Errorf("a search listing file-2 after the word: %d open cases, want none", n)
		}
		// Another resource is another duplicate: a person looks.
		claim("evt-dup-3", "file-3")
		if n := openCases(t, b, op.ID); n != 1 {
			t.Errorf("a new event naming file-3: %d open cases, want one", n)
		}
		assertSealed(t, b.s)
	})
}

// TestLateSuccessOfADuplicate: a success reported late for an earlier
// attempt of a confirmed operation, naming another resource than the one
// it was confirmed with, opens a case for the duplicate (I2), as evidence
// submitted for it does.
func TestLateSuccessOfADuplicate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op, c := b.inReview(t, intention("doc-late-dup", review.RiskCompensableWrite, "plain"), false)
		if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideApproveRetry, "alice")); err != nil {
			t.Fatal(err)
		}
		b.start(t, op)
		wantState(t, b.report(t, op, 2, success("file-9")).Operation, review.Confirmed)
		// Attempt 1 (reported as a timeout) did create file-1 after all.
		_, err := b.s.RecordOutcome(b.ctx, op.Tenant, op.ID, 1, success("file-1"), "test")
		var conflict *review.OutcomeConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("late report: %v", err)
		}
		got := b.get(t, op)
		t.Logf("state %s, resource %+v", got.State, got.Resource)
		cs, err := b.s.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, x := range cs {
			if x.Status == store.CaseOpen {
				open++
			}
		}
		if open == 0 {
			t.Fatalf("confirmed with file-9, an authoritative late success names file-1, and no case is open: %v", countActions(b.history(t, op.ID)))
		}
	})
}

// TestEffectOnASettledOperation: evidence of an effect that arrives for an
// operation Limbo settled without one — failed (its integrator was told it
// did not happen) or compensated (it was undone) — opens a case for a
// person (I2: every extra effect ends compensated or in an open case),
// by the API's evidence and by a signed webhook alike, audited; the
// operation stays as it is, and the case's decision is the undo.
// Before, only an evidence.recorded event was written.
func TestEffectOnASettledOperation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		search := func(op *review.Operation, refs ...string) review.Evidence {
			ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}
			for _, ref := range refs {
				ev.Candidates = append(ev.Candidates, review.Candidate{Ref: ref, Version: op.LogicalVersion, OperationID: op.ID})
			}
			return ev
		}
		failed := func(t *testing.T, ref string) *review.Operation {
			t.Helper()
			op := b.newOp(t, ref, review.RiskCompensableWrite, "plain")
			b.start(t, op)
			res := b.report(t, op, 1, httpError(400))
			wantState(t, res.Operation, review.Failed)
			return res.Operation
		}
		// theCase is op's one open case, which must be about ref as
		// reason says, recommending its undo, and audited as found.
		theCase := func(t *testing.T, op *review.Operation, reason review.Reason, ref string) *store.Case {
			t.Helper()
			cs, err := b.s.CasesForOperation(b.ctx, op.ID)
			if err != nil {
				t.Fatal(err)
			}
			var open []store.Case
			for _, c := range cs {
				if c.Status == store.CaseOpen {
					open = append(open, c)
				}
			}
			if len(open) != 1 {
				t.Fatalf("%d open cases, want one", len(open))
			}
			c := open[0]
			if !slices.Contains(c.Reasons, reason) || c.RecommendedAction != review.RecommendCompensate || c.RecommendedRef != ref {
				t.Errorf("the case: reasons %v, recommends %s %s; want %s and the undo of %s", c.Reasons, c.RecommendedAction, c.RecommendedRef, reason, ref)
			}
			var audited bool
			for _, ev := range b.history(t, op.ID) {
				audited = audited || ev.Action == "evidence.extra_effect" && strings.Contains(string(ev.Detail), ref)
			}
			if !audited {
				t.Errorf("no evidence.extra_effect event naming %s", ref)
			}
			return &c
		}

		t.Run("failed, found by a search", func(t *testing.T) {
			op := failed(t, "doc-failed-search")
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, search(op, "file-1"), "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.Failed)
			c := theCase(t, op, review.ReasonStateConflict, "file-1")
			// The undo is decided on the case; the operation stays failed.
			req := decideReq(c, review.DecideCompensate, "rita@example.com")
			req.Ref = "file-1"
			if _, err := b.s.Decide(b.ctx, req); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, op), review.Failed)
			if ks, err := b.s.Compensations(b.ctx, op.ID); err != nil || len(ks) != 1 || ks[0].ResourceRef != "file-1" {
				t.Errorf("compensations %+v, %v; want the undo of file-1", ks, err)
			}
			assertSealed(t, b.s)
		})

		t.Run("failed, named by a webhook", func(t *testing.T) {
			op := failed(t, "doc-failed-webhook")
			if _, err := b.s.Inbound(b.ctx, webhookFor(op, "evt-failed")); err != nil {
				t.Fatal(err)
			}
			wantState(t, b.get(t, op), review.Failed)
			theCase(t, op, review.ReasonStateConflict, "file-7")
		})

		t.Run("failed, a late success naming nothing", func(t *testing.T) {
			// A mail API answers 202 with no id: the send happened after
			// all, and nothing names it. Kept as evidence alone, nobody
			// would look; the integrator was told it failed.
			op := failed(t, "doc-failed-unnamed")
			late := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202}
			if _, err := b.s.RecordOutcome(b.ctx, op.Tenant, op.ID, 1, late, "integrator"); err == nil {
				t.Fatal("a second outcome for attempt 1 was taken as its own")
			}
			wantState(t, b.get(t, op), review.Failed)
			cs, err := b.s.CasesForOperation(b.ctx, op.ID)
			if err != nil || len(cs) != 1 || cs[0].Status != store.CaseOpen {
				t.Fatalf("cases %+v, %v; want one open", cs, err)
			}
			c := cs[0]
			if !slices.Contains(c.Reasons, review.ReasonStateConflict) || c.RecommendedAction != review.RecommendReconcileAgain ||
				c.Rationale != review.RationaleUnnamedEffect {
				t.Errorf("the case: reasons %v, recommends %s (%s); want state_conflict and a look at the destination", c.Reasons, c.RecommendedAction, c.Rationale)
			}
			audited := false
			for _, ev := range b.history(t, op.ID) {
				audited = audited || ev.Action == "evidence.extra_effect"
			}
			if !audited {
				t.Error("no evidence.extra_effect event")
			}
			// The way out: the person undid what they found (or found
			// nothing) and says so; the operation stays failed.
			done := decideReq(&c, review.DecideCompensationDone, "rita@example.com")
			if _, err := b.s.Decide(b.ctx, done); err != nil {
				t.Fatalf("compensation_done naming nothing: %v", err)
			}
			wantState(t, b.get(t, op), review.Failed)
			if n := openCases(t, b, op.ID); n != 0 {
				t.Errorf("%d open cases after the word, want none", n)
			}
			// The same report again opens nothing new: the case said it.
			if _, err := b.s.RecordOutcome(b.ctx, op.Tenant, op.ID, 1, late, "integrator"); err == nil {
				t.Fatal("the report again was taken as attempt 1's own")
			}
			if n := openCases(t, b, op.ID); n != 0 {
				t.Errorf("the same report again opened %d cases, want none", n)
			}
			assertSealed(t, b.s)
		})

		t.Run("compensated, another found", func(t *testing.T) {
			c := b.reviewCase(t, "doc-compensated")
			if _, err := b.s.Decide(b.ctx, decideReq(c, review.DecideCompensate, "rita@example.com")); err != nil {
				t.Fatal(err)
			}
			ks, err := b.s.Compensations(b.ctx, c.OperationID)
			if err != nil || len(ks) != 1 {
				t.Fatalf("compensations %+v, %v", ks, err)
			}
			child := &review.Operation{ID: ks[0].OperationID, Tenant: tenantA}
			b.start(t, child)
			b.report(t, child, 1, success("fld-2"))
			op := b.get(t, &review.Operation{ID: c.OperationID, Tenant: tenantA})
			wantState(t, op, review.Compensated)
			// The undone resource, still listed, is nothing new.
			if _, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, search(op, "fld-2"), "integrator"); err != nil {
				t.Fatal(err)
			}
			if n := openCases(t, b, op.ID); n != 0 {
				t.Fatalf("the undone fld-2 listed again: %d open cases, want none", n)
			}
			got, err := b.s.AddEvidence(b.ctx, tenantA, op.ID, search(op, "fld-2", "fld-3"), "integrator")
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, got, review.Compensated)
			theCase(t, op, review.ReasonMultipleCands, "fld-3")
			assertSealed(t, b.s)
		})
	})
}
