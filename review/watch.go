package review

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The confirm window (issue 12, hole 16): a search that shows nothing once
// the configured lag has passed is proof of absence only if the
// destination's lag is what it says. A destination whose real lag is
// longer shows the first write later — after Limbo granted a retry on that
// proof — and then both resources exist. So after absence moves an
// operation on, the reconciler keeps searching for it until the window
// closes (Watch), and finds the late one: a case for a person, recommending
// the undo of the extra. And absence alone never fails an operation before
// the window has passed (AbsenceSure): failing is final, and nothing is
// lost by being sure.

// ConfirmWindowFactor is the default window, in search lags.
const ConfirmWindowFactor = 10

// Window is how long after absence was proven the destination is still
// searched for a late write: confirm_window, or ConfirmWindowFactor times
// the search lag. Zero (no search lag, nothing configured) means no watch.
func (d Destination) Window() time.Duration {
	if d.ConfirmWindow > 0 {
		return d.ConfirmWindow
	}
	return ConfirmWindowFactor * d.SearchLag
}

// AbsenceSure reports whether absence observed at now, after the last
// write at lastWrite, is sure enough to fail an operation: the confirm
// window has passed since the write.
func AbsenceSure(d Destination, lastWrite, now time.Time) bool {
	return lastWrite.IsZero() || !now.Before(lastWrite.Add(d.Window()))
}

// RetryNeedsReviewer reports whether a retry of op needs a reviewer's
// approval: a financial, irreversible or regulated action (SPEC: all
// three send a proven-absent write to a reviewer before any retry). Absence proven for such an
// operation asks a person to approve the retry, which is as final as
// failing it (an approved send cannot be unsent), so it waits for absence
// to be sure, as failing does.
func RetryNeedsReviewer(op *Operation) bool {
	return op.HasFlag(FlagFinancial) || op.HasFlag(FlagIrreversible) || op.HasFlag(FlagRegulated) || op.Risk == RiskIrreversible
}

// watchStep is how often a watched operation is searched: once a lag, and
// at least ten times over the window.
func watchStep(d Destination) time.Duration {
	return max(d.SearchLag, d.Window()/10, time.Second)
}

// Watching is what one look at a watched operation concludes.
type Watching struct {
	// Evidence are the rows to record, one per probe answered.
	Evidence []Evidence
	// Extra are the resources the destination holds for this operation and
	// version besides the one the ledger confirmed: each is a duplicate.
	Extra []Candidate
	// Next is when to look again; zero: the watch is over.
	Next time.Time
}

// Watch reads one look at an operation under watch until until. Evidence
// is recorded whatever the state (weighed by Weigh where it may move the
// operation); a confirmed operation whose destination now holds another
// resource for it, or a failed or compensated one whose destination holds
// one at all (settledWithoutEffect), has Extra, and the watch ends there
// (a person takes over). The watch also ends when the window closes or the operation
// stops being one that could gain a duplicate (failed, compensated, in
// review).
func Watch(op *Operation, d Destination, results []ProbeResult, until, now time.Time) Watching {
	var w Watching
	var found []Candidate
	for _, r := range results {
		if r.Err != "" {
			continue
		}
		cands, clash := uniqueRefs(r.Candidates)
		m, _, _, anon := sortCandidates(op, cands)
		m = withoutEndedJobs(op, m) // no effect, as a round reads them
		// Never refutes: an empty search here is no absence — the
		// operation has moved on since.
		verdict := VerdictInconclusive
		if clash == "" && len(anon) == 0 && len(m) == 1 {
			verdict = VerdictConfirms
		}
		w.Evidence = append(w.Evidence, r.Evidence(op, verdict, fmt.Sprintf(WhyConfirmWindowFound, r.Kind, len(m))))
		if clash == "" {
			found = append(found, m...)
		}
	}
	if op.State == Confirmed || settledWithoutEffect(op) {
		if w.Extra = extraEffects(op, found); len(w.Extra) > 0 {
			return w
		}
	}
	switch op.State {
	case Failed, Compensated, Compensating, NeedsReview:
		return w
	}
	if now.Before(until) {
		w.Next = now.Add(watchStep(d))
		if w.Next.After(until) {
			w.Next = until
		}
	}
	return w
}

