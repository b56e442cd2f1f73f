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
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, arg); err == nil && len(arg) >= len("2006-01-02T15:04:05Z") {
		return FormatTime(ctx, t)
	}
	return arg
}
