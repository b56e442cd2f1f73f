package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/webhook"
)

// hookCase registers r, lets its first attempt time out and reports two
// candidates naming it, which opens a case; it returns the operation and
// the case.
func (b *bundle) hookCase(t testing.TB, r review.Registration) (*review.Operation, *store.Case) {
	t.Helper()
	op := b.register(t, r)
	b.start(t, op)
	wantState(t, b.report(t, op, 1, timeoutAfterSend).Operation, review.Ambiguous)
	cands := []review.Candidate{
		{Ref: "fld-1", Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID},
		{Ref: "fld-2", Kind: "folder", Version: op.LogicalVersion, OperationID: op.ID},
	}
	got, err := b.s.AddEvidence(b.ctx, r.Tenant, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true,
		Candidates: cands}, "integrator")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, got, review.NeedsReview)
	cs, err := b.s.CasesForOperation(b.ctx, op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases = %+v, %v; want one", cs, err)
	}
	return got, &cs[0]
}

// confirm decides c as confirmed by alice.
func (b *bundle) confirm(t testing.TB, c *store.Case) *store.Decision {
	t.Helper()
	d, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideConfirm, Ref: "fld-1",
		Reason: "fld-1 is the one", Actor: "alice"})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}

// addEndpoint adds an endpoint for tenant.
func (b *bundle) addEndpoint(t testing.TB, tenant, u string) *store.WebhookEndpoint {
	t.Helper()
	ep, err := b.s.AddWebhookEndpoint(b.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenant, URL: u})
	if err != nil {
		t.Fatalf("AddWebhookEndpoint(%s): %v", u, err)
	}
	return ep
}

