package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// checkingConsole is a console whose checks ask the sandbox's file
// service through a real reconciler, over loopback HTTP, and the
// sandbox's address.
func checkingConsole(t *testing.T, e store.Engine) (srv *httptest.Server, st *store.Store, clk *storetest.Clock, files string) {
	t.Helper()
	return checkingConsoleWith(t, e, sandbox.Options{Seed: 1})
}

// checkingConsoleWith is checkingConsole with a sandbox made with opts.
func checkingConsoleWith(t *testing.T, e store.Engine, opts sandbox.Options) (srv *httptest.Server, st *store.Store, clk *storetest.Clock, files string) {
	t.Helper()
	sb := sandbox.New(opts)
	fs := httptest.NewServer(sb.Handler())
	t.Cleanup(func() {
		fs.Close()
		sb.Close()
	})
	cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: fs.URL, Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clk = storetest.NewClock(time.Now().UTC().Truncate(time.Second))
	srv, st = consoleServerWith(t, e, consoleSetup{clock: clk, cfg: cfg, with: []func(*handlers.Handlers){func(h *handlers.Handlers) {
		h.Checker = reconcile.New(h.Store, cfg, "test", nil)
	}}})
	return srv, st, clk, fs.URL
}

// folderFor makes, at the sandbox, the folder op's upload would have
// made, and returns its ref.
func folderFor(t *testing.T, files string, op *review.Operation) string {
	t.Helper()
	return sandboxMade(t, files+"/folders", map[string]any{"name": op.SourceRef,
		"metadata": map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}})
}

// sandboxMade posts body to the sandbox at url and returns the ref of
// what it made.
func sandboxMade(t *testing.T, url string, body map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var made struct {
		Ref string `json:"ref"`
	}
	err = json.NewDecoder(resp.Body).Decode(&made)
	resp.Body.Close()
	if err != nil || made.Ref == "" {
		t.Fatalf("POST %s: %d, %v", url, resp.StatusCode, err)
	}
	return made.Ref
}

// jobCase is the case of a conversion the sandbox accepted as a job,
// whose deadline passed while it ran: the case waits on the job
// (returned with the operation).
func jobCase(t *testing.T, st *store.Store, clk *storetest.Clock, files, source string) (*review.Operation, string, store.Case) {
	t.Helper()
	ctx := context.Background()
	r := review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "v1", Action: "convert",
		Destination: sandbox.DestinationName, Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"}
	deadline := clk.Now().Add(time.Hour)
	r.Deadline = &deadline
	op, _, err := st.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	job := sandboxMade(t, files+"/jobs", map[string]any{"input_ref": "file-in", "format": "pdf",
		"metadata": map[string]any{"operation_id": op.ID, "logical_version": "v1"}})
	accepted := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202, Job: &review.JobRef{Ref: job, Status: "queued"}}
	if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, accepted, "test"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	if _, err := st.ExpireDeadlines(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := st.CasesForOperation(ctx, op.ID)
	if err != nil || len(cs) != 1 || cs[0].RecommendedAction != review.RecommendReconcileAgain {
		t.Fatalf("cases %+v, %v; want one waiting on the job", cs, err)
	}
	return op, job, cs[0]
}

// answers is the check panel's list of what the destination answered.
func answers(t *testing.T, page string) string {
	t.Helper()
	i := strings.Index(page, `<ul class="answers">`)
	if i < 0 {
		t.Fatal("the page lists no answers of the destination")
	}
	j := strings.Index(page[i:], "</ul>")
	if j < 0 {
		t.Fatal("the list of the destination's answers does not end")
	}
	return page[i : i+j]
}

// scanUpload is a timed-out upload of source to the sandbox.
func scanUpload(t *testing.T, st *store.Store, source string) *review.Operation {
	t.Helper()
	return reported(t, st, review.Registration{Tenant: "acme", SourceRef: source, LogicalVersion: "v1", Action: "create_folder",
		Destination: sandbox.DestinationName, Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"},
		review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend})
}

