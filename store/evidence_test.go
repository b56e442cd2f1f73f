package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

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