// messages lists every outbox message of ep.
func (b *bundle) messages(t testing.TB, ep *store.WebhookEndpoint) []store.OutboxMessage {
	t.Helper()
	ms, _, err := b.s.EndpointMessages(b.ctx, ep.ID, nil, "", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// claimAll claims every due message for owner.
func (b *bundle) claimAll(t testing.TB, owner string) []store.DeliveryClaim {
	t.Helper()
	cs, err := b.s.ClaimDeliveries(b.ctx, owner, 100, 30*time.Second)
	if err != nil {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	return cs
}

// TestWebhookEndpoints: adding validates the URL and the secret, generates
// a secret when none is given, respects the scope and is audited, as is
// disabling; listings never show a secret.
func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for _, u := range []string{"", "ftp://example.com/hook", "/hooks", "https://", "http://169.254.169.254/latest",
			"http://[fe80::1]/x", "https://example.com/#frag", "https://example.com/" + strings.Repeat("x", 2100)} {
			_, err := b.s.AddWebhookEndpoint(b.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenantA, URL: u})
			if !errors.Is(err, review.ErrInvalid) {
				t.Errorf("AddWebhookEndpoint(%q) = %v, want ErrInvalid", u, err)
			}
		}
		for _, sec := range []string{"whsec_!!!", "whsec_" + "c2hvcnQ=", "not base64 at all"} {
			_, err := b.s.AddWebhookEndpoint(b.ctx, review.Operator("test"), store.NewWebhookEndpoint{Tenant: tenantA, URL: "https://example.com/h", Secret: sec})
			if !errors.Is(err, review.ErrInvalid) {
				t.Errorf("secret %q: %v, want ErrInvalid", sec, err)
			}
		}
		_, err := b.s.AddWebhookEndpoint(b.ctx, review.Principal{Name: "test", Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{tenantA}}}, store.NewWebhookEndpoint{Tenant: tenantB, URL: "https://b.example/h"})
		if !errors.Is(err, review.ErrForbidden) {
			t.Errorf("add out of scope = %v, want ErrForbidden", err)
		}

		gen := b.addEndpoint(t, tenantA, "https://a.example/hooks?x=1")
		if key, err := webhook.ParseSecret(gen.Secret); err != nil || !strings.HasPrefix(gen.Secret, webhook.SecretPrefix) || len(key) != 32 {
			t.Errorf("generated secret %q: %v", gen.Secret, err)
		}
		mine, _ := webhook.NewSecret()
		given, err := b.s.AddWebhookEndpoint(b.ctx, review.Operator("admin"), store.NewWebhookEndpoint{Tenant: tenantA, URL: "https://hooks.example:9000/h",
			Secret: mine, Description: " ops "})
		if err != nil || given.Secret != mine || given.Description != "ops" {
			t.Fatalf("add with a secret = %+v, %v", given, err)
		}
		other := b.addEndpoint(t, tenantB, "https://b.example/h")

		all, err := b.s.ListWebhookEndpoints(b.ctx, nil)
		if err != nil || len(all) != 3 {
			t.Fatalf("list all = %d, %v", len(all), err)
		}
		for _, ep := range all {
			if ep.Secret != "" {
				t.Errorf("listing shows the secret of %s", ep.ID)
			}
		}
		onlyA, _ := b.s.ListWebhookEndpoints(b.ctx, []string{tenantA})
		none, _ := b.s.ListWebhookEndpoints(b.ctx, []string{})
		if len(onlyA) != 2 || onlyA[0].Tenant != tenantA || len(none) != 0 {
			t.Errorf("scoped lists: %d for A, %d for nobody", len(onlyA), len(none))
		}
		if _, err := b.s.GetWebhookEndpoint(b.ctx, other.ID, []string{tenantA}); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("get other tenant's endpoint = %v, want ErrNotFound", err)
		}
		if sec, err := b.s.RevealWebhookSecret(b.ctx, review.Principal{Name: "admin", Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{tenantA}}}, gen.ID); err != nil || sec != gen.Secret {
			t.Errorf("reveal = %q, %v", sec, err)
		}
		if err := b.s.DisableWebhookEndpoint(b.ctx, review.Principal{Name: "admin", Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{tenantA}}}, other.ID); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("disable other tenant's endpoint = %v, want ErrNotFound", err)
		}
		b.clk.Advance(time.Minute)
		for range 2 { // the second time changes nothing
			if err := b.s.DisableWebhookEndpoint(b.ctx, review.Operator("admin"), gen.ID); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := b.s.GetWebhookEndpoint(b.ctx, gen.ID, nil)
		if got.DisabledAt == nil || !got.DisabledAt.Equal(b.clk.Now()) || got.Secret != "" {
			t.Errorf("after disable: %+v", got)
		}
		evs, err := b.s.AuditEvents(b.ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		acts := countActions(evs)
		if acts["webhook.endpoint_added"] != 3 || acts["webhook.endpoint_disabled"] != 1 || acts["webhook.secret_revealed"] != 1 {
			t.Errorf("audit = %v", acts)
		}
		for _, ev := range evs {
			if strings.Contains(ev.Detail, "whsec_") {
				t.Errorf("audit event %s carries a secret: %s", ev.Action, ev.Detail)
			}
		}
		assertSealed(t, b.s)
	})
}

