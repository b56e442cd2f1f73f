package web

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	for _, a := range slices.Concat(decidedActions, []string{string(review.DecisionFirstApproval), string(review.DecisionRefusedPayload), string(review.DecisionExtraEffect)}) {
		actions = append(actions, "decision."+a)
	}
	// The list the audit search offers is every one of them.
	offered := map[string]bool{}
	for _, a := range AuditActions(context.Background()) {
		offered[a.Code] = true
	}
	for _, a := range actions {
		if !offered[a] {
			t.Errorf("audit action %q is not in auditActions", a)
		}
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

// TestAuditActionsNamed: a label names its action whatever its case and
// accents, in the reader's language or in English; a text no label holds
// (NUL bytes and invalid UTF-8 included) names none.
func TestAuditActionsNamed(t *testing.T) {
	it := WithLang(context.Background(), "it")
	for _, c := range []struct {
		ctx      context.Context
		text     string
		has, not []string
	}{
		{it, "decisione", []string{"decision.compensate", "decision.confirm", "decision.refused_payload"}, []string{"case.opened"}},
		{it, " ACCESSO ", []string{"login.succeeded", "login.failed"}, []string{"logout", "decision.confirm"}},
		{it, "non piu valida", []string{"decision.approval_voided"}, nil},             // più, without its accent
		{it, "sign-in failed", []string{"login.failed"}, []string{"login.succeeded"}}, // English, read in Italian
		{context.Background(), "undo", []string{"decision.compensate", "compensation.left_to_person"}, []string{"decision.confirm"}},
		{context.Background(), "compensa", nil, []string{"decision.compensate"}}, // Italian, read in English
	} {
		got := AuditActionsNamed(c.ctx, c.text)
		for _, a := range c.has {
			if !slices.Contains(got, a) {
				t.Errorf("%q (%s): does not name %s (names %v)", c.text, Lang(c.ctx), a, got)
			}
		}
		for _, a := range c.not {
			if slices.Contains(got, a) {
				t.Errorf("%q (%s): names %s", c.text, Lang(c.ctx), a)
			}
		}
	}
	for _, text := range []string{"", "  ", "\x00", "\xff", "zzz"} {
		if got := AuditActionsNamed(it, text); got != nil {
			t.Errorf("%q names %v", text, got)
		}
	}
}

// TestAuditActionsHint: the audit page says which actions its Action text
// searched; that none is so named only when it found no event, since a
// trail may hold an action an earlier Limbo wrote.
func TestAuditActionsHint(t *testing.T) {
	it := WithLang(context.Background(), "it")
	for _, c := range []struct {
		text  string
		empty bool
		want  string
	}{
		{"utente aggiunto", false, "Azioni cercate: Utente aggiunto."},
		{"case.", false, "Azioni cercate: Caso preso in carico, Caso aperto, Caso rilasciato, Caso risolto, Caso rilevato, Caso aggiornato."},
		{"decisione", true, " e altre "},
		{"case.assigned", true, "Nessuna azione si chiama “case.assigned”"},
		{"case.assigned", false, ""},
	} {
		got := auditActionsHint(it, c.text, c.empty)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%q (empty %v): %q, want %q", c.text, c.empty, got, c.want)
		}
	}
}
