package simulate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/contract"
	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// document is one contract of the seed-2 flow and the operations its
// intentions are (the same on every registration: the keys derive from
// them).
type document struct {
	source, file string
	folder       *client.Operation
	up7, tr7     *client.Operation
	link, up8    *client.Operation
}

// TestFileFlowFaultRun is the seed-2 flow under faults, on both engines:
// for each contract, create its folder, upload version 7 of its file, transform it to PDF and
// publish a share link to the PDF — the link registered with the
// transformation, waiting for it in the ledger (after: confirmed, version
// 7) — while version 8 is uploaded as the v7 transformation is in flight.
// The sandbox loses 30 % of its answers after the effect and answers 500
// after it for 5 % more; integrations give up at random points (killed
// mid-attempt) and start again from what Limbo holds; between rounds
// leases run out, the reconciler settles, dependencies are swept. Against
// the sandbox's ground truth: no operation has two effects unless it is in
// an open case; no link is ever published to the PDF of a transformation
// that ran on another version; the v8 upload has its own key.
func TestFileFlowFaultRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run")
	}
	for _, imported := range []bool{false, true} {
		name := "hand-written"
		if imported {
			name = "imported"
		}
		t.Run(name, func(t *testing.T) { fileFlowFaultRun(t, imported) })
	}
}