// caseToCheck is a case the reconciler left to a person with nothing
// settled: a timed-out upload to the sandbox whose search named only
// another operation's folder. Since then the upload's folder has shown
// up at the sandbox (a search that lagged). The console asks through a
// real reconciler, over loopback HTTP.
func caseToCheck(t *testing.T, e store.Engine) (srv *httptest.Server, st *store.Store, clk *storetest.Clock, op *review.Operation, caseID, folder string) {
	t.Helper()
	srv, st, clk, files := checkingConsole(t, e)
	ctx := context.Background()
	op = scanUpload(t, st, "scan-9")
	foreign := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
		{Ref: "fld-other", Kind: "folder", Version: "v1", OperationID: "op_other"}}}
	if got, err := st.AddEvidence(ctx, "acme", op.ID, foreign, "system:reconciler"); err != nil || got.State != review.NeedsReview {
		t.Fatalf("the search naming another operation's folder: %+v, %v", got, err)
	}
	folder = folderFor(t, files, op)
	cs, err := st.CasesForOperation(ctx, op.ID)
	if err != nil || len(cs) != 1 || cs[0].RecommendedAction != review.RecommendReconcileAgain {
		t.Fatalf("cases %+v, %v; want one recommending a look at the destination", cs, err)
	}
	return srv, st, clk, op, cs[0].ID, folder
}

// TestConsoleCheckTakesTheJobsEnd: a conversion the sandbox accepted as a
// job, whose deadline passed while it ran: its case waits on the job. The
// job ends at the sandbox; a check from the console asks about it too, as
// a poll would, and takes its end: the case recommends confirming the
// job's output, and the check panel says what the destination answered of
// the job beside what its looks answered, in English and Italian.
func TestConsoleCheckTakesTheJobsEnd(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, clk, files := checkingConsoleWith(t, e, sandbox.Options{Seed: 1, JobDuration: 20 * time.Millisecond})
		_, job, c := jobCase(t, st, clk, files, "scan-job")
		// The job ends at the sandbox (its output made).
		var output string
		for range 200 {
			resp, err := http.Get(files + "/jobs/" + job)
			if err != nil {
				t.Fatal(err)
			}
			var j struct {
				Status    string `json:"status"`
				OutputRef string `json:"output_ref"`
			}
			err = json.NewDecoder(resp.Body).Decode(&j)
			resp.Body.Close()
			if err == nil && j.Status == string(review.JobSucceeded) && j.OutputRef != "" {
				output = j.OutputRef
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if output == "" {
			t.Fatal("the sandbox's job did not end")
		}
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		if _, page := rev.get("/cases/" + c.ID); !strings.Contains(page, "asks about the job the case waits on") {
			t.Errorf("the check button does not say it asks about the job")
		}
		clk.Advance(review.CheckInterval)
		if code, _, _ := rev.post("/cases/"+c.ID+"/check", url.Values{"csrf": {rev.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("check: %d, want 303", code)
		}
		after, err := st.GetCase(ctx, c.ID, nil)
		if err != nil || after.RecommendedAction != review.RecommendConfirm || after.RecommendedRef != output {
			t.Fatalf("the case after the check: %+v, %v; want confirm %s", after, err, output)
		}
		// The job's success is evidence the check recorded, listed once
		// among the answers: not again on a line of its own.
		_, page := rev.get("/cases/" + c.ID)
		if list := answers(t, page); strings.Count(list, "job "+job+" succeeded") != 1 || strings.Contains(list, "Job <code>") {
			t.Errorf("the check panel's answers say %s succeeded %d times and on a line of its own %v; want once, as evidence: %s",
				job, strings.Count(list, "job "+job+" succeeded"), strings.Contains(list, "Job <code>"), list)
		}
		if list := answers(t, casePageIn(t, st, rev, "reviewer@example.com", "it", c.ID)); strings.Count(list, "il job "+job+" è riuscito") != 1 || strings.Contains(list, "<code>"+job+"</code>") {
			t.Errorf("the Italian check panel's answers do not say once, as evidence, that %s succeeded: %s", job, list)
		}
	})
}

// TestConsoleCheckSaysTheJobRuns: a check of a case waiting on a job the
// destination has not finished (still queued) asks about the job, and the panel says
// what the destination answered of it beside what its looks answered, in
// English and Italian: a job not ended is no evidence, so nothing else
// says it. The case still waits on the job.
func TestConsoleCheckSaysTheJobRuns(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, clk, files := checkingConsoleWith(t, e, sandbox.Options{Seed: 1, JobDuration: time.Hour})
		_, job, c := jobCase(t, st, clk, files, "scan-running")
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		clk.Advance(review.CheckInterval)
		if code, _, _ := rev.post("/cases/"+c.ID+"/check", url.Values{"csrf": {rev.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("check: %d, want 303", code)
		}
		after, err := st.GetCase(ctx, c.ID, nil)
		if err != nil || after.RecommendedAction != review.RecommendReconcileAgain || after.Rationale != c.Rationale {
			t.Fatalf("the case after the check: %+v, %v; want it still waiting on %s", after, err, job)
		}
		_, page := rev.get("/cases/" + c.ID)
		if list := answers(t, page); !strings.Contains(list, "Job <code>"+job+"</code>: <span title=\"queued\">Queued</span>") {
			t.Errorf("the check panel does not say the destination has %s queued: %s", job, list)
		}
		if list := answers(t, casePageIn(t, st, rev, "reviewer@example.com", "it", c.ID)); !strings.Contains(list, "Job <code>"+job+"</code>: <span title=\"queued\">In coda</span>") {
			t.Errorf("the Italian check panel does not say, in Italian, that the destination has %s queued: %s", job, list)
		}
	})
}

// TestConsoleShowsAnAnsweredDisagreement: an upload's search found
// nothing and a retry was due when the upload's late success named its
// folder: the sources disagree, and the case asks for a look. A check
// from the console finds the folder: the case recommends confirming it
// and no longer says the sources disagree — in the queue ("None now")
// nor on its page, which shows the reason it was opened for struck
// through, as answered, in English and Italian. Before, the badge stayed
// beside the recommendation to confirm.
func TestConsoleShowsAnAnsweredDisagreement(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, clk, files := checkingConsole(t, e)
		op := scanUpload(t, st, "scan-late")
		if got, err := st.AddEvidence(ctx, "acme", op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "system:reconciler"); err != nil || got.State != review.RetryWait {
			t.Fatalf("the empty search: %+v, %v; want a retry due", got, err)
		}
		folder := folderFor(t, files, op)
		late := review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, Resource: &review.ResourceRef{Ref: folder, Kind: "folder", Version: "v1"}}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, 1, late, "test"); err == nil {
			t.Fatal("the late report was taken as on time") // it is kept as evidence, and refused
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 || !slices.Equal(cs[0].Reasons, []review.Reason{review.ReasonSourcesDisagree}) {
			t.Fatalf("cases %+v, %v; want one for sources_disagree", cs, err)
		}
		caseID := cs[0].ID
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		clk.Advance(review.CheckInterval)
		if code, _, _ := rev.post("/cases/"+caseID+"/check", url.Values{"csrf": {rev.csrf}}); code != http.StatusSeeOther {
			t.Fatalf("check: %d, want 303", code)
		}
		c, err := st.GetCase(ctx, caseID, nil)
		if err != nil || c.RecommendedAction != review.RecommendConfirm || c.RecommendedRef != folder || len(c.Reasons) != 0 {
			t.Fatalf("the case after the check: %+v, %v; want confirm %s, no reasons left", c, err, folder)
		}
		_, page := rev.get("/cases/" + caseID)
		if i := strings.Index(page, "Earlier, since answered by the evidence:"); i < 0 || !strings.Contains(page[i:], "<s>Sources disagree</s>") {
			t.Errorf("the case page does not show sources_disagree as answered")
		}
		if strings.Contains(page, `badge tone-attention" title="sources_disagree"`) {
			t.Errorf("the case page still shows sources_disagree as a reason")
		}
		if _, q := rev.get("/"); !strings.Contains(q, caseID) || !strings.Contains(q, "None now") {
			t.Errorf("the queue does not list the case with no reasons now")
		}
		if _, q := rev.get("/?reason=sources_disagree"); strings.Contains(q, caseID) {
			t.Errorf("the queue filtered by sources_disagree still lists the case")
		}
		if it := casePageIn(t, st, rev, "reviewer@example.com", "it", caseID); !strings.Contains(it, "In precedenza, poi chiarito dalle prove:") || !strings.Contains(it, "Nessuno al momento") {
			t.Errorf("the Italian case page does not show the answered reason")
		}
	})
}

