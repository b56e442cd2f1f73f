package web

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Human labels for the words of attempts, evidence, jobs and decisions, as
// the case and operation pages show them (labels.go has the states, risks,
// reasons and actions). The raw value stays in each one's title.

var flagLabels = map[review.Flag]string{
	review.FlagFinancial:    "Moves money",
	review.FlagIrreversible: "Cannot be undone",
	review.FlagRegulated:    "Regulated",
}

var resultLabels = map[review.Result]string{
	review.ResultSuccess:         "succeeded",
	review.ResultError:           "failed with an error",
	review.ResultTimeout:         "timed out",
	review.ResultConnectionError: "connection error",
	review.ResultUnknown:         "no outcome before the lease expired",
}

var phaseLabels = map[review.Phase]string{
	review.PhaseBeforeSend: "Before sending: no effect is possible",
	review.PhaseAfterSend:  "After sending: the destination may have acted",
	review.PhaseUnknown:    "Unknown: treated as after sending",
}

var nextLabels = map[review.Next]string{
	review.NextDone:      "Nothing more to do",
	review.NextRetryAt:   "Retry under the same key",
	review.NextReconcile: "Reconcile before anything repeats",
	review.NextReview:    "A person decides",
	review.NextFailed:    "Failed: do not repeat it",
}

var sourceLabels = map[review.EvidenceSource]string{
	review.SourceResponse:       "Destination's response",
	review.SourceStatusLookup:   "Status lookup",
	review.SourceMetadataSearch: "Metadata search",
	review.SourceWebhook:        "Webhook",
	review.SourceReviewer:       "Reviewer",
}

var verdictLabels = map[review.Verdict]string{
	review.VerdictConfirms:     "Confirms the effect",
	review.VerdictRefutes:      "Refutes the effect",
	review.VerdictInconclusive: "Inconclusive",
}

var jobStatusLabels = map[review.JobStatus]string{
	review.JobQueued:    "Queued",
	review.JobRunning:   "Running",
	review.JobSucceeded: "Succeeded",
	review.JobFailed:    "Ended in failure",
	review.JobCanceled:  "Canceled",
}

var decisionStatusLabels = map[string]string{
	store.DecisionApplied:        "applied",
	store.DecisionFirstApproval:  "first approval: a second, different reviewer must approve",
	store.DecisionVoid:           "void: the payload or the state changed since",
	store.DecisionRefusedPayload: "on the refused payload only",
	store.DecisionExtraEffect:    "on the extra resource only",
}

func label[K ~string](ctx context.Context, m map[K]string, k K) string {
	if l, ok := m[k]; ok {
		return T(ctx, l)
	}
	return string(k)
}

// FlagLabel is an operation's flag as a person reads it.
func FlagLabel(ctx context.Context, f review.Flag) string { return label(ctx, flagLabels, f) }

// PhaseLabel says how far an attempt got.
func PhaseLabel(ctx context.Context, p review.Phase) string { return label(ctx, phaseLabels, p) }

// NextLabel says what an attempt's outcome told the integrator to do.
func NextLabel(ctx context.Context, n review.Next) string { return label(ctx, nextLabels, n) }

// SourceLabel says where evidence came from.
func SourceLabel(ctx context.Context, s review.EvidenceSource) string {
	return label(ctx, sourceLabels, s)
}

// VerdictLabel says what evidence says about the effect.
func VerdictLabel(ctx context.Context, v review.Verdict) string { return label(ctx, verdictLabels, v) }

// JobStatusLabel is a transformation job's status.
func JobStatusLabel(ctx context.Context, s review.JobStatus) string {
	return label(ctx, jobStatusLabels, s)
}

// DecisionStatusLabel says what a decision did.
func DecisionStatusLabel(ctx context.Context, s string) string {
	return label(ctx, decisionStatusLabels, s)
}

// ResolutionLabel is how a case was resolved: the decision's action, or
// what ended it without one (expired, dependency_failed).
func ResolutionLabel(ctx context.Context, r string) string {
	if r == "expired" {
		return T(ctx, "Expired")
	}
	if r == review.ResolvedJobEnded {
		return T(ctx, "Job ended without an effect")
	}
	if r == string(review.ReasonDependencyFailed) {
		return ReasonLabel(ctx, review.ReasonDependencyFailed)
	}
	return ActionLabel(ctx, r)
}

// attemptOutcome is an attempt's result in words, "running" while it has none.
func attemptOutcome(ctx context.Context, a review.Attempt) string {
	if a.Result == "" {
		return T(ctx, "running, no outcome reported yet")
	}
	return label(ctx, resultLabels, a.Result)
}

// attemptID is the anchor of attempt n on the page.
func attemptID(n int) string { return "attempt-" + strconv.Itoa(n) }

