package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/webhook"
)

// Webhook secrets of the test destinations (base64 of 32 bytes).
const (
	filesSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	rotatedOld    = "whsec_b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZC1zZWNyZXQ="
	rotatedNew    = "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQ="
	strangeSecret = "whsec_c29tZW9uZS1lbHNlcy1zZWNyZXQtc29tZW9uZS1lbHNl"
)

// inboundConfig: "files" signs its webhooks with filesSecret, "rotating"
// is mid-rotation (either secret verifies), "quiet" sends no webhooks.
func inboundConfig() *review.Config {
	return &review.Config{Destinations: map[string]review.Destination{
		"files":    {Lease: time.Minute, WebhookSecrets: []string{filesSecret}},
		"rotating": {Lease: time.Minute, WebhookSecrets: []string{rotatedOld, rotatedNew}},
		"quiet":    {Lease: time.Minute},
	}}
}

// delivery is one webhook POST.
type delivery struct {
	source string
	body   string
	header http.Header // nil: none
}

// signed is a delivery of body to source with id, signed with secret at ts.
func signed(t *testing.T, source, secret, id string, ts time.Time, body string) delivery {
	t.Helper()
	h, err := webhook.Headers(secret, id, ts, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Content-Type", "application/json")
	return delivery{source: source, body: body, header: h}
}

// deliver posts d without a bearer token and checks the answer as b.do
// does: never a 5xx, errors as problems, everything as openapi.json says.
func (b *testBundle) deliver(t *testing.T, d delivery) *response {
	t.Helper()
	path := "/api/v1/inbound/" + d.source
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range d.header {
		req.Header[k] = vs
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	res := &response{Status: resp.StatusCode, Header: resp.Header, Body: data, what: "POST " + path}
	if res.Status >= 500 {
		t.Errorf("%s: %d: %s", res.what, res.Status, data)
	}
	if res.Status >= 400 {
		var p handlers.Problem
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(data, &p) != nil || p.Type == "" || p.Status != res.Status {
			t.Errorf("%s: %d is not a problem: %s %s", res.what, res.Status, ct, data)
		}
	}
	for _, e := range checkAgainstDoc(http.MethodPost, path, d.body, res) {
		t.Errorf("%s: %d: answer does not match openapi.json: %s\nbody: %s", res.what, res.Status, e, data)
	}
	return res
}

// inboundAnswer is the 200 answer to a webhook.
type inboundAnswer struct {
	EventID   string `json:"event_id"`
	Duplicate bool   `json:"duplicate"`
}

// ambiguousAt registers a compensable write at dest whose first attempt
// timed out after send.
func (b *testBundle) ambiguousAt(t *testing.T, ref, dest string) *review.Operation {
	t.Helper()
	op := b.registerAt(t, ref, dest, review.RiskCompensableWrite)
	g := b.attempt(t, op.ID)
	if a := b.outcome(t, op.ID, g.N, `{"result":"timeout","phase":"after_send"}`); a.Operation.State != review.Ambiguous {
		t.Fatalf("state %s, want ambiguous", a.Operation.State)
	}
	return op
}

func jobCompleted(op *review.Operation) string {
	return fmt.Sprintf(`{"type":"job.completed","job_ref":"job-000001","status":"succeeded","output_ref":"file-000002","operation_id":%q,"logical_version":%q}`,
		op.ID, op.LogicalVersion)
}

func webhookRows(op *review.Operation) []review.Evidence {
	var out []review.Evidence
	for _, e := range op.Evidence {
		if e.Source == review.SourceWebhook {
			out = append(out, e)
		}
	}
	return out
}

// TestInboundWebhook: a validly signed webhook is accepted without a
// token, recorded once as evidence that settles nothing; replays are
// answered as duplicates; bad, expired and missing signatures are 401.
func TestInboundWebhook(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, inboundConfig())
		op := b.ambiguousAt(t, "folder-1", "files")
		body := jobCompleted(op)
		now := b.clock.Now()
		valid := signed(t, "files", filesSecret, "msg_1", now, body)

		var a inboundAnswer
		b.deliver(t, valid).want(t, http.StatusOK).decode(t, &a)
		if a.EventID != "msg_1" || a.Duplicate {
			t.Fatalf("answer = %+v, want msg_1, not a duplicate", a)
		}
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		rows := webhookRows(got)
		if len(rows) != 1 || rows[0].Authoritative || rows[0].Verdict != review.VerdictInconclusive ||
			len(rows[0].Candidates) != 1 || rows[0].Candidates[0].Ref != "file-000002" || rows[0].Candidates[0].OperationID != op.ID {
			t.Fatalf("webhook evidence = %+v, want one inconclusive row naming file-000002", got.Evidence)
		}
		if got.State != review.Ambiguous || got.Resource != nil {
			t.Errorf("a webhook settled the operation: %s, resource %+v", got.State, got.Resource)
		}

		// The same event again — as sent, or re-signed later as senders
		// retry — is a duplicate, 9 more times: still one evidence row.
		for i := range 9 {
			d := valid
			if i%2 == 1 {
				d = signed(t, "files", filesSecret, "msg_1", now.Add(time.Duration(i)*time.Second), body)
			}
			b.deliver(t, d).want(t, http.StatusOK).decode(t, &a)
			if !a.Duplicate || a.EventID != "msg_1" {
				t.Errorf("replay %d: %+v, want a duplicate", i+1, a)
			}
		}
		got = b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if n := len(webhookRows(got)); n != 1 {
			t.Errorf("%d webhook evidence rows after 10 deliveries, want 1", n)
		}

		tampered := signed(t, "files", filesSecret, "msg_2", now, body)
		tampered.body = strings.Replace(body, "file-000002", "file-999999", 1)
		otherID := signed(t, "files", filesSecret, "msg_3", now, body)
		otherID.header.Set(webhook.HeaderID, "msg_4")
		noHeaders := delivery{source: "files", body: body, header: http.Header{"Content-Type": {"application/json"}}}
		badTimestamp := signed(t, "files", filesSecret, "msg_5", now, body)
		badTimestamp.header.Set(webhook.HeaderTimestamp, "yesterday")
		bearerOnly := delivery{source: "files", body: body, header: http.Header{"Authorization": {"Bearer " + b.token}}}
		for name, d := range map[string]delivery{
			"wrong secret":    signed(t, "files", strangeSecret, "msg_6", now, body),
			"expired (6 min)": signed(t, "files", filesSecret, "msg_7", now.Add(-6*time.Minute), body),
			"future (6 min)":  signed(t, "files", filesSecret, "msg_8", now.Add(6*time.Minute), body),
			"body changed":    tampered,
			"id changed":      otherID,
			"no headers":      noHeaders,
			"bad timestamp":   badTimestamp,
			"timestamp with a sign": func() delivery {
				d := signed(t, "files", filesSecret, "msg_12", now, body)
				d.header.Set(webhook.HeaderTimestamp, "+"+d.header.Get(webhook.HeaderTimestamp))
				return d
			}(),
			"timestamp with a leading zero": func() delivery {
				d := signed(t, "files", filesSecret, "msg_13", now, body)
				d.header.Set(webhook.HeaderTimestamp, "0"+d.header.Get(webhook.HeaderTimestamp))
				return d
			}(),
			"a token instead": bearerOnly,
			"only a v2 signature": func() delivery {
				d := signed(t, "files", filesSecret, "msg_9", now, body)
				d.header.Set(webhook.HeaderSignature, "v2,"+strings.TrimPrefix(d.header.Get(webhook.HeaderSignature), "v1,"))
				return d
			}(),
		} {
			t.Run(name, func(t *testing.T) {
				b.on(t).deliver(t, d).want(t, http.StatusUnauthorized).problem(t, "invalid-signature")
			})
		}
		got = b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if n := len(webhookRows(got)); n != 1 {
			t.Errorf("%d webhook evidence rows after refused deliveries, want 1", n)
		}

		// Within the tolerance on either side: accepted.
		b.deliver(t, signed(t, "files", filesSecret, "msg_10", now.Add(-4*time.Minute), body)).want(t, http.StatusOK)
		b.deliver(t, signed(t, "files", filesSecret, "msg_11", now.Add(4*time.Minute), body)).want(t, http.StatusOK)
	})
}

