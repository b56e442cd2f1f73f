package handlers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleUnnamedEffect: a success reported late for an operation that
// failed, naming no resource (review.UnnamedEffect), opens a case. Its page
// asks the reviewer to find the effect at the destination, in English and
// Italian, preselects no decision, offers no undo Limbo would have to
// refuse (it sends this destination's undo, and knows no resource to
// name), and the reviewer's word that it is undone (naming nothing)
// closes the case; the operation stays failed.
func TestConsoleUnnamedEffect(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		// Limbo sends this destination's undo itself: it could undo only a
		// resource the operation is known to have, and it has none.
		cfg := &review.Config{Destinations: map[string]review.Destination{"mail": {
			Undo: &review.Undo{Method: "DELETE", URL: "http://127.0.0.1:9/messages/{{.Ref}}", Timeout: time.Second}}}}
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		ctx := context.Background()
		// The provider refused the send: the operation failed.
		op := reported(t, st, review.Registration{Tenant: "acme", SourceRef: "welcome-mail-42", LogicalVersion: "1", Action: "send_mail",
			Destination: "mail", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"},
			review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 400})
		// The mail went out after all; the provider's answer names nothing.
		_, _ = st.RecordOutcome(ctx, "acme", op.ID, 1, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202}, "test")
		failed := func(when string) {
			t.Helper()
			if got, err := st.GetOperation(ctx, "acme", op.ID, ""); err != nil {
				t.Fatal(err)
			} else if got.State != review.Failed {
				t.Errorf("%s: the operation is %s, want failed", when, got.State)
			}
		}
		failed("the refused send")
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases %+v, %v; want one", cs, err)
		}
		caseID := cs[0].ID
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		for _, lang := range []struct{ code, says, situation, label string }{
			{"en", "Check again</strong> — the destination reported a success for this operation, which failed, without naming what it made: " +
				"find the effect at the destination, undo it, then say so (compensation_done) — or say so if nothing is there",
				"the destination later reported that it happened, without naming what it made",
				"Compensation done: the effect is undone, or nothing was there (the case closes; the operation stays failed)"},
			{"it", "Interroga di nuovo</strong> — la destinazione ha riportato un successo per questa operazione, che è fallita, senza dire cosa ha creato: " +
				"cerca l'effetto presso la destinazione, annullalo, poi indicalo (compensation_done) — oppure indicalo se non c'è nulla",
				"la destinazione ha poi riportato che è avvenuto, senza dire cosa ha creato",
				"Compensazione eseguita: l'effetto è annullato, oppure non c'era nulla (il caso si chiude; l'operazione resta fallita)"},
		} {
			body := casePageIn(t, st, rev, "reviewer@example.com", lang.code, caseID)
			// The decision's label says what it closes: no resource is named
			// below, so it cannot speak of one.
			for _, want := range []string{lang.says, lang.situation, lang.label} {
				if !strings.Contains(body, want) {
					t.Errorf("%s: the case page does not say %q", lang.code, want)
				}
			}
			if !strings.Contains(body, `value="compensation_done"`) || strings.Contains(body, `checked required`) {
				t.Errorf("%s: the form does not offer compensation_done, or preselects a decision", lang.code)
			}
			if strings.Contains(body, `name="action" value="compensate"`) {
				t.Errorf("%s: the form offers an undo Limbo would refuse: no resource to name", lang.code)
			}
		}
		code, body, _ := rev.decide(caseID, url.Values{"action": {review.DecideCompensationDone}, "reason": {"the mail went out; recalled it by hand"}})
		if code >= 400 {
			t.Fatalf("compensation_done: %d %s", code, body)
		}
		if c, err := st.GetCase(ctx, caseID, nil); err != nil {
			t.Fatal(err)
		} else if c.Status != store.CaseResolved {
			t.Errorf("the case after the word is %s, want resolved", c.Status)
		}
		failed("after the word")
	})
}
