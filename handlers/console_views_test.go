package handlers_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

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
		if !strings.Contains(body, `<span class="rate-destination">files</span>`) || !strings.Contains(body, `<span class="rate-share">33,3% su 3</span>`) {
			t.Errorf("the ambiguity of files is not written as text beside its bar")
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

// TestLapsedApprovalInItalian: an approval given after its request lapsed
// (before the deadline sweeper ended the operation) is refused, in the
// reader's language.
func TestLapsedApprovalInItalian(t *testing.T) {
	t.Parallel()
	clk := storetest.NewClock(time.Now().UTC())
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"mail": {Lease: 30 * time.Second, Actions: map[string]review.ActionConfig{"send_email": {RequiresApproval: true, ApprovalTimeout: time.Hour}}},
	}}
	srv, st := consoleServerWith(t, store.SQLite, consoleSetup{cfg: cfg, clock: clk})
	op, _, err := st.Register(context.Background(), review.Registration{Tenant: "acme", SourceRef: "mail-1", LogicalVersion: "1", Action: "send_email",
		Destination: "mail", Risk: review.RiskCompensableWrite, Payload: []byte(`{"to":"legal@example.com"}`), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := st.CasesForOperation(context.Background(), op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases %+v, %v", cs, err)
	}
	clk.Advance(2 * time.Hour)
	rev := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
	rev.login("reviewer@example.com")
	code, body, _ := rev.decide(cs[0].ID, url.Values{"action": {review.DecideApprove}, "reason": {"the mail reads well"}})
	if code < 400 || !strings.Contains(body, "troppo tardi per approvare") {
		t.Errorf("approving a lapsed request: %d; want it refused in Italian", code)
	}
	if got, err := st.OperationByID(context.Background(), op.ID, nil); err != nil || got.State != review.AwaitingApproval {
		t.Errorf("after the refused approval: %v, %v; want still awaiting approval, for the sweeper to end", got, err)
	}
}

// TestAuditVerifyKeepsTheFilter: verifying the chain shows the events of
// the filter the audit page had, with its export and paging, and refuses
// a bad filter as the audit page does.
func TestAuditVerifyKeepsTheFilter(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	needsReview(t, st, "doc-a")
	mgr := newBrowser(t, srv.URL)
	mgr.login("manager@example.com")
	if _, page := mgr.get("/audit?actor=test"); !strings.Contains(page, `href="/audit/verify?actor=test"`) {
		t.Error("the audit page's verify link drops its filter")
	}
	code, page := mgr.get("/audit/verify?actor=test")
	if code != 200 || !strings.Contains(page, `href="/audit.csv?actor=test"`) {
		t.Errorf("/audit/verify?actor=test: %d; its export link drops the filter", code)
	}
	if code, _ := mgr.get("/audit/verify?from=bad"); code != 400 {
		t.Errorf("/audit/verify?from=bad: %d, want 400 as /audit answers", code)
	}
}

// TestCandidateLinksOnlyWhatOpens: a candidate naming another operation
// links to it only when the reader may open it; one Limbo never
// registered, or another tenant's, is shown without a link (a 404).
func TestCandidateLinksOnlyWhatOpens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, st := consoleServer(t, store.SQLite)
	reg := func(tenant, ref string) *review.Operation {
		op, _, err := st.Register(ctx, review.Registration{Tenant: tenant, SourceRef: ref, LogicalVersion: "1", Action: "render",
			Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	op, mine, theirs := reg("acme", "doc-1"), reg("acme", "doc-2"), reg("globex", "doc-3")
	if _, err := st.AddEvidence(ctx, "acme", op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
		{Ref: "f-1", OperationID: mine.ID}, {Ref: "f-2", OperationID: theirs.ID}, {Ref: "f-3", OperationID: "op_06H0NOWHERE000000000000000"}}}, "integrator"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "acme@example.com", Password: "correct horse battery",
		Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"acme"}}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, srv.URL)
	b.login("acme@example.com")
	code, page := b.get("/operations/" + op.ID)
	if code != 200 {
		t.Fatalf("operation page: %d", code)
	}
	if !strings.Contains(page, `href="/operations/`+mine.ID+`"`) {
		t.Error("a candidate naming an operation of the reader's tenant is not linked")
	}
	for _, id := range []string{theirs.ID, "op_06H0NOWHERE000000000000000"} {
		if strings.Contains(page, `href="/operations/`+id+`"`) || !strings.Contains(page, "<code>"+id+"</code>") {
			t.Errorf("candidate operation %s: linked, or not shown; want it shown without a link", id)
		}
	}
}