// attemptEvidence sorts op's evidence by attempt: per[i] is what was
// observed from attempt i's start until the next one's, before what came
// ahead of the first attempt (evidence is not tied to an attempt in the
// ledger; it follows the attempt whose answer it explains).
func attemptEvidence(op *review.Operation) (before []review.Evidence, per [][]review.Evidence) {
	per = make([][]review.Evidence, len(op.Attempts))
	for _, e := range op.Evidence {
		i := -1
		for j, a := range op.Attempts {
			if !e.ObservedAt.Before(a.StartedAt) {
				i = j
			}
		}
		if i < 0 {
			before = append(before, e)
		} else {
			per[i] = append(per[i], e)
		}
	}
	return before, per
}

// resourceKind is a resource's kind and version, as far as known.
func resourceKind(ctx context.Context, r review.ResourceRef) string {
	switch {
	case r.Kind != "" && r.Version != "":
		return Tf(ctx, "%s, version %s", r.Kind, r.Version)
	case r.Version != "":
		return Tf(ctx, "version %s", r.Version)
	}
	return r.Kind
}

// sourceList names where a candidate was seen.
func sourceList(ctx context.Context, ss []review.EvidenceSource) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = SourceLabel(ctx, s)
	}
	return strings.Join(out, ", ")
}

// eventDetail is an audit event's JSON detail indented, "" when it says nothing.
func eventDetail(d string) string {
	switch strings.TrimSpace(d) {
	case "", "{}", "null":
		return ""
	}
	return indented([]byte(d))
}

// historyLine is one version of a version history (review.HistoryEvidence
// writes "REF: version V by OP").
type historyLine struct{ Ref, Version, OperationID string }

func parseHistoryLine(s string) (historyLine, bool) {
	ref, rest, ok := strings.Cut(s, ": version ")
	if !ok {
		return historyLine{}, false
	}
	v, op, ok := strings.Cut(rest, " by ")
	if !ok {
		return historyLine{}, false
	}
	if op == review.NotGiven {
		op = ""
	}
	if v == review.NotGiven {
		v = ""
	}
	return historyLine{Ref: ref, Version: v, OperationID: op}, true
}

// historyVersionBy opens a version history's line: "version v1 by", or
// "no version, by" for an entry the destination gave no version.
func historyVersionBy(ctx context.Context, version string) string {
	if version == "" {
		return T(ctx, "no version, by")
	}
	return Tf(ctx, "version %s by", version)
}

// historyMeans is what a version history means, in the reader's language
// (review.HistoryEvidence writes it in English in the evidence's note).
func historyMeans(ctx context.Context, means string) string {
	if means == review.WhyHistoryNoOwnVersion {
		return T(ctx, "No version by this operation.")
	}
	before, after, _ := strings.Cut(review.WhyHistoryOwnVersion, "%s")
	if v, ok := strings.CutPrefix(means, before); ok {
		if v, ok := strings.CutSuffix(v, after); ok {
			return Tf(ctx, "This operation's version %s existed: a later version replaced it.", v)
		}
	}
	return means
}

// candidate is a resource seen in the evidence, with where it was seen.
type candidate struct {
	review.Candidate
	Sources []review.EvidenceSource
	// Undone: its undo is confirmed (review.Operation.Undone); the form
	// offers it for nothing.
	Undone bool
	// Ended: a job the ledger knows failed or was canceled
	// (review.EndedJob): no effect to confirm or to undo, so the form
	// offers it for nothing either.
	Ended bool
}

func candidates(op *review.Operation) []candidate {
	seen := map[string]int{}
	var out []candidate
	for _, e := range op.Evidence {
		for _, c := range e.Candidates {
			if i, ok := seen[c.Ref]; ok {
				if !slices.Contains(out[i].Sources, e.Source) {
					out[i].Sources = append(out[i].Sources, e.Source)
				}
				continue
			}
			seen[c.Ref] = len(out)
			out = append(out, candidate{Candidate: c, Sources: []review.EvidenceSource{e.Source}, Undone: slices.Contains(op.Undone, c.Ref),
				Ended: review.EndedJob(op, c.Ref)})
		}
	}
	return out
}

// offered are the candidates the decision form offers: not those
// already undone, nor jobs that ended without an effect, which neither
// confirm nor need undoing. A compensation
// is offered the resource it undoes even when no lookup has named it
// (they all failed): confirming that is a reviewer's word that the undo
// happened, and without it the form could not say so.
func offered(op *review.Operation) []candidate {
	out := slices.DeleteFunc(candidates(op), func(c candidate) bool { return c.Undone || c.Ended })
	if ref := review.CompensationResource(op); ref != "" && !slices.ContainsFunc(out, func(c candidate) bool { return c.Ref == ref }) {
		out = append(out, candidate{Candidate: review.Candidate{Ref: ref}})
	}
	return out
}

// decimal is a cost the language's way (1,234.5 / 1.234,5).
func decimal(ctx context.Context, f float64) string {
	return printer(Lang(ctx)).Sprint(f)
}
