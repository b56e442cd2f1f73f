package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// t0 is where every test clock starts.
var t0 = time.Date(2030, time.June, 7, 8, 0, 0, 0, time.UTC)

// searchLag is the sandbox's search lag and what the configuration says of it.
const searchLag = 2 * time.Second

const tenant = "acme"

// testBundle is a real sandbox destination on loopback, a store on a fresh
// database with the same fake clock, and a reconciler configured to probe
// the sandbox.
type testBundle struct {
	ctx context.Context
	clk *storetest.Clock
	sb  *sandbox.Sandbox
	url string
	cfg *review.Config
	st  *store.Store
	rec *reconcile.Reconciler
}

// loopbackV4 opts the test's own listeners (httptest, on 127.0.0.1) in:
// without it netguard refuses them like any other loopback address.
var loopbackV4 = review.AllowList{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// sandboxDestination probes the sandbox at base: status lookup by the
// resource ref, metadata search for the operation id.
func sandboxDestination(base string) review.Destination {
	return review.Destination{
		Lease: time.Minute, SearchLag: searchLag, ProbeConcurrency: 4, AllowInternal: loopbackV4,
		Probes: review.Probes{
			Status: &review.Probe{Method: "GET", URL: base + "/resources/{{.ResourceRef}}", Timeout: 2 * time.Second},
			Search: &review.Probe{Method: "GET", URL: base + "/search?operation_id={{.ID}}", Candidates: "items", Timeout: 2 * time.Second},
		},
	}
}

// setup starts a sandbox with opts and a store on engine. extra adds
// destinations to the configuration ("sandbox" is always there).
func setup(t *testing.T, engine store.Engine, opts sandbox.Options, extra map[string]review.Destination) *testBundle {
	t.Helper()
	return setupWith(t, engine, opts, extra, sandboxDestination)
}

// setupWith is setup with the "sandbox" destination dest configures for
// the sandbox's address.
func setupWith(t *testing.T, engine store.Engine, opts sandbox.Options, extra map[string]review.Destination,
	dest func(base string) review.Destination) *testBundle {
	t.Helper()
	clk := storetest.NewClock(t0)
	opts.Now = clk.Now
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	sb := sandbox.New(opts)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() {
		srv.Close()
		sb.Close()
	})
	cfg := &review.Config{Destinations: map[string]review.Destination{"sandbox": dest(srv.URL)}}
	for name, d := range extra {
		cfg.Destinations[name] = d
	}
	st := storetest.Open(t, engine, store.Options{Config: cfg, Clock: clk.Now})
	return &testBundle{ctx: context.Background(), clk: clk, sb: sb, url: srv.URL, cfg: cfg, st: st,
		rec: newReconciler(st, cfg, "reconciler-1")}
}

