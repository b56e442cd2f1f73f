package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleUndoLeftToAPerson: where Limbo's undo call would remove a
// resource other operations wrote too (review.UndoByHand), the case page
// of the operation being compensated says who runs the undo — a person,
// not Limbo — and what to do, and the compensation's reason names the
// other operation; in English and in Italian.
func TestConsoleUndoLeftToAPerson(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		cfg := &review.Config{Destinations: map[string]review.Destination{"files": {
			Undo: &review.Undo{Method: "DELETE", URL: "http://127.0.0.1:9/resources/{{.Ref}}", Timeout: time.Second}}}}
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		ctx := context.Background()
		// The file's creator, confirmed with it; then an upload to it in review.
		creator := reported(t, st, review.Registration{Tenant: "acme", SourceRef: "contract-583", LogicalVersion: "6", Action: "upload_file",
			Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"},
			review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Resource: &review.ResourceRef{Ref: "file-doc-shared", Kind: "file", Version: "6"}})
		caseID := needsReview(t, st, "doc-shared") // its resource: file-doc-shared
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: caseID, Action: review.DecideCompensate, Ref: "file-doc-shared",
			Compensation: "remove version 7", Actor: "reviewer@example.com", Reason: "version 7 went up by mistake"}); err != nil {
			t.Fatal(err)
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		for _, lang := range []struct{ code, runBy, todo, reason, recommended, deadline, settles string }{
			{"en", "which a person does at the destination: Limbo does not send it",
				"Undo this operation's part at the destination yourself, then say here that the undo is done.",
				"left to a person: file-doc-shared was written by " + creator.ID + " too",
				"Undo by hand</strong> <code>file-doc-shared</code> — Limbo does not send the undo of file-doc-shared, which other operations wrote too: " +
					"remove this operation's part at the destination yourself, then say the undo is done (compensation_done)",
				", the undo counts as failed and the operation comes back here for review.",
				"this one settles when someone says here how it went."},
			{"it", "che una persona esegue presso la destinazione: Limbo non la invia",
				"Annulla tu stesso la parte di questa operazione presso la destinazione, poi indica qui che l'annullamento è avvenuto.",
				"lasciata a una persona: file-doc-shared è stata scritta anche da " + creator.ID,
				"Compensa a mano</strong> <code>file-doc-shared</code> — Limbo non invia l'annullamento di file-doc-shared, scritta anche da altre operazioni: " +
					"rimuovi tu stesso la parte di questa operazione presso la destinazione, poi indica che l'annullamento è avvenuto (compensation_done)",
				", l'annullamento conta come fallito e l'operazione torna qui in revisione.",
				"questa si chiude quando qualcuno indica qui com'è andato."},
		} {
			body := casePageIn(t, st, rev, "reviewer@example.com", lang.code, caseID)
			for _, want := range []string{lang.runBy, lang.todo, lang.reason, lang.recommended, lang.deadline, lang.settles} {
				if !strings.Contains(body, want) {
					t.Errorf("%s: the case page does not say %q", lang.code, want)
				}
			}
			// Nothing is chosen for the reviewer: only they know when the
			// undo is done.
			if strings.Contains(body, `name="action" value="compensation_done" checked`) {
				t.Errorf("%s: the form preselects compensation_done", lang.code)
			}
		}
	})
}
