package web

import "github.com/limbo-dev/limbo/review"

// english words, in English, the reasons whose arguments the console
// shows as labels (reasonArgKinds): review writes the code
// ("compensable_write never repeated before reconciliation"), which the
// API and the audit trail keep; read back (Reason), the label takes its
// place, and these formats give it a sentence it reads right in. A format
// not here reads in English as review wrote it.
var english = map[string]string{
	review.WhyNeverRepeated:          "%s: never repeated before reconciliation",
	review.WhyKeyGuaranteeNotCovered: "%s: the destination's key guarantee does not cover this retry; reconcile first",
	review.WhyPolicyEscalates:        "the action's policy leaves “%s” cases to a person",
	review.WhyLateAfterOutcome:       "after its outcome “%s”",
	review.WhyDependencyWaiting:      "waiting for dependency %s to be confirmed (state: %s)",
	review.WhyJobEnded:               "job %s ended: %s",
	review.WhyJobEndedAfterRetry:     "job %s ended (%s), but the operation was attempted again after it (attempt %d): reconciliation decides whether that had an effect",
	review.WhyJobEndedBesideLive:     "job %s ended (%s), but job %s of an earlier attempt is not known to have ended and may yet make the effect: a person decides",
	review.WhyNoJobLeft:              "job %s ended (%s): none of the operation's %d jobs is still running, and none made an output",
	review.WhyProbeFailed:            "the %s failed: %s",
	review.WhyProbeFailedClass:       "the %s failed (%s): %s",
	review.WhyAnswerClash:            "the %s's answer lists %s twice, differently: it proves nothing",
	review.WhyAnonymousCandidate:     "the %s found %s, which names no operation: the answer proves nothing",
	review.WhyFoundCandidates:        "the %s found %d candidates",
	review.WhyFoundOneCandidate:      "the %s found 1 candidate",
	review.WhyConfirmWindowFound:     "confirm window: the %s found %d candidates for this operation",
	review.WhyDependencyOtherVersion: "dependency %s was confirmed %s, not for version %s",
	review.WhyHistoryVersion:         "%s: %s by %s",
}
