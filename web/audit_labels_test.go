package web

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
)

// auditActionLiteral is an audit action as the code writes it: a family
// and a name ("case.opened"), or the lone "logout".
var auditActionLiteral = regexp.MustCompile(`"((?:operation|attempt|case|job|evidence|reconcile|compensation|login|user|token|webhook|payload|watch|audit)\.[a-z_]+|logout)"`)

// notAuditActions are literals of those families that name something
// else: JSON fields of job and payload details.
var notAuditActions = map[string]bool{"job.ref": true, "job.status": true, "payload.body": true, "payload.name": true}

// TestAuditActionLabels: every audit action the code can write has a
// label, so the audit page and the histories never show a raw name. It
// reads the actions from the packages that write them; decisions are
// "decision." and the decided action, or a decision's own status.
func TestAuditActionLabels(t *testing.T) {
	var actions []string
	for _, dir := range []string{"../store", "../review", "../app", "../reconcile", "../handlers"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range auditActionLiteral.FindAllStringSubmatch(string(src), -1) {
				if !notAuditActions[m[1]] {
					actions = append(actions, m[1])
				}
			}
		}
	}
	if len(actions) < 20 {
		t.Fatalf("found only %d audit actions in the code: is the pattern still right?", len(actions))
	}
	for _, a := range []string{review.DecideConfirm, review.DecideCompensate, review.DecideApproveRetry, review.DecideFail,
		review.DecideCompensationDone, review.DecideCompensationFailed, review.DecideApprove, review.DecideRefuse, review.DecideKeepAndUndo,
		string(review.DecisionFirstApproval), string(review.DecisionRefusedPayload), string(review.DecisionExtraEffect)} {
		actions = append(actions, "decision."+a)
	}
	it := WithLang(context.Background(), "it")
	for _, a := range actions {
		if l := AuditActionLabel(context.Background(), a); l == a || strings.Contains(l, "_") {
			t.Errorf("audit action %q has no label (shows %q)", a, l)
		}
		if AuditActionLabel(it, a) == AuditActionLabel(context.Background(), a) {
			t.Errorf("audit action %q reads the same in Italian", a)
		}
	}
}
