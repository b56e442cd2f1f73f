package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func TestRegisterCreates(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		r := intention("contract-583", review.RiskCompensableWrite, "files")
		r.Flags = []review.Flag{review.FlagRegulated, review.FlagFinancial, review.FlagRegulated}
		r.Payload = canonical(t, `{"format":"pdf","pages":[1,2]}`)

		op, created, err := b.s.Register(b.ctx, r)
		if err != nil || !created {
			t.Fatalf("Register = created %v, %v; want a new operation", created, err)
		}
		wantState(t, op, review.Pending)
		checks := []struct {
			field     string
			got, want any
		}{
			{"tenant", op.Tenant, tenantA},
			{"key", op.Key, review.DeriveKey(tenantA, "contract-583", "transform", "v1")},
			{"payload", string(op.Payload), `{"format":"pdf","pages":[1,2]}`},
			{"payload_hash", op.PayloadHash, review.PayloadHash(r.Payload)},
			{"flags", fmt.Sprint(op.Flags), "[financial regulated]"},
			{"version", op.Version, int64(1)},
			{"max_attempts", op.MaxAttempts, review.DefaultMaxAttempts},
			{"attempt_count", op.AttemptCount, 0},
			{"deadline", op.Deadline, t0.Add(review.DefaultDeadline)},
			{"created_at", op.CreatedAt, t0},
			{"resource", op.Resource == nil, true},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
			}
		}
		if op.Attempts == nil || op.Evidence == nil || op.Jobs == nil {
			t.Errorf("attempts/evidence/jobs must be empty lists, not nil (they render as [] in the API)")
		}
		got := b.get(t, op)
		if got.ID != op.ID || got.Key != op.Key || !bytes.Equal(got.Payload, op.Payload) {
			t.Errorf("GetOperation = %+v, want %+v", got, op)
		}
		byKey, err := b.s.GetOperation(b.ctx, tenantA, "", op.Key)
		if err != nil || byKey.ID != op.ID {
			t.Errorf("GetOperation by key = %v, %v; want %s", byKey, err, op.ID)
		}
		assertSealed(t, b.s)
	})
}

func TestRegisterSameIntentionIsIdempotent(t *testing.T) {
	t.Parallel()
	// The same intention five times, its JSON written five different ways.
	bodies := []string{
		`{"target":{"format":"pdf","dpi":300},"source":"contract-583","tags":["a","b"]}`,
		`{"source":"contract-583","tags":["a","b"],"target":{"dpi":300,"format":"pdf"}}`,
		`{ "tags" : [ "a", "b" ], "target" : { "dpi" : 3e2, "format" : "pdf" }, "source" : "contract-583" }`,
		"{\"target\":{\"format\":\"\\u0070df\",\"dpi\":300.0},\n\"source\":\"contract-583\",\"tags\":[\"a\",\"b\"]}",
		`{"tags":["a","b"],"source":"contract-583","target":{"dpi":300,"format":"pdf"}}`,
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		var first *review.Operation
		for i, body := range bodies {
			r := intention("contract-583", review.RiskCompensableWrite, "files")
			r.Payload = canonical(t, body)
			op, created, err := b.s.Register(b.ctx, r)
			if err != nil {
				t.Fatalf("registration %d: %v", i+1, err)
			}
			if created != (i == 0) {
				t.Errorf("registration %d: created = %v, want %v", i+1, created, i == 0)
			}
			if i == 0 {
				first = op
				continue
			}
			if op.ID != first.ID || op.Key != first.Key || op.PayloadHash != first.PayloadHash || !bytes.Equal(op.Payload, first.Payload) {
				t.Errorf("registration %d = (%s, %s, %s), want (%s, %s, %s)", i+1,
					op.ID, op.Key, op.PayloadHash, first.ID, first.Key, first.PayloadHash)
			}
			b.clk.Advance(time.Second)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operations`); n != 1 {
			t.Errorf("operations rows = %d, want 1", n)
		}
		if n := len(b.history(t, first.ID)); n != 1 {
			t.Errorf("audit events = %d, want 1 (repeats change nothing)", n)
		}
	})
}

func TestRegisterSameKeyDifferentIntention(t *testing.T) {
	t.Parallel()
	const key = "caller-key-0000000001"
	tests := []struct {
		name   string
		change func(r *review.Registration)
		want   string
	}{
		{"payload", func(r *review.Registration) { r.Payload = json.RawMessage(`{"source":"other"}`) }, "payload"},
		{"action", func(r *review.Registration) { r.Action = "delete" }, "action"},
		{"logical version", func(r *review.Registration) { r.LogicalVersion = "v2" }, "logical_version"},
		{"risk", func(r *review.Registration) { r.Risk = review.RiskRead }, "risk"},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := intention("doc-"+tt.name, review.RiskCompensableWrite, "files")
				r.Key = key + tt.want
				stored := b.register(t, r)
				tt.change(&r)
				_, _, err := b.s.Register(b.ctx, r)
				mm := errAs[*review.PayloadMismatchError](t, err)
				if !slices.Contains(mm.Fields, tt.want) {
					t.Errorf("mismatch fields = %v, want %q among them", mm.Fields, tt.want)
				}
				if mm.Operation == nil || mm.Operation.ID != stored.ID {
					t.Errorf("mismatch names operation %v, want %s", mm.Operation, stored.ID)
				}
				if got := b.get(t, stored); !bytes.Equal(got.Payload, stored.Payload) || got.Action != stored.Action || got.Version != 1 {
					t.Errorf("stored operation changed: %+v", got)
				}
			})
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operations`); n != len(tests) {
			t.Errorf("operations rows = %d, want %d", n, len(tests))
		}
	})
}

func TestRegisterCallerKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		key   string
		valid bool
	}{
		{"printable ascii", "order-583/v7:transform", true},
		{"exactly 16", strings.Repeat("k", 16), true},
		{"exactly 255", strings.Repeat("k", 255), true},
		{"too short", "short-key", false},
		{"too long", strings.Repeat("k", 256), false},
		{"control character", "order-583\tv7-transform", false},
		{"non-ascii", "order-583-v7-é-transform", false},
		{"leading space", " order-583-v7-transform", false},
		{"trailing space", "order-583-v7-transform ", false},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := intention(fmt.Sprintf("doc-%d", i), review.RiskRead, "files")
				r.Key = tt.key
				op, created, err := b.s.Register(b.ctx, r)
				if !tt.valid {
					if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), "key") {
						t.Fatalf("Register(key %q) = %v, want ErrInvalid naming the key", tt.key, err)
					}
					if _, err := b.s.GetOperation(b.ctx, tenantA, "", tt.key); !errors.Is(err, review.ErrNotFound) {
						t.Errorf("a refused key was stored: %v", err)
					}
					return
				}
				if err != nil || !created {
					t.Fatalf("Register(key %q) = %v, %v", tt.key, created, err)
				}
				if op.Key != tt.key {
					t.Errorf("key = %q, want the caller's %q", op.Key, tt.key)
				}
			})
		}
	})
}

func TestRegisterDerivedKey(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		v1 := b.newOp(t, "contract-583", review.RiskCompensableWrite, "files")
		if want := review.DeriveKey(tenantA, "contract-583", "transform", "v1"); v1.Key != want {
			t.Fatalf("derived key = %s, want %s", v1.Key, want)
		}

		// Same intention, later: same key, same operation.
		b.clk.Advance(time.Hour)
		again, created, err := b.s.Register(b.ctx, intention("contract-583", review.RiskCompensableWrite, "files"))
		if err != nil || created || again.ID != v1.ID || again.Key != v1.Key {
			t.Fatalf("same intention again = %s/%s created %v, %v; want %s/%s", again.ID, again.Key, created, err, v1.ID, v1.Key)
		}

		// A new logical version is a new intention: new key, new operation.
		r := intention("contract-583", review.RiskCompensableWrite, "files")
		r.LogicalVersion = "v2"
		v2 := b.register(t, r)
		if v2.Key == v1.Key || v2.ID == v1.ID {
			t.Errorf("version 2 reuses version 1's key or id")
		}

		// Another tenant with the same source gets its own key.
		r = intention("contract-583", review.RiskCompensableWrite, "files")
		r.Tenant = tenantB
		other := b.register(t, r)
		if other.Key == v1.Key {
			t.Errorf("two tenants share a derived key")
		}
	})
}