// TestConsoleChecksTheDestination: a case that recommends a look at the
// destination offers one. Pressed, the destination's probes are sent
// (the sandbox's search, over loopback), what it answers is recorded, and
// the case now recommends confirming the folder it found — preselected
// in the decision form; the operation stays in review until a person
// decides. Pressed again at once, it is refused with a reason and asks
// nothing. A manager, who does not work cases, is offered none.
func TestConsoleChecksTheDestination(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, clk, op, caseID, folder := caseToCheck(t, e)
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		checkForm := `action="/cases/` + caseID + `/check"`

		// Just after the reconciler's search: refused, nothing sent.
		if _, page := rev.get("/cases/" + caseID); !strings.Contains(page, checkForm) {
			t.Fatalf("the case page offers no check:\n%s", page)
		}
		code, page, _ := rev.post("/cases/"+caseID+"/check", url.Values{"csrf": {rev.csrf}})
		if code != http.StatusConflict || !strings.Contains(page, "less than 10 seconds ago") {
			t.Fatalf("a check just after the reconciler's search: %d, want 409 saying why", code)
		}

		clk.Advance(review.CheckInterval)
		before := len(mustOp(t, st, op).Evidence)
		if code, _, hdr := rev.post("/cases/"+caseID+"/check", url.Values{"csrf": {rev.csrf}}); code != http.StatusSeeOther || hdr.Get("Location") != "/cases/"+caseID {
			t.Fatalf("check: %d to %q, want 303 to the case", code, hdr.Get("Location"))
		}
		got := mustOp(t, st, op)
		if got.State != review.NeedsReview || len(got.Evidence) != before+1 {
			t.Fatalf("after the check: %s with %d evidence rows, want needs_review with %d", got.State, len(got.Evidence), before+1)
		}
		if ev := got.Evidence[len(got.Evidence)-1]; ev.Source != review.SourceMetadataSearch || len(ev.Candidates) != 1 || ev.Candidates[0].Ref != folder {
			t.Fatalf("the check's evidence: %+v, want the search finding %s", ev, folder)
		}
		c, err := st.GetCase(ctx, caseID, nil)
		if err != nil || c.RecommendedAction != review.RecommendConfirm || c.RecommendedRef != folder {
			t.Fatalf("the case after the check: %+v, %v; want it to recommend confirming %s", c, err, folder)
		}
		_, page = rev.get("/cases/" + caseID)
		for _, want := range []string{`value="confirm" checked`, `<option value="` + folder + `" selected>`} {
			if !strings.Contains(page, want) {
				t.Errorf("the decision form after the check lacks %s", want)
			}
		}
		// What it answered is said beside the button that asked.
		if i := strings.Index(page, checkForm); i < 0 || !strings.Contains(page[i:], "It answered:") ||
			!strings.Contains(page[i:], `Confirms the effect</span> — search found `+folder) {
			t.Errorf("the check panel does not say what the destination answered")
		}
		code, page, _ = rev.post("/cases/"+caseID+"/check", url.Values{"csrf": {rev.csrf}})
		if code != http.StatusConflict || !strings.Contains(page, "less than 10 seconds ago") {
			t.Errorf("a second check at once: %d, want 409 saying why", code)
		}
		if n := len(mustOp(t, st, op).Evidence); n != before+1 {
			t.Errorf("the refused check recorded evidence: %d rows", n)
		}
		if it := casePageIn(t, st, rev, "reviewer@example.com", "it", caseID); !strings.Contains(it, "Interroga ora la destinazione") || !strings.Contains(it, "Ha risposto:") {
			t.Errorf("the Italian case page has no check button, or does not say what the destination answered")
		}

		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		if _, page := mgr.get("/cases/" + caseID); strings.Contains(page, checkForm) {
			t.Errorf("a manager is offered a check")
		}
	})
}

