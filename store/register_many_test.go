package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// A batch answers each registration as Register would, in order: new keys
// created, a repeat the stored operation, a mismatch its refusal with its
// case, an invalid one its error, and none of them fails a neighbour. Keys
// repeated inside the batch answer as if sent one after the other. Both
// engines.
func TestRegisterManyAnswersEachInOrder(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"payments": {Actions: map[string]review.ActionConfig{"charge": {RequiresApproval: true}}},
	}}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, cfg)
		stored := b.newOp(t, "stored", review.RiskCompensableWrite, "files")
		other := b.newOp(t, "other", review.RiskCompensableWrite, "files")

		changed := intention("other", review.RiskCompensableWrite, "files")
		changed.Payload = canonical(t, `{"source":"changed"}`)
		invalid := intention("bad", review.RiskCompensableWrite, "files")
		invalid.Risk = "fatal"
		charge := intention("invoice-1", review.RiskIrreversible, "payments")
		charge.Action = "charge"
		link := intention("link", review.RiskCompensableWrite, "files")
		link.After = &review.Dependency{OperationID: stored.ID}
		noDep := intention("link-nowhere", review.RiskCompensableWrite, "files")
		noDep.After = &review.Dependency{OperationID: "op_nope"}
		twinB := intention("twin", review.RiskCompensableWrite, "files")
		twinB.Payload = canonical(t, `{"source":"twin","v":2}`)
		approvalThenPlain := intention("invoice-1", review.RiskIrreversible, "payments") // charge's key, another action
		approvalThenPlain.Action = "charge"
		approvalThenPlain.Payload = canonical(t, `{"source":"invoice-1","amount":2}`)

		batch := []review.Registration{
			intention("new-1", review.RiskCompensableWrite, "files"),  // 0 created
			intention("stored", review.RiskCompensableWrite, "files"), // 1 the stored one
			changed, // 2 mismatch with other
			invalid, // 3 invalid
			intention("twin", review.RiskCompensableWrite, "files"), // 4 created
			intention("twin", review.RiskCompensableWrite, "files"), // 5 the same as 4
			twinB,             // 6 mismatch with 4
			charge,            // 7 created, awaiting approval
			link,              // 8 created, with its dependency
			noDep,             // 9 invalid dependency
			approvalThenPlain, // 10 mismatch with 7, though bulkable
			intention("new-2", review.RiskCompensableWrite, "files"), // 11 created
		}
		got, err := b.s.RegisterMany(b.ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(batch) {
			t.Fatalf("%d answers for %d registrations", len(got), len(batch))
		}
		created := func(i int) *review.Operation {
			t.Helper()
			if got[i].Err != nil || !got[i].Created || got[i].Op == nil {
				t.Fatalf("registration %d: %+v, want created", i, got[i])
			}
			if got[i].Op.SourceRef != batch[i].SourceRef {
				t.Fatalf("registration %d answers %s, want %s", i, got[i].Op.SourceRef, batch[i].SourceRef)
			}
			return got[i].Op
		}
		same := func(i int, want *review.Operation) {
			t.Helper()
			if got[i].Err != nil || got[i].Created || got[i].Op == nil || got[i].Op.ID != want.ID {
				t.Fatalf("registration %d: %+v, want the stored %s", i, got[i], want.ID)
			}
		}
		mismatch := func(i int, with *review.Operation) {
			t.Helper()
			mm := errAs[*review.PayloadMismatchError](t, got[i].Err)
			if mm.Operation.ID != with.ID {
				t.Fatalf("registration %d: mismatch with %s, want %s", i, mm.Operation.ID, with.ID)
			}
		}
		invalidAt := func(i int, field string) {
			t.Helper()
			if !errors.Is(got[i].Err, review.ErrInvalid) || !strings.Contains(got[i].Err.Error(), field) {
				t.Fatalf("registration %d: %v, want ErrInvalid naming %s", i, got[i].Err, field)
			}
		}
		created(0)
		same(1, stored)
		mismatch(2, other)
		invalidAt(3, "risk")
		twin := created(4)
		same(5, twin)
		mismatch(6, twin)
		wantState(t, created(7), review.AwaitingApproval)
		if l := created(8); l.After == nil || l.After.OperationID != stored.ID {
			t.Fatalf("link after = %+v", l.After)
		}
		invalidAt(9, "after.operation_id")
		mismatch(10, got[7].Op)
		created(11)

		// What the database holds: the answers, each created one audited
		// once, each mismatch with its case and refused payload.
		for _, i := range []int{0, 4, 7, 8, 11} {
			if stored := b.get(t, got[i].Op); stored.Key != got[i].Op.Key || stored.State != got[i].Op.State {
				t.Errorf("registration %d stored as %+v, answered %+v", i, stored, got[i].Op)
			}
			if evs := b.history(t, got[i].Op.ID); len(evs) == 0 || evs[0].Action != "operation.registered" {
				t.Errorf("registration %d: history %+v, want operation.registered first", i, evs)
			}
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operations`); n != 2+5 {
			t.Errorf("operations = %d, want 7", n)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events WHERE action = 'operation.registered'`); n != 7 {
			t.Errorf("registration events = %d, want 7", n)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM rejected_payloads`); n != 3 {
			t.Errorf("rejected payloads = %d, want 3", n)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM operation_dependencies`); n != 1 {
			t.Errorf("dependencies = %d, want 1", n)
		}
		// The bulk write feeds the fast path as Register does.
		g := b.start(t, got[0].Op)
		if g.N != 1 {
			t.Errorf("first attempt n = %d", g.N)
		}
		assertSealed(t, b.s)

		if _, err := b.s.RegisterMany(b.ctx, make([]review.Registration, store.MaxRegisterMany+1)); err == nil {
			t.Error("a batch over the bound was taken")
		}
		if got, err := b.s.RegisterMany(b.ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("an empty batch: %v, %v", got, err)
		}
	})
}

