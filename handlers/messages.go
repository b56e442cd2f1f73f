package handlers

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// The domain (review, store) refuses in English sentences with dynamic
// parts: they are also the API's problem details, and their callers test
// their words. The console shows them in the reader's language: the
// sentences people meet most are listed here, each written as review or
// store produce it with %s for its dynamic parts, so one list is both the
// pattern that recognises the sentence and the catalog key (with its
// Italian in web/catalog_it_admin.go; TestCatalogComplete checks there is
// one). A sentence not listed here is shown under a translated lead-in
// ("Non consentito: …"), its detail still in English — readable, not
// translated; add it here when people meet it.
var domainMessages = []web.Message{
	// review/access.go: who administers what.
	web.Msg("only admins administer users"),
	web.Msg("you cannot change your own role, tenants or status; ask another admin"),
	web.Msg("only an all-tenants admin changes admins"),
	web.Msg("only an all-tenants admin grants the admin role"),
	web.Msg("only an all-tenants admin grants all tenants (*)"),
	web.Msg("you can grant only tenants you hold (%s)"),
	web.Msg("this is the last enabled all-tenants admin; make another one first"),
	web.Msg("only admins manage API tokens and webhook endpoints"),
	web.Msg("only admins manage API tokens"),
	web.Msg("tenant %s is outside your scope (%s)"),
	web.Msg("tenants: give a comma-separated list, or * for all"),
	web.Msg("your account no longer exists"),
	web.Msg("your account is disabled"),
	web.Msg("your role may not decide this case"),
	web.Msg("your role no longer claims cases"),
	web.Msg("your own password is reset by another admin, or at the command line (limbo user password)"),
	web.Msg("your role cannot decide this case, so it does not claim it: a claim would keep those who can from deciding"),
	// store/users.go: the add-user form.
	web.Msg("email: not an email address"),
	web.Msg("email: at most %s bytes"),
	web.Msg("role: must be reviewer, support, manager or admin"),
	web.Msg("password: at least %s characters"),
	web.Msg("tenants: give tenants, or * for all"),
	web.Msg("a user with email %s exists"),
	// review.NormalizeTenant and ParseScope: a tenant typed on the users,
	// tokens and webhooks forms.
	web.Msg("tenant: required"),
	web.Msg("name: required"),
	web.Msg("tenant: must not contain ',' or '*'"),
	web.Msg("tenants: %s is not a tenant name: * stands alone, for all tenants"),
	web.Msg("changed since this page was opened (by another admin, or by this form sent twice); the page now shows the user as they are: change them again if you still mean to"),
	// store/webhooks.go: the endpoint's URL. A netguard refusal (the %s
	// before "; to allow it") names its rule in English (loopback,
	// private (RFC 1918), …): those are the networking terms themselves.
	web.Msg("url: give an https URL of at most 2048 bytes"),
	web.Msg("url: not a URL"),
	web.Msg("url: must start with https://"),
	web.Msg("url: needs a host"),
	web.Msg("url: must not carry a #fragment"),
	web.Msg("url: must not carry credentials (user:password@); the receiver verifies the signature instead"),
	web.Msg("url: use https: plain http is accepted only for targets listed in webhooks.allow_internal in the configuration file"),
	web.Msg("url: %s; to allow it, add it to webhooks.allow_internal in the configuration file"),
	web.Msg("secret: give whsec_ and base64 of 24–64 random bytes, or leave it empty"),
	web.Msg("the endpoint is disabled; enable it first"),
	web.Msg("url: tenant %s already has an enabled endpoint at this URL (%s); disable it first to replace it"),
	// Decisions: the sentinels people meet on a case.
	web.Msg("reason: every decision needs a reason, in a few words"),
	web.Msg("too late to approve: no approval was given before the request expired; the operation will not run"),
	web.Msg("too late to approve: the deadline passed before the operation was approved; it will not run"),
	web.Msg("compensation: say what is undone and how"),
	web.Msg("candidate: confirm names the resource that is the effect"),
	web.Msg("candidate: keep_and_undo names the resource to keep"),
	web.Msg("undo_ref: keep_and_undo undoes another resource than the one it keeps"),
	web.Msg("candidate: Limbo sends this destination's undo itself: name the resource to undo"),
	web.Msg("candidate: %s is not a resource name Limbo sends an undo for"),
	web.Msg("candidate: %s is not a resource this operation is known to have (its resource, a candidate its evidence names, or a job's); Limbo sends this destination's undo itself, and undoes only those"),
	web.Msg("candidate: %s is not a resource this operation is known to have (its resource, a candidate its evidence names, or a job's): name the one that is undone"),
	web.Msg("candidate: the undos of %s are under way: name the one that is undone"),
	web.Msg("candidate: the operation waits for the undo of %s, which this does not settle: name that resource to say it is undone, or wait for its outcome"),
	web.Msg("a second, different reviewer must approve"),
	web.Msg("a second, different reviewer must approve: %s already gave an approval; the next must come from someone else"),
	web.Msg("nobody approves their own request"),
	web.Msg("nobody approves their own request: %s created the API token that registered this operation; another reviewer must approve it"),
	web.Msg("the case changed since this page was opened"),
	web.Msg("the case changed since this page was opened: %s gave an approval meanwhile; reload the case and decide again"),
	web.Msg("the case changed since this page was opened: the operation moved on since (it is %s now); reload the case and decide again"),
	web.Msg("the case changed since this page was opened: it was claimed, released or re-assessed since (version %s, now %s); reload the case and decide again"),
	web.Msg("the case changed since this page was opened: this form does not say which version of the case you saw (it is incomplete or from an older page): reload the case and decide again"),
	web.Msg("the operation is %s: a decision applies only to an operation in needs_review"),
	web.Msg("the compensation %s is in review: say whether the undo happened on its own case, and this case follows"),
	web.Msg("the compensation %s is %s: the undo may be happening right now, and its outcome settles this case (or sends it back to review); wait for it rather than saying how it went"),
	web.Msg("an undo of %s is already under way (compensation %s is %s): wait for its outcome, or settle it on its case, before undoing it again"),
	web.Msg("%s is an undo, and an undo is not undone: say whether it happened (confirm or fail), or approve sending it again (approve_retry)"),
	web.Msg("case %s changed meanwhile; reload it"),
	web.Msg("case is claimed by %s until %s"),
	// store.CheckCase and RecordCheck: a check of the destination refused.
	web.Msg("the destination cannot be asked about this operation from here: it is %s, and only an operation in review or settled, whose destination has a status lookup or a search, is asked"),
	web.Msg("the destination was asked about this operation less than %s seconds ago: its answers are under Attempts and evidence"),
	web.Msg("this instance does not ask destinations"),
	// review.PlanBulk and Bulk: why a case is skipped.
	web.Msg("no single resource is recommended to confirm"),
	web.Msg("no resource is recommended to undo"),
	web.Msg("its recommendation, approve_retry, is decided one case at a time"),
	web.Msg("its recommendation (%s) is not a decision yet"),
	web.Msg("%s is decided one case at a time"),
	// review.TextProblem, for any field (the console's form check, and the
	// domain's): last, so that a sentence above wins over these.
	web.Msg("%s: at most %s characters, got %s"),
	web.Msg("%s: must not contain control characters (U+%s at character %s)"),
	web.Msg("%s: must not contain line breaks (U+%s at character %s)"),
	web.Msg("%s: must not contain NUL (character %s)"),
	web.Msg("%s: not valid UTF-8 (byte %s)"),
}