// fileFlowFaultRun is the fault run with the sandbox's hand-written
// configuration, or the one `limbo destination import` writes from its
// OpenAPI document (with what a document cannot say set alike).
func fileFlowFaultRun(t *testing.T, imported bool) {
	const docs, rounds = 8, 25
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed^0xf11e))
		var rngMu sync.Mutex
		draw := func() float64 { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() }

		sb := sandbox.New(sandbox.Options{Seed: int64(seed >> 1), Loss: 0.30, ErrorAfterCommit: 0.05,
			SearchLag: 200 * time.Millisecond, JobDuration: 100 * time.Millisecond})
		sbSrv := httptest.NewServer(sb.Handler())
		t.Cleanup(func() { sbSrv.Close(); sb.Close() })
		cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: sbSrv.URL, HonoursKeys: true, SearchLag: 200 * time.Millisecond,
			Lease: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if imported {
			cfg = importedConfig(t, sbSrv.URL, cfg.Destinations[sandbox.DestinationName])
		}
		clk := &storetest.ShiftClock{}
		st := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now})
		api := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
		t.Cleanup(api.Close)
		tok, err := st.CreateToken(context.Background(), review.Operator("test"), "acme", "files")
		if err != nil {
			t.Fatal(err)
		}
		c := client.New(api.URL, tok)
		dest := simulate.DestClient(time.Second)
		rec := reconcile.New(st, cfg, "reconciler", slog.New(slog.NewTextHandler(io.Discard, nil)))
		ctx := context.Background()

		// Each contract's file exists at version 6 before the run.
		all := make([]*document, docs)
		for i := range all {
			d := &document{source: fmt.Sprintf("contract-%d", 583+i)}
			d.file = createFile(t, sbSrv.URL, d.source)
			all[i] = d
		}
		upload := func(d *document) simulate.Flavour {
			return simulate.Flavour{Action: "upload_version", Risk: client.RiskCompensableWrite, Method: http.MethodPost,
				Path: "/files/" + url.PathEscape(d.file) + "/versions",
				Body: func(s, v string) map[string]any { return map[string]any{"content": s + " version " + v} }}
		}
		folder := simulate.Flavour{Action: "create_folder", Risk: client.RiskIdempotentWrite, Method: http.MethodPost, Path: "/folders",
			Body: func(s, v string) map[string]any { return map[string]any{"name": s + " PDFs"} }}
		transform := simulate.Flavour{Action: "transform_pdf", Risk: client.RiskCompensableWrite, Method: http.MethodPost, Path: "/jobs", Job: true}

		// drive carries op as far as it goes before rctx ends (the
		// integration giving up or killed mid-attempt); it returns the
		// operation as last seen.
		drive := func(rctx context.Context, fl simulate.Flavour, op *client.Operation, body map[string]any) *client.Operation {
			for rctx.Err() == nil {
				switch op.State {
				case client.Pending, client.RetryWait:
					res, err := c.Do(rctx, op.ID, client.AttemptOptions{}, simulate.Sender(dest, sbSrv.URL, fl, op, body))
					if err != nil {
						return op
					}
					op = res.Operation
					continue
				case client.Accepted:
					next, err := simulate.FollowJob(rctx, c, dest, sbSrv.URL, op)
					if err == nil && next.State != client.Accepted {
						op = next
						continue
					}
				default:
					if op.State != client.InFlight && op.State != client.Ambiguous {
						return op
					}
				}
				simulate.Pause(rctx, 100*time.Millisecond)
				if next, err := c.Get(rctx, op.ID); err == nil {
					op = next
				}
			}
			return op
		}
		register := func(fl simulate.Flavour, d *document, version string, body map[string]any, after *client.After) *client.Operation {
			r := fl.Registration(d.source, version, body)
			r.After = after
			op, _, err := c.Register(ctx, r)
			if err != nil {
				t.Fatalf("register %s %s v%s: %v", fl.Action, d.source, version, err)
			}
			return op
		}
		// giveUp is how long an integration carries an operation this
		// round before it is killed or gives up: often mid-attempt.
		giveUp := func() time.Duration { return time.Duration(100+int(draw()*2500)) * time.Millisecond }

		reviewed := 0
		for round := range rounds {
			var wg sync.WaitGroup
			for i, d := range all {
				wg.Go(func() {
					// The contract's folder for its outputs, first.
					folderBody := folder.Body(d.source, "7")
					d.folder = register(folder, d, "7", folderBody, nil)
					fctx, cancel := context.WithTimeout(ctx, giveUp())
					defer cancel()
					if d.folder = drive(fctx, folder, d.folder, folderBody); d.folder.State != client.Confirmed {
						return
					}
					up := upload(d)
					upBody := up.Body(d.source, "7")
					d.up7 = register(up, d, "7", upBody, nil)
					rctx, cancel := context.WithTimeout(ctx, giveUp())
					defer cancel()
					if d.up7 = drive(rctx, up, d.up7, upBody); d.up7.State != client.Confirmed {
						return
					}
					trBody := map[string]any{"input_ref": d.file, "format": "pdf"}
					d.tr7 = register(transform, d, "7", trBody, nil)
					d.link = register(simulate.SharePDF, d, "7", simulate.SharePDF.Body(d.source, "7"),
						&client.After{OperationID: d.tr7.ID, ResourceVersion: "7"})
					var flow sync.WaitGroup
					flow.Go(func() {
						// The transformation and the v8 upload race: for
						// every other contract v8 is sent first, so that some
						// v7 transformations run on version 8.
						if i%2 == 1 {
							simulate.Pause(ctx, 80*time.Millisecond)
						}
						tctx, cancel := context.WithTimeout(ctx, giveUp())
						defer cancel()
						d.tr7 = drive(tctx, transform, d.tr7, trBody)
					})
					// Version 8 is uploaded while the v7 transformation is
					// in flight: an intention of its own, with its own key.
					flow.Go(func() {
						if i%2 == 0 {
							simulate.Pause(ctx, time.Duration(draw()*60)*time.Millisecond)
						}
						body8 := up.Body(d.source, "8")
						d.up8 = register(up, d, "8", body8, nil)
						uctx, cancel := context.WithTimeout(ctx, giveUp())
						defer cancel()
						d.up8 = drive(uctx, up, d.up8, body8)
					})
					flow.Go(func() {
						lctx, cancel := context.WithTimeout(ctx, giveUp()+time.Second)
						defer cancel()
						d.link = drive(lctx, simulate.SharePDF, d.link, simulate.SharePDF.Body(d.source, "7"))
					})
					flow.Wait()
				})
			}
			wg.Wait()
			// Time passes: leases of killed attempts run out, the
			// reconciler settles, dependents of broken dependencies end.
			clk.Advance(cfg.Destination(sandbox.DestinationName).Lease + time.Second)
			if _, err := st.SweepLeases(ctx); err != nil {
				t.Fatal(err)
			}
			simulate.Pause(ctx, 300*time.Millisecond) // past the search lag
			for range 3 {
				if _, err := rec.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// A reviewer keeps the PDF of each transformation that ran on
			// version 8 (confirmed as it is, version 8): its link, waiting
			// for version 7, must then fail rather than publish it.
			reviewed += confirmWrongVersions(t, st, all)
			if _, err := st.SweepDependencies(ctx); err != nil {
				t.Fatal(err)
			}
			if settled(t, st, all) {
				t.Logf("settled after %d rounds", round+1)
				break
			}
		}
		checkFileFlow(t, st, sb, sbSrv.URL, all)
		t.Logf("%d transformations of version 8 kept by a reviewer", reviewed)
	})
}

