package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBrowserKeepAndUndo (issue 14, part 4): a retry without key support
// made two folders at the sandbox for one operation. A reviewer resolves
// the duplicate in one decision in the console — keep A, undo B, both
// preselected from the recommendation; the integrator learns of the
// compensation operation from the decision, runs its DELETE through the
// API, and B is gone at the sandbox while A stays; the operation is
// confirmed with A and its case resolved, the compensation's own timeline
// on the page. An undo the destination refuses reopens the case with
// compensation_failed.
func TestBrowserKeepAndUndo(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		sb := sandbox.New(sandbox.Options{Seed: 1})
		files := httptest.NewServer(sb.Handler())
		t.Cleanup(func() {
			files.Close()
			sb.Close()
		})
		// No undo call configured: the integrator runs the undo.
		cfg := &review.Config{Destinations: map[string]review.Destination{"files": {Lease: 30 * time.Second}}}
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: cfg})
		ctx := context.Background()
		tok, err := st.CreateToken(ctx, review.Operator("admin@example.com"), "acme", "files-app")
		if err != nil {
			t.Fatal(err)
		}
		integrator := client.New(srv.URL, tok)
		plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

		// duplicate is the integration's bad day: one attempt, two folders
		// (plus refs the search lists that the sandbox never made), the
		// answer lost; the search's evidence opens a case.
		duplicate := func(ref string, extra ...string) (opID, caseID string, refs []string) {
			op, _, err := integrator.Register(ctx, client.Registration{SourceRef: ref, LogicalVersion: "v1", Action: "create_folder",
				Destination: "files", Risk: client.RiskCompensableWrite, Payload: json.RawMessage(`{"name":"` + ref + `"}`)})
			if err != nil {
				t.Fatal(err)
			}
			g, err := integrator.StartAttempt(ctx, op.ID, client.AttemptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				body, _ := json.Marshal(map[string]any{"name": ref, "metadata": map[string]any{"operation_id": op.ID, "logical_version": "v1"}})
				resp, err := plain.Post(files.URL+"/folders", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				var v struct {
					Ref string `json:"ref"`
				}
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
				if err != nil || v.Ref == "" {
					t.Fatalf("POST /folders: %v", err)
				}
				refs = append(refs, v.Ref)
			}
			refs = append(refs, extra...)
			if _, err := integrator.ReportOutcome(ctx, op.ID, g.N, client.Outcome{Result: client.ResultTimeout, Phase: client.PhaseAfterSend}); err != nil {
				t.Fatal(err)
			}
			ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}
			for _, r := range refs {
				ev.Candidates = append(ev.Candidates, review.Candidate{Ref: r, Kind: "folder", Version: "v1", OperationID: op.ID})
			}
			if got, err := st.AddEvidence(ctx, "acme", op.ID, ev, "reconciler"); err != nil || got.State != review.NeedsReview {
				t.Fatalf("the search's evidence: %+v, %v", got, err)
			}
			cs, err := st.CasesForOperation(ctx, op.ID)
			if err != nil || len(cs) != 1 {
				t.Fatalf("cases %+v, %v", cs, err)
			}
			return op.ID, cs[0].ID, refs
		}
		// runUndo is the integrator's side: wait for the decision, run the
		// compensation it names — DELETE of the resource it undoes.
		runUndo := func(opID, undo string) *client.Decision {
			t.Helper()
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			d, err := integrator.WaitDecision(wctx, opID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != review.DecideKeepAndUndo || d.CompensationID == "" || d.UndoRef != undo {
				t.Fatalf("the decision the integrator sees: %+v", d)
			}
			if _, err := integrator.Do(wctx, d.CompensationID, client.AttemptOptions{}, func(ctx context.Context, g *client.Grant) client.Outcome {
				req, err := client.NewAttemptRequest(ctx, g, http.MethodDelete, files.URL+"/resources/"+d.UndoRef, nil)
				if err != nil {
					return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
				}
				resp, o := client.SendAttempt(plain, req)
				if resp != nil {
					resp.Body.Close()
				}
				return o
			}); err != nil {
				t.Fatal(err)
			}
			return d
		}
		undone := func() map[string]bool {
			out := map[string]bool{}
			for _, e := range sb.Truth() {
				out[e.ResourceRef] = e.Compensated
			}
			return out
		}

		opID, caseID, refs := duplicate("doc-twice")
		browser := startChromium(t)
		rev := openBrowserTab(t, browser, srv.URL, "reviewer")
		rev.login("reviewer@example.com")
		rev.open("/cases/" + caseID)
		if got := evalJS[string](rev, `document.querySelector('form.decision input[name="action"]:checked').value`); got != review.DecideKeepAndUndo {
			rev.fatalf("the form preselects %q on a duplicate, want keep_and_undo", got)
		}
		keep := evalJS[string](rev, `document.getElementById("confirm_ref").value`)
		drop := evalJS[string](rev, `document.getElementById("undo_ref").value`)
		if keep == drop || !slices.Contains(refs, keep) || !slices.Contains(refs, drop) {
			rev.fatalf("the form preselects keep %q and undo %q, want the two folders %v apart", keep, drop, refs)
		}
		rev.do("deciding keep and undo",
			chromedp.SendKeys(chromedp.ID("compensation"), "DELETE the second folder"),
			chromedp.SendKeys(chromedp.ID("reason"), "a retry made a second folder"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision", "Keep one, undo the other by reviewer@example.com")
		rev.waitText("#decision .situation", "which the integrator runs through the API")
		rev.waitText("section.compensations", "undoes "+drop)
		rev.waitText("section.compensations details", "Operation registered")
		rev.waitText("form.decision", "Compensation done: the duplicate is undone (→ confirmed with "+keep+")")
		rev.screenshotWidths("compensating-case")

		runUndo(opID, drop)
		if got := undone(); got[keep] || !got[drop] {
			t.Errorf("the sandbox after the undo: %v; want %s undone and %s kept", got, drop, keep)
		}
		op, err := st.OperationByID(ctx, opID, nil)
		if err != nil || op.State != review.Confirmed || op.Resource == nil || op.Resource.Ref != keep {
			t.Fatalf("after the undo: %+v, %v; want confirmed with %s", op, err, keep)
		}
		rev.open("/cases/" + caseID)
		rev.waitText("section.summary", "Resolved: Undo done by system:compensation")
		rev.waitText(`section.compensations .badge[title="confirmed"]`, "Confirmed")
		rev.waitText(`section[aria-labelledby="candidates-h"]`, drop+" undone")
		// Settled, its timeline is folded away, and holds the whole run.
		rev.waitFor(`(d => !d.open && Array.from(d.querySelectorAll("ol.history > li")).some(li =>
			li.querySelector("[data-action]").dataset.action === "attempt.outcome" &&
			li.querySelector('.badge[title="in_flight"] ~ .badge[title="confirmed"]') !== null))(document.querySelector("section.compensations details.compensation-history"))`,
			"the settled compensation's timeline, folded, with its outcome")
		rev.screenshotWidths("compensated-case")
		rev.axe("case with compensations")

		// An undo the destination refuses: the case comes back.
		opID, caseID, refs = duplicate("doc-ghost", "fld-never-made")
		rev.open("/cases/" + caseID)
		rev.do("deciding keep and undo of a ref the sandbox never made",
			chromedp.SetValue(chromedp.ID("confirm_ref"), refs[0]),
			chromedp.SetValue(chromedp.ID("undo_ref"), "fld-never-made"),
			chromedp.SendKeys(chromedp.ID("compensation"), "DELETE the listed extra"),
			chromedp.SendKeys(chromedp.ID("reason"), "the search lists a third folder"),
			chromedp.Click(chromedp.CSS(`form.decision button[type="submit"]`)))
		rev.waitText("#decision", "Keep one, undo the other by reviewer@example.com")
		runUndo(opID, "fld-never-made")
		if op, err := st.OperationByID(ctx, opID, nil); err != nil || op.State != review.NeedsReview {
			t.Fatalf("after a refused undo: %+v, %v; want needs_review", op, err)
		}
		rev.open("/cases/" + caseID)
		rev.waitText(`section.summary .badge[title="compensation_failed"]`, "Undo failed")
		if evalJS[bool](rev, `document.querySelector("form.decision") === null`) {
			rev.fatalf("the reopened case offers no decision")
		}
		rev.noConsoleErrors()
	})
}
