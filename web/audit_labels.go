package web

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// auditActions are the audit actions Limbo writes, each with its label
// (a message id), but for the decisions by action (decidedActions). It is
// the one list of them: the labels the audit page and the histories show,
// the audit search's suggestions, and the labels a person may search by.
// TestAuditActionLabels holds it to the actions the code writes.
var auditActions = []struct{ code, label string }{
	{"audit.key_replaced", "Audit key replaced"},
	{"attempt.started", "Attempt started"},
	{"attempt.outcome", "Outcome reported"},
	{"attempt.closed", "Attempt closed"},
	{"case.opened", "Case opened"},
	{"case.updated", "Case updated"},
	{"case.claimed", "Case claimed"},
	{"case.released", "Case released"},
	{"case.taken_over", "Case taken over"},
	{"case.resolved", "Case resolved"},
	{"compensation.settled", "Compensation settled"},
	{"compensation.canceled", "Compensation cancelled"},
	{"compensation.left_to_person", "Undo left to a person"},
	{"decision.first_approval", "First approval"},
	{"decision.approval_voided", "Approval no longer counts"},
	{"decision.refused_payload", "Decision on a refused payload"},
	{"decision.extra_effect", "Decision on an extra effect"},
	{"evidence.extra_effect", "Extra effect found"},
	{"evidence.recorded", "Evidence recorded"},
	{"evidence.settled", "Settled by evidence"},
	{"job.updated", "Job updated"},
	{"job.completed", "Job completed"},
	{"job.settled", "Job settled"},
	{"login.succeeded", "Signed in"},
	{"login.failed", "Sign-in failed"},
	{"login.throttled", "Sign-in throttled"},
	{"login.still_throttled", "Sign-ins still refused"},
	{"logout", "Signed out"},
	{"operation.registered", "Operation registered"},
	{"operation.payload_mismatch", "Key reused with a different payload"},
	{"operation.confirmed", "Operation confirmed"},
	{"operation.failed", "Operation failed"},
	{"operation.ambiguous", "Outcome left ambiguous"},
	{"operation.escalated", "Sent to review"},
	{"operation.deadline_expired", "Deadline passed"},
	{"operation.approval_expired", "Approval request expired"},
	{"operation.dependency_failed", "Dependency failed"},
	{"operation.payload_purged", "Payload purged (retention)"},
	{"payload.revealed", "Payload revealed"},
	{"reconcile.settled", "Settled by reconciliation"},
	{"reconcile.inconclusive", "Reconciliation inconclusive"},
	{"token.created", "Token created"},
	{"token.revoked", "Token revoked"},
	{"user.added", "User added"},
	{"user.changed", "User changed"},
	{"user.password_reset", "Password reset"},
	{"user.language", "Language changed"},
	{"watch.extra_effect", "Extra effect found"},
	{"webhook.endpoint_added", "Webhook endpoint added"},
	{"webhook.endpoint_disabled", "Webhook endpoint disabled"},
	{"webhook.endpoint_enabled", "Webhook endpoint enabled"},
	{"webhook.redelivered", "Webhook messages delivered again"},
	{"webhook.secret_revealed", "Webhook secret revealed"},
}

// decidedActions are the decisions by action: each is audited as
// "decision." and the action, and reads "Decision: " and its label.
var decidedActions = []string{review.DecideConfirm, review.DecideCompensate, review.DecideApproveRetry, review.DecideFail,
	review.DecideCompensationDone, review.DecideCompensationFailed, review.DecideApprove, review.DecideRefuse, review.DecideKeepAndUndo}

var auditActionLabels = func() map[string]string {
	m := make(map[string]string, len(auditActions))
	for _, a := range auditActions {
		m[a.code] = a.label
	}
	return m
}()

// AuditActionLabel is an audit event's action as a person reads it; an
// action without a label (a later one) is shown raw rather than hidden.
// The raw action stays in the row's title and in the CSV export.
func AuditActionLabel(ctx context.Context, a string) string {
	if l, ok := auditActionLabels[a]; ok {
		return T(ctx, l)
	}
	if d, ok := strings.CutPrefix(a, "decision."); ok && d != "" {
		return Tf(ctx, "Decision: %s", ActionLabel(ctx, d))
	}
	return a
}