func newReconciler(st *store.Store, cfg *review.Config, owner string) *reconcile.Reconciler {
	return reconcile.New(st, cfg, owner, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// ambiguous registers a compensable write at dest whose first attempt is
// sent at the current (fake) time; created, when set, runs while the
// request is "in flight" (the destination commits it); then the answer is
// lost (timeout after send) and the operation is ambiguous.
func (b *testBundle) ambiguous(t *testing.T, ref, dest string, created func(op *review.Operation)) *review.Operation {
	t.Helper()
	return b.ambiguousWith(t, ref, dest, created, nil, nil)
}

// ambiguousAfter is ambiguous with attempt 1 ending in timeout (nil: a
// plain timeout after send).
func (b *testBundle) ambiguousAfter(t *testing.T, ref, dest string, timeout *review.Outcome) *review.Operation {
	t.Helper()
	return b.ambiguousWith(t, ref, dest, nil, timeout, nil)
}

// ambiguousWith is ambiguous with attempt 1's outcome (nil: a plain
// timeout) and an attempt budget (nil: the default).
func (b *testBundle) ambiguousWith(t *testing.T, ref, dest string, created func(op *review.Operation), timeout *review.Outcome, maxAttempts *int) *review.Operation {
	t.Helper()
	return b.ambiguousAs(t, ref, dest, review.RiskCompensableWrite, created, timeout, maxAttempts)
}

// ambiguousAs is ambiguousWith for an operation of the given risk.
func (b *testBundle) ambiguousAs(t *testing.T, ref, dest string, risk review.Risk, created func(op *review.Operation), timeout *review.Outcome, maxAttempts *int) *review.Operation {
	t.Helper()
	if timeout == nil {
		timeout = &review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}
	}
	payload, err := review.Canonicalize([]byte(`{"name":"` + ref + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := b.st.Register(b.ctx, review.Registration{Tenant: tenant, SourceRef: ref, LogicalVersion: "v1",
		Action: "create_folder", Destination: dest, Risk: risk, Payload: payload, MaxAttempts: maxAttempts, Actor: "test"})
	if err != nil {
		t.Fatalf("Register(%s): %v", ref, err)
	}
	g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatalf("StartAttempt(%s): %v", ref, err)
	}
	if created != nil {
		created(op)
	}
	res, err := b.st.RecordOutcome(b.ctx, tenant, op.ID, g.N, *timeout, "test")
	if err != nil {
		t.Fatalf("RecordOutcome(%s): %v", ref, err)
	}
	if res.Operation.State != review.Ambiguous {
		t.Fatalf("%s is %s after a timeout, want ambiguous", ref, res.Operation.State)
	}
	return res.Operation
}

// createFolder creates a folder at the sandbox directly, its metadata
// naming op and its logical version, and returns the folder's ref.
func (b *testBundle) createFolder(t *testing.T, op *review.Operation) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": op.SourceRef,
		"metadata": map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}})
	req, _ := http.NewRequest(http.MethodPost, b.url+"/folders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", op.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /folders: %v", err)
	}
	defer resp.Body.Close()
	var v struct {
		Ref string `json:"ref"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusCreated || v.Ref == "" {
		t.Fatalf("POST /folders: %d, %+v, %v", resp.StatusCode, v, err)
	}
	return v.Ref
}

func (b *testBundle) get(t *testing.T, op *review.Operation) *review.Operation {
	t.Helper()
	got, err := b.st.GetOperation(b.ctx, tenant, op.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// runOnce runs one reconciliation round and requires it to claim want operations.
func (b *testBundle) runOnce(t *testing.T, want int) {
	t.Helper()
	n, err := b.rec.RunOnce(b.ctx)
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if n != want {
		t.Fatalf("RunOnce claimed %d operations, want %d", n, want)
	}
}

func wantState(t *testing.T, op *review.Operation, want review.State) {
	t.Helper()
	if op.State != want {
		t.Fatalf("operation %s is %s (%s), want %s", op.SourceRef, op.State, op.StateReason, want)
	}
}

func reconcileEvents(t *testing.T, st *store.Store, opID string) map[string]int {
	t.Helper()
	evs, err := st.OperationHistory(context.Background(), opID)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, e := range evs {
		if strings.HasPrefix(e.Action, "reconcile.") || strings.HasPrefix(e.Action, "case.") {
			m[e.Action]++
		}
	}
	return m
}

func sealed(t *testing.T, st *store.Store) {
	t.Helper()
	if rep := storetest.Sealed(t, st); !rep.OK || rep.Unsealed != 0 {
		t.Errorf("audit trail: %+v, want OK and sealed", rep)
	}
}

// TestCommittedCreateIsConfirmed: the destination committed the create,
// the answer was lost; reconciliation finds exactly one folder naming the
// operation and its version and confirms it — once the search can see it.
func TestCommittedCreateIsConfirmed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag}, nil)
		var ref string
		op := b.ambiguous(t, "folder-1", "sandbox", func(op *review.Operation) { ref = b.createFolder(t, op) })

		// Inside the search lag the search shows nothing: that is not
		// absence, the operation stays ambiguous.
		b.clk.Advance(searchLag / 2)
		b.runOnce(t, 1)
		got := b.get(t, op)
		wantState(t, got, review.Ambiguous)
		if len(got.Evidence) != 1 || got.Evidence[0].Verdict != review.VerdictInconclusive || got.Evidence[0].Authoritative {
			t.Fatalf("evidence inside the lag = %+v, want one inconclusive, non-authoritative row", got.Evidence)
		}

		b.clk.Advance(searchLag)
		b.runOnce(t, 1)
		got = b.get(t, op)
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != ref || got.Resource.Version != op.LogicalVersion {
			t.Errorf("resource = %+v, want %s version %s", got.Resource, ref, op.LogicalVersion)
		}
		last := got.Evidence[len(got.Evidence)-1]
		if last.Source != review.SourceMetadataSearch || !last.Authoritative || last.Verdict != review.VerdictConfirms ||
			len(last.Candidates) != 1 || last.Candidates[0].Ref != ref || last.Candidates[0].OperationID != op.ID {
			t.Errorf("confirming evidence = %+v", last)
		}
		if truth := b.sb.Truth(); len(truth) != 1 || truth[0].OperationID != op.ID || truth[0].ResourceRef != ref {
			t.Errorf("ground truth = %+v, want the one folder", truth)
		}
		if ev := reconcileEvents(t, b.st, op.ID); ev["reconcile.settled"] != 1 || ev["reconcile.inconclusive"] != 1 || ev["case.opened"] != 0 {
			t.Errorf("audit = %v, want one inconclusive round and one settlement", ev)
		}
		b.clk.Advance(time.Hour)
		b.runOnce(t, 0)
		sealed(t, b.st)
	})
}

// TestNothingCreatedRetriesAfterTheLag: the create never reached the
// destination. A search inside the lag leaves the operation ambiguous and
// it is not probed again before the lag has passed; after the lag the
// empty search is proof of absence and a retry with the same key follows.
func TestNothingCreatedRetriesAfterTheLag(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag}, nil)
		op := b.ambiguous(t, "folder-1", "sandbox", nil)

		b.clk.Advance(searchLag / 4)
		b.runOnce(t, 1)
		got := b.get(t, op)
		wantState(t, got, review.Ambiguous)
		for _, ev := range got.Evidence {
			if ev.Verdict == review.VerdictRefutes || ev.Authoritative {
				t.Fatalf("a search inside the lag was recorded as %+v", ev)
			}
		}
		// Not due again before the lag has passed.
		b.clk.Advance(searchLag/2 - time.Millisecond)
		b.runOnce(t, 0)
		wantState(t, b.get(t, op), review.Ambiguous)

		b.clk.Advance(searchLag)
		b.runOnce(t, 1)
		got = b.get(t, op)
		wantState(t, got, review.RetryWait)
		last := got.Evidence[len(got.Evidence)-1]
		if last.Verdict != review.VerdictRefutes || !last.Authoritative {
			t.Errorf("absence evidence = %+v, want an authoritative refutation", last)
		}
		g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
		if err != nil || g.N != 2 || g.Key != op.Key {
			t.Errorf("attempt after proven absence = %+v, %v; want attempt 2 with key %s", g, err, op.Key)
		}
		if truth := b.sb.Truth(); len(truth) != 0 {
			t.Errorf("ground truth = %+v, want nothing", truth)
		}
		sealed(t, b.st)
	})
}

// TestDuplicateEffectsNeedReview: a destination without key support
// created the folder twice for one operation; reconciliation cannot pick
// one and opens a case recommending to compensate the extra one.
func TestDuplicateEffectsNeedReview(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag, NoKeySupport: true}, nil)
		var refs []string
		op := b.ambiguous(t, "folder-1", "sandbox", func(op *review.Operation) {
			refs = append(refs, b.createFolder(t, op), b.createFolder(t, op))
		})
		if refs[0] == refs[1] {
			t.Fatalf("the sandbox without key support returned %s twice", refs[0])
		}
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, 1)
		got := b.get(t, op)
		wantState(t, got, review.NeedsReview)
		if got.Resource != nil {
			t.Errorf("resource = %+v, want none chosen", got.Resource)
		}
		cs, err := b.st.CasesForOperation(b.ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Status != store.CaseOpen || !slices.Contains(cs[0].Reasons, review.ReasonMultipleCands) {
			t.Fatalf("cases = %+v, want one open multiple_candidates case", cs)
		}
		if cs[0].RecommendedAction != review.RecommendCompensate || !slices.Contains(refs, cs[0].RecommendedRef) {
			t.Errorf("recommendation = %s %s, want compensate one of %v", cs[0].RecommendedAction, cs[0].RecommendedRef, refs)
		}
		if truth := b.sb.Truth(); len(truth) != 2 {
			t.Errorf("ground truth = %+v, want two effects", truth)
		}
		sealed(t, b.st)
	})
}

// flakyServer answers every request the way its mode says: 500, too slow
// for the probe timeout, garbage, or JSON of the wrong shape.
func flakyServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("mode") {
		case "500":
			http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
		case "503":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "<html>Gateway error</html>")
		case "truncated":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"items":[{"ref":"fld-1","operation_id":`)
		case "shape":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"items":"none"}`)
		case "noref":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"items":[{"kind":"folder"}]}`)
		case "nokey":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"results":[]}`)
		case "redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			http.Error(w, "unknown mode", http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestProbeFailuresNeverGuess: probes that fail — 5xx, a timeout, garbage
// or an answer of the wrong shape — prove nothing: the operation stays
// ambiguous, the failure is recorded as inconclusive evidence, and it is
// probed again later.
func TestProbeFailuresNeverGuess(t *testing.T) {
	t.Parallel()
	modes := []string{"500", "503", "slow", "garbage", "truncated", "shape", "noref", "nokey", "redirect"}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		flaky := flakyServer(t)
		extra := map[string]review.Destination{}
		for _, m := range modes {
			extra["flaky-"+m] = review.Destination{Lease: time.Minute, AllowInternal: loopbackV4, Probes: review.Probes{
				Search: &review.Probe{URL: flaky + "/search?mode=" + m + "&operation_id={{.ID}}", Candidates: "items", Timeout: 300 * time.Millisecond},
			}}
		}
		b := setup(t, e, sandbox.Options{}, extra)
		ops := map[string]*review.Operation{}
		for _, m := range modes {
			ops[m] = b.ambiguous(t, "folder-"+m, "flaky-"+m, nil)
		}
		b.clk.Advance(time.Minute) // far past any lag: only the failures stand in the way

		for round := 1; round <= 3; round++ {
			b.runOnce(t, len(modes))
			for _, m := range modes {
				got := b.get(t, ops[m])
				if got.State != review.Ambiguous {
					t.Fatalf("%s, round %d: %s (%s), want ambiguous", m, round, got.State, got.StateReason)
				}
				if len(got.Evidence) != round {
					t.Fatalf("%s, round %d: %d evidence rows, want one per round", m, round, len(got.Evidence))
				}
				ev := got.Evidence[round-1]
				if ev.Authoritative || ev.Verdict != review.VerdictInconclusive || !strings.Contains(ev.Note, "failed") {
					t.Errorf("%s, round %d: evidence %+v, want an inconclusive, non-authoritative note of the failure", m, round, ev)
				}
			}
			// Probed again later, not at once.
			b.runOnce(t, 0)
			b.clk.Advance(review.ProbeBackoffCap + time.Second)
		}
		sealed(t, b.st)
	})
}

// TestProbeAnswersUnfit: a member of a destination's answer that breaks the
// intake rule (a NUL, a control, an over-long ref) makes the answer
// unreadable, never fitted: cut or replaced, two refs could read as one
// (TestCandidateReadWhole). What is recorded — the failure, which becomes
// the evidence's note — names the problem without the offending text, so
// that the evidence stays storable on PostgreSQL and the operation can be
// reconciled.
func TestProbeAnswersUnfit(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{"ref": `a\u0000b`, "kind": `k\u0085`, "version": `v\u001b1`, "operation_id": strings.Repeat("é", 300)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				members := map[string]string{"ref": "fld-1", "kind": "folder", "version": "v1", "operation_id": "op-1"}
				members[name] = value
				io.WriteString(w, fmt.Sprintf(`{"items":[{"ref":"%s","kind":"%s","version":"%s","operation_id":"%s"}]}`,
					members["ref"], members["kind"], members["version"], members["operation_id"]))
			}))
			t.Cleanup(srv.Close)
			d := review.Destination{AllowInternal: loopbackV4, Probes: review.Probes{Search: &review.Probe{URL: srv.URL + "/search?id={{.ID}}", Candidates: "items", Timeout: 5 * time.Second}}}
			p := reconcile.NewProber(&review.Config{Destinations: map[string]review.Destination{"odd": d}})
			res := p.Probe(context.Background(), &review.Operation{ID: "op-1"}, d)
			if len(res) != 1 || !strings.Contains(res[0].Err, `"`+name+`"`) || len(res[0].Candidates) != 0 {
				t.Fatalf("probe = %+v, want one answer unreadable for its %s", res, name)
			}
			if err := review.CheckText("note", review.FreeText, 2000, res[0].Err); err != nil {
				t.Errorf("failure %q: %v", res[0].Err, err)
			}
		})
	}
}

// TestConcurrentReconcilersNeverDoubleApply: two reconciler instances with
// their own store connections on one database run rounds at the same
// time; every operation is settled exactly once.
func TestConcurrentReconcilersNeverDoubleApply(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag}, nil)
		// Two instances on one database: the bundle's store is one; open
		// another on a fresh database shared by both.
		url := storetest.URL(t, e)
		stores := make([]*store.Store, 2)
		for i := range stores {
			s, err := store.Open(b.ctx, url, store.Options{Config: b.cfg, Clock: b.clk.Now, AuditKey: storetest.AuditKey, MaxConns: storetest.MaxConns})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			stores[i] = s
		}
		if err := stores[0].Migrate(b.ctx); err != nil {
			t.Fatal(err)
		}
		b.st = stores[0]

		const n = 24
		ops := make([]*review.Operation, n)
		refs := map[string]string{}
		for i := range n {
			var created func(op *review.Operation)
			if i%2 == 0 {
				created = func(op *review.Operation) { refs[op.ID] = b.createFolder(t, op) }
			}
			ops[i] = b.ambiguous(t, fmt.Sprintf("folder-%02d", i), "sandbox", created)
		}
		b.clk.Advance(searchLag + time.Second)

		recs := []*reconcile.Reconciler{newReconciler(stores[0], b.cfg, "instance-a"), newReconciler(stores[1], b.cfg, "instance-b")}
		claimed := make([]int, len(recs))
		var wg sync.WaitGroup
		ready := make(chan struct{})
		for i, r := range recs {
			r.Batch = 3
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				for {
					k, err := r.RunOnce(b.ctx)
					if err != nil {
						t.Errorf("%s: %v", r.Owner, err)
						return
					}
					if k == 0 {
						return
					}
					claimed[i] += k
				}
			}()
		}
		close(ready)
		wg.Wait()
		if claimed[0]+claimed[1] != n {
			t.Errorf("claims %v add up to %d, want %d (each operation claimed once)", claimed, claimed[0]+claimed[1], n)
		}
		for i, op := range ops {
			got := b.get(t, op)
			want := review.RetryWait
			if i%2 == 0 {
				want = review.Confirmed
				if got.Resource == nil || got.Resource.Ref != refs[op.ID] {
					t.Errorf("%s: resource %+v, want %s", op.SourceRef, got.Resource, refs[op.ID])
				}
			}
			wantState(t, got, want)
			if len(got.Evidence) != 1 {
				t.Errorf("%s: %d evidence rows, want exactly one round's", op.SourceRef, len(got.Evidence))
			}
			if ev := reconcileEvents(t, b.st, op.ID); ev["reconcile.settled"] != 1 || len(ev) != 1 {
				t.Errorf("%s: audit %v, want exactly one reconcile.settled", op.SourceRef, ev)
			}
		}
		if len(b.sb.Truth()) != n/2 {
			t.Errorf("ground truth has %d effects, want %d", len(b.sb.Truth()), n/2)
		}
		sealed(t, stores[1])
	})
}

// TestExampleConfigProbesRun: the probes of limbo.example.yaml, pointed at
// the sandbox, execute: their URL templates only use fields the prober
// offers.
func TestExampleConfigProbesRun(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../limbo.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(func() { srv.Close(); sb.Close() })
	raw = bytes.ReplaceAll(raw, []byte("https://files.example.com"), []byte(srv.URL))
	// The sandbox listens on loopback: opt it in, as an operator would.
	raw = bytes.Replace(raw, []byte("allow_internal: [10.20.0.0/16, files.internal]"), []byte("allow_internal: [127.0.0.1]"), 1)
	cfg, err := review.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Destination("files")
	op := &review.Operation{ID: "op-1", Tenant: tenant, LogicalVersion: "v1", Destination: "files", State: review.Ambiguous,
		Resource: &review.ResourceRef{Ref: "fld-000001"}, Jobs: []review.Job{{Ref: "job-000002"}}}
	// The credentials the example names, as an operator would set them
	// (the probes' read-only one, the undo call's): without them the
	// probes are not sent at all.
	p := reconcile.NewProberEnv(cfg, func(k string) string {
		return map[string]string{"FILES_API_TOKEN": "Bearer wr1te", "FILES_READ_TOKEN": "Bearer t0ken"}[k]
	})
	if miss := p.MissingCredentials(); len(miss) != 0 {
		t.Errorf("missing credentials %v, want none", miss)
	}
	res := p.Probe(context.Background(), op, d)
	if len(res) != 2 {
		t.Errorf("probes of limbo.example.yaml = %+v, want a status lookup and a search", res)
	}
	for _, res := range res {
		if strings.Contains(res.Err, "template") || res.Class == string(netguard.FailPolicy) || res.Class == reconcile.ClassCredential {
			t.Errorf("%s probe of limbo.example.yaml fails: %s", res.Kind, res.Err)
		}
	}
	if miss := reconcile.NewProberEnv(cfg, func(string) string { return "" }).MissingCredentials(); len(miss) != 5 || miss[4].Probe != "undo" {
		t.Errorf("missing credentials without FILES_READ_TOKEN and FILES_API_TOKEN = %v, want the four probes of files and its undo call", miss)
	}
}