// The bulk write is Register's write: the same registrations sent one by
// one to one store and as a batch to another leave the same rows, table by
// table, but for ids and sequence numbers. Both engines.
func TestRegisterManyWritesWhatRegisterWrites(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		one, many := setup(t, e, nil), setup(t, e, nil)
		var rs []review.Registration
		for i := range 20 {
			r := intention(fmt.Sprintf("doc-%02d", i), review.RiskCompensableWrite, "files")
			switch i % 4 {
			case 1:
				r.Flags = []review.Flag{review.FlagRegulated, review.FlagFinancial}
				budget := 2.5
				r.CostBudget = &budget
			case 2:
				r.Key = fmt.Sprintf("caller-key-%08d", i)
				r.Payload = canonical(t, `{"quote":"a \"b\" \\ c,{d}","nul":"\u0000","é":"ü"}`)
			case 3:
				deadline := t0.Add(90 * 60 * 1e9)
				r.Deadline = &deadline
				attempts := 7
				r.MaxAttempts = &attempts
			}
			rs = append(rs, r)
		}
		for _, r := range rs {
			one.register(t, r)
		}
		got, err := many.s.RegisterMany(many.ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			if r.Err != nil || !r.Created {
				t.Fatalf("registration %d: %+v", i, r)
			}
		}
		tables := map[string]string{
			"operations": `SELECT tenant, key, source_ref, logical_version, action, destination, risk, flags, payload,
				payload_hash, state, state_reason, deadline, max_attempts, cost_budget, cost_spent, attempt_count, version,
				created_at, updated_at FROM operations ORDER BY key`,
			"audit_events": `SELECT e.at, e.actor, e.tenant, o.key, e.action, e.from_state, e.to_state, e.detail
				FROM audit_events e JOIN operations o ON o.id = e.operation_id ORDER BY o.key, e.seq`,
		}
		for table, q := range tables {
			a, b := dumpRows(t, one.s, q), dumpRows(t, many.s, q)
			if len(a) != len(rs) {
				t.Fatalf("%s: %d rows, want %d", table, len(a), len(rs))
			}
			if !slices.Equal(a, b) {
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Errorf("%s row %d:\none by one %s\nbatch      %s", table, i, a[i], b[i])
					}
				}
				t.Fatalf("%s: %d rows one by one, %d in a batch", table, len(a), len(b))
			}
		}
		assertSealed(t, many.s)
	})
}