// TestDecisionEnqueuesWebhooks: an applied decision writes one message per
// enabled endpoint of its tenant, with the decision as payload; a first
// approval writes none.
func TestDecisionEnqueuesWebhooks(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep1 := b.addEndpoint(t, tenantA, "https://a.example/one")
		ep2 := b.addEndpoint(t, tenantA, "https://a.example/two")
		off := b.addEndpoint(t, tenantA, "https://a.example/off")
		if err := b.s.DisableWebhookEndpoint(b.ctx, review.Operator("admin"), off.ID); err != nil {
			t.Fatal(err)
		}
		epB := b.addEndpoint(t, tenantB, "https://b.example/h")

		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.clk.Advance(time.Second)
		d := b.confirm(t, c)
		var eventIDs []string
		for _, ep := range []*store.WebhookEndpoint{ep1, ep2} {
			ms := b.messages(t, ep)
			if len(ms) != 1 {
				t.Fatalf("endpoint %s has %d messages, want 1", ep.URL, len(ms))
			}
			m := ms[0]
			if m.Status != store.OutboxPending || m.EventType != "decision.confirm" || m.Tenant != tenantA || m.Attempts != 0 ||
				!m.NextAttemptAt.Equal(b.clk.Now()) || !m.CreatedAt.Equal(b.clk.Now()) || !strings.HasPrefix(m.EventID, "msg_") {
				t.Errorf("message = %+v", m)
			}
			var body struct {
				Type      string         `json:"type"`
				Timestamp time.Time      `json:"timestamp"`
				Decision  store.Decision `json:"data"`
			}
			if err := json.Unmarshal([]byte(m.Payload), &body); err != nil {
				t.Fatalf("payload %s: %v", m.Payload, err)
			}
			if body.Type != "decision.confirm" || body.Decision.ID != d.ID || body.Decision.CaseID != c.ID ||
				body.Decision.ResourceRef != "fld-1" || body.Decision.Status != store.DecisionApplied || !body.Timestamp.Equal(d.DecidedAt) {
				t.Errorf("payload = %s", m.Payload)
			}
			eventIDs = append(eventIDs, m.EventID)
		}
		if eventIDs[0] == eventIDs[1] {
			t.Error("two endpoints share one event id")
		}
		if n := len(b.messages(t, off)) + len(b.messages(t, epB)); n != 0 {
			t.Errorf("%d messages for a disabled endpoint or another tenant", n)
		}

		// Four eyes: the first approval is not announced, the second is.
		r := intention("charge-1", review.RiskCompensableWrite, "plain")
		r.Flags = []review.Flag{review.FlagFinancial}
		_, fc := b.hookCase(t, r)
		first, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: fc.ID, Action: review.DecideApproveRetry, Reason: "checked by hand", Actor: "alice"})
		if err != nil || first.Status != store.DecisionFirstApproval {
			t.Fatalf("first approval = %+v, %v", first, err)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM outbox`); n != 2 {
			t.Errorf("%d messages after a first approval, want still 2", n)
		}
		second, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: fc.ID, Action: review.DecideApproveRetry, Reason: "checked by hand", Actor: "bob"})
		if err != nil || second.Status != store.DecisionApplied {
			t.Fatalf("second approval = %+v, %v", second, err)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM outbox WHERE event_type = 'decision.approve_retry' AND payload LIKE ?`,
			"%"+second.ID+"%"); n != 2 {
			t.Errorf("%d approve_retry messages naming the applied decision, want 2", n)
		}
	})
}

// failOn installs a trigger that makes every insert into table fail when
// cond holds for the new row; the returned func removes it.
func failOn(t *testing.T, b *bundle, _ store.Engine, table, cond string) func() {
	t.Helper()
	return storetest.FailOn(t, b.s, "INSERT", table, cond)
}

