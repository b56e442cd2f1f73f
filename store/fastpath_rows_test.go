package store_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestFastPathWritesWhatTheOrdinaryPathWrites: the attempt cycle's fast
// path (snapshots, one guarded statement per call, the group commit on
// PostgreSQL) is an optimisation, never another behaviour. The same calls
// at the same instants, on a store with it and on one without it
// (Options.NoFastPath), must leave every table the same, row by row — ids
// aside, which are random. Both engines.
func TestFastPathWritesWhatTheOrdinaryPathWrites(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		open := func(noFast bool) *bundle {
			clk := storetest.NewClock(t0)
			cfg := &review.Config{Destinations: map[string]review.Destination{"narrow": {Concurrency: 1}}}
			s := storetest.Open(t, e, store.Options{Config: cfg, Clock: clk.Now, Rand: fixedRand(0.5), NoFastPath: noFast})
			return &bundle{ctx: context.Background(), s: s, clk: clk}
		}
		fast, slow := open(false), open(true)
		var ids [2][]string // each store's operation ids, in registration order
		h0, _ := fast.s.FastPath()
		for k, b := range []*bundle{fast, slow} {
			ids[k] = fastPathScenario(t, b)
		}
		if h1, _ := fast.s.FastPath(); h1-h0 < 10 {
			t.Fatalf("the fast path served %d calls: the comparison compares nothing", h1-h0)
		}
		if h, _ := slow.s.FastPath(); h != 0 {
			t.Fatalf("NoFastPath: %d calls took the fast path", h)
		}
		for _, table := range tables(t, fast.s) {
			a, b := normalizedRows(t, fast.s, table, ids[0]), normalizedRows(t, slow.s, table, ids[1])
			if !slices.Equal(a, b) {
				t.Errorf("%s differs:\nfast path:\n  %s\nordinary path:\n  %s", table, strings.Join(a, "\n  "), strings.Join(b, "\n  "))
			}
		}
		assertSealed(t, fast.s)
		assertSealed(t, slow.s)
	})
}

// fastPathScenario runs the calls the fast path takes, and some it hands
// on, and returns the operations' ids in registration order.
func fastPathScenario(t *testing.T, b *bundle) []string {
	t.Helper()
	var ids []string
	op := func(ref string, risk review.Risk) *review.Operation {
		o := b.newOp(t, ref, risk, "files")
		ids = append(ids, o.ID)
		b.clk.Advance(time.Millisecond)
		return o
	}
	step := func() { b.clk.Advance(7 * time.Millisecond) }

	done := op("done", review.RiskCompensableWrite)
	b.start(t, done)
	step()
	b.report(t, done, 1, success("file-1"))

	retried := op("retried", review.RiskIdempotentWrite)
	b.start(t, retried)
	step()
	b.report(t, retried, 1, httpError(503))
	b.clk.Advance(time.Second)
	b.start(t, retried)
	step()
	b.report(t, retried, 2, success("file-2"))

	lost := op("lost", review.RiskCompensableWrite)
	b.start(t, lost)
	step()
	b.report(t, lost, 1, timeoutAfterSend)

	refused := op("refused", review.RiskCompensableWrite)
	b.start(t, refused)
	step()
	b.report(t, refused, 1, connBeforeSend)
	step()
	b.report(t, refused, 1, connBeforeSend) // the same report again

	costly := intention("costly", review.RiskGenerate, "files")
	budget := 1.0
	costly.CostBudget = &budget
	c := b.register(t, costly)
	ids = append(ids, c.ID)
	b.start(t, c)
	step()
	o := success("gen-1")
	o.Cost = 0.25
	b.report(t, c, 1, o)

	// A destination with a concurrency limit of one: the second waits
	// until the first is done.
	first := b.newOp(t, "limited-1", review.RiskCompensableWrite, "narrow")
	second := b.newOp(t, "limited-2", review.RiskCompensableWrite, "narrow")
	ids = append(ids, first.ID, second.ID)
	b.start(t, first)
	step()
	if _, err := b.tryStart(second, "", ""); !errors.As(err, new(*review.WaitError)) {
		t.Fatalf("a second attempt at a destination limited to one = %v, want a wait", err)
	}
	b.report(t, first, 1, success("file-l1"))
	b.get(t, second)
	b.start(t, second)
	step()
	b.report(t, second, 1, success("file-l2"))

	inFlight := op("in-flight", review.RiskRead)
	b.start(t, inFlight)
	return ids
}

// tables lists the store's tables.
func tables(t *testing.T, s *store.Store) []string {
	t.Helper()
	q := `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	if s.Engine() == store.SQLite {
		q = `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	}
	var names []string
	if err := s.DB().Select(&names, q); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if len(names) < 10 {
		t.Fatalf("tables = %v", names)
	}
	return names
}

// randomID is an id newID makes (a prefix and 26 characters).
var randomID = regexp.MustCompile(`\b[a-z]+_[0-9A-Za-z]{26}\b`)

// normalizedRows are table's rows as sorted lines: the operations' ids
// named by their order (op#1 …), other random ids blanked, the
// transaction id (PostgreSQL's own counter) and the audit hash (of the
// event with its random operation id; assertSealed checks it) left out.
func normalizedRows(t *testing.T, s *store.Store, table string, ops []string) []string {
	t.Helper()
	rows, err := s.DB().Queryx(`SELECT * FROM ` + table)
	if err != nil {
		t.Fatalf("%s: %v", table, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	names := strings.NewReplacer(slices.Concat(func() []string {
		var r []string
		for i, id := range ops {
			r = append(r, id, fmt.Sprintf("op#%d", i+1))
		}
		return r
	}())...)
	var out []string
	for rows.Next() {
		vs, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		var line []string
		for i, v := range vs {
			if cols[i] == "txid" || (table == "audit_events" && cols[i] == "hash") {
				continue
			}
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			if tm, ok := v.(time.Time); ok {
				v = tm.UTC().Format(time.RFC3339Nano)
			}
			line = append(line, cols[i]+"="+randomID.ReplaceAllString(names.Replace(fmt.Sprint(v)), "<id>"))
		}
		out = append(out, strings.Join(line, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
