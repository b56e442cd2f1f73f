package undo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
	"github.com/limbo-dev/limbo/undo"
)

const tenant = "acme"

type bundle struct {
	ctx context.Context
	sb  *sandbox.Sandbox
	url string
	cfg *review.Config
	st  *store.Store
}

// setup runs the sandbox on loopback and a store on engine, configured as
// sandbox.LimboConfig configures Limbo: with the sandbox's undo call.
func setup(t *testing.T, e store.Engine) *bundle {
	t.Helper()
	return setupWith(t, e, sandbox.Options{Seed: 1})
}

func setupWith(t *testing.T, e store.Engine, opts sandbox.Options) *bundle {
	t.Helper()
	sb := sandbox.New(opts)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() {
		srv.Close()
		sb.Close()
	})
	cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: srv.URL, HonoursKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Destinations[sandbox.DestinationName].Undo == nil {
		t.Fatal("the sandbox's configuration has no undo call")
	}
	return &bundle{ctx: context.Background(), sb: sb, url: srv.URL, cfg: cfg, st: storetest.Open(t, e, store.Options{Config: cfg})}
}

func (b *bundle) worker(t *testing.T, getenv func(string) string) *undo.Worker {
	t.Helper()
	w, err := undo.New(b.st, b.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), getenv)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// folder creates a folder at the sandbox for op, as an integrator's send
// without a key would: every call is a new effect. The ref is read from
// the sandbox's truth, so a lost answer (Options.Loss) does not matter.
func (b *bundle) folder(t *testing.T, op *review.Operation) string {
	t.Helper()
	before := len(b.sb.Truth())
	body, _ := json.Marshal(map[string]any{"name": op.SourceRef,
		"metadata": map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}})
	if resp, err := http.Post(b.url+"/folders", "application/json", bytes.NewReader(body)); err == nil {
		resp.Body.Close()
	}
	truth := b.sb.Truth()
	if len(truth) != before+1 || truth[before].OperationID != op.ID {
		t.Fatalf("POST /folders made %d effects", len(truth)-before)
	}
	return truth[before].ResourceRef
}

// duplicate registers an operation whose one attempt created refs at the
// sandbox (and, for a ghost, names one it never created) and lost its
// answer; the search's evidence lists them all, so a case opens on
// multiple candidates.
func (b *bundle) duplicate(t *testing.T, source string, folders int, ghost string) (*review.Operation, []string, *store.Case) {
	t.Helper()
	payload, _ := review.Canonicalize([]byte(`{"name":"` + source + `"}`))
	op, _, err := b.st.Register(b.ctx, review.Registration{Tenant: tenant, SourceRef: source, LogicalVersion: "v1",
		Action: "create_folder", Destination: sandbox.DestinationName, Risk: review.RiskCompensableWrite, Payload: payload, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for range folders {
		refs = append(refs, b.folder(t, op))
	}
	if ghost != "" {
		refs = append(refs, ghost)
	}
	if _, err := b.st.RecordOutcome(b.ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
		t.Fatal(err)
	}
	ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}
	for _, r := range refs {
		ev.Candidates = append(ev.Candidates, review.Candidate{Ref: r, Kind: "folder", Version: "v1", OperationID: op.ID})
	}
	got, err := b.st.AddEvidence(b.ctx, tenant, op.ID, ev, "test")
	if err != nil || got.State != review.NeedsReview {
		t.Fatalf("after the search: %v, %v", got, err)
	}
	cs, err := b.st.CasesForOperation(b.ctx, op.ID)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases %+v, %v", cs, err)
	}
	return op, refs, &cs[0]
}