func TestRegisterConcurrentSameIntention(t *testing.T) {
	t.Parallel()
	const callers = 50
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		var (
			wg      sync.WaitGroup
			ready   = make(chan struct{})
			ids     = make([]string, callers)
			created = make([]bool, callers)
			errs    = make([]error, callers)
		)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				r := intention("contract-583", review.RiskIrreversible, "mail")
				var op *review.Operation
				op, created[i], errs[i] = b.s.Register(b.ctx, r)
				if op != nil {
					ids[i] = op.ID
				}
			}()
		}
		close(ready)
		wg.Wait()

		nCreated := 0
		for i := range callers {
			if errs[i] != nil {
				t.Errorf("caller %d: %v", i, errs[i])
				continue
			}
			if created[i] {
				nCreated++
			}
			if ids[i] != ids[0] {
				t.Errorf("caller %d got %s, caller 0 got %s", i, ids[i], ids[0])
			}
		}
		if nCreated != 1 {
			t.Errorf("%d callers created the operation, want exactly 1", nCreated)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operations`); n != 1 {
			t.Errorf("operations rows = %d, want 1", n)
		}
		ops, _, err := b.s.ListOperations(b.ctx, tenantA, store.OperationFilter{}, "", 100)
		if err != nil || len(ops) != 1 {
			t.Errorf("ListOperations = %d operations, %v; want 1", len(ops), err)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events WHERE action = 'operation.registered'`); n != 1 {
			t.Errorf("registration events = %d, want 1", n)
		}
		assertSealed(t, b.s)
	})
}

