package handlers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleOffersNoJobThatFailed: a conversion's job failed, as its
// report said, and a look then listed it beside another operation's
// folder: a case. The decision form offers neither resource to confirm
// or to undo the failed job — it is no effect — and the candidates table
// says why it is listed, in English and Italian. Before, the form
// offered the failed job as the effect to confirm.
func TestConsoleOffersNoJobThatFailed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, _, _ := checkingConsole(t, e)
		r := review.Registration{Tenant: "acme", SourceRef: "scan-failed", LogicalVersion: "v1", Action: "convert",
			Destination: sandbox.DestinationName, Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"}
		op := reported(t, st, r, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend,
			Job: &review.JobRef{Ref: "job-failed", Status: "queued"}})
		if _, err := st.PutJob(ctx, "acme", op.ID, review.Job{Ref: "job-failed", Status: review.JobFailed}, "integrator"); err != nil {
			t.Fatal(err)
		}
		look := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
			{Ref: "job-failed", Kind: "job", Version: "v1", OperationID: op.ID},
			{Ref: "fld-other", Kind: "folder", Version: "v1", OperationID: "op_other"}}}
		if got, err := st.AddEvidence(ctx, "acme", op.ID, look, "integrator"); err != nil || got.State != review.NeedsReview {
			t.Fatalf("the look: %+v, %v; want the operation in review", got, err)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases %+v, %v; want one", cs, err)
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		for _, lang := range []string{"en", "it"} {
			page := casePageIn(t, st, rev, "reviewer@example.com", lang, cs[0].ID)
			if !strings.Contains(page, `<select id="confirm_ref"`) {
				t.Fatalf("%s: the case page has no form to confirm a resource", lang)
			}
			if strings.Contains(page, `<option value="job-failed"`) {
				t.Errorf("%s: the form offers the failed job to confirm or undo", lang)
			}
			if !strings.Contains(page, `<option value="fld-other"`) {
				t.Errorf("%s: the form does not offer the folder the look found", lang)
			}
			_, op := rev.get("/operations/" + op.ID)
			tag := map[string]string{"en": "ended without an effect", "it": "terminato senza effetto"}[lang]
			if i := strings.Index(op, "<code>job-failed</code>"); i < 0 || !strings.Contains(op[i:min(len(op), i+200)], tag) {
				t.Errorf("%s: the candidates table does not say job-failed %s", lang, tag)
			}
		}
	})
}