// extraEffects is what of found, resources naming op and its version, is
// not the effect the ledger confirmed op with: each a duplicate (of a
// failed or compensated operation, every one is an effect nobody answers
// for). A resource whose undo is confirmed, still listed (a destination
// that shows deleted resources), is no new duplicate, nor is a job the
// ledger knows ended without an output.
func extraEffects(op *Operation, found []Candidate) []Candidate {
	found, _ = uniqueRefs(found)
	var extra []Candidate
	for _, c := range found {
		if !confirmedAs(op, c.Ref) && !slices.Contains(op.Undone, c.Ref) && !EndedJob(op, c.Ref) && !outputStandsFor(op, c.Ref) {
			extra = append(extra, c)
		}
	}
	return extra
}

// settledWithoutEffect reports whether op settled on the word that its
// effect is not there: failed (the integrator was told it did not happen)
// or compensated (it was undone). An effect found afterwards is one
// nobody answers for, and I2 asks for an open case. A compensation is
// left out: its effect is an undo, and an undo is not undone.
func settledWithoutEffect(op *Operation) bool {
	return (op.State == Failed || op.State == Compensated) && !IsCompensation(op.Action)
}

// ExtraEffects is what one piece of evidence about a settled operation
// shows the destination holds for it that nobody answers for, whatever
// path the evidence came by (the confirm window's probes, an integrator's
// own look through the API, a report that came late, a webhook): for a
// confirmed operation, resources besides the effect the ledger confirmed
// (duplicates); for a failed or compensated one, any resource naming it
// and its version (settledWithoutEffect). Each is for a person to undo
// (I2). Authoritative evidence counts, and so does a signed webhook: the
// destination's own word that it holds a resource nobody answers for
// (a second charge, a second file) is reason enough to ask a person to
// look, whatever the operation settled on. It confirms nothing, and the
// case's decisions are an undo or the word that it is undone (or that
// nothing is there). Evidence contradicting itself counts on no path.
func ExtraEffects(op *Operation, ev Evidence) []Candidate {
	if op.State != Confirmed && !settledWithoutEffect(op) {
		return nil
	}
	if !ev.Authoritative && ev.Source != SourceWebhook {
		return nil
	}
	cands, clash := uniqueRefs(ev.Candidates)
	if clash != "" {
		return nil
	}
	m, _, _, _ := sortCandidates(op, cands)
	return extraEffects(op, m)
}

// ExtraEffectsOf is what all of op's evidence shows the destination
// holds for it that nobody answers for (ExtraEffects), each ref once.
func ExtraEffectsOf(op *Operation) []Candidate {
	return ExtraEffectsSince(op, time.Time{})
}

// ResolvedJobEnded is how a case about a job of a settled operation that
// nobody answered for is resolved when the job ends having made nothing,
// and nothing else is left for the case (store.putJobTx).
const ResolvedJobEnded = "job_ended"

// ExtraEffectsSince is what the evidence recorded for op after since
// first shows the destination holds for it that nobody answers for
// (ExtraEffects), each ref once. The parent of an undo asks it once the
// undo settles it (store.settleParent): an operation being undone moves
// on no evidence, so what came while the undo ran (an earlier attempt's
// job that succeeded, a webhook, an integrator's look) was weighed by
// nothing. A resource the record named when the undo was decided is not
// news, even named again: the reviewer decided knowing of it.
func ExtraEffectsSince(op *Operation, since time.Time) []Candidate {
	var known []string
	for _, ev := range op.Evidence {
		if !ev.ObservedAt.After(since) {
			for _, c := range ev.Candidates {
				known = append(known, c.Ref)
			}
		}
	}
	var extra []Candidate
	for _, ev := range op.Evidence {
		if !ev.ObservedAt.After(since) {
			continue
		}
		for _, c := range ExtraEffects(op, ev) {
			if !slices.Contains(known, c.Ref) && !slices.ContainsFunc(extra, func(e Candidate) bool { return e.Ref == c.Ref }) {
				extra = append(extra, c)
			}
		}
	}
	return extra
}

