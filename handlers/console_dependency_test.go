package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// registerShare registers a share of source, version 7, for acme, waiting
// for after when set.
func registerShare(t *testing.T, st *store.Store, source string, after *review.Dependency) *review.Operation {
	t.Helper()
	op, _, err := st.Register(context.Background(), review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "7", Action: "share",
		Destination: "files", Risk: review.RiskCompensableWrite, Payload: json.RawMessage(`{}`), After: after})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// The operation page says what an operation waits for, the dependency's
// state now and, once it is confirmed, what it was confirmed with.
func TestConsoleShowsTheDependency(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		pdf := registerShare(t, st, "contract-7-pdf", nil)
		link := registerShare(t, st, "contract-7-link", &review.Dependency{OperationID: pdf.ID, ResourceVersion: "7"})
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		page := func() string {
			code, body := b.get("/operations/" + link.ID)
			if code != 200 {
				t.Fatalf("operation page: %d", code)
			}
			return body
		}
		// The dependency's state now is the badge after "now" (the one
		// before it is the state it must reach).
		now := func(body string) string {
			_, dd, _ := strings.Cut(body, `<dd class="dependency">`)
			dd, _, _ = strings.Cut(dd, "</dd>")
			_, after, _ := strings.Cut(dd, " now ")
			return after
		}
		if body := page(); !strings.Contains(body, "Depends on") || !strings.Contains(body, pdf.ID) ||
			!strings.Contains(body, "for version 7") || !strings.Contains(now(body), `title="pending">Pending</span>`) {
			t.Errorf("operation page lacks the dependency:\n%s", body)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: pdf.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", pdf.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "pdf-9", Kind: "file", Version: "7"}}, "test"); err != nil {
			t.Fatal(err)
		}
		if body := page(); !strings.Contains(now(body), `title="confirmed">Confirmed</span>`) || !strings.Contains(now(body), "pdf-9") {
			t.Errorf("operation page lacks the confirmed dependency")
		}
	})
}

// A case on an operation that others wait for says so: its page lists
// them (Waited on by), and the decision panel says what a decision means
// for them — those waiting end with the operation if it fails or is
// undone; those that already ran on what it made are not undone with
// it. In English and Italian, both engines.
func TestConsoleCaseNamesWhatWaitsForIt(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")

		// A render in review (its result is for another version), and two
		// links waiting for it.
		caseID := needsReview(t, st, "contract-7")
		c, err := st.GetCase(ctx, caseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := registerShare(t, st, "contract-7-link", &review.Dependency{OperationID: c.OperationID, ResourceVersion: "7"})
		second := registerShare(t, st, "contract-7-mail", &review.Dependency{OperationID: c.OperationID})
		page := casePageIn(t, st, b, "support@example.com", "en", caseID)
		for _, want := range []string{"Waited on by", first.ID, second.ID, "for version 7",
			"2 operations wait for this one (Waited on by, above): if this one fails or is undone, they fail too"} {
			if !strings.Contains(page, want) {
				t.Errorf("the case page lacks %q:\n%s", want, page)
			}
		}
		if strings.Contains(page, "already run") {
			t.Errorf("the case page says an operation already ran on it, none has")
		}
		page = casePageIn(t, st, b, "support@example.com", "it", caseID)
		for _, want := range []string{"Attesa da", "per la versione 7", "2 operazioni attendono questa"} {
			if !strings.Contains(page, want) {
				t.Errorf("the Italian case page lacks %q:\n%s", want, page)
			}
		}

		// A render confirmed, a link that ran on its file, and then the
		// destination shows a second file for the render: a case about
		// the extra file, where an undo may reach what the link used.
		pdf := reported(t, st, review.Registration{Tenant: "acme", SourceRef: "contract-8", LogicalVersion: "7", Action: "render",
			Destination: "files", Risk: review.RiskCompensableWrite, Payload: json.RawMessage(`{}`), Actor: "test"},
			review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Resource: &review.ResourceRef{Ref: "file-8", Kind: "file", Version: "7"}})
		link := registerShare(t, st, "contract-8-link", &review.Dependency{OperationID: pdf.ID, ResourceVersion: "7"})
		if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: link.ID, Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
			{Ref: "file-8", Kind: "file", Version: "7", OperationID: pdf.ID}, {Ref: "file-8b", Kind: "file", Version: "7", OperationID: pdf.ID}}}
		if _, err := st.AddEvidence(ctx, "acme", pdf.ID, ev, "integrator"); err != nil {
			t.Fatal(err)
		}
		cs, err := st.CasesForOperation(ctx, pdf.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases of %s: %+v, %v; want the extra file's", pdf.ID, cs, err)
		}
		page = casePageIn(t, st, b, "support@example.com", "en", cs[0].ID)
		for _, want := range []string{"Waited on by", link.ID, "One operation has already run on what this one made: undoing this one does not undo it."} {
			if !strings.Contains(page, want) {
				t.Errorf("the extra-effect case page lacks %q:\n%s", want, page)
			}
		}
		if strings.Contains(page, "wait for this one") || strings.Contains(page, "waits for this one") {
			t.Errorf("the extra-effect case page says an operation waits for it; the one that did has run")
		}
		if page := casePageIn(t, st, b, "support@example.com", "it", cs[0].ID); !strings.Contains(page, "Un'operazione è già stata eseguita su ciò che questa ha prodotto") {
			t.Errorf("the Italian extra-effect case page lacks the note:\n%s", page)
		}
	})
}