func (b *bundle) keepAndUndo(t *testing.T, c *store.Case, keep, drop string) {
	t.Helper()
	if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: c.ID, Action: review.DecideKeepAndUndo, Ref: keep, UndoRef: drop,
		Compensation: "delete the duplicate folder", Actor: "rita@example.com", Reason: "two folders for one operation"}); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) op(t *testing.T, id string) *review.Operation {
	t.Helper()
	op, err := b.st.GetOperation(b.ctx, tenant, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func compensated(sb *sandbox.Sandbox) map[string]bool {
	out := map[string]bool{}
	for _, e := range sb.Truth() {
		out[e.ResourceRef] = e.Compensated
	}
	return out
}

// TestWorkerRunsTheUndo (issue 14, part 4): for a destination with an
// undo call, Limbo's worker runs a keep-A-undo-B compensation itself —
// one DELETE, attempt and outcome in the ledger under system:undo — and
// B's effect is gone at the sandbox; the parent is confirmed with A and
// its case resolved. An undo the destination refuses fails the
// compensation and reopens the case; a missing credential runs nothing.
func TestWorkerRunsTheUndo(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e)
		w := b.worker(t, nil)

		t.Run("keep A, undo B", func(t *testing.T) {
			parent, refs, c := b.duplicate(t, "doc-two-folders", 2, "")
			b.keepAndUndo(t, c, refs[0], refs[1])
			n, err := w.RunOnce(b.ctx)
			if err != nil || n != 1 {
				t.Fatalf("RunOnce = %d, %v; want 1 compensation run", n, err)
			}
			if got := compensated(b.sb); got[refs[0]] || !got[refs[1]] {
				t.Errorf("sandbox after the undo: %v; want %s undone and %s kept", got, refs[1], refs[0])
			}
			p := b.op(t, parent.ID)
			if p.State != review.Confirmed || p.Resource == nil || p.Resource.Ref != refs[0] {
				t.Errorf("parent = %s %+v, want confirmed with %s", p.State, p.Resource, refs[0])
			}
			if got, _ := b.st.GetCase(b.ctx, c.ID, nil); got.Status != store.CaseResolved || got.Resolution != "compensation_done" {
				t.Errorf("case = %s %q", got.Status, got.Resolution)
			}
			cs, err := b.st.Compensations(b.ctx, parent.ID)
			if err != nil || len(cs) != 1 || cs[0].State != review.Confirmed {
				t.Fatalf("compensations %+v, %v", cs, err)
			}
			child := b.op(t, cs[0].OperationID)
			if len(child.Attempts) != 1 {
				t.Errorf("compensation attempts = %+v, want one", child.Attempts)
			}
			hist, err := b.st.OperationHistory(b.ctx, child.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(hist, func(e store.AuditEvent) bool { return e.Actor == undo.Actor }) {
				t.Errorf("the compensation's trail names no %s: %+v", undo.Actor, hist)
			}
			if n, err := w.RunOnce(b.ctx); err != nil || n != 0 {
				t.Errorf("second round = %d, %v; want nothing left to run", n, err)
			}
		})

		t.Run("a refused undo reopens the case", func(t *testing.T) {
			parent, refs, c := b.duplicate(t, "doc-ghost", 1, "fld-never-created")
			b.keepAndUndo(t, c, refs[0], refs[1])
			if n, err := w.RunOnce(b.ctx); err != nil || n != 1 {
				t.Fatalf("RunOnce = %d, %v", n, err)
			}
			p := b.op(t, parent.ID)
			if p.State != review.NeedsReview {
				t.Errorf("parent = %s, want needs_review after its undo failed", p.State)
			}
			got, _ := b.st.GetCase(b.ctx, c.ID, nil)
			if got.Status != store.CaseOpen || !slices.Contains(got.Reasons, review.ReasonCompensationFailed) {
				t.Errorf("case = %s %v, want open with compensation_failed", got.Status, got.Reasons)
			}
		})

		t.Run("no credential, nothing sent", func(t *testing.T) {
			d := b.cfg.Destinations[sandbox.DestinationName]
			u := *d.Undo
			u.AuthHeader, u.AuthEnv = "Authorization", "SANDBOX_UNDO_TOKEN"
			d.Undo = &u
			cfg := &review.Config{Destinations: map[string]review.Destination{sandbox.DestinationName: d}}
			nw, err := undo.New(b.st, cfg, nil, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			parent, refs, c := b.duplicate(t, "doc-no-credential", 2, "")
			b.keepAndUndo(t, c, refs[0], refs[1])
			if n, err := nw.RunOnce(b.ctx); err != nil || n != 0 {
				t.Fatalf("RunOnce without its credential = %d, %v; want nothing run", n, err)
			}
			if compensated(b.sb)[refs[1]] {
				t.Error("the undo was sent without its credential")
			}
			if p := b.op(t, parent.ID); p.State != review.Compensating {
				t.Errorf("parent = %s, want compensating (the integrator may still run it)", p.State)
			}
			// The ordinary worker runs it.
			if n, err := w.RunOnce(b.ctx); err != nil || n != 1 || !compensated(b.sb)[refs[1]] {
				t.Errorf("RunOnce = %d, %v; undone %v", n, err, compensated(b.sb)[refs[1]])
			}
		})
	})
}

// TestLostUndoIsReconciled: the sandbox undoes the resource but the
// answer is lost, so the compensation is ambiguous. Reconciliation looks
// the undone resource up (a search cannot show a DELETE), finds it
// compensated and confirms the undo; the parent is confirmed with the
// kept resource. An undo whose resource the lookup still shows active
// is sent again.
func TestLostUndoIsReconciled(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setupWith(t, e, sandbox.Options{Seed: 1, Loss: 1})
		w := b.worker(t, nil)
		rec := reconcile.New(b.st, b.cfg, "reconciler", slog.New(slog.NewTextHandler(io.Discard, nil)))

		parent, refs, c := b.duplicate(t, "doc-lost-undo", 2, "")
		b.keepAndUndo(t, c, refs[0], refs[1])
		if n, err := w.RunOnce(b.ctx); err != nil || n != 1 {
			t.Fatalf("RunOnce = %d, %v", n, err)
		}
		cs, _ := b.st.Compensations(b.ctx, parent.ID)
		if cs[0].State != review.Ambiguous {
			t.Fatalf("the compensation after a lost answer is %s, want ambiguous", cs[0].State)
		}
		if !compensated(b.sb)[refs[1]] {
			t.Fatal("the sandbox did not undo the resource")
		}
		if _, err := rec.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		cs, _ = b.st.Compensations(b.ctx, parent.ID)
		if cs[0].State != review.Confirmed {
			t.Errorf("the compensation after reconciliation is %s (%s), want confirmed", cs[0].State, cs[0].StateReason)
		}
		if p := b.op(t, parent.ID); p.State != review.Confirmed || p.Resource == nil || p.Resource.Ref != refs[0] {
			t.Errorf("parent = %s %+v, want confirmed with %s", p.State, p.Resource, refs[0])
		}
	})
}