// domainPatterns are domainMessages as anchored patterns, %s matching
// the dynamic part.
var domainPatterns = func() []*regexp.Regexp {
	ps := make([]*regexp.Regexp, len(domainMessages))
	for i, m := range domainMessages {
		ps[i] = regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(m.Key), "%s", "(.+?)") + "$")
	}
	return ps
}()

// sentinelWords are the words review's generic sentinels put in front of
// a message ("forbidden: …"): not for a person, who reads the sentence.
var sentinelWords = []error{review.ErrForbidden, review.ErrInvalid, review.ErrConflict, review.ErrInvalidTransition, review.ErrNotFound}

// domainSentence is err's message without the sentinel's own words and
// with a field named the way the form labels it (`field "url": …` reads
// "url: …").
func domainSentence(err error) string {
	msg := err.Error()
	for _, sentinel := range sentinelWords {
		msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	}
	if m := fieldInMessage.FindStringSubmatchIndex(msg); m != nil && m[0] == 0 {
		msg = msg[m[2]:m[3]] + msg[m[1]:]
	}
	return msg
}

// domainMessage is a domain sentence as a Message: a listed one with its
// dynamic parts as arguments, else the sentence under a lead-in chosen by
// the sentinel err wraps (nil err: "Refused").
func domainMessage(err error, sentence string) web.Message {
	for i, p := range domainPatterns {
		if m := p.FindStringSubmatch(sentence); m != nil {
			args := make([]any, len(m)-1)
			for j, a := range m[1:] {
				args[j] = a
			}
			return web.Msg(domainMessages[i].Key, args...)
		}
	}
	switch {
	case errors.Is(err, review.ErrForbidden):
		return web.Msg("Not allowed: %s", sentence)
	case errors.Is(err, review.ErrInvalid):
		return web.Msg("Not accepted: %s", sentence)
	case errors.Is(err, review.ErrInvalidTransition):
		return web.Msg("Not possible in the operation's current state: %s", sentence)
	case errors.Is(err, review.ErrConflict), errors.Is(err, review.ErrStale):
		return web.Msg("Changed meanwhile: %s", sentence)
	}
	return web.Msg("Refused: %s", sentence)
}

