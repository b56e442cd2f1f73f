package review

// The reasons the ledger stores as written, as formats: an operation's
// state reason, an attempt's next step, an evidence note. They are
// English, for the API and the audit trail; the console reads them back
// in the reader's language by finding the formats they were written with
// (web.Reason), so each one is written only here. A stored reason is often
// several of these joined by "; " (a classification, then what follows
// from it): each constant is one clause, or clauses that always come
// together. The verbs are %s and %d only. A %s is a code, a ref, a time, a
// person's words — or another reason quoted in this one, which is read
// back in turn.
//
// (review.Reason, the type, is an escalation's code: these are Why….)
const (
	// Classify: what an attempt's outcome says of its effect (the first
	// clause of an attempt's reason).
	WhyAcceptedJob        = "destination accepted job %s"
	WhyAnsweredSuccess    = "destination answered success"
	WhyLeaseExpired       = "attempt lease expired without an outcome: whether the request was sent is unknown"
	WhyBeforeSend         = "%s before any byte was sent: no effect possible"
	WhyAfterSend          = "%s after the request was sent: outcome unknown"
	WhyHTTPForAction      = "HTTP %d (configured for action %s)"
	WhyHTTPForDestination = "HTTP %d (configured for this destination)"
	WhyHTTPQuota          = "HTTP 429 %s: quota exhausted, not transient"
	WhyHTTPShouldRetry    = "HTTP %d with x-should-retry: true: the provider says it may be retried"
	WhyHTTPShouldNotRetry = "HTTP %d with x-should-retry: false: the provider says not to retry"
	WhyHTTPNotProcessed   = "HTTP %d: not processed"
	WhyHTTPKeyInProgress  = "HTTP 409: same key in progress"
	WhyHTTPConflict       = "HTTP 409: conflict (the destination is not configured as honouring keys with 409 for a key in progress)"
	WhyHTTPAfterSend      = "HTTP %d after send: outcome unknown"
	WhyHTTPRejected       = "HTTP %d: repeating identical data cannot help"
	WhyBusinessError      = "business error reported with HTTP %d"
	WhyHTTPWithError      = "HTTP %d with an error: outcome unknown"

	// Decide and PlanOutcome: what follows from the classification.
	WhyOutputRefused          = "the structured output breaks its schema (%s): nothing runs from it; the next generation is a new attempt"
	WhyOutputIgnored          = "output_invalid ignored: the destination did it, and only a read or a generation is asked again"
	WhyReturnedOtherVersion   = "destination returned %s for version %s, expected %s"
	WhyJobEnded               = "job %s ended %s"
	WhyJobEndedAfterRetry     = "job %s ended %s, but the operation was attempted again after it (attempt %d): reconciliation decides whether that had an effect"
	WhyFoundJobEnded          = "job %s ended %s, but a look at the destination found it after %d attempts, and no answer said which one it was for: reconciliation decides whether another had an effect"
	WhyJobSucceededAfterRetry = "job %s succeeded, but the operation was attempted again after it (attempt %d), which may have made a second effect: look at the destination, then confirm the job's output or undo the other"
	WhyJobEndedBesideLive     = "job %s ended %s, but job %s of an earlier attempt is not known to have ended and may yet make the effect: a person decides"
	WhyNoJobLeft              = "job %s ended %s: none of the operation's %d jobs is still running, and none made an output"
	WhyEarlierJobSucceeded    = "job %s of an earlier attempt succeeded while the operation followed job %s, which may make a second effect: look at the destination, then confirm one output and undo any other"
	WhyConfirmedWhenJobEnds   = "confirmed when the job completes"
	WhyEarlierNeverFailed     = "an earlier attempt may have had its effect: reconcile, never declare it failed"
	WhyNeverRepeated          = "%s never repeated before reconciliation"
	WhyKeyGuaranteeNotCovered = "%s the destination's key guarantee does not cover this retry; reconcile first"
	WhyRetryAt                = "retry at %s"
	WhyPolicyEscalates        = "the action's policy escalates %s to a person"
	WhyModelNotPriced         = "the tokens of model %s are not priced at this destination (pricing), so they cost nothing here"
	// WhyButEvidence quotes the reason the evidence weighed (Weigh) gives.
	WhyButEvidence = "but %s"
	// WhyResponseNote is a reported success's evidence: the attempt, and
	// its reason.
	WhyResponseNote = "attempt %d: %s"
	// Why no retry is left (retrySlot), and the same when the effect is
	// unknown.
	WhyAttemptBudgetSpent        = "attempt budget exhausted (%d of %d)"
	WhyCostBudgetSpent           = "cost budget exhausted (%s of %s spent)"
	WhyWaitTooLong               = "the destination asks to wait %s, longer than the action's max_wait of %s"
	WhyRetryPastDeadline         = "the next retry would pass the deadline"
	WhyAttemptBudgetSpentUnknown = WhyAttemptBudgetSpent + whyEffectUnknown
	WhyCostBudgetSpentUnknown    = WhyCostBudgetSpent + whyEffectUnknown
	WhyWaitTooLongUnknown        = WhyWaitTooLong + whyEffectUnknown
	WhyRetryPastDeadlineUnknown  = WhyRetryPastDeadline + whyEffectUnknown
	whyEffectUnknown             = ", effect unknown"

	// Registration, approval, grants, budgets and deadlines.
	WhyRegistered                = "registered"
	WhyApprovalRequired          = "the action requires approval before any attempt"
	WhyApprovalExpired           = "no approval was given before the request expired; the operation will not run"
	WhyApprovalDeadline          = "the deadline passed before the operation was approved; it will not run"
	WhyAttemptGranted            = "attempt %d granted"
	WhyDeadlineHasPassed         = "the deadline has passed"
	WhyAttemptBudgetIsExhausted  = "the attempt budget is exhausted"
	WhyEarlierMayHaveHadEffect   = "an earlier attempt may have had its effect"
	WhyKeyRetentionLapsed        = "the destination's key memory (key_retention) has lapsed since the first attempt, and an earlier attempt may have had its effect: reconcile before any retry"
	WhyDeadlineBeforeRun         = "the deadline passed before the operation could run"
	WhyDeadlineWhileWaiting      = "the deadline passed while waiting to retry"
	WhyDeadlineBeforeJobFinished = "the deadline passed before the destination's job finished"

	// Reports that come late, and the attempts they close.
	WhySuperseded                = "superseded: the operation moved on before its outcome"
	WhyClosedForLateSuccess      = "closed in review: attempt %d's late success"
	WhyLateSuccessRetryDue       = "attempt %d reported success after it was closed, while a retry was due: it would repeat the effect"
	WhyLateSuccessAnotherAttempt = "attempt %d reported success after it was closed, while attempt %d (%s) may have its effect too"
	// WhyLateReport is a late report's evidence: the attempt, how late
	// (WhyLateAfterClosed, WhyLateAfterOutcome, WhyLateAfterMovedOn) and
	// what it said (its result, HTTP status, resource and job).
	WhyLateReport       = "late report for attempt %d %s: %s"
	WhyLateAfterClosed  = "after it was closed"
	WhyLateAfterOutcome = "after its outcome %s"
	WhyLateAfterMovedOn = "after the operation moved on"
	// What a late report said: its result, then its HTTP status, resource
	// and job, each when it gave one (in that order).
	WhyLateSaidHTTP     = "%s (HTTP %d)"
	WhyLateSaidResource = "%s, resource %s"
	WhyLateSaidJob      = "%s, job %s"

	// Dependencies (DependencyReady); a broken one quotes the
	// dependency's own state reason.
	WhyDependencyOtherVersion = "dependency %s was confirmed for version %s, not %s"
	WhyDependencyConfirmed    = "dependency %s is confirmed"
	WhyDependencyFailed       = "dependency %s failed: %s"
	WhyDependencyCompensated  = "dependency %s compensated: %s"
	WhyDependencyWaiting      = "waiting for dependency %s to be confirmed (it is %s)"

	// Jobs, and evidence brought by the API and webhooks.
	WhyJobSucceeded        = "job %s succeeded"
	WhyJobOtherVersion     = "job %s completed for version %s, expected %s"
	WhyJobGone             = "the ledger holds job %s, but the destination no longer finds it (%s)"
	WhySubmittedThroughAPI = "submitted through the API"
	WhyWebhookNote         = "webhook %s: %s"

	// Absence proven (AfterAbsence).
	WhyNoEffectAttemptsSpent  = "no effect found and the attempt budget is exhausted"
	WhyNoEffectDeadlinePassed = "no effect found and the deadline has passed"
	WhyNoEffectCostSpent      = "no effect found and the cost budget is exhausted"
	WhyNoEffectRetry          = "no effect found; retry with the same key"
	WhyNoEffectNeedsReviewer  = "the destination holds no effect; a financial, irreversible or regulated action is never retried without a reviewer"

	// Weigh: what all the evidence says.
	WhyOtherVersion           = "%s belongs to version %s, expected %s"
	WhyForeignResource        = "%s was found but its metadata does not name this operation"
	WhyEvidenceNamesResources = "the evidence names %d resources for this operation and version"
	WhySeveralCandidates      = "the destination answered with several candidates for this operation"
	WhyEvidenceThenAbsence    = "evidence names resource %s for this operation, and a later search proved absence"
	WhyEvidenceNamesJob       = "the evidence names job %s for this operation; confirmed when it completes"
	WhyEvidenceNamesOne       = "the evidence names exactly one resource %s for this operation and version"
	WhyWebhookThenAbsence     = "a webhook reports an effect for this operation, and a search proved absence"
	WhyWebhookClaim           = "a webhook reports an effect for this operation: reconcile before any retry"

	// Settle: a reconciliation round, and the notes of its probes.
	WhyClaimPastDeadline  = "an effect is claimed that the search does not show, and the confirm window ends after the deadline"
	WhyClaimProbing       = "an effect is claimed for this operation that the search does not show yet; probing again once the confirm window has passed"
	WhyProbeFailed        = "%s probe failed: %s"
	WhyProbeFailedClass   = "%s probe failed (%s): %s"
	WhyLedgerRefNotFound  = "the ledger holds %s, but the destination's status lookup does not find it"
	WhyLedgerRefAnswers   = "the ledger holds %s, but the destination's status lookup of it answers %s"
	WhyAnswerClash        = "%s answer lists %s twice, differently: it proves nothing"
	WhyAnonymousCandidate = "%s found %s, which names no operation: the answer proves nothing"
	WhyStatusFound        = "status found %s"
	WhySearchFound        = "search found %s"
	WhySearchWithinLag    = "search found nothing, but within the %s search lag: not proof of absence"
	WhySearchLedgerHolds  = "search found nothing, but the ledger holds %s and no status lookup found it this round: not proof of absence"
	WhySearchNothing      = "search found nothing, after the search lag"
	WhyFoundCandidates    = "%s found %d candidates"
	WhyFoundOneCandidate  = "%s found 1 candidate"
	WhyResourcesNamed     = "%d resources name this operation and version"
	WhySourcesDisagree    = "status lookup and search disagree"
	WhyReconciledJob      = "reconciled: the destination holds job %s for this operation; confirmed when it completes"
	WhyReconciledOne      = "reconciled: exactly one resource %s names this operation and version"
	WhyNoEffectShown      = "the destination shows no effect"

	// WhySearchOnlyEnded and WhySearchOnlyEndedWithinLag: the search
	// listed only jobs the ledger knows ended without an effect
	// (noEffectShown), named.
	WhySearchOnlyEnded          = "search found only %s, which ended without an effect, after the search lag"
	WhySearchOnlyEndedWithinLag = "search found only %s, which ended without an effect, but within the %s search lag: not proof of absence"

	// WhyAbsencePastDeadline quotes the absence the confirm window would
	// have made sure (WhyNoEffectShown, or AfterAbsence's).
	WhyAbsencePastDeadline        = "%s, but absence is sure only once the confirm window passes at %s, after the deadline"
	WhyReviewerOnlyIfNothingShows = "a reviewer is asked to approve a retry only if nothing shows by the end of the confirm window at %s"
	WhyFailedOnlyIfNothingShows   = "failed only if nothing shows by the end of the confirm window at %s"
	WhyOutcomePastDeadline        = "the deadline comes before the outcome could be settled"
	WhyRoundsSettledNothing       = "%d reconciliation rounds settled nothing"
	WhyNoProbesNoEvidence         = "the destination has no probes and no evidence arrived"
	WhyInconclusive               = "inconclusive (%d of %d probes failed); probing again"
	WhyConfirmWindowFound         = "confirm window: %s found %d candidates for this operation"
	// A version history (HistoryEvidence): HistoryNote, the resource, its
	// versions (WhyHistoryVersion) joined by "; ", then " — " and what
	// they mean (HistoryOf reads it).
	WhyHistory             = HistoryNote + "%s: %s"
	WhyHistoryNoVersions   = HistoryNote + "%s: no versions"
	WhyHistoryVersion      = "%s: version %s by %s"
	WhyHistoryOwnVersion   = "this operation's version %s existed: a later version replaced it"
	WhyHistoryNoOwnVersion = "no version by this operation"
	// A history's note and what it means, joined by " — " (HistoryOf
	// splits them): written as these formats so that the console reads
	// the whole note back, what it means too.
	WhyHistoryMine              = WhyHistory + " — " + WhyHistoryOwnVersion
	WhyHistoryNotMine           = WhyHistory + " — " + WhyHistoryNoOwnVersion
	WhyHistoryNoVersionsNotMine = WhyHistoryNoVersions + " — " + WhyHistoryNoOwnVersion

	// Compensations, their undo and their parent.
	WhyUndoes = "undoes %s of %s, as %s decided"
	// UndoByHand: the resource, then who else wrote it.
	WhyUndoByHand = "left to a person: %s was written by %s too, and the destination's undo call removes it whole, " +
		"their part included; Limbo does not send it: undo this operation's part at the destination, then say so (compensation_done)"
	// Why a first approval no longer counts (the approver may no longer
	// decide the case): audited as decision.approval_voided, shown on
	// the case page until then.
	WhyApproverDisabled  = "the approver's account is disabled"
	WhyApproverOffTenant = "the approver no longer holds tenant %s"
	WhyApproverRole      = "the approver's role (%s) no longer decides this case"
	// An approval bound to a payload and key the operation no longer has.
	WhyApprovalOtherPayload = "it was given for another payload or key"
	// AnotherTenantsOperation names, among those who wrote a resource
	// (WhyUndoByHand), an operation of another tenant, whose id a
	// reviewer is not shown.
	AnotherTenantsOperation       = "an operation of another tenant"
	WhyDuplicateUndone            = "the duplicate is undone; %s is the effect"
	WhyCompensationConfirmed      = "the compensation is confirmed: the effect is undone"
	WhyCompensationOutcomeUnknown = "the compensation's outcome is unknown; reconciling it"
	WhyCompensationFailed         = "the compensation is failed: the effect may still be there"
	WhyCompensationInReview       = "the compensation is needs_review: the effect may still be there"
	WhyCompensationCanceled       = "canceled: %s said how the undo went (%s) before it ran"
	WhyUndoLookupFailed           = "status lookup of %s failed: %s"
	WhyUndoNotFound               = "the destination no longer finds %s: it is undone"
	WhyReconciledNotFound         = "reconciled: the destination no longer finds %s"
	WhyUndoStatus                 = "the destination shows %s %s: it is undone"
	WhyReconciledStatus           = "reconciled: the destination shows %s %s"
	WhyUndoStatusNotUndone        = "the destination shows %s %s: the undo did not happen"
	WhyUndoDidNotHappen           = "the undo did not happen (%s is %s)"
	WhyUndoJobRanThrough          = "job %s succeeded before the cancel took: its effect stands, and cancelling it again would change nothing; a person decides what to undo"
	WhyUndoNoStatus               = "the status lookup of %s names no status"
	WhyUndoStatusUnknown          = "the destination shows %s %s, which says neither that it is undone nor that it stands"
	// WhyUndoStatusTooSoon is a live status read inside the confirm
	// window; WhyUndoAgainOnlyIfStillShown follows it (waitOutWindow).
	WhyUndoStatusTooSoon         = "the destination shows %s %s too soon after the undo to say it did not happen"
	WhyUndoAgainOnlyIfStillShown = "the undo is sent again only if the destination still shows so at the end of the confirm window at %s"
	// The same for the undo of a financial, irreversible or regulated
	// action, which only a reviewer sends again.
	WhyUndoToReviewerOnlyIfStillShown = "a reviewer is asked whether to send the undo again only if the destination still shows so at the end of the confirm window at %s"
	WhyUndoNeedsReviewer              = "the undo of a financial, irreversible or regulated action is never sent again without a reviewer"
	WhyUndoPastDeadline               = "the deadline comes before the undo could be settled"
	WhyUndoRoundsSpent                = "%d reconciliation rounds could not say whether %s is undone"
	WhyUndoProbing                    = "whether %s is undone is not known yet; probing again"

	// A reviewer's decision: the evidence it is (the reviewer, what, and
	// the reason they gave) and the reason of the operation's move.
	WhyReviewerKeep              = "%s: keep %s, undo %s: %s"
	WhyReviewerRetry             = "%s approved a retry, having weighed the evidence so far: %s"
	WhyReviewerDuplicateUndone   = "%s: the duplicate is undone, %s kept: %s"
	WhyCompensationDone          = "compensation done — %s: %s"
	WhyCompensationDoneOf        = "compensation done of %s — %s: %s"
	WhyCompensationDoneHow       = "compensation done (%s) — %s: %s"
	WhyCompensationDoneOfHow     = "compensation done of %s (%s) — %s: %s"
	WhyDecidedConfirm            = DecideConfirm + whyDecidedBy
	WhyDecidedCompensate         = DecideCompensate + whyDecidedBy
	WhyDecidedApproveRetry       = DecideApproveRetry + whyDecidedBy
	WhyDecidedFail               = DecideFail + whyDecidedBy
	WhyDecidedCompensationDone   = DecideCompensationDone + whyDecidedBy
	WhyDecidedCompensationFailed = DecideCompensationFailed + whyDecidedBy
	WhyDecidedApprove            = DecideApprove + whyDecidedBy
	WhyDecidedRefuse             = DecideRefuse + whyDecidedBy
	WhyDecidedKeepAndUndo        = DecideKeepAndUndo + whyDecidedBy
	whyDecidedBy                 = " by %s: %s"
)