// confirmWrongVersions decides each open case of a v7 transformation whose
// job ran on another version: confirm, with the PDF it made.
func confirmWrongVersions(t *testing.T, st *store.Store, all []*document) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, d := range all {
		if d.tr7 == nil {
			continue
		}
		op, err := st.GetOperation(ctx, "acme", d.tr7.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if op.State != review.NeedsReview || len(op.Jobs) == 0 {
			continue
		}
		j := op.Jobs[len(op.Jobs)-1]
		if j.OutputRef == "" || j.InputVersion == op.LogicalVersion {
			continue
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Status != store.CaseOpen {
				continue
			}
			if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideConfirm, Ref: j.OutputRef,
				Actor: "rita@example.com", Reason: "the PDF is of version " + j.InputVersion + "; keep it"}); err != nil {
				t.Fatalf("confirm %s: %v", op.ID, err)
			}
			n++
		}
	}
	return n
}

// createFile uploads a contract's file at version 6, outside Limbo.
func createFile(t *testing.T, base, source string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": source + ".docx", "content": "v6",
		"metadata": map[string]any{"operation_id": "setup-" + source, "logical_version": "6"}})
	// The sandbox's faults spoil some answers after the effect (a lost
	// answer is a dropped connection): then the file is looked up by its
	// metadata. A key makes sending it again harmless.
	req, _ := http.NewRequest(http.MethodPost, base+"/files", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "setup-"+source)
	resp, err := http.DefaultClient.Do(req)
	var v struct{ Ref string }
	if err == nil {
		defer resp.Body.Close()
		err = json.NewDecoder(resp.Body).Decode(&v)
	}
	if err != nil || v.Ref == "" {
		return searchRef(t, base, "setup-"+source)
	}
	return v.Ref
}