// UnnamedEffect reports whether ev, a success the destination reported
// for op, says the effect happened without naming it while op is failed:
// its integrator was told it did not happen, and no resource says what to
// undo (ExtraEffects finds none). A person looks for it at the
// destination (RationaleUnnamedEffect). On a compensated operation such a
// report may be of the effect already undone, so it opens nothing. op's
// evidence holds ev already: only the first such report asks; the same
// report sent again says nothing new.
func UnnamedEffect(op *Operation, ev Evidence) bool {
	if !unnamedSuccess(op, ev) {
		return false
	}
	n := 0
	for _, e := range op.Evidence {
		if unnamedSuccess(op, e) {
			n++
		}
	}
	return n <= 1
}

func unnamedSuccess(op *Operation, ev Evidence) bool {
	return op.State == Failed && !IsCompensation(op.Action) && ev.Source == SourceResponse && ev.Authoritative &&
		ev.Verdict == VerdictConfirms && len(ev.Candidates) == 0
}

// ExtraEffectCaseReason is the reason of the case an effect found on a
// settled operation opens (ExtraEffects): on a failed one the destination
// contradicts the ledger (state_conflict); on a confirmed or compensated
// one it holds a resource besides the one the ledger answers for
// (multiple_candidates).
func ExtraEffectCaseReason(op *Operation) Reason {
	if op.State == Failed {
		return ReasonStateConflict
	}
	return ReasonMultipleCands
}

// confirmedAs reports whether ref is the effect the ledger confirmed op
// with: its resource, or the job the resource came out of. A failed
// operation was confirmed with nothing: a job of it that succeeded (after
// a person failed it while the job was queued) made an effect its
// integrator was told did not happen. Nor does a compensated one stand on
// a job's output: what was undone is in Undone, and an output that was
// not is an effect made beside the one undone.
func confirmedAs(op *Operation, ref string) bool {
	if op.Resource == nil {
		return false
	}
	if op.Resource.Ref == ref {
		return true
	}
	// Only the job its resource came out of: another job of the operation
	// that succeeded (an earlier attempt's, reported late) made an effect
	// beside it.
	return op.State != Failed && op.State != Compensated && slices.ContainsFunc(op.Jobs, func(j Job) bool {
		return j.Status == JobSucceeded && (j.OutputRef == op.Resource.Ref || j.Ref == op.Resource.Ref) && (j.Ref == ref || j.OutputRef == ref)
	})
}

// ExtraEffectReason is the case text for the duplicates a watch found
// (on a failed or compensated operation, ExtraEvidenceReason's).
func ExtraEffectReason(op *Operation, extra []Candidate) string {
	if op.State != Confirmed {
		return ExtraEvidenceReason(op, extra)
	}
	refs, kept := extraRefs(op, extra)
	return fmt.Sprintf("after a retry on proven absence the destination shows %s as well as the confirmed %s: its search lags longer than configured; undo the extra (compensate)",
		refs, kept)
}

// ExtraEvidenceReason says why evidence about a settled operation (an
// integrator's, a report that came late, a webhook, the confirm window's
// look at a failed or compensated one) opened a case: it names extra
// besides the confirmed resource, or where there should be none.
func ExtraEvidenceReason(op *Operation, extra []Candidate) string {
	refs, kept := extraRefs(op, extra)
	switch op.State {
	case Failed:
		return fmt.Sprintf("evidence shows %s for this operation, which failed: the integrator was told it did not happen; undo it (compensate), or say it is undone", refs)
	case Compensated:
		return fmt.Sprintf("evidence shows %s for this operation after its effect was undone: an extra effect; undo it (compensate), or say it is undone", refs)
	}
	return fmt.Sprintf("evidence shows %s as well as the confirmed %s: a duplicate; undo the extra (compensate)", refs, kept)
}

func extraRefs(op *Operation, extra []Candidate) (refs, kept string) {
	rs := make([]string, len(extra))
	for i, c := range extra {
		rs[i] = c.Ref
	}
	kept = "resource"
	if op.Resource != nil {
		kept = op.Resource.Ref
	}
	return strings.Join(rs, ", "), kept
}