// Fifty batches at once over the same keys, in different orders: each key
// is created exactly once, every other answer is that operation, nobody
// gets an error, and the trail holds one registration per key. Both
// engines.
func TestRegisterManyConcurrentSharedKeys(t *testing.T) {
	t.Parallel()
	const batches, keys = 50, 40
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		var (
			wg    sync.WaitGroup
			ready = make(chan struct{})
			res   = make([][]store.Registered, batches)
			errs  = make([]error, batches)
		)
		for n := range batches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rs []review.Registration
				for k := range keys {
					// Each batch its own rotation of the keys, half of them reversed.
					i := (k + n) % keys
					if n%2 == 1 {
						i = keys - 1 - i
					}
					rs = append(rs, intention(fmt.Sprintf("shared-%02d", i), review.RiskCompensableWrite, "files"))
				}
				<-ready
				res[n], errs[n] = b.s.RegisterMany(b.ctx, rs)
			}()
		}
		close(ready)
		wg.Wait()
		ids := map[string]string{}
		created := map[string]int{}
		for n := range batches {
			if errs[n] != nil {
				t.Fatalf("batch %d: %v", n, errs[n])
			}
			for _, r := range res[n] {
				if r.Err != nil {
					t.Fatalf("batch %d: %v", n, r.Err)
				}
				if id, ok := ids[r.Op.SourceRef]; ok && id != r.Op.ID {
					t.Fatalf("%s answered as %s and %s", r.Op.SourceRef, id, r.Op.ID)
				}
				ids[r.Op.SourceRef] = r.Op.ID
				if r.Created {
					created[r.Op.SourceRef]++
				}
			}
		}
		for ref := range ids {
			if created[ref] != 1 {
				t.Errorf("%s created %d times, want 1", ref, created[ref])
			}
		}
		if len(ids) != keys {
			t.Errorf("%d keys answered, want %d", len(ids), keys)
		}
		if n := countRows(t, b.s, `SELECT COUNT(*) FROM audit_events WHERE action = 'operation.registered'`); n != keys {
			t.Errorf("registration events = %d, want %d", n, keys)
		}
		assertSealed(t, b.s)
	})
}

// dumpRows renders each row of q as one line, in order.
func dumpRows(t *testing.T, s *store.Store, q string) []string {
	t.Helper()
	rows, err := s.DB().Queryx(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vs, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			if b, ok := v.([]byte); ok {
				vs[i] = string(b)
			}
		}
		out = append(out, fmt.Sprintf("%q", vs))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkRegisterMany is the bulk write per registration, batches of
// 100, one caller, on each engine (ns/op is one registration).
func BenchmarkRegisterMany(b *testing.B) {
	for _, e := range storetest.Engines(b) {
		b.Run(string(e), func(b *testing.B) {
			s := storetest.Open(b, e, store.Options{})
			ctx := b.Context()
			const size = 100
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				if n%size == 0 {
					rs := make([]review.Registration, size)
					for k := range rs {
						rs[k] = intention(fmt.Sprintf("bulk-%d-%d", n, k), review.RiskCompensableWrite, "files")
					}
					got, err := s.RegisterMany(ctx, rs)
					if err != nil || !got[size-1].Created {
						b.Fatal(err)
					}
				}
				n++
			}
		})
	}
}

// A bulk batch inserts its new operations in the order the fast path takes
// their locks: tenant, then key, compared as bytes (batch.go, lockOrder).
// PostgreSQL sorted them under the database's collation instead, which
// under ICU en-US puts "_x" before "alpha" before "Alpha" before "Zulu":
// a bulk batch and a fast batch registering the same keys then each held a
// key the other waited for. The insertion order shows in the heap (ctid)
// and the rowid. Both engines; .ci/run runs it under ICU en-US too.
func TestRegisterManyInsertsInByteOrder(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		keys := []string{"alpha-key-00000001", "Zulu-key-000000001", "_under-key-0000001", "Alpha-key-00000001", "9-key-000000000001"}
		var batch []review.Registration
		for i, k := range keys {
			r := intention(fmt.Sprintf("bytes-%d", i), review.RiskCompensableWrite, "files")
			r.Key = k
			batch = append(batch, r)
		}
		got, err := b.s.RegisterMany(b.ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if g.Err != nil || !g.Created {
				t.Fatalf("registration %d: %+v, want created", i, g)
			}
		}
		order := "rowid"
		if e == store.Postgres {
			order = "ctid"
		}
		var inserted []string
		if err := b.s.DB().Select(&inserted, `SELECT key FROM operations ORDER BY `+order); err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(inserted, want) {
			t.Fatalf("inserted in the order %q, want the bytes' order %q", inserted, want)
		}
	})
}