// TestInboundKeyRotation: the receiver holds two secrets, the sender may
// send several signatures; any v1 match passes.
func TestInboundKeyRotation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, inboundConfig())
		op := b.ambiguousAt(t, "folder-1", "rotating")
		body := jobCompleted(op)
		now := b.clock.Now()
		b.deliver(t, signed(t, "rotating", rotatedOld, "msg_old", now, body)).want(t, http.StatusOK)
		b.deliver(t, signed(t, "rotating", rotatedNew, "msg_new", now, body)).want(t, http.StatusOK)

		both := signed(t, "rotating", rotatedNew, "msg_both", now, body)
		foreign, _ := webhook.Sign(strangeSecret, "msg_both", now, []byte(body))
		both.header.Set(webhook.HeaderSignature, foreign+" "+both.header.Get(webhook.HeaderSignature))
		b.deliver(t, both).want(t, http.StatusOK)

		b.deliver(t, signed(t, "rotating", filesSecret, "msg_files", now, body)).want(t, http.StatusUnauthorized).problem(t, "invalid-signature")
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if n := len(webhookRows(got)); n != 3 {
			t.Errorf("%d webhook evidence rows, want 3", n)
		}
	})
}

// TestInboundNotFoundAndInvalid: unknown sources, sources without
// webhooks and unknown operations are 404; a signed body Limbo cannot
// read is 400.
func TestInboundNotFoundAndInvalid(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, inboundConfig())
		op := b.ambiguousAt(t, "folder-1", "files")
		elsewhere := b.ambiguousAt(t, "folder-2", "rotating")
		now := b.clock.Now()
		body := jobCompleted(op)

		for name, d := range map[string]delivery{
			"unknown source":              signed(t, "nowhere", filesSecret, "msg_1", now, body),
			"source without webhooks":     signed(t, "quiet", filesSecret, "msg_2", now, body),
			"unknown operation":           signed(t, "files", filesSecret, "msg_3", now, strings.Replace(body, op.ID, "op_nope", 1)),
			"operation of another source": signed(t, "files", filesSecret, "msg_4", now, jobCompleted(elsewhere)),
		} {
			t.Run(name, func(t *testing.T) {
				b.on(t).deliver(t, d).want(t, http.StatusNotFound).problem(t, "not-found")
			})
		}
		for name, d := range map[string]delivery{
			"not JSON":         signed(t, "files", filesSecret, "msg_5", now, "operation "+op.ID),
			"no operation":     signed(t, "files", filesSecret, "msg_6", now, `{"type":"job.completed","job_ref":"job-1"}`),
			"an array":         signed(t, "files", filesSecret, "msg_7", now, `[]`),
			"operation number": signed(t, "files", filesSecret, "msg_8", now, `{"operation_id":7}`),
		} {
			t.Run(name, func(t *testing.T) {
				b.on(t).deliver(t, d).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			})
		}
		// The operation named under data is found too.
		nested := fmt.Sprintf(`{"type":"file.created","data":{"operation_id":%q,"ref":"file-3","logical_version":"v1"}}`, op.ID)
		b.deliver(t, signed(t, "files", filesSecret, "msg_9", now, nested)).want(t, http.StatusOK)
		got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t)
		if rows := webhookRows(got); len(rows) != 1 || len(rows[0].Candidates) != 1 || rows[0].Candidates[0].Ref != "file-3" {
			t.Errorf("evidence = %+v, want the nested event's file-3 alone", got.Evidence)
		}
	})
}

