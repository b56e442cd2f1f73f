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

// TestConsolePurgedPayload: once payload retention has emptied an
// operation's payload, its operation page and its case page say when
// (a <time>) instead of showing bytes, keep the hash and key, and show
// nothing of the payload or of the one refused under its key; the API
// answers payload null with payload_purged_at.
func TestConsolePurgedPayload(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		srv, st := consoleServerWith(t, e, consoleSetup{clock: clk, cfg: &review.Config{PayloadRetention: time.Hour}})
		ctx := context.Background()
		reg := review.Registration{Tenant: "acme", SourceRef: "inv-1", LogicalVersion: "1", Action: "charge", Destination: "pay",
			Risk: review.RiskCompensableWrite, Payload: []byte(`{"email":"ada@example.com"}`), Actor: "test"}
		op, _, err := st.Register(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "charge-1"}}, "test"); err != nil {
			t.Fatal(err)
		}
		// A payload refused under its key, judged: a case page to read.
		refused := reg
		refused.Payload = []byte(`{"email":"grace@example.com"}`)
		if _, _, err := st.Register(ctx, refused); err == nil {
			t.Fatal("another payload under the key was accepted")
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideFail, Actor: "reviewer@example.com",
			Reason: "the second charge is not meant"}); err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		if _, page := b.get("/operations/" + op.ID); !strings.Contains(page, "ada@example.com") || strings.Contains(page, "data-payload-purged") {
			t.Fatal("before the purge the operation page does not show the payload, or says it is purged")
		}

		clk.Advance(2 * time.Hour)
		rep, err := st.PurgePayloads(ctx, clk.Now(), false)
		if err != nil || rep.Operations != 1 {
			t.Fatalf("purge: %+v, %v", rep, err)
		}
		when := clk.Now().UTC().Format(time.RFC3339)
		b = newBrowser(t, srv.URL) // two hours on, the session has lapsed
		b.login("support@example.com")
		for _, path := range []string{"/operations/" + op.ID, "/cases/" + cs[0].ID} {
			code, page := b.get(path)
			if code != http.StatusOK {
				t.Fatalf("%s: %d", path, code)
			}
			if !strings.Contains(page, "Payload purged on") || !strings.Contains(page, `<time datetime="`+when+`"`) {
				t.Errorf("%s does not say the payload was purged on %s", path, when)
			}
			if strings.Contains(page, "ada@example.com") || strings.Contains(page, "grace@example.com") || canonicalPre.MatchString(page) {
				t.Errorf("%s still shows payload bytes", path)
			}
			if !strings.Contains(page, `data-copy="`+op.PayloadHash+`"`) || !strings.Contains(page, `data-copy="`+op.Key+`"`) {
				t.Errorf("%s no longer shows the payload hash and the key", path)
			}
		}
		if _, page := b.get("/operations/" + op.ID); !strings.Contains(page, `data-action="operation.payload_purged"`) {
			t.Error("the operation's history does not name the purge")
		}

		token, err := st.CreateToken(ctx, review.Operator("test"), "acme", "api")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/operations/"+op.ID, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET the operation: %d, %v", resp.StatusCode, err)
		}
		if got["payload"] != nil || got["payload_purged_at"] != clk.Now().UTC().Format(time.RFC3339Nano) || got["payload_hash"] != op.PayloadHash {
			t.Errorf("the API answers payload %v, payload_purged_at %v, payload_hash %v", got["payload"], got["payload_purged_at"], got["payload_hash"])
		}
	})
}
