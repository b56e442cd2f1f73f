package handlers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestDashboardPercentInItalian: a percentage is written the reader's way
// (33,3%), as the counts beside it are.
func TestDashboardPercentInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		for i, res := range []review.Result{review.ResultTimeout, review.ResultSuccess, review.ResultSuccess} {
			op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "doc-" + string(rune('a'+i)), LogicalVersion: "1",
				Action: "render", Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			out := review.Outcome{Result: res, Phase: review.PhaseAfterSend}
			if res == review.ResultSuccess {
				out.Resource = &review.ResourceRef{Ref: "file-" + op.ID, Kind: "file", Version: "1"}
			}
			if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, out, "test"); err != nil {
				t.Fatal(err)
			}
		}
		mgr := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		mgr.login("manager@example.com")
		code, body := mgr.get("/dashboard?window=24h")
		if code != 200 {
			t.Fatalf("dashboard: %d", code)
		}
		if strings.Contains(body, "33.3%") || !strings.Contains(body, "33,3") {
			i := strings.Index(body, "33.3")
			t.Fatalf("Italian dashboard writes the ambiguity rate with a decimal point: %q", body[max(0, i-80):min(len(body), i+40)])
		}
	})
}

// On an Italian page, the English reason a chain is broken is introduced
// as English ("(dettaglio in inglese)"), as every other English detail is.
// TestAuditVerifyBrokenInItalian: the store's English reason for a broken
// chain comes after the Italian lead-in that says it is English.
func TestAuditVerifyBrokenInItalian(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "doc-1")
		storetest.Sealed(t, st)
		if _, err := st.DB().Exec(`UPDATE audit_events SET detail = '{"edited":true}' WHERE seq = 1`); err != nil {
			t.Fatal(err)
		}
		mgr := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		mgr.login("manager@example.com")
		code, body := mgr.get("/audit/verify")
		i := strings.Index(body, "La catena è interrotta")
		if code != 200 || i < 0 {
			t.Fatalf("verify: %d\n%s", code, body)
		}
		line := body[i:min(len(body), i+200)]
		line = line[:strings.Index(line, "<")]
		if !strings.Contains(line, "dettaglio in inglese") {
			t.Fatalf("Italian verify page shows an untranslated English reason: %q", line)
		}
	})
}

// TestQueueKeepsAnAgeTyped: an age the form does not offer, typed into the
// address, filters the queue and is shown selected, so that filtering
// again keeps it.
func TestQueueKeepsAnAgeTyped(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	needsReview(t, st, "doc-age")
	sup := newBrowser(t, srv.URL)
	sup.login("support@example.com")
	if code, body := sup.get("/?age=2h&decidable=0"); code != 200 || !strings.Contains(body, `<option value="2h" selected>`) {
		t.Errorf("/?age=2h: %d; the age select does not show 2h selected", code)
	}
}
