package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// The operation page shows each attempt's structured output: refused (with
// why) or accepted.
func TestConsoleStructuredOutputs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "run-1", LogicalVersion: "plan-1", Action: "plan",
			Destination: "llm", Risk: review.RiskGenerate, Payload: json.RawMessage(`{"release":"v1.2"}`)})
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 200, Output: json.RawMessage(`{"steps":"<all of them>"}`), OutputInvalid: "at '/steps': got string, want array"}, "test"); err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		code, body := b.get("/operations/" + op.ID)
		if code != 200 {
			t.Fatalf("operation page: %d", code)
		}
		for _, want := range []string{"Structured outputs", "Attempt 1: refused", "at &#39;/steps&#39;: got string, want array", "&#34;&lt;all of them&gt;&#34;"} {
			if !strings.Contains(body, want) {
				t.Errorf("operation page lacks %q", want)
			}
		}
	})
}

// TestConsolePurgedOutputs: once payload retention has emptied an
// operation's model outputs, the operation page says, per attempt, that
// its output was kept and purged, and when (a <time>), in English and
// Italian, showing none of it; the API answers the attempt's output 410
// (purged, saying when), not the 404 of an attempt that kept none. Both
// read as if nothing had ever been kept before.
func TestConsolePurgedOutputs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk, cfg: &review.Config{PayloadRetention: time.Hour}})
		ctx := context.Background()
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "run-1", LogicalVersion: "plan-1", Action: "plan",
			Destination: "llm", Risk: review.RiskGenerate, Payload: json.RawMessage(`{"release":"v1.2"}`)})
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 200, Output: json.RawMessage(`{"steps":["tag the release"]}`)}, "test"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Hour)
		if rep, err := st.PurgePayloads(ctx, clk.Now(), false); err != nil || rep.Operations != 1 || rep.Outputs != 1 {
			t.Fatalf("purge: %+v, %v", rep, err)
		}
		when := clk.Now().UTC().Format(time.RFC3339)
		for _, c := range []struct{ lang, heading, kept string }{
			{"en", "Attempt 1: output purged", "Kept, then purged by the payload retention on"},
			{"it", "Tentativo 1: output eliminato", "Tenuto, poi eliminato dalla conservazione del payload il"},
		} {
			b := newBrowser(t, srv.URL).withHeader("Accept-Language", c.lang)
			b.login("support@example.com")
			code, page := b.get("/operations/" + op.ID)
			if code != http.StatusOK {
				t.Fatalf("operation page (%s): %d", c.lang, code)
			}
			if !strings.Contains(page, c.heading) || !strings.Contains(page, c.kept) || !strings.Contains(page, `data-output-purged`) ||
				!strings.Contains(page, `<time datetime="`+when+`"`) {
				t.Errorf("the operation page (%s) does not say attempt 1's output was kept and purged on %s", c.lang, when)
			}
			if strings.Contains(page, "tag the release") {
				t.Errorf("the operation page (%s) still shows the purged output", c.lang)
			}
		}

		token, err := st.CreateToken(ctx, review.Operator("test"), "acme", "api")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/operations/"+op.ID+"/attempts/1/output", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct{ Type, Detail string }
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusGone || p.Type != "purged" || !strings.Contains(p.Detail, "kept, and purged by the payload retention at "+when) {
			t.Errorf("GET the purged output: %d %+v; want 410, purged, saying when (%s)", resp.StatusCode, p, when)
		}
	})
}