// AuditAction is an audit action and its label, as the audit search
// offers it.
type AuditAction struct{ Code, Label string }

// AuditActions are every audit action Limbo writes, labelled in ctx's
// language, in the order of their codes (so families stay together).
func AuditActions(ctx context.Context) []AuditAction {
	out := make([]AuditAction, 0, len(auditActions)+len(decidedActions))
	for _, a := range auditActions {
		out = append(out, AuditAction{a.code, T(ctx, a.label)})
	}
	for _, d := range decidedActions {
		out = append(out, AuditAction{"decision." + d, AuditActionLabel(ctx, "decision."+d)})
	}
	slices.SortFunc(out, func(a, b AuditAction) int { return strings.Compare(a.Code, b.Code) })
	return out
}

// AuditActionsNamed are the audit actions whose label holds text, read in
// ctx's language or in English, whatever its case and accents: an Italian
// manager who types "decisione" or "accesso" finds what the page calls
// so, though the actions' codes are English ("decision.compensate").
func AuditActionsNamed(ctx context.Context, text string) []string {
	text = foldLabel(strings.TrimSpace(text))
	if text == "" {
		return nil
	}
	var out []string
	for _, a := range AuditActions(ctx) {
		if strings.Contains(foldLabel(a.Label), text) || strings.Contains(foldLabel(AuditActionLabel(context.Background(), a.Code)), text) {
			out = append(out, a.Code)
		}
	}
	return out
}

// auditActionsHint says which actions the audit search's Action text
// finds (its code's start or a label), so a person sees what the filter
// means: "Actions searched: Decision: Undo, …", or, when the page is empty,
// that none is so named ("" when it is not: a trail may hold an action an
// earlier Limbo wrote, which the text's start still finds).
func auditActionsHint(ctx context.Context, text string, empty bool) string {
	prefix, named := strings.ToLower(text), AuditActionsNamed(ctx, text)
	var found []string
	for _, a := range AuditActions(ctx) {
		if strings.HasPrefix(a.Code, prefix) || slices.Contains(named, a.Code) {
			found = append(found, a.Label)
		}
	}
	const shown = 8
	switch {
	case len(found) == 0 && !empty:
		return ""
	case len(found) == 0:
		return Tf(ctx, "No action is called “%s”: pick one from the list, or type the start of its name or of its code.", text)
	case len(found) > shown:
		return Tf(ctx, "Actions searched: %s and %s more.", strings.Join(found[:shown], ", "), Number(ctx, len(found)-shown))
	}
	return Tf(ctx, "Actions searched: %s.", strings.Join(found, ", "))
}

// foldLabel is s as a search compares it: lower case, without accents
// ("Attività" and "attivita" match).
func foldLabel(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.ToLower(s)) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// AuditSubject is what an audit event is about, as a link: an operation
// or a case.
type AuditSubject struct {
	Kind, ID, Href string
}

// auditSubjects are the operation and case an event names: its operation,
// and from its detail its case and, for a compensation event, the
// undoing operation, in that order, each once.
func auditSubjects(e store.AuditEvent) []AuditSubject {
	var out []AuditSubject
	seen := map[string]bool{}
	add := func(kind, id, prefix string) {
		if id == "" || seen[prefix+id] || !plainID(id) {
			return
		}
		seen[prefix+id] = true
		out = append(out, AuditSubject{Kind: kind, ID: id, Href: prefix + id})
	}
	add("operation", e.OperationID, "/operations/")
	var d map[string]any
	if json.Unmarshal([]byte(e.Detail), &d) == nil {
		if id, ok := d["case_id"].(string); ok {
			add("case", id, "/cases/")
		}
		// A decision's "compensation" is prose (what is undone); a
		// compensation event's is the undoing operation.
		if id, ok := d["compensation"].(string); ok && strings.HasPrefix(e.Action, "compensation.") {
			add("operation", id, "/operations/")
		}
	}
	return out
}

// plainID: an id a link can carry as it is (letters, digits, - and _).
func plainID(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