func searchRef(t *testing.T, base, opID string) string {
	t.Helper()
	for range 50 {
		var page struct {
			Items []struct{ Ref string } `json:"items"`
		}
		if getJSON(base+"/search?operation_id="+url.QueryEscape(opID), &page) == nil && len(page.Items) == 1 {
			return page.Items[0].Ref
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no file for %s", opID)
	return ""
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// settled reports whether every document's operations have ended, or
// wait on a person (a case, or a dependency in one).
func settled(t *testing.T, st *store.Store, all []*document) bool {
	t.Helper()
	for _, d := range all {
		if d.folder == nil || d.link == nil || d.up8 == nil {
			return false
		}
		for _, op := range []*client.Operation{d.folder, d.up7, d.tr7, d.link, d.up8} {
			got, err := st.GetOperation(context.Background(), "acme", op.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if !done(got) {
				return false
			}
		}
	}
	return true
}

// done: terminal, in review, or waiting for a dependency that is in review.
func done(op *review.Operation) bool {
	if op.State.Terminal() || op.State == review.NeedsReview {
		return true
	}
	return op.After != nil && op.After.DependencyState == review.NeedsReview && op.State.Attemptable()
}

// checkFileFlow holds the run against the sandbox's ground truth.
func checkFileFlow(t *testing.T, st *store.Store, sb *sandbox.Sandbox, base string, all []*document) {
	t.Helper()
	ctx := context.Background()
	effects := map[string][]sandbox.Effect{}
	for _, ef := range sb.Truth() {
		if !ef.Compensated {
			effects[ef.OperationID] = append(effects[ef.OperationID], ef)
		}
	}
	links, confirmed, waiting, onV8, reconciled, refused := 0, 0, 0, 0, 0, 0
	for _, d := range all {
		if d.folder == nil || d.up7 == nil || d.up8 == nil || d.link == nil {
			t.Errorf("%s never got past its v7 upload (%v)", d.source, d.up7)
			continue
		}
		if d.up7.Key == d.up8.Key {
			t.Errorf("%s: the v8 upload reuses the v7 key %s", d.source, d.up7.Key)
		}
		for _, op := range []*client.Operation{d.folder, d.up7, d.tr7, d.link, d.up8} {
			got, err := st.GetOperation(ctx, "acme", op.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range got.Evidence {
				if ev.Source == review.SourceMetadataSearch {
					reconciled++
					break
				}
			}
			if n := len(effects[op.ID]); n > 1 && got.State != review.NeedsReview {
				t.Errorf("DUPLICATE: %s %s (%s) has %d effects and is %s (%s), not in an open case",
					d.source, got.Action, got.ID, n, got.State, got.StateReason)
			}
			if !done(got) {
				t.Errorf("%s %s is %s (%s): neither ended nor waiting on a person", d.source, got.Action, got.State, got.StateReason)
			}
			if got.ID == d.link.ID {
				switch {
				case got.State == review.Confirmed:
					confirmed++
				case done(got) && got.State.Attemptable():
					waiting++
				case got.State == review.Failed && strings.Contains(got.StateReason, "not 7"):
					refused++
				}
			}
		}
		for _, ef := range effects[d.tr7.ID] {
			var job struct {
				InputVersion string `json:"input_version"`
			}
			if ef.Kind == sandbox.KindJob && getJSON(base+"/jobs/"+url.PathEscape(ef.ResourceRef), &job) == nil && job.InputVersion == "8" {
				onV8++
			}
		}
		for _, ef := range effects[d.link.ID] {
			links++
			if v := linkedVersion(t, base, ef.ResourceRef); v != "7" {
				t.Errorf("WRONG VERSION: %s's link %s publishes the PDF of a transformation of version %q", d.source, ef.ResourceRef, v)
			}
		}
	}
	t.Logf("%d links published, %d link operations confirmed, %d waiting on a transformation in review, %d failed for a "+
		"transformation of another version; %d v7 transformations ran on version 8; %d operations reconciled",
		links, confirmed, waiting, refused, onV8, reconciled)
	if links == 0 || reconciled == 0 {
		t.Error("no link was published, or nothing needed reconciling: the fault run proved nothing")
	}
}

// linkedVersion follows a link to the PDF it publishes, the job that made
// the PDF and the version of the file that job ran on.
func linkedVersion(t *testing.T, base, link string) string {
	t.Helper()
	var l struct {
		FileRef string `json:"file_ref"`
	}
	var pdf struct {
		JobRef string `json:"job_ref"`
	}
	var job struct {
		InputVersion string `json:"input_version"`
	}
	if err := getJSON(base+"/resources/"+url.PathEscape(link), &l); err != nil {
		t.Fatal(err)
	}
	if err := getJSON(base+"/resources/"+url.PathEscape(l.FileRef), &pdf); err != nil || pdf.JobRef == "" {
		t.Fatalf("link %s publishes %q, which no job made (%v)", link, l.FileRef, err)
	}
	if err := getJSON(base+"/jobs/"+url.PathEscape(pdf.JobRef), &job); err != nil {
		t.Fatal(err)
	}
	return job.InputVersion
}

// importedConfig is the sandbox's destination as limbo destination import
// writes it from GET /openapi.json, with what a document cannot say (keys,
// 409s, lag, lease) taken from the hand-written one.
func importedConfig(t *testing.T, base string, hand review.Destination) *review.Config {
	t.Helper()
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	block, err := contract.Import(context.Background(), doc, contract.Options{Name: sandbox.DestinationName, AllowInternal: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := review.ParseConfig(block)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Destinations[sandbox.DestinationName]
	d.HonoursKeys, d.ConflictMeansInProgress, d.SearchLag, d.Lease, d.ProbeConcurrency = hand.HonoursKeys, hand.ConflictMeansInProgress,
		hand.SearchLag, hand.Lease, hand.ProbeConcurrency
	cfg.Destinations[sandbox.DestinationName] = d
	return cfg
}