func mustOp(t *testing.T, st *store.Store, op *review.Operation) *review.Operation {
	t.Helper()
	got, err := st.GetOperation(context.Background(), op.Tenant, op.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestBrowserChecksTheDestination: in a real browser, the reviewer
// presses the check on a case that recommends one; the page is swapped in
// place with the search's answer among the evidence and the decision
// form preselecting the folder it found, which the reviewer confirms.
func TestBrowserChecksTheDestination(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st, clk, op, caseID, folder := caseToCheck(t, e)
		clk.Advance(review.CheckInterval)
		rev := openBrowserTab(t, startChromium(t), srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		rev.open("/cases/" + caseID)
		if evalJS[bool](rev, `document.querySelector('form.decision input[name="action"]:checked') !== null`) {
			rev.fatalf("the form preselects a decision before anything was found")
		}
		rev.screenshotWidths("check-before")
		rev.do("checking the destination", chromedp.Click(chromedp.CSS(`form.check button[type="submit"]`)))
		rev.waitFor(`document.getElementById("confirm_ref") && document.getElementById("confirm_ref").value === `+jsString(folder),
			"the folder the search found, preselected")
		if !evalJS[bool](rev, `document.querySelector('form.decision input[value="confirm"]').checked`) {
			rev.fatalf("after the check the form does not preselect confirm")
		}
		rev.waitText("#attempts-h + *, main", folder)
		rev.noConsoleErrors()
		rev.screenshotWidths("check-after")
		rev.axe("case after a check")
		rev.do("confirming with the form's defaults",
			chromedp.SendKeys(chromedp.ID("reason"), "the search found it"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision .decided", "by reviewer@example.com")
		if got := mustOp(t, st, op); got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != folder {
			rev.fatalf("after the confirm: %+v; want confirmed with %s", got, folder)
		}
	})
}