// errorMessage is a domain error as the console shows it. Typed errors
// whose parts are known are built here, in ctx's language (an action's
// label, a time in the reader's format); others go through domainMessage.
func errorMessage(ctx context.Context, err error) web.Message {
	var (
		already *review.AlreadyDecidedError
		held    *review.ClaimHeldError
		twice   *store.TokenFormSentTwice
	)
	switch {
	case errors.As(err, &twice):
		return web.Msg("This form was sent already: it created the token %s of tenant %s (%s), whose value was shown then, once. If it was lost, revoke that token and create another.",
			twice.Name, twice.Tenant, web.FormatTime(ctx, twice.CreatedAt))
	case errors.As(err, &already) && already.By != "":
		return web.Msg("case %s was already decided: %s by %s at %s", already.CaseID, web.ResolutionLabel(ctx, already.Action), already.By,
			web.FormatTime(ctx, already.At))
	case errors.As(err, &held):
		return web.Msg("case %s is held by %s until %s: only the holder decides; take it over, with a reason, to decide it yourself",
			held.CaseID, held.By, web.FormatTime(ctx, held.Until))
	case errors.Is(err, review.ErrNotFound):
		return web.Msg("Not found.")
	}
	return withLabels(ctx, withTimes(ctx, domainMessage(err, domainSentence(err))))
}

// labelledArgs are the domain sentences that name an operation's state or
// a decision by its code ("it is needs_review now", "its recommendation
// (reconcile_again) …"), and which of their arguments those are, with the
// label the pages give them.
var labelledArgs = map[string][]labelledArg{
	"the case changed since this page was opened: the operation moved on since (it is %s now); reload the case and decide again":                                                 {{0, stateLabel}},
	"the operation is %s: a decision applies only to an operation in needs_review":                                                                                               {{0, stateLabel}},
	"the compensation %s is %s: the undo may be happening right now, and its outcome settles this case (or sends it back to review); wait for it rather than saying how it went": {{1, stateLabel}},
	"an undo of %s is already under way (compensation %s is %s): wait for its outcome, or settle it on its case, before undoing it again":                                        {{2, stateLabel}},
	"its recommendation (%s) is not a decision yet": {{0, web.ActionLabel}},
	"%s is decided one case at a time":              {{0, web.ActionLabel}},

	"the destination cannot be asked about this operation from here: it is %s, and only an operation in review or settled, whose destination has a status lookup or a search, is asked": {{0, stateLabel}},
}

type labelledArg struct {
	i     int
	label func(context.Context, string) string
}

func stateLabel(ctx context.Context, s string) string { return web.StateLabel(ctx, review.State(s)) }

// withLabels is m with the states and decisions it names by their codes
// labelled as the pages label them, in Italian ("In compensazione", not
// "compensating"); English keeps the code, which its sentence is written
// around.
func withLabels(ctx context.Context, m web.Message) web.Message {
	if web.Lang(ctx) == "en" {
		return m
	}
	for _, a := range labelledArgs[m.Key] {
		if a.i >= len(m.Args) {
			continue
		}
		if s, ok := m.Args[a.i].(string); ok {
			m.Args[a.i] = a.label(ctx, s)
		}
	}
	return m
}

// withTimes is m with every argument that is a time as the domain writes
// it (RFC 3339: "case is claimed by … until 2026-12-05T06:43:56Z") written
// as the console writes times for a person, in ctx's language.
func withTimes(ctx context.Context, m web.Message) web.Message {
	for i, a := range m.Args {
		s, ok := a.(string)
		if !ok {
			continue
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			m.Args[i] = web.FormatTime(ctx, t)
		}
	}
	return m
}
