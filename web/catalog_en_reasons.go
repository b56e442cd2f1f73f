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
}