// TestInboundFailureAndDisagreement: a webhook whose status says the job
// failed or was canceled claims no effect — kept as evidence without
// candidates, it neither blocks an operation never attempted nor proves
// one in flight absent — while a success still does; a body whose top
// level and data disagree is refused naming the member, and nothing is
// recorded, so the destination can send the event id again, fixed; only
// members spelled as Limbo reads them count.
func TestInboundFailureAndDisagreement(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, inboundConfig())
		now := b.clock.Now()

		// Never attempted: a failure notice leaves it attemptable.
		pending := b.registerAt(t, "folder-1", "files", review.RiskCompensableWrite)
		for i, status := range []string{"failed", "canceled"} {
			body := fmt.Sprintf(`{"type":"job.%s","job_ref":"job-1","output_ref":"file-1","status":%q,"operation_id":%q}`, status, status, pending.ID)
			b.deliver(t, signed(t, "files", filesSecret, fmt.Sprintf("msg_f%d", i), now, body)).want(t, http.StatusOK)
		}
		got := b.get("/api/v1/operations/"+pending.ID).want(t, http.StatusOK).op(t)
		rows := webhookRows(got)
		if got.State != review.Pending || len(rows) != 2 || len(rows[0].Candidates) != 0 || len(rows[1].Candidates) != 0 {
			t.Fatalf("after failure notices: %s, webhook evidence %+v; want pending, two rows without candidates", got.State, rows)
		}
		b.attempt(t, pending.ID)

		// In flight and ambiguous: a failure notice is no proof of absence.
		amb := b.ambiguousAt(t, "folder-2", "files")
		failed := fmt.Sprintf(`{"type":"job.failed","job_ref":"job-2","status":"failed","operation_id":%q}`, amb.ID)
		b.deliver(t, signed(t, "files", filesSecret, "msg_f2", now, failed)).want(t, http.StatusOK)
		if got := b.get("/api/v1/operations/"+amb.ID).want(t, http.StatusOK).op(t); got.State != review.Ambiguous {
			t.Errorf("a failure notice moved an ambiguous operation to %s", got.State)
		}

		// A success still claims an effect: no attempt until reconciled.
		claimed := b.registerAt(t, "folder-3", "files", review.RiskCompensableWrite)
		ok := fmt.Sprintf(`{"type":"job.completed","job_ref":"job-3","status":"succeeded","output_ref":"file-3","operation_id":%q}`, claimed.ID)
		b.deliver(t, signed(t, "files", filesSecret, "msg_s3", now, ok)).want(t, http.StatusOK)
		if got := b.get("/api/v1/operations/"+claimed.ID).want(t, http.StatusOK).op(t); got.State != review.Ambiguous {
			t.Errorf("after a success notice: %s, want ambiguous", got.State)
		}

		// Top level and data disagree: 400 naming the member, nothing kept.
		op2 := b.registerAt(t, "folder-4", "files", review.RiskCompensableWrite)
		op3 := b.registerAt(t, "folder-5", "files", review.RiskCompensableWrite)
		for field, body := range map[string]string{
			"data.operation_id":    fmt.Sprintf(`{"type":"file.created","operation_id":%q,"data":{"operation_id":%q,"ref":"file-of-op3","logical_version":"v9"}}`, op2.ID, op3.ID),
			"data.ref":             fmt.Sprintf(`{"operation_id":%q,"ref":"file-a","data":{"operation_id":%q,"ref":"file-b"}}`, op2.ID, op2.ID),
			"data.logical_version": fmt.Sprintf(`{"operation_id":%q,"logical_version":"v1","data":{"ref":"file-a","logical_version":"v2"}}`, op2.ID),
		} {
			p := b.on(t).deliver(t, signed(t, "files", filesSecret, "msg_mixed", now, body)).want(t, http.StatusBadRequest).problem(t, "invalid-request")
			if p.Field != field {
				t.Errorf("%s: problem names %q, want %q", body, p.Field, field)
			}
		}
		for _, op := range []*review.Operation{op2, op3} {
			if got := b.get("/api/v1/operations/"+op.ID).want(t, http.StatusOK).op(t); got.State != review.Pending || len(got.Evidence) != 0 {
				t.Errorf("a refused webhook left %s %s with %+v", op.ID, got.State, got.Evidence)
			}
		}
		// Not marked as seen: the same id, fixed, is recorded.
		fixed := fmt.Sprintf(`{"type":"file.created","operation_id":%q,"data":{"operation_id":%q,"ref":"file-of-op2","logical_version":"v1"}}`, op2.ID, op2.ID)
		var a inboundAnswer
		b.deliver(t, signed(t, "files", filesSecret, "msg_mixed", now, fixed)).want(t, http.StatusOK).decode(t, &a)
		if a.Duplicate {
			t.Error("the fixed event was answered as a duplicate of the refused one")
		}
		got = b.get("/api/v1/operations/"+op2.ID).want(t, http.StatusOK).op(t)
		if rows := webhookRows(got); len(rows) != 1 || len(rows[0].Candidates) != 1 || rows[0].Candidates[0].Ref != "file-of-op2" {
			t.Errorf("after the fixed event: %+v, want one row naming file-of-op2", rows)
		}

		// Another spelling of a member is not that member: it neither
		// overrides nor names the operation.
		op4 := b.registerAt(t, "folder-6", "files", review.RiskCompensableWrite)
		folded := fmt.Sprintf(`{"operation_id":%q,"OPERATION_ID":%q,"ref":"file-6"}`, op4.ID, op3.ID)
		b.deliver(t, signed(t, "files", filesSecret, "msg_folded", now, folded)).want(t, http.StatusOK)
		if rows := webhookRows(b.get("/api/v1/operations/"+op3.ID).want(t, http.StatusOK).op(t)); len(rows) != 0 {
			t.Errorf("OPERATION_ID was read as operation_id: %+v", rows)
		}
		if rows := webhookRows(b.get("/api/v1/operations/"+op4.ID).want(t, http.StatusOK).op(t)); len(rows) != 1 {
			t.Errorf("%d webhook rows on the operation named by operation_id, want 1", len(rows))
		}
		alone := fmt.Sprintf(`{"Operation_Id":%q}`, op4.ID)
		b.deliver(t, signed(t, "files", filesSecret, "msg_alone", now, alone)).want(t, http.StatusBadRequest).problem(t, "invalid-request")
	})
}