// TestUndoWithoutCredentialHoldsNoOneBack: the compensations of a
// destination whose undo credential is not set stay due for the
// integrator, and do not take every round's batch: another destination's,
// decided after them, run.
func TestUndoWithoutCredentialHoldsNoOneBack(t *testing.T) {
	t.Parallel()
	sb := sandbox.New(sandbox.Options{Seed: 1})
	srv := httptest.NewServer(sb.Handler())
	defer srv.Close()
	defer sb.Close()
	cfg, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: srv.URL, HonoursKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Destinations[sandbox.DestinationName]
	nc := d
	u := *d.Undo
	u.AuthHeader, u.AuthEnv = "Authorization", "REV_UNSET_UNDO_TOKEN"
	nc.Undo = &u
	cfg.Destinations["nocred"] = nc
	st := storetest.Open(t, store.SQLite, store.Options{Config: cfg})
	b := &bundle{ctx: context.Background(), sb: sb, url: srv.URL, cfg: cfg, st: st}

	decide := func(dest, source string) {
		payload, _ := review.Canonicalize([]byte(`{"name":"` + source + `"}`))
		op, _, err := st.Register(b.ctx, review.Registration{Tenant: tenant, SourceRef: source, LogicalVersion: "v1",
			Action: "create_folder", Destination: dest, Risk: review.RiskCompensableWrite, Payload: payload, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		g, err := st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(b.ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
			t.Fatal(err)
		}
		var refs []string
		if dest == sandbox.DestinationName {
			refs = []string{b.folder(t, op), b.folder(t, op)}
		} else {
			refs = []string{"fld-a-" + source, "fld-b-" + source}
		}
		ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}
		for _, r := range refs {
			ev.Candidates = append(ev.Candidates, review.Candidate{Ref: r, Kind: "folder", Version: "v1", OperationID: op.ID})
		}
		if _, err := st.AddEvidence(b.ctx, tenant, op.ID, ev, "test"); err != nil {
			t.Fatal(err)
		}
		cs, err := st.CasesForOperation(b.ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases %+v, %v", cs, err)
		}
		b.keepAndUndo(t, &cs[0], refs[0], refs[1])
	}
	decide("nocred", "n1")
	decide("nocred", "n2")
	decide(sandbox.DestinationName, "s1")

	w := b.worker(t, func(string) string { return "" })
	w.Batch = 2 // stands for the default 32 with 32 waiting compensations
	for range 5 {
		if _, err := w.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := st.DueCompensations(b.ctx, []string{sandbox.DestinationName}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Errorf("the %s compensation %s was never run: compensations of a destination without its undo credential fill every batch", sandbox.DestinationName, cs[0].OperationID)
	}
}

// TestUndoOfAVersionIsLeftToAPerson: the sandbox's undo call is DELETE
// /resources/{ref}, and an upload of a file's new version has the file as
// its resource. A reviewer compensating the upload had the worker delete
// the file with every version, the one another operation created first
// included. Since the ledger shows that operation wrote the file too, the
// compensation is left to a person: the worker sends nothing, the file
// keeps both versions, and the reviewer's compensation_done, once they
// removed the version by hand, compensates the upload.
func TestUndoOfAVersionIsLeftToAPerson(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e)
		w := b.worker(t, nil)
		post := func(t *testing.T, path string, op *review.Operation, body map[string]any) map[string]any {
			t.Helper()
			body["metadata"] = map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}
			raw, _ := json.Marshal(body)
			resp, err := http.Post(b.url+path, "application/json", bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
			}
			return out
		}
		register := func(t *testing.T, source, action string) (*review.Operation, *store.Grant) {
			t.Helper()
			payload, _ := review.Canonicalize([]byte(`{"source":"` + source + `"}`))
			op, _, err := b.st.Register(b.ctx, review.Registration{Tenant: tenant, SourceRef: source, LogicalVersion: "v1",
				Action: action, Destination: sandbox.DestinationName, Risk: review.RiskCompensableWrite, Payload: payload, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			return op, g
		}
		// One operation uploads the contract; it is confirmed with the file.
		creator, g := register(t, "contract-583", "upload_file")
		file := post(t, "/files", creator, map[string]any{"name": "contract-583.docx", "content": "v1"})["ref"].(string)
		if _, err := b.st.RecordOutcome(b.ctx, tenant, creator.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 201, Resource: &review.ResourceRef{Ref: file, Kind: "file", Version: "v1"}}, "test"); err != nil {
			t.Fatal(err)
		}
		// Another uploads its next version; the answer is lost, and the
		// search names the file and a second candidate: a person decides.
		upload, g := register(t, "contract-583-v2", "upload_version")
		post(t, "/files/"+file+"/versions", upload, map[string]any{"content": "v2"})
		if _, err := b.st.RecordOutcome(b.ctx, tenant, upload.ID, g.N, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}, "test"); err != nil {
			t.Fatal(err)
		}
		ev := review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true, Candidates: []review.Candidate{
			{Ref: file, Kind: "file", Version: "v1", OperationID: upload.ID}, {Ref: "file-elsewhere", Kind: "file", Version: "v1", OperationID: upload.ID}}}
		if got, err := b.st.AddEvidence(b.ctx, tenant, upload.ID, ev, "test"); err != nil || got.State != review.NeedsReview {
			t.Fatalf("after the search: %v, %v", got, err)
		}
		cs, err := b.st.CasesForOperation(b.ctx, upload.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases %+v, %v", cs, err)
		}
		if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideCompensate, Ref: file,
			Compensation: "remove version 2", Actor: "rita@example.com", Reason: "the version went up by mistake"}); err != nil {
			t.Fatal(err)
		}
		if n, err := w.RunOnce(b.ctx); err != nil || n != 0 {
			t.Fatalf("RunOnce = %d, %v; want nothing sent", n, err)
		}
		for _, ef := range b.sb.Truth() {
			if ef.Compensated {
				t.Fatalf("the sandbox undid %+v: the file went with every version", ef)
			}
		}
		if got := b.op(t, upload.ID); got.State != review.Compensating {
			t.Fatalf("upload = %s, want compensating while a person undoes it", got.State)
		}
		if _, err := b.st.Decide(b.ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideCompensationDone, Ref: file,
			Actor: "rita@example.com", Reason: "removed version 2 in the file's history"}); err != nil {
			t.Fatal(err)
		}
		if got := b.op(t, upload.ID); got.State != review.Compensated {
			t.Fatalf("upload = %s, want compensated", got.State)
		}
		if got := b.op(t, creator.ID); got.State != review.Confirmed {
			t.Fatalf("creator = %s, want confirmed, its file untouched", got.State)
		}
	})
}
