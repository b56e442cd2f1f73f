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

// The operation page says what an operation waits for, the dependency's
// state now and, once it is confirmed, what it was confirmed with.
func TestConsoleShowsTheDependency(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		reg := func(source string, after *review.Dependency) *review.Operation {
			op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "7", Action: "share",
				Destination: "files", Risk: review.RiskCompensableWrite, Payload: json.RawMessage(`{}`), After: after})
			if err != nil {
				t.Fatal(err)
			}
			return op
		}
		pdf := reg("contract-7-pdf", nil)
		link := reg("contract-7-link", &review.Dependency{OperationID: pdf.ID, ResourceVersion: "7"})
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