// decisionsPage is one page of GET /api/v1/decisions.
type decisionsPage struct {
	Decisions  []store.Decision `json:"decisions"`
	NextCursor string           `json:"next_cursor"`
}

// inReview registers an operation for the bundle's tenant and sends it to
// review with two candidates, returning its case.
func (b *testBundle) inReview(t *testing.T, ref string) (*review.Operation, *store.Case) {
	t.Helper()
	op := b.ambiguousAt(t, ref, "drive")
	cand := func(r string) string {
		return fmt.Sprintf(`{"ref":%q,"kind":"folder","version":"v1","operation_id":%q}`, r, op.ID)
	}
	got := b.post("/api/v1/operations/"+op.ID+"/evidence",
		`{"source":"metadata_search","authoritative":true,"candidates":[`+cand("fld_a")+`,`+cand("fld_b")+`]}`).want(t, http.StatusOK).op(t)
	if got.State != review.NeedsReview {
		t.Fatalf("state %s, want needs_review", got.State)
	}
	cs, err := b.store.CasesForOperation(context.Background(), op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases = %+v, %v", cs, err)
	}
	return op, &cs[0]
}

// feed reads the decisions feed with token from cursor until want
// decisions arrived (PostgreSQL lists a decision once every older
// transaction on the server has ended) or 20 s passed.
func (b *testBundle) feed(t *testing.T, token, cursor string, want int) ([]store.Decision, string) {
	t.Helper()
	var all []store.Decision
	deadline := time.Now().Add(20 * time.Second)
	for {
		path := "/api/v1/decisions"
		if cursor != "" {
			path += "?cursor=" + cursor
		}
		var p decisionsPage
		b.do(request{path: path, token: &token}).want(t, http.StatusOK).decode(t, &p)
		if p.Decisions == nil {
			t.Fatalf("GET %s: decisions is null, want a list", path)
		}
		if len(p.Decisions) == 0 && p.NextCursor != cursor {
			t.Fatalf("GET %s: an empty page moved the cursor to %q", path, p.NextCursor)
		}
		all = append(all, p.Decisions...)
		cursor = p.NextCursor
		if len(p.Decisions) == 0 && (len(all) >= want || time.Now().After(deadline)) {
			return all, cursor
		}
		if len(p.Decisions) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestDecisionsFeed: GET /api/v1/decisions lists the tenant's decisions
// in order, page after page, and nothing of other tenants.
func TestDecisionsFeed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		ctx := context.Background()
		other := b.newToken("globex")

		if got, cursor := b.feed(t, b.token, "", 0); len(got) != 0 || cursor != "" {
			t.Fatalf("empty feed = %+v, cursor %q", got, cursor)
		}

		op1, c1 := b.inReview(t, "folder-1")
		_, c2 := b.inReview(t, "folder-2")
		b.clock.Advance(time.Second)
		d1, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: c1.ID, Action: review.DecideConfirm, Ref: "fld_a",
			Reason: "fld_a has the contract's pages", Actor: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		d2, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: c2.ID, Action: review.DecideCompensate, Ref: "fld_b",
			Compensation: "deleted fld_b", Reason: "duplicate folder", Actor: "bob@example.com"})
		if err != nil {
			t.Fatal(err)
		}

		got, cursor := b.feed(t, b.token, "", 2)
		if len(got) != 2 || got[0].ID != d1.ID || got[1].ID != d2.ID {
			t.Fatalf("feed = %+v, want alice's then bob's decision", got)
		}
		if g := got[0]; g.OperationID != op1.ID || g.CaseID != c1.ID || g.Action != review.DecideConfirm || g.ResourceRef != "fld_a" ||
			g.Actor != "alice@example.com" || g.Status != store.DecisionApplied || g.ToState != string(review.Confirmed) ||
			g.Tenant != "acme" || g.Key != op1.Key || !g.DecidedAt.Equal(b.clock.Now()) {
			t.Errorf("decision = %+v", g)
		}
		if cursor == "" {
			t.Error("no next_cursor after two decisions")
		}
		// The operation shows the decision's effect.
		if op := b.get("/api/v1/operations/"+op1.ID).want(t, http.StatusOK).op(t); op.State != review.Confirmed || op.Resource == nil || op.Resource.Ref != "fld_a" {
			t.Errorf("operation after confirm: %s, %+v", op.State, op.Resource)
		}

		// Continuing from the cursor: only what came after.
		_, c3 := b.inReview(t, "folder-3")
		d3, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: c3.ID, Action: review.DecideFail, Reason: "customer cancelled", Actor: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		more, _ := b.feed(t, b.token, cursor, 1)
		if len(more) != 1 || more[0].ID != d3.ID {
			t.Errorf("after the cursor: %+v, want the third decision alone", more)
		}

		// Another tenant sees none of them.
		if theirs, _ := b.feed(t, other, "", 0); len(theirs) != 0 {
			t.Errorf("tenant globex sees %+v", theirs)
		}

		b.do(request{path: "/api/v1/decisions?cursor=nonsense"}).want(t, http.StatusBadRequest).problem(t, "invalid-request")
		b.do(request{path: "/api/v1/decisions", token: strp("")}).want(t, http.StatusUnauthorized).problem(t, "unauthorized")
	})
}