// whyDecided is the format of the state reason a decision's action gives
// the operation it moves ("" for an action none is written for).
var whyDecided = map[string]string{
	DecideConfirm: WhyDecidedConfirm, DecideCompensate: WhyDecidedCompensate, DecideApproveRetry: WhyDecidedApproveRetry,
	DecideFail: WhyDecidedFail, DecideCompensationDone: WhyDecidedCompensationDone, DecideCompensationFailed: WhyDecidedCompensationFailed,
	DecideApprove: WhyDecidedApprove, DecideRefuse: WhyDecidedRefuse, DecideKeepAndUndo: WhyDecidedKeepAndUndo,
}

// WhyFormats lists every reason format.
func WhyFormats() []string {
	return []string{
		WhyAcceptedJob, WhyAnsweredSuccess, WhyLeaseExpired, WhyBeforeSend, WhyAfterSend, WhyHTTPForAction,
		WhyHTTPForDestination, WhyHTTPQuota, WhyHTTPShouldRetry, WhyHTTPShouldNotRetry, WhyHTTPNotProcessed,
		WhyHTTPKeyInProgress, WhyHTTPConflict, WhyHTTPAfterSend, WhyHTTPRejected, WhyBusinessError, WhyHTTPWithError,
		WhyOutputRefused, WhyOutputIgnored, WhyReturnedOtherVersion, WhyJobEnded, WhyJobEndedAfterRetry, WhyFoundJobEnded, WhyJobSucceededAfterRetry, WhyJobEndedBesideLive, WhyNoJobLeft, WhyEarlierJobSucceeded, WhyConfirmedWhenJobEnds,
		WhyEarlierNeverFailed, WhyNeverRepeated, WhyKeyGuaranteeNotCovered, WhyRetryAt, WhyPolicyEscalates,
		WhyModelNotPriced, WhyButEvidence, WhyResponseNote, WhyAttemptBudgetSpent, WhyCostBudgetSpent, WhyWaitTooLong,
		WhyRetryPastDeadline, WhyAttemptBudgetSpentUnknown, WhyCostBudgetSpentUnknown, WhyWaitTooLongUnknown,
		WhyRetryPastDeadlineUnknown, WhyRegistered, WhyApprovalRequired, WhyApprovalExpired, WhyApprovalDeadline,
		WhyAttemptGranted, WhyDeadlineHasPassed, WhyAttemptBudgetIsExhausted, WhyEarlierMayHaveHadEffect,
		WhyKeyRetentionLapsed, WhyDeadlineBeforeRun, WhyDeadlineWhileWaiting, WhyDeadlineBeforeJobFinished, WhySuperseded,
		WhyClosedForLateSuccess, WhyLateSuccessRetryDue, WhyLateSuccessAnotherAttempt, WhyLateReport, WhyLateAfterClosed,
		WhyLateAfterOutcome, WhyLateAfterMovedOn, WhyLateSaidHTTP, WhyLateSaidResource, WhyLateSaidJob, WhyDependencyOtherVersion, WhyDependencyConfirmed, WhyDependencyFailed,
		WhyDependencyCompensated, WhyDependencyWaiting, WhyJobSucceeded, WhyJobOtherVersion, WhyJobGone,
		WhySubmittedThroughAPI, WhyWebhookNote, WhyNoEffectAttemptsSpent, WhyNoEffectDeadlinePassed, WhyNoEffectCostSpent,
		WhyNoEffectRetry, WhyNoEffectNeedsReviewer, WhyOtherVersion, WhyForeignResource, WhyEvidenceNamesResources,
		WhySeveralCandidates, WhyEvidenceThenAbsence, WhyEvidenceNamesJob, WhyEvidenceNamesOne, WhyWebhookThenAbsence,
		WhyWebhookClaim, WhyClaimPastDeadline, WhyClaimProbing, WhyProbeFailed, WhyProbeFailedClass, WhyLedgerRefNotFound,
		WhyLedgerRefAnswers, WhyAnswerClash, WhyAnonymousCandidate, WhyStatusFound, WhySearchFound, WhySearchWithinLag,
		WhySearchLedgerHolds, WhySearchNothing, WhySearchOnlyEnded, WhySearchOnlyEndedWithinLag, WhyFoundCandidates, WhyFoundOneCandidate, WhyResourcesNamed, WhySourcesDisagree, WhyReconciledJob,
		WhyReconciledOne, WhyNoEffectShown, WhyAbsencePastDeadline, WhyReviewerOnlyIfNothingShows,
		WhyFailedOnlyIfNothingShows, WhyOutcomePastDeadline, WhyRoundsSettledNothing, WhyNoProbesNoEvidence, WhyInconclusive,
		WhyConfirmWindowFound, WhyHistory, WhyHistoryNoVersions, WhyHistoryVersion, WhyHistoryOwnVersion,
		WhyHistoryNoOwnVersion, WhyHistoryMine, WhyHistoryNotMine, WhyHistoryNoVersionsNotMine, WhyUndoes, WhyUndoByHand, WhyApproverDisabled, WhyApproverOffTenant, WhyApproverRole, WhyApprovalOtherPayload, WhyDuplicateUndone, WhyCompensationConfirmed, WhyCompensationOutcomeUnknown,
		WhyCompensationFailed, WhyCompensationInReview, WhyCompensationCanceled, WhyUndoLookupFailed, WhyUndoNotFound,
		WhyReconciledNotFound, WhyUndoStatus, WhyReconciledStatus, WhyUndoStatusNotUndone, WhyUndoDidNotHappen, WhyUndoJobRanThrough,
		WhyUndoNoStatus, WhyUndoStatusUnknown, WhyUndoStatusTooSoon, WhyUndoAgainOnlyIfStillShown, WhyUndoToReviewerOnlyIfStillShown, WhyUndoNeedsReviewer, WhyUndoPastDeadline, WhyUndoRoundsSpent, WhyUndoProbing, WhyReviewerKeep, WhyReviewerRetry,
		WhyReviewerDuplicateUndone, WhyCompensationDone, WhyCompensationDoneOf, WhyCompensationDoneHow,
		WhyCompensationDoneOfHow, WhyDecidedConfirm, WhyDecidedCompensate, WhyDecidedApproveRetry, WhyDecidedFail,
		WhyDecidedCompensationDone, WhyDecidedCompensationFailed, WhyDecidedApprove, WhyDecidedRefuse, WhyDecidedKeepAndUndo,
	}
}