// TestAdminSeesAGrantThatCannotBeRead: a user whose stored tenants no
// longer read as a scope (stored before tenants were checked as names)
// grants nothing; the users page says so, in Italian too.
func TestAdminSeesAGrantThatCannotBeRead(t *testing.T) {
	t.Parallel()
	srv, st := consoleServer(t, store.SQLite)
	if _, err := st.DB().Exec(`UPDATE users SET tenants = 'acme,*' WHERE email = 'support@example.com'`); err != nil {
		t.Fatal(err)
	}
	adm := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
	adm.login("admin@example.com")
	if code, page := adm.get("/admin/users"); code != 200 || strings.Count(page, "Questa autorizzazione non è leggibile") != 1 {
		t.Errorf("/admin/users: %d; want the one unreadable grant marked", code)
	}
}

// TestAuditVerifyScoped: a manager of some tenants verifies the whole
// chain, but is told only about their tenants' events: their count, and
// where the chain breaks only when the break is one of theirs. Another
// tenant's broken event is "outside your tenants", without its seq or
// reason; a reader of every tenant sees both.
func TestAuditVerifyScoped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "acme-mgr@example.com", Password: "correct horse battery",
			Role: review.RoleManager, Scope: review.Scope{Tenants: []string{"acme"}}}); err != nil {
			t.Fatal(err)
		}
		needsReviewOn(t, st, "acme", "files", "doc-a")
		needsReviewOn(t, st, "beta", "files", "doc-b")
		storetest.Sealed(t, st)
		seqOf := func(tenant string) (first int64, n int) {
			evs, err := st.AuditEvents(ctx, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Tenant == tenant {
					if first == 0 {
						first = ev.Seq
					}
					n++
				}
			}
			return first, n
		}
		acmeSeq, acmeN := seqOf("acme")
		betaSeq, _ := seqOf("beta")
		scoped := newBrowser(t, srv.URL)
		scoped.login("acme-mgr@example.com")
		all := newBrowser(t, srv.URL)
		all.login("manager@example.com")
		// The events about console users of acme (or of every tenant) are
		// acme's readers' too (store.aboutTenants): acme-mgr's own
		// user.added and both sign-ins among them.
		var about int
		if err := st.DB().Get(&about, `SELECT COUNT(DISTINCT seq) FROM audit_event_tenants WHERE tenant IN ('acme', '*')`); err != nil {
			t.Fatal(err)
		}
		if about == 0 {
			t.Fatal("no event about acme's users: acme-mgr's user.added is one")
		}
		acmeN += about

		_, body := scoped.get("/audit/verify")
		if want := fmt.Sprintf("every tenant&#39;s events were checked; yours are %d,", acmeN); !strings.Contains(body, want) {
			t.Errorf("scoped verify of a sound chain: want %q", want)
		}
		edit := func(seq int64) {
			if _, err := st.DB().Exec(st.DB().Rebind(`UPDATE audit_events SET detail = '{"edited":true}' WHERE seq = ?`), seq); err != nil {
				t.Fatal(err)
			}
		}
		edit(betaSeq)
		_, body = scoped.get("/audit/verify")
		if !strings.Contains(body, "outside your tenants") || strings.Contains(body, fmt.Sprintf("seq %d", betaSeq)) {
			t.Errorf("scoped verify, another tenant's event edited: want \"outside your tenants\" and no seq")
		}
		if _, body = all.get("/audit/verify"); !strings.Contains(body, fmt.Sprintf("The chain is broken at seq %d:", betaSeq)) {
			t.Errorf("all-tenants verify: want the break at seq %d", betaSeq)
		}
		edit(acmeSeq)
		if _, body = scoped.get("/audit/verify"); !strings.Contains(body, fmt.Sprintf("The chain is broken at seq %d:", acmeSeq)) {
			t.Errorf("scoped verify, own tenant's event edited: want the break at seq %d", acmeSeq)
		}
	})
}