// TestDecisionsFeedNamesVoidedApprovals: a first approval that a later
// decision made void (here: an undo decided after it, which moved the
// operation) is named by that decision in the feed, which lists each
// decision once: a client waiting on the approval learns it counts no more.
func TestDecisionsFeedNamesVoidedApprovals(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, nil)
		ctx := context.Background()
		op := b.registerAt(t, "folder-irr", "drive", review.RiskIrreversible)
		g := b.attempt(t, op.ID)
		b.outcome(t, op.ID, g.N, `{"result":"timeout","phase":"after_send"}`)
		cand := func(r string) string {
			return fmt.Sprintf(`{"ref":%q,"kind":"folder","version":"v1","operation_id":%q}`, r, op.ID)
		}
		b.post("/api/v1/operations/"+op.ID+"/evidence",
			`{"source":"metadata_search","authoritative":true,"candidates":[`+cand("fld_a")+`,`+cand("fld_b")+`]}`).want(t, http.StatusOK)
		cs, err := b.store.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases = %+v, %v", cs, err)
		}
		first, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideApproveRetry,
			Reason: "nothing shows it ran", Actor: "alice@example.com"})
		if err != nil || first.Status != store.DecisionFirstApproval {
			t.Fatalf("first approval: %+v, %v", first, err)
		}
		undo, err := b.store.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideCompensate, Ref: "fld_b",
			Compensation: "delete fld_b", Reason: "a duplicate after all", Actor: "bob@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := b.feed(t, b.token, "", 2)
		if len(got) != 2 || got[0].ID != first.ID || got[1].ID != undo.ID {
			t.Fatalf("feed = %+v, want alice's approval then bob's undo", got)
		}
		if len(got[0].VoidedApprovals) != 0 || !slices.Equal([]string(got[1].VoidedApprovals), []string{first.ID}) {
			t.Errorf("voided approvals: %v then %v, want none then alice's %s", got[0].VoidedApprovals, got[1].VoidedApprovals, first.ID)
		}
		var ds struct {
			Decisions []store.Decision `json:"decisions"`
		}
		b.get("/api/v1/operations/"+op.ID+"/decisions").want(t, http.StatusOK).decode(t, &ds)
		if len(ds.Decisions) != 2 || ds.Decisions[0].Status != store.DecisionVoid || !slices.Equal([]string(ds.Decisions[1].VoidedApprovals), []string{first.ID}) {
			t.Errorf("the operation's decisions = %+v, want alice's void, named by bob's", ds.Decisions)
		}
	})
}