// TestWebhookOutboxIsTransactional: the outbox rows share the decision's
// transaction. A decision rolled back after its messages were written
// leaves no message; a message that cannot be written leaves no decision.
func TestWebhookOutboxIsTransactional(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		op, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))

		// The last write of Decide (the case.resolved event) fails: the
		// messages written before it must go with the decision.
		drop := failOn(t, b, e, "audit_events", "NEW.action = 'case.resolved'")
		if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideConfirm, Ref: "fld-1",
			Reason: "checked by hand", Actor: "alice"}); err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("Decide with a failing audit insert = %v", err)
		}
		drop()
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM outbox`); n != 0 {
			t.Errorf("%d messages of a rolled-back decision", n)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions`); n != 0 {
			t.Errorf("%d decisions after the rollback", n)
		}

		// The message cannot be written: no decision either.
		drop = failOn(t, b, e, "outbox", "1 = 1")
		if _, err := b.s.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideConfirm, Ref: "fld-1",
			Reason: "checked by hand", Actor: "alice"}); err == nil {
			t.Fatal("Decide succeeded although its outbox row could not be written")
		}
		drop()
		wantState(t, b.get(t, op), review.NeedsReview)
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM decisions`); n != 0 {
			t.Errorf("%d decisions committed without their webhook", n)
		}

		d := b.confirm(t, c)
		ms := b.messages(t, ep)
		if len(ms) != 1 || !strings.Contains(ms[0].Payload, d.ID) {
			t.Errorf("after a committed decision: %+v", ms)
		}
	})
}

// TestWebhookBackoff: a receiver that keeps failing is retried after
// 30 s, 1 min, 2 min, … capped at 6 h (jittered into [½, 1] of that; the
// test's jitter is 0.75), until about three days after the message was
// enqueued; then the message fails. Every try is in the history.
func TestWebhookBackoff(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)
		created := b.clk.Now()

		var waits []time.Duration
		var last *store.OutboxMessage
		for try := 1; ; try++ {
			if try > 100 {
				t.Fatal("never gave up")
			}
			cs := b.claimAll(t, "w1")
			if len(cs) != 1 || cs[0].Attempts != try-1 {
				t.Fatalf("try %d: claims = %+v", try, cs)
			}
			m, err := b.s.CompleteDelivery(b.ctx, cs[0], 503, nil, 120*time.Millisecond)
			if err != nil {
				t.Fatalf("try %d: %v", try, err)
			}
			if m.Attempts != try || m.LastStatusCode != 503 || m.LastError != "HTTP 503" {
				t.Fatalf("try %d: message %+v", try, m)
			}
			last = m
			if m.Status == store.OutboxFailed {
				break
			}
			wait := m.NextAttemptAt.Sub(b.clk.Now())
			nominal := min(store.WebhookRetryBase<<(try-1), store.WebhookRetryCap)
			if want := nominal * 3 / 4; wait != want {
				t.Errorf("wait after try %d = %s, want %s", try, wait, want)
			}
			waits = append(waits, wait)
			// Not due a second early.
			b.clk.Advance(wait - time.Second)
			if cs := b.claimAll(t, "w1"); len(cs) != 0 {
				t.Fatalf("claimed %s before it was due", cs[0].ID)
			}
			b.clk.Advance(time.Second)
		}
		tries := last.Attempts
		elapsed := b.clk.Now().Sub(created)
		nextWait := min(store.WebhookRetryBase<<(tries-1), store.WebhookRetryCap) * 3 / 4
		if elapsed > store.WebhookGiveUpAfter || elapsed+nextWait <= store.WebhookGiveUpAfter {
			t.Errorf("gave up %s after enqueueing, with the next try due at %s; want the last try before 72 h and the next past it",
				elapsed, elapsed+nextWait)
		}
		t.Logf("%s: %d tries over %s, then failed; waits %v", e, tries, elapsed, waits)

		// The whole history, newest first, three to a page.
		var hist []store.Delivery
		cursor := ""
		for {
			p, err := b.s.DeliveryHistory(b.ctx, ep.ID, []string{tenantA}, cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			hist = append(hist, p.Deliveries...)
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if len(hist) != tries {
			t.Fatalf("history has %d tries, want %d", len(hist), tries)
		}
		for i, d := range hist {
			if d.N != tries-i || d.StatusCode != 503 || d.ErrorClass != "http_status" || d.Error != "HTTP 503" || d.DurationMS != 120 ||
				d.MessageStatus != store.OutboxFailed || d.EventType != "decision.confirm" {
				t.Errorf("history[%d] = %+v", i, d)
			}
		}
		if _, err := b.s.DeliveryHistory(b.ctx, ep.ID, []string{tenantB}, "", 10); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("history out of scope = %v, want ErrNotFound", err)
		}
		if cs := b.claimAll(t, "w1"); len(cs) != 0 {
			t.Errorf("a failed message was claimed again")
		}
	})
}

// TestWebhookUnrecordedTries: a message whose tries cannot be recorded
// (here the history's insert fails every time, so CompleteDelivery rolls
// back) is not sent again at every lease's end for ever: each claim that
// recorded nothing waits as a failed try would, and once the give-up
// window is over the message fails, saying why. Before, a receiver got it
// every 30 s, 72 h and on. Both engines.
func TestWebhookUnrecordedTries(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)
		failOn(t, b, e, "webhook_deliveries", "1 = 1")

		sent := 0
		for step := 0; step < 6*80; step++ { // 80 hours, a look every 10 minutes
			for _, cl := range b.claimAll(t, "w1") {
				sent++
				if _, err := b.s.CompleteDelivery(b.ctx, cl, 503, nil, time.Millisecond); err == nil {
					t.Fatal("a try was recorded through the failing insert")
				}
			}
			b.clk.Advance(10 * time.Minute)
		}
		// As often as a receiver that stays down (21–33 tries), not 400+.
		if sent < 15 || sent > 40 {
			t.Errorf("the message was sent %d times in 80 h, want about as many as failed tries (21–33)", sent)
		}
		ms := b.messages(t, ep)
		if len(ms) != 1 || ms[0].Status != store.OutboxFailed || !strings.Contains(ms[0].LastError, "no try could be recorded") {
			t.Errorf("messages = %+v, want one, failed, saying no try could be recorded", ms)
		}
		t.Logf("%s: sent %d times before giving up", e, sent)
	})
}

// TestWebhookJitter: the wait lies between half and all of the nominal.
func TestWebhookJitter(t *testing.T) {
	t.Parallel()
	for _, r := range []float64{0, 0.999999} {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			t.Parallel()
			clk := storetest.NewClock(t0)
			s := storetest.Open(t, store.SQLite, store.Options{Clock: clk.Now, Rand: fixedRand(r)})
			b := &bundle{ctx: t.Context(), s: s, clk: clk}
			b.addEndpoint(t, tenantA, "https://a.example/h")
			_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
			b.confirm(t, c)
			for try := 1; try <= 11; try++ {
				cs := b.claimAll(t, "w")
				m, err := b.s.CompleteDelivery(b.ctx, cs[0], 0, errors.New("connection refused"), 0)
				if err != nil {
					t.Fatal(err)
				}
				nominal := min(store.WebhookRetryBase<<(try-1), store.WebhookRetryCap)
				wait := m.NextAttemptAt.Sub(b.clk.Now())
				if wait < nominal/2 || wait > nominal || (r == 0 && wait != nominal/2) {
					t.Errorf("try %d: wait %s, nominal %s", try, wait, nominal)
				}
				b.clk.Advance(wait)
			}
		})
	}
}

// TestWebhookFencing: a claim whose lease expired and was taken over
// cannot complete; the current one can, once.
func TestWebhookFencing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)

		stale := b.claimAll(t, "w1")
		if len(stale) != 1 {
			t.Fatalf("claims = %d", len(stale))
		}
		if again := b.claimAll(t, "w2"); len(again) != 0 {
			t.Fatal("a leased message was claimed twice")
		}
		b.clk.Advance(31 * time.Second) // w1 paused past its lease
		fresh := b.claimAll(t, "w2")
		if len(fresh) != 1 || fresh[0].Generation <= stale[0].Generation || fresh[0].EventID != stale[0].EventID {
			t.Fatalf("takeover = %+v (stale %+v)", fresh, stale)
		}
		if _, err := b.s.CompleteDelivery(b.ctx, stale[0], 200, nil, time.Millisecond); !errors.Is(err, store.ErrDeliveryFenced) {
			t.Fatalf("stale completion = %v, want ErrDeliveryFenced", err)
		}
		if ms := b.messages(t, ep); ms[0].Status != store.OutboxPending || ms[0].Attempts != 0 {
			t.Errorf("after the stale completion: %+v", ms[0])
		}
		m, err := b.s.CompleteDelivery(b.ctx, fresh[0], 204, nil, 5*time.Millisecond)
		if err != nil || m.Status != store.OutboxDelivered || m.DeliveredAt == nil || !m.DeliveredAt.Equal(b.clk.Now()) || m.Attempts != 1 {
			t.Fatalf("current completion = %+v, %v", m, err)
		}
		for _, cl := range []store.DeliveryClaim{fresh[0], stale[0]} {
			if _, err := b.s.CompleteDelivery(b.ctx, cl, 500, nil, 0); !errors.Is(err, store.ErrDeliveryFenced) {
				t.Errorf("completing a delivered message = %v, want ErrDeliveryFenced", err)
			}
		}
		p, err := b.s.DeliveryHistory(b.ctx, ep.ID, nil, "", 10)
		if err != nil || len(p.Deliveries) != 1 || p.Deliveries[0].StatusCode != 204 || p.Deliveries[0].N != 1 {
			t.Errorf("history = %+v, %v; want the one fenced-in try", p, err)
		}
	})
}

// TestWebhookDisabledEndpoint: disabling an endpoint fails its pending
// messages, and a try in flight that fails is not rescheduled.
func TestWebhookDisabledEndpoint(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		for i := range 2 {
			_, c := b.hookCase(t, intention(fmt.Sprintf("doc-%d", i), review.RiskCompensableWrite, "plain"))
			b.confirm(t, c)
		}
		cs, err := b.s.ClaimDeliveries(b.ctx, "w1", 1, 30*time.Second)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claims = %d, %v", len(cs), err)
		}
		if err := b.s.DisableWebhookEndpoint(b.ctx, review.Operator("admin"), ep.ID); err != nil {
			t.Fatal(err)
		}
		m, err := b.s.CompleteDelivery(b.ctx, cs[0], 500, nil, 0)
		if err != nil || m.Status != store.OutboxFailed {
			t.Errorf("in-flight try on a disabled endpoint = %+v, %v; want failed", m, err)
		}
		failed, _, err := b.s.EndpointMessages(b.ctx, ep.ID, nil, store.OutboxFailed, "", 10)
		if err != nil || len(failed) != 2 {
			t.Errorf("failed messages = %d, %v; want both", len(failed), err)
		}
		_, c := b.hookCase(t, intention("doc-late", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)
		if n := len(b.messages(t, ep)); n != 2 {
			t.Errorf("%d messages, want no new one for a disabled endpoint", n)
		}
	})
}

// TestWebhookRedeliver: "given up" has a way out. An admin of the tenant
// delivers an enabled endpoint's given-up messages again, each keeping its
// webhook-id and its tries' history, with a new give-up window; a disabled
// endpoint is enabled first. Both are audited once, and doing either again
// changes nothing.
func TestWebhookRedeliver(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		adminOf := func(tenant string) review.Principal {
			return review.Principal{Name: "admin", Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{tenant}}}
		}
		ep := b.addEndpoint(t, tenantA, "https://a.example/h")
		_, c := b.hookCase(t, intention("doc-1", review.RiskCompensableWrite, "plain"))
		b.confirm(t, c)
		// The receiver stays down past the give-up window.
		for try := 1; ; try++ {
			cs := b.claimAll(t, "w1")
			if len(cs) != 1 {
				t.Fatalf("try %d: claims = %+v", try, cs)
			}
			m, err := b.s.CompleteDelivery(b.ctx, cs[0], 503, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status == store.OutboxFailed {
				break
			}
			b.clk.Advance(m.NextAttemptAt.Sub(b.clk.Now()))
		}
		given := b.messages(t, ep)[0]
		if r, err := b.s.RedeliveryOf(b.ctx, ep.ID, []string{tenantA}); r.GivenUp != 1 || r.Again != 0 || err != nil {
			t.Fatalf("redelivery = %+v, %v; want 1 given up", r, err)
		}
		if _, err := b.s.RedeliveryOf(b.ctx, ep.ID, []string{tenantB}); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("count out of scope = %v, want ErrNotFound", err)
		}
		if _, err := b.s.RedeliverWebhookMessages(b.ctx, adminOf(tenantB), ep.ID); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("another tenant's admin redelivers: %v, want ErrNotFound", err)
		}

		// A disabled endpoint gets nothing until it is enabled.
		if err := b.s.DisableWebhookEndpoint(b.ctx, adminOf(tenantA), ep.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.RedeliverWebhookMessages(b.ctx, adminOf(tenantA), ep.ID); !errors.Is(err, store.ErrEndpointDisabled) ||
			!errors.Is(err, review.ErrConflict) {
			t.Errorf("redelivering to a disabled endpoint = %v, want ErrEndpointDisabled", err)
		}
		if err := b.s.EnableWebhookEndpoint(b.ctx, adminOf(tenantB), ep.ID); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("another tenant's admin enables: %v, want ErrNotFound", err)
		}
		for range 2 {
			if err := b.s.EnableWebhookEndpoint(b.ctx, adminOf(tenantA), ep.ID); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := b.s.GetWebhookEndpoint(b.ctx, ep.ID, nil); err != nil || got.DisabledAt != nil {
			t.Fatalf("enabled endpoint = %+v, %v", got, err)
		}

		b.clk.Advance(time.Hour)
		redelivered := b.clk.Now()
		if n, err := b.s.RedeliverWebhookMessages(b.ctx, adminOf(tenantA), ep.ID); n != 1 || err != nil {
			t.Fatalf("redelivered %d, %v; want 1", n, err)
		}
		if n, err := b.s.RedeliverWebhookMessages(b.ctx, adminOf(tenantA), ep.ID); n != 0 || err != nil {
			t.Errorf("redelivering again = %d, %v; want 0, nothing changed", n, err)
		}
		m := b.messages(t, ep)[0]
		if m.Status != store.OutboxPending || !m.NextAttemptAt.Equal(redelivered) || m.EventID != given.EventID ||
			!m.CreatedAt.Equal(given.CreatedAt) || m.Attempts != given.Attempts {
			t.Errorf("redelivered message = %+v, was %+v", m, given)
		}
		if r, err := b.s.RedeliveryOf(b.ctx, ep.ID, nil); r.GivenUp != 0 || r.Again != 1 || err != nil {
			t.Errorf("redelivery after redelivering = %+v, %v; want 1 on its way again", r, err)
		}
		// A new window: the next failed try is retried, not given up.
		cs := b.claimAll(t, "w1")
		if len(cs) != 1 || !cs[0].Since().Equal(redelivered) {
			t.Fatalf("claims after redelivery = %+v", cs)
		}
		if m, err := b.s.CompleteDelivery(b.ctx, cs[0], 503, nil, 0); err != nil || m.Status != store.OutboxPending {
			t.Errorf("failed try after redelivery = %+v, %v; want retried", m, err)
		} else if wait := m.NextAttemptAt.Sub(b.clk.Now()); wait > store.WebhookRetryBase {
			// Its backoff starts again: the tries before the give-up had
			// reached hours.
			t.Errorf("first failed try after redelivery waits %v, want at most %v", wait, store.WebhookRetryBase)
		}
		b.clk.Advance(store.WebhookRetryCap)
		cs = b.claimAll(t, "w1")
		if len(cs) != 1 {
			t.Fatalf("claims = %+v", cs)
		}
		if m, err := b.s.CompleteDelivery(b.ctx, cs[0], 200, nil, 0); err != nil || m.Status != store.OutboxDelivered ||
			m.Attempts != given.Attempts+2 {
			t.Errorf("delivered = %+v, %v; want the count of tries to go on", m, err)
		}

		evs, err := b.s.AuditEvents(b.ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var acts []string
		for _, ev := range evs {
			if strings.HasPrefix(ev.Action, "webhook.") {
				acts = append(acts, ev.Action)
			}
			if ev.Action == "webhook.redelivered" && !strings.Contains(ev.Detail, `"messages":1`) {
				t.Errorf("redelivery audited as %s", ev.Detail)
			}
		}
		if want := "webhook.endpoint_added webhook.endpoint_disabled webhook.endpoint_enabled webhook.redelivered"; strings.Join(acts, " ") != want {
			t.Errorf("audit = %v, want %s", acts, want)
		}
	})
}
