package handlers_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleCaseBesideALiveJob: the deadline passed while the operation
// followed a job the destination had accepted, still queued. Its case
// page says the job is not known to have ended and what a retry or a fail would risk,
// warns on the retry's option, and preselects nothing (the case
// recommends waiting on the job), in English and Italian. Once the job is
// reported succeeded, the form preselects confirming its output, and that
// confirm settles the operation with it.
func TestConsoleCaseBesideALiveJob(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, op, caseID := caseBesideALiveJob(t, e)
		rev := newBrowser(t, srv.URL)
		rev.login("reviewer@example.com")
		for _, lang := range []struct{ code, rationale, situation, reported, retry string }{
			{"en", "job job-1 is not known to have ended and may yet make the effect",
				"Job job-1, which the destination accepted for this operation, is not known to have ended.</strong>", "Last reported: Queued,",
				"Approve a retry (job job-1 is not known to have ended: a retry now could make a second effect)"},
			{"it", "il job job-1 non risulta terminato e può ancora produrre l'effetto",
				"Il job job-1, accettato dalla destinazione per questa operazione, non risulta terminato.</strong>", "Ultimo stato riportato: In coda,",
				"Approva un nuovo tentativo (il job job-1 non risulta terminato: un nuovo tentativo ora potrebbe produrre un secondo effetto)"},
		} {
			body := casePageIn(t, st, rev, "reviewer@example.com", lang.code, caseID)
			for _, want := range []string{lang.rationale, lang.situation, lang.reported, lang.retry} {
				if !strings.Contains(body, want) {
					t.Errorf("%s: the case page does not say %q", lang.code, want)
				}
			}
			if preselected.MatchString(body) {
				t.Errorf("%s: the form preselects a decision while the job may still run", lang.code)
			}
		}

		if _, err := st.PutJob(ctx, "acme", op.ID, review.Job{Ref: "job-1", Status: review.JobSucceeded, OutputRef: "scan-7.pdf"}, "integrator"); err != nil {
			t.Fatal(err)
		}
		body := casePageIn(t, st, rev, "reviewer@example.com", "en", caseID)
		if decision := body[strings.Index(body, `id="decision-h"`):strings.Index(body, `id="history-h"`)]; strings.Contains(decision, "known to have ended") {
			t.Error("the case page still says the job is not known to have ended once it succeeded")
		}
		if !strings.Contains(body, `value="confirm" checked`) || !strings.Contains(body, `value="scan-7.pdf" selected`) {
			t.Error("the form does not preselect confirming the job's output, as recommended")
		}
		code, page, _ := rev.decide(caseID, url.Values{"action": {review.DecideConfirm}, "confirm_ref": {"scan-7.pdf"},
			"reason": {"the PDF is at the destination"}})
		if code >= 400 {
			t.Fatalf("confirm: %d %s", code, page)
		}
		got, err := st.GetOperation(ctx, "acme", op.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "scan-7.pdf" {
			t.Errorf("after the confirm: %s with %+v; want confirmed with scan-7.pdf", got.State, got.Resource)
		}
	})
}

// TestBrowserCaseBesideALiveJob: the same case in a real browser. The
// warning shows above the form, nothing is preselected, the page passes
// axe at a phone's width and a desktop's; once the job is reported
// succeeded, the reviewer confirms its output with the form's defaults.
func TestBrowserCaseBesideALiveJob(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st, op, caseID := caseBesideALiveJob(t, e)
		rev := openBrowserTab(t, startChromium(t), srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		rev.open("/cases/" + caseID)
		rev.waitText("#decision .situation", "Job job-1, which the destination accepted for this operation, is not known to have ended.")
		if evalJS[bool](rev, `document.querySelector('form.decision input[name="action"]:checked') !== null`) {
			rev.fatalf("the form preselects a decision while the job may still run")
		}
		retry := evalJS[string](rev, `document.querySelector('form.decision input[value="approve_retry"]').parentElement.textContent`)
		if !strings.Contains(retry, "a retry now could make a second effect") {
			rev.fatalf("the retry's option says %q, want the warning", retry)
		}
		rev.screenshotWidths("live-job")
		rev.axe("case beside a live job")

		if _, err := st.PutJob(ctx, "acme", op.ID, review.Job{Ref: "job-1", Status: review.JobSucceeded, OutputRef: "scan-7.pdf"}, "integrator"); err != nil {
			t.Fatal(err)
		}
		rev.open("/cases/" + caseID)
		if got := evalJS[string](rev, `document.getElementById("confirm_ref").value`); got != "scan-7.pdf" {
			rev.fatalf("the resource preselected is %q, want the job's output", got)
		}
		rev.do("confirming the job's output with the form's defaults",
			chromedp.SendKeys(chromedp.ID("reason"), "the PDF is at the destination"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision .decided", "by reviewer@example.com")
		rev.noConsoleErrors()
		if got, err := st.GetOperation(ctx, "acme", op.ID, ""); err != nil || got.State != review.Confirmed || got.Resource == nil || got.Resource.Ref != "scan-7.pdf" {
			rev.fatalf("after the confirm: %v, %+v; want confirmed with scan-7.pdf", err, got)
		}
	})
}

// preselected finds a decision the form checks by default.
var preselected = regexp.MustCompile(`name="action" value="[a-z_]+" checked`)

// caseBesideALiveJob makes an operation whose deadline passed while it
// followed job-1, still queued at the destination: in review, with its
// case.
func caseBesideALiveJob(t *testing.T, e store.Engine) (*httptest.Server, *store.Store, *review.Operation, string) {
	t.Helper()
	clk := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
	srv, st := consoleServerWith(t, e, consoleSetup{clock: clk})
	deadline := clk.Now().Add(time.Hour)
	op := reported(t, st, review.Registration{Tenant: "acme", SourceRef: "scan-7", LogicalVersion: "1", Action: "transform",
		Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Deadline: &deadline, Actor: "test"},
		review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202, Job: &review.JobRef{Ref: "job-1", Status: "queued"}})
	clk.Advance(2 * time.Hour)
	if _, err := st.ExpireDeadlines(context.Background()); err != nil {
		t.Fatal(err)
	}
	cs, err := st.CasesForOperation(context.Background(), op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases %+v, %v; want one", cs, err)
	}
	return srv, st, op, cs[0].ID
}
