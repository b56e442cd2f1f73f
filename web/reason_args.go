package web

import (
	"context"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// argKind is what a reason's %s argument holds when it is not a person's
// words or a ref: a code the console has a label for.
type argKind int

const (
	argAsWritten argKind = iota
	argRisk
	argReason
	argResult
	argState
	argAction
	// argWriters: the operations that wrote a resource, joined by ", ",
	// another tenant's as review.AnotherTenantsOperation.
	argWriters
	// argJobEnd: how a job ended (review.JobStatus), in a sentence.
	argJobEnd
	// argProbe: which probe asked the destination (review.ProbeKind).
	argProbe
	// argFailure: the class of a failed request (netguard's).
	argFailure
	argRole
	// argVersionFor: the version a dependency was confirmed for, or
	// review.NotGiven ("for version v1", "without a version").
	argVersionFor
	// argVersion: a version in a history, or review.NotGiven.
	argVersion
	// argWriter: the operation that wrote a version, or review.NotGiven.
	argWriter
	// argStateReason: a dependency's state reason, or review.NotGiven.
	argStateReason
)

// reasonArgKinds are the codes review writes into its reasons, by format
// and verb position: read back, each is shown as the console labels it
// elsewhere ("compensable_write" is “Write that can be undone”), not as
// the code.
var reasonArgKinds = map[string][]argKind{
	review.WhyNeverRepeated:             {argRisk},
	review.WhyKeyGuaranteeNotCovered:    {argRisk},
	review.WhyPolicyEscalates:           {argReason},
	review.WhyBeforeSend:                {argResult},
	review.WhyAfterSend:                 {argResult},
	review.WhyLateAfterOutcome:          {argResult},
	review.WhyLateSaidHTTP:              {argResult},
	review.WhyLateSaidResource:          {argResult},
	review.WhyLateSaidJob:               {argResult},
	review.WhyDependencyWaiting:         {argAsWritten, argState},
	review.WhyLateSuccessAnotherAttempt: {argAsWritten, argAsWritten, argState},
	review.WhyCompensationCanceled:      {argAsWritten, argAction},
	review.WhyUndoByHand:                {argAsWritten, argWriters},
	review.WhyJobEnded:                  {argAsWritten, argJobEnd},
	review.WhyJobEndedAfterRetry:        {argAsWritten, argJobEnd},
	review.WhyFoundJobEnded:             {argAsWritten, argJobEnd},
	review.WhyJobEndedBesideLive:        {argAsWritten, argJobEnd},
	review.WhyNoJobLeft:                 {argAsWritten, argJobEnd},
	review.WhyProbeFailed:               {argProbe},
	review.WhyProbeFailedClass:          {argProbe, argFailure},
	review.WhyAnswerClash:               {argProbe},
	review.WhyAnonymousCandidate:        {argProbe},
	review.WhyFoundCandidates:           {argProbe},
	review.WhyFoundOneCandidate:         {argProbe},
	review.WhyConfirmWindowFound:        {argProbe},
	review.WhyApproverRole:              {argRole},
	review.WhyDependencyOtherVersion:    {argAsWritten, argVersionFor},
	review.WhyDependencyFailed:          {argAsWritten, argStateReason},
	review.WhyDependencyCompensated:     {argAsWritten, argStateReason},
	review.WhyHistoryVersion:            {argAsWritten, argVersion, argWriter},
}

// notGivenLabels word review.NotGiven in each place it stands ("dependency
// op_1 failed: no reason recorded"), where review writes "none".
var notGivenLabels = map[argKind]string{
	argVersionFor:  "without a version",
	argVersion:     "no version",
	argWriter:      "no known operation",
	argStateReason: "no reason recorded",
}

// jobEndLabels say how a job ended within a sentence ("job j1 ended: it
// failed"); its status column says it as jobStatusLabels do.
var jobEndLabels = map[review.JobStatus]string{
	review.JobSucceeded: "it succeeded",
	review.JobFailed:    "it failed",
	review.JobCanceled:  "it was canceled",
}

// probeLabels name a probe within a sentence ("the search found 2
// candidates").
var probeLabels = map[review.ProbeKind]string{
	review.ProbeStatus:  "status lookup",
	review.ProbeSearch:  "search",
	review.ProbeHistory: "history lookup",
}

// argInLang is a reason's argument, written by review as the i-th verb of
// format, in ctx's language: a code review writes there as its label, a
// time (RFC 3339, as review writes them) as the pages write a time; any
// other argument (a ref, a version, a person's words) as written.
func argInLang(ctx context.Context, format string, i int, arg string) string {
	if kinds := reasonArgKinds[format]; i < len(kinds) {
		switch kinds[i] {
		case argRisk:
			return RiskLabel(ctx, review.Risk(arg))
		case argReason:
			return ReasonLabel(ctx, review.Reason(arg))
		case argResult:
			return label(ctx, resultLabels, review.Result(arg))
		case argState:
			return StateLabel(ctx, review.State(arg))
		case argAction:
			return ActionLabel(ctx, arg)
		case argWriters:
			return strings.ReplaceAll(arg, review.AnotherTenantsOperation, T(ctx, review.AnotherTenantsOperation))
		case argJobEnd:
			return label(ctx, jobEndLabels, review.JobStatus(arg))
		case argProbe:
			return label(ctx, probeLabels, review.ProbeKind(arg))
		case argFailure:
			return failureClass(ctx, arg)
		case argRole:
			return roleLabel(ctx, arg)
		case argVersionFor, argVersion, argWriter, argStateReason:
			switch {
			case arg == review.NotGiven:
				return T(ctx, notGivenLabels[kinds[i]])
			case kinds[i] == argVersionFor:
				return Tf(ctx, "for version %s", arg)
			case kinds[i] == argVersion:
				return Tf(ctx, "version %s", arg)
			}
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, arg); err == nil && len(arg) >= len("2006-01-02T15:04:05Z") {
		return FormatTime(ctx, t)
	}
	return arg
}