func TestRegisterRequiresApproval(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"payments": {Actions: map[string]review.ActionConfig{"charge": {RequiresApproval: true}}},
	}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		r := intention("invoice-17", review.RiskIrreversible, "payments")
		r.Action = "charge"
		r.Flags = []review.Flag{review.FlagFinancial}
		op := b.register(t, r)
		wantState(t, op, review.AwaitingApproval)

		_, err := b.tryStart(op, "", "")
		na := errAs[*review.NotAttemptableError](t, err)
		if na.Operation.State != review.AwaitingApproval {
			t.Errorf("refusal names state %s, want awaiting_approval", na.Operation.State)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM attempts`); n != 0 {
			t.Errorf("attempts = %d, want none before approval", n)
		}

		// Another action on the same destination needs no approval.
		free := b.newOp(t, "invoice-17-lookup", review.RiskRead, "payments")
		wantState(t, free, review.Pending)
	})
}

func TestOperationsAreTenantScoped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "contract-583", review.RiskCompensableWrite, "files")
		b.start(t, op)

		calls := map[string]func() error{
			"GetOperation": func() error { _, err := b.s.GetOperation(b.ctx, tenantB, op.ID, ""); return err },
			"GetOperation by key": func() error {
				_, err := b.s.GetOperation(b.ctx, tenantB, "", op.Key)
				return err
			},
			"StartAttempt": func() error {
				_, err := b.s.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenantB, OperationID: op.ID})
				return err
			},
			"RecordOutcome": func() error {
				_, err := b.s.RecordOutcome(b.ctx, tenantB, op.ID, 1, timeoutAfterSend, "test")
				return err
			},
			"AddEvidence": func() error {
				_, err := b.s.AddEvidence(b.ctx, tenantB, op.ID, review.Evidence{Source: review.SourceMetadataSearch, Authoritative: true}, "test")
				return err
			},
			"PutJob": func() error {
				_, err := b.s.PutJob(b.ctx, tenantB, op.ID, review.Job{Ref: "job-1", Status: review.JobQueued}, "test")
				return err
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, review.ErrNotFound) {
				t.Errorf("%s from another tenant = %v, want ErrNotFound", name, err)
			}
		}
		ops, _, err := b.s.ListOperations(b.ctx, tenantB, store.OperationFilter{}, "", 10)
		if err != nil || len(ops) != 0 {
			t.Errorf("ListOperations(tenant B) = %d operations, %v; want none", len(ops), err)
		}
		// Nothing the other tenant tried left a trace.
		got := b.get(t, op)
		if got.State != review.InFlight || got.Version != 2 || len(got.Evidence) != 0 || len(got.Jobs) != 0 {
			t.Errorf("operation changed by another tenant: %+v", got)
		}
	})
}

func TestListOperationsKeysetPages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		var all, pending, inFlight []string
		for i := range 7 {
			op := b.newOp(t, fmt.Sprintf("doc-%d", i), review.RiskRead, "files")
			all = append(all, op.ID)
			if i%3 == 1 {
				b.start(t, op)
				inFlight = append(inFlight, op.ID)
			} else {
				pending = append(pending, op.ID)
			}
			// Ids are time-ordered to the millisecond.
			b.clk.Advance(time.Millisecond)
		}
		r := intention("doc-other", review.RiskRead, "files")
		r.Tenant = tenantB
		b.register(t, r)

		tests := []struct {
			state     review.State
			limit     int
			want      []string
			wantPages []int
		}{
			{"", 3, all, []int{3, 3, 1}},
			{"", 7, all, []int{7}},
			{"", 100, all, []int{7}},
			{review.Pending, 2, pending, []int{2, 2, 1}},
			{review.InFlight, 1, inFlight, []int{1, 1}},
			{review.Confirmed, 5, nil, []int{0}},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d", tt.state, tt.limit), func(t *testing.T) {
				var got []string
				var pages []int
				cursor := ""
				for range 10 {
					ops, next, err := b.s.ListOperations(b.ctx, tenantA, store.OperationFilter{State: tt.state}, cursor, tt.limit)
					if err != nil {
						t.Fatal(err)
					}
					pages = append(pages, len(ops))
					for _, op := range ops {
						got = append(got, op.ID)
						if tt.state != "" && op.State != tt.state {
							t.Errorf("%s is %s, want %s", op.ID, op.State, tt.state)
						}
						if op.State == review.InFlight && len(op.Attempts) != 1 {
							t.Errorf("%s lists %d attempts, want its 1", op.ID, len(op.Attempts))
						}
					}
					if next == "" {
						break
					}
					cursor = next
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("ids = %v, want %v (creation order)", got, tt.want)
				}
				if !slices.Equal(pages, tt.wantPages) {
					t.Errorf("page sizes = %v, want %v", pages, tt.wantPages)
				}
			})
		}
	})
}

// A caller passing a limit of zero (or less) must get an answer, not crash
// the process.
func TestListOperationsNonPositiveLimit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		b.newOp(t, "doc-1", review.RiskRead, "files")
		for _, limit := range []int{0, -1} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("ListOperations(limit %d) panicked: %v", limit, p)
					}
				}()
				ops, _, err := b.s.ListOperations(b.ctx, tenantA, store.OperationFilter{}, "", limit)
				if err != nil && !errors.Is(err, review.ErrInvalid) {
					t.Errorf("ListOperations(limit %d) = %v, want a page or ErrInvalid", limit, err)
				}
				if len(ops) > 1 {
					t.Errorf("ListOperations(limit %d) = %d operations", limit, len(ops))
				}
			}()
		}
	})
}

// TestConcurrentCallsOnASmallPool: transactions that each hold a pooled
// connection never wait for another one (preparing a statement on the pool
// inside a transaction did, and with every connection held that way nobody
// got one: a deadlock under load).
func TestConcurrentCallsOnASmallPool(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		b.s.DB().SetMaxOpenConns(2)
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Go(func() {
				// The same key: one registers, the others compare under a lock.
				_, _, errs[i] = b.s.Register(ctx, intention("small-pool", review.RiskIrreversible, "mail"))
				if errs[i] == nil {
					op, err := b.s.GetOperation(ctx, tenantA, "", review.DeriveKey(tenantA, "small-pool", "transform", "v1"))
					if err == nil {
						_, errs[i] = b.s.RecordOutcome(ctx, tenantA, op.ID, 1, success("x"), "test")
					}
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			var ce *review.OutcomeConflictError
			if err != nil && !errors.Is(err, review.ErrNotFound) && !errors.As(err, &ce) && !errors.Is(err, review.ErrConflict) {
				t.Errorf("caller %d: %v", i, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("calls did not finish within 30 s on a pool of 2 connections: deadlocked")
			}
		}
	})
}

// TestConcurrentPayloadMismatches: integrators reuse one key with other
// payloads at the same moment; each is refused as a mismatch (never an
// internal error) and the operation has exactly one open case.
func TestConcurrentPayloadMismatches(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		op := b.newOp(t, "reused", review.RiskCompensableWrite, "plain")
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := range errs {
			wg.Go(func() {
				r := intention("reused", review.RiskCompensableWrite, "plain")
				r.Payload = canonical(t, fmt.Sprintf(`{"n":%d}`, i))
				_, _, errs[i] = b.s.Register(b.ctx, r)
			})
		}
		wg.Wait()
		for i, err := range errs {
			var pm *review.PayloadMismatchError
			if !errors.As(err, &pm) {
				t.Errorf("caller %d: %v, want a payload mismatch", i, err)
			}
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM cases WHERE operation_id = ? AND status = 'open'`, op.ID); n != 1 {
			t.Errorf("%d open cases, want 1", n)
		}
	})
}
