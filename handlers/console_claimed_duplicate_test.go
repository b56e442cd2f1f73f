package handlers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleWebhookClaimsADuplicate: a signed webhook naming a second
// resource for a confirmed operation opens a case (review.ExtraEffects).
// Its page says only the destination's word names the resource, asks the
// reviewer to look for it, preselects the undo of that resource (the
// recommendation), and offers the word that it is undone or was never
// there, in English and Italian; that word closes the case, and the
// operation stays confirmed with the resource it was confirmed with.
func TestConsoleWebhookClaimsADuplicate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServerWith(t, e, consoleSetup{})
		ctx := context.Background()
		op := reported(t, st, review.Registration{Tenant: "acme", SourceRef: "charge-42", LogicalVersion: "1", Action: "charge",
			Destination: "plain", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"},
			review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "ch-1"}})
		if got, err := st.GetOperation(ctx, "acme", op.ID, ""); err != nil || got.State != review.Confirmed {
			t.Fatalf("the charge: %+v, %v; want confirmed", got, err)
		}
		if _, err := st.Inbound(ctx, store.InboundEvent{Source: "plain", EventID: "evt-9", OperationID: op.ID, Body: `{}`, Note: "charge.succeeded",
			Candidates: []review.Candidate{{Ref: "ch-2", Version: "1", OperationID: op.ID}}}); err != nil {
			t.Fatal(err)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases %+v, %v; want one", cs, err)
		}
		caseID := cs[0].ID
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		for _, lang := range []struct{ code, says, situation, label string }{
			{"en", "a signed webhook of the destination reports ch-2 for this operation besides the confirmed ch-1: a duplicate, if it is there",
				"a signed webhook of the destination has since named another resource for it, ch-2: a duplicate, if it is there. No look at the destination has shown it.",
				"Compensation done: the effect is undone, or nothing was there (the case closes; the operation stays confirmed)"},
			{"it", "un webhook firmato della destinazione riporta ch-2 per questa operazione oltre alla ch-1 confermata: un duplicato, se esiste",
				"un webhook firmato della destinazione ha indicato un'altra risorsa a suo nome, ch-2: un duplicato, se esiste. Nessuna verifica presso la destinazione l'ha ancora mostrata.",
				"Compensazione eseguita: l'effetto è annullato, oppure non c'era nulla (il caso si chiude; l'operazione resta confermata)"},
		} {
			body := casePageIn(t, st, rev, "reviewer@example.com", lang.code, caseID)
			for _, want := range []string{lang.says, lang.situation, lang.label} {
				if !strings.Contains(body, want) {
					t.Errorf("%s: the case page does not say %q", lang.code, want)
				}
			}
			if !strings.Contains(body, `value="compensate" checked`) || !strings.Contains(body, `value="ch-2" selected`) {
				t.Errorf("%s: the form does not preselect the undo of ch-2, as recommended", lang.code)
			}
			if strings.Contains(body, `value="confirm"`) {
				t.Errorf("%s: the form offers to confirm an operation that is confirmed", lang.code)
			}
		}
		code, body, _ := rev.decide(caseID, url.Values{"action": {review.DecideCompensationDone}, "undo_ref": {"ch-2"},
			"reason": {"no ch-2 at the payment provider"}})
		if code >= 400 {
			t.Fatalf("compensation_done: %d %s", code, body)
		}
		if c, err := st.GetCase(ctx, caseID, nil); err != nil {
			t.Fatal(err)
		} else if c.Status != store.CaseResolved {
			t.Errorf("the case after the word is %s, want resolved", c.Status)
		}
		got, err := st.GetOperation(ctx, "acme", op.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "ch-1" {
			t.Errorf("after the word: %s with %+v; want confirmed with ch-1", got.State, got.Resource)
		}
	})
}
