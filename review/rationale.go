package review

// The rationales a recommendation gives, as formats. A case stores its
// rationale as written (English, for the API and the audit trail); the
// console reads it back in the reader's language by finding the format it
// was written with (web.Rationale), so each one is written only here.
const (
	RationaleApproval      = "the action's policy asks for approval before it runs: read the payload, then approve or refuse"
	RationaleDuplicates    = "%d resources name this operation and version: keep %s, compensate %s"
	RationaleOneResource   = "exactly one resource, %s, names this operation and version %s"
	RationaleOtherVersion  = "%s is a result for another logical version than %s; undo it before retrying"
	RationaleDisagree      = "authoritative sources disagree; probe again before deciding"
	RationaleSpent         = "the destination holds no effect and the budget or deadline is spent"
	RationaleSafeRetry     = "the destination authoritatively holds no effect; a retry with the same key is safe"
	RationalePayloadReused = "the key was reused with a different payload; check which payload is meant — a new version needs a new key"
	// RationaleRefusedPayload: a case about a refused payload alone, whose
	// one decision is fail.
	RationaleRefusedPayload = "the key was reused with a different payload, which does not run under it; fail it to say so — if it is meant, register it as a new version, with a new key"
	RationaleDeadlinePassed = "the deadline passed with the outcome unknown; search the destination once more, then fail or confirm"
	RationaleNoEvidence     = "no evidence settles the outcome yet; probe the destination again"
	// RationaleDependencyBroken: a dependent that never sent an attempt,
	// escalated because what it waits for can no longer be met.
	RationaleDependencyBroken = "the operation this one waits for can no longer be what it needs, and no attempt was sent: nothing exists to confirm or undo"
	// RationaleUndoUnderWay: an undo decided already has not settled;
	// undoing the same resource again is refused (UndoUnderWay).
	RationaleUndoUnderWay = "the undo of %s is under way: its outcome settles this; wait for it rather than deciding again"
	// RationaleUndoByHand: an undo left to a person is pending; Limbo
	// does not send it (UndoByHand), so waiting settles nothing.
	RationaleUndoByHand = "Limbo does not send the undo of %s, which other operations wrote too: remove this operation's part at the destination yourself, then say the undo is done (compensation_done)"
	// RationaleEffectOnFailed and RationaleEffectOnCompensated: the
	// destination reports an effect of an operation settled without one.
	RationaleEffectOnFailed      = "the destination reports %s for this operation, which failed: its integrator was told it did not happen; undo it (compensate), or say it is undone"
	RationaleEffectOnCompensated = "the destination reports %s for this operation after its effect was undone: an extra effect; undo it (compensate), or say it is undone"
	// RationaleClaimedDuplicate: a signed webhook names a second resource
	// for a confirmed operation (ExtraEffects); no look has shown it yet.
	RationaleClaimedDuplicate = "a signed webhook of the destination reports %s for this operation besides the confirmed %s: a duplicate, if it is there; look at the destination, then undo it (compensate) or say it is undone (compensation_done) — or, if nothing is there, say so"
	// RationaleUnnamedEffect: a success reported for a failed operation
	// without naming a resource (UnnamedEffect).
	RationaleUnnamedEffect = "the destination reported a success for this operation, which failed, without naming what it made: find the effect at the destination, undo it, then say so (compensation_done) — or say so if nothing is there"
	// RationaleJobUnfinished: the operation is in review while a job the
	// destination accepted for it is not known to have ended (JobToWaitOn).
	RationaleJobUnfinished = "job %s is not known to have ended and may yet make the effect: once it succeeds, confirm its output; once it fails, fail or retry — a retry while it may still run could make a second effect"
	// RationaleClaimUnseen: a webhook claims an effect of an operation in
	// review that no look at the destination has shown.
	RationaleClaimUnseen = "a webhook of the destination reports %s for this operation, which no look at the destination has shown: check the destination again; if it still shows nothing, look for it there yourself — confirm it if it is there, otherwise fail the operation or approve a retry"
	// RationaleEffectGone: the destination showed an effect, and the
	// newest look there finds nothing.
	RationaleEffectGone = "the destination reported %s for this operation, and the newest look there finds nothing: check the destination again; if it still shows nothing, look for it there yourself — confirm it if it is there; if it was removed, approve a retry to make it again, or fail the operation"
	// RationaleLooksSplit: in the newest look at the destination, one
	// probe (a status lookup) found the effect and another (a search)
	// found nothing.
	RationaleLooksSplit = "the destination's status lookup finds %s for this operation and its search finds nothing: check the destination again; if they still disagree, look for it there yourself — confirm it if it is there; if it is not, approve a retry to make it, or fail the operation"
)

// RationaleFormats lists every rationale format.
func RationaleFormats() []string {
	return []string{RationaleApproval, RationaleDuplicates, RationaleOneResource, RationaleOtherVersion, RationaleDisagree,
		RationaleSpent, RationaleSafeRetry, RationalePayloadReused, RationaleRefusedPayload, RationaleDeadlinePassed, RationaleNoEvidence, RationaleDependencyBroken,
		RationaleUndoUnderWay, RationaleUndoByHand, RationaleEffectOnFailed, RationaleEffectOnCompensated, RationaleClaimedDuplicate, RationaleUnnamedEffect, RationaleJobUnfinished, RationaleClaimUnseen, RationaleEffectGone, RationaleLooksSplit}
}
