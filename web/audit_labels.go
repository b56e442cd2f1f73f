package web

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/limbo-dev/limbo/store"
)

// AuditActionLabel is an audit event's action as a person reads it; an
// action without a label (a later one) is shown raw rather than hidden.
// The raw action stays in the row's title and in the CSV export.
func AuditActionLabel(ctx context.Context, a string) string {
	switch a {
	case "audit.key_replaced":
		return T(ctx, "Audit key replaced")
	case "attempt.started":
		return T(ctx, "Attempt started")
	case "attempt.outcome":
		return T(ctx, "Outcome reported")
	case "attempt.closed":
		return T(ctx, "Attempt closed")
	case "case.opened":
		return T(ctx, "Case opened")
	case "case.updated":
		return T(ctx, "Case updated")
	case "case.claimed":
		return T(ctx, "Case claimed")
	case "case.released":
		return T(ctx, "Case released")
	case "case.taken_over":
		return T(ctx, "Case taken over")
	case "case.resolved":
		return T(ctx, "Case resolved")
	case "compensation.settled":
		return T(ctx, "Compensation settled")
	case "compensation.canceled":
		return T(ctx, "Compensation cancelled")
	case "compensation.left_to_person":
		return T(ctx, "Undo left to a person")
	case "decision.first_approval":
		return T(ctx, "First approval")
	case "decision.approval_voided":
		return T(ctx, "Approval no longer counts")
	case "decision.refused_payload":
		return T(ctx, "Decision on a refused payload")
	case "decision.extra_effect":
		return T(ctx, "Decision on an extra effect")
	case "evidence.extra_effect":
		return T(ctx, "Extra effect found")
	case "evidence.recorded":
		return T(ctx, "Evidence recorded")
	case "evidence.settled":
		return T(ctx, "Settled by evidence")
	case "job.updated":
		return T(ctx, "Job updated")
	case "job.completed":
		return T(ctx, "Job completed")
	case "job.settled":
		return T(ctx, "Job settled")
	case "login.succeeded":
		return T(ctx, "Signed in")
	case "login.failed":
		return T(ctx, "Sign-in failed")
	case "login.throttled":
		return T(ctx, "Sign-in throttled")
	case "login.still_throttled":
		return T(ctx, "Sign-ins still refused")
	case "logout":
		return T(ctx, "Signed out")
	case "operation.registered":
		return T(ctx, "Operation registered")
	case "operation.payload_mismatch":
		return T(ctx, "Key reused with a different payload")
	case "operation.confirmed":
		return T(ctx, "Operation confirmed")
	case "operation.failed":
		return T(ctx, "Operation failed")
	case "operation.ambiguous":
		return T(ctx, "Outcome left ambiguous")
	case "operation.escalated":
		return T(ctx, "Sent to review")
	case "operation.deadline_expired":
		return T(ctx, "Deadline passed")
	case "operation.approval_expired":
		return T(ctx, "Approval request expired")
	case "operation.dependency_failed":
		return T(ctx, "Dependency failed")
	case "operation.payload_purged":
		return T(ctx, "Payload purged (retention)")
	case "payload.revealed":
		return T(ctx, "Payload revealed")
	case "reconcile.settled":
		return T(ctx, "Settled by reconciliation")
	case "reconcile.inconclusive":
		return T(ctx, "Reconciliation inconclusive")
	case "token.created":
		return T(ctx, "Token created")
	case "token.revoked":
		return T(ctx, "Token revoked")
	case "user.added":
		return T(ctx, "User added")
	case "user.changed":
		return T(ctx, "User changed")
	case "user.password_reset":
		return T(ctx, "Password reset")
	case "user.language":
		return T(ctx, "Language changed")
	case "watch.extra_effect":
		return T(ctx, "Extra effect found")
	case "webhook.endpoint_added":
		return T(ctx, "Webhook endpoint added")
	case "webhook.endpoint_disabled":
		return T(ctx, "Webhook endpoint disabled")
	case "webhook.endpoint_enabled":
		return T(ctx, "Webhook endpoint enabled")
	case "webhook.redelivered":
		return T(ctx, "Webhook messages delivered again")
	case "webhook.secret_revealed":
		return T(ctx, "Webhook secret revealed")
	}
	if d, ok := strings.CutPrefix(a, "decision."); ok && d != "" {
		return Tf(ctx, "Decision: %s", ActionLabel(ctx, d))
	}
	return a
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
