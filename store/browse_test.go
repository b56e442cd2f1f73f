package store_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestBrowseAndSearch: the operations browser lists open and settled
// operations newest first within the reader's scope, pages by keyset, counts
// each state, filters, and its search finds an id, a key prefix and any part
// of a source or resource ref in either case — the same rows on both
// engines, whatever the text (short, odd characters, NUL and invalid UTF-8
// refused alike).
func TestBrowseAndSearch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		// Settled, with a resource: confirmed.
		r := intention("Run-7F3A/Step_2", review.RiskCompensableWrite, "plain")
		r.Key = "invoice-2030-0001"
		done := b.register(t, r)
		b.start(t, done)
		done = b.report(t, done, 1, success("Folder-ABC-42")).Operation
		b.clk.Advance(time.Minute)
		// Open, in review with a case.
		c := b.reviewCase(t, "batch%_x")
		b.clk.Advance(time.Minute)
		// Another tenant's operation, out of a tenantA reader's scope.
		rb := intention("Run-7F3A/other", review.RiskRead, "plain")
		rb.Tenant, rb.Key = tenantB, "zz-key-other-00001"
		other := b.register(t, rb)
		b.clk.Advance(time.Minute)
		// Non-ASCII and a lone pending one.
		ru := intention("Ünïcode-ref", review.RiskRead, "plain")
		ru.Key = "zz-key-unicode-0001"
		uni := b.register(t, ru)
		b.clk.Advance(time.Minute)
		rp := intention("ab", review.RiskGenerate, "other-dest")
		rp.Key = "zz-key-pending-0001"
		pend := b.register(t, rp)

		ids := func(p *store.BrowsePage) []string {
			var out []string
			for _, r := range p.Rows {
				out = append(out, r.ID)
			}
			return out
		}
		browse := func(scope []string, f store.BrowseFilter) []string {
			t.Helper()
			p, err := b.s.BrowseOperations(b.ctx, scope, f, "", 50)
			if err != nil {
				t.Fatalf("BrowseOperations(%+v): %v", f, err)
			}
			return ids(p)
		}
		scopeA := []string{tenantA}

		// Everything, newest first; the other tenant only for all tenants.
		if got, want := browse(nil, store.BrowseFilter{}), []string{pend.ID, uni.ID, other.ID, c.OperationID, done.ID}; !slices.Equal(got, want) {
			t.Errorf("all: %v, want %v", got, want)
		}
		if got, want := browse(scopeA, store.BrowseFilter{}), []string{pend.ID, uni.ID, c.OperationID, done.ID}; !slices.Equal(got, want) {
			t.Errorf("tenant-a scope: %v, want %v", got, want)
		}
		if got := browse([]string{}, store.BrowseFilter{}); len(got) != 0 {
			t.Errorf("empty scope: %v", got)
		}

		// Keyset pages of two, no row twice, none lost.
		var paged []string
		after := ""
		for i := 0; i < 5; i++ {
			p, err := b.s.BrowseOperations(b.ctx, nil, store.BrowseFilter{}, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, ids(p)...)
			if after = p.Next; after == "" {
				break
			}
		}
		if want := browse(nil, store.BrowseFilter{}); !slices.Equal(paged, want) {
			t.Errorf("paged: %v, want %v", paged, want)
		}
		if _, err := b.s.BrowseOperations(b.ctx, nil, store.BrowseFilter{}, "nonsense", 2); !errors.Is(err, review.ErrInvalid) {
			t.Errorf("bad cursor: %v, want ErrInvalid", err)
		}

		// Counts per state, the state filter aside; the state filter narrows.
		p, err := b.s.BrowseOperations(b.ctx, scopeA, store.BrowseFilter{State: review.Confirmed}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(p), []string{done.ID}) || p.Counts[review.Confirmed] != 1 || p.Counts[review.NeedsReview] != 1 ||
			p.Counts[review.Pending] != 2 || p.Total != 4 || p.TotalCapped {
			t.Errorf("confirmed in tenant-a: %v, counts %v total %d", ids(p), p.Counts, p.Total)
		}
		if p.Rows[0].ResourceRef.String != "Folder-ABC-42" || p.Rows[0].CaseID.Valid {
			t.Errorf("confirmed row: %+v", p.Rows[0])
		}

		// The other filters.
		for _, tt := range []struct {
			name string
			f    store.BrowseFilter
			want []string
		}{
			{"destination", store.BrowseFilter{Destination: "other-dest"}, []string{pend.ID}},
			{"action", store.BrowseFilter{Action: "nothing"}, nil},
			{"risk", store.BrowseFilter{Risk: review.RiskRead}, []string{uni.ID}},
			{"tenant outside scope", store.BrowseFilter{Tenant: tenantB}, nil},
			{"has case", store.BrowseFilter{HasCase: "yes"}, []string{c.OperationID}},
			{"no case", store.BrowseFilter{HasCase: "no"}, []string{pend.ID, uni.ID, done.ID}},
			{"created within 90s", store.BrowseFilter{CreatedWithin: 90 * time.Second}, []string{pend.ID, uni.ID}},
			{"older than 3m", store.BrowseFilter{CreatedBefore: 3 * time.Minute}, []string{c.OperationID, done.ID}},
			{"flag", store.BrowseFilter{Flag: review.FlagFinancial}, nil},
		} {
			if got := browse(scopeA, tt.f); !slices.Equal(got, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			}
		}
		rows, _ := b.s.BrowseOperations(b.ctx, scopeA, store.BrowseFilter{HasCase: "yes"}, "", 50)
		if len(rows.Rows) != 1 || rows.Rows[0].CaseID.String != c.ID {
			t.Errorf("the open case's link: %+v, want %s", rows.Rows, c.ID)
		}

		// Search: the same answers on both engines.
		for _, tt := range []struct {
			q    string
			want []string
		}{
			{done.ID, []string{done.ID}},           // an id, exactly
			{done.ID[:len(done.ID)-1], nil},        // not a prefix of an id
			{"invoice-2030", []string{done.ID}},    // a key prefix
			{"INVOICE-2030", nil},                  // keys are exact
			{"2030-0001", nil},                     // not the middle of a key
			{"run-7f3a/step_2", []string{done.ID}}, // a source ref, in another case
			{"7F3A", []string{done.ID}},            // the middle of it (tenant-b's is out of scope)
			{"p_2", []string{done.ID}},             // _ is a character, not a wildcard
			{"step%2", nil},                        // % too
			{"%_x", []string{c.OperationID}},       // ... found as themselves
			{"folder-abc", []string{done.ID}},      // a resource ref, in another case
			{"abc-4", []string{done.ID}},           // its middle
			{"ab", nil},                            // two characters: too short to look inside refs
			{"B", nil},                             // one
			{"zz", []string{pend.ID, uni.ID}},      // ...but a key prefix still
			{"abc", []string{done.ID}},             // three: inside refs again
			{"Ünï", []string{uni.ID}},              // non-ASCII, as written
			{"ünï", nil},                           // only ASCII letters fold, on both engines
			{`"quoted"`, nil},                      // FTS syntax is text
			{"a\" OR \"b", nil},                    // ...all of it
			{"   ", []string{pend.ID, uni.ID, c.OperationID, done.ID}}, // blank: no search
		} {
			if got := browse(scopeA, store.BrowseFilter{Search: tt.q}); !slices.Equal(got, tt.want) {
				t.Errorf("search %q: %v, want %v", tt.q, got, tt.want)
			}
		}
		if got := browse(nil, store.BrowseFilter{Search: "7f3a"}); !slices.Equal(got, []string{other.ID, done.ID}) {
			t.Errorf("search 7f3a, all tenants: %v", got)
		}
		// A search narrows the counts too.
		p, _ = b.s.BrowseOperations(b.ctx, scopeA, store.BrowseFilter{Search: "7f3a"}, "", 50)
		if p.Total != 1 || p.Counts[review.Confirmed] != 1 {
			t.Errorf("search counts: %v total %d", p.Counts, p.Total)
		}

		// Text that is not text, or values that are not values: refused,
		// the same on both engines.
		for _, f := range []store.BrowseFilter{{Search: "a\x00b"}, {Search: "a\xffb"}, {Tenant: "\x00"}, {State: "bogus"},
			{Risk: "bogus"}, {Flag: "bogus"}, {HasCase: "maybe"}, {CreatedWithin: -time.Hour}} {
			if _, err := b.s.BrowseOperations(b.ctx, scopeA, f, "", 50); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("%+v: %v, want ErrInvalid", f, err)
			}
		}

		// The id a search jumps to, within scope only.
		for _, tt := range []struct {
			scope []string
			id    string
			want  bool
		}{{scopeA, done.ID, true}, {scopeA, other.ID, false}, {nil, other.ID, true}, {scopeA, "a\x00", false}, {scopeA, "nope", false}} {
			if got, err := b.s.OperationIDInScope(b.ctx, tt.scope, tt.id); err != nil || got != tt.want {
				t.Errorf("OperationIDInScope(%v, %q) = %v, %v; want %v", tt.scope, tt.id, got, err, tt.want)
			}
		}
	})
}

// TestPageCursorsWithinYears: a page cursor whose time is outside years
// 0001–9999 is malformed (ErrInvalid) on both engines, the queue's and the
// operations browser's alike. Before, one far in the past was an error
// from PostgreSQL (a 500) and a page on SQLite, and one in year 10000 an
// empty page on SQLite and rows on PostgreSQL. The range's first and last
// microseconds are cursors still, answering the same on both.
func TestPageCursorsWithinYears(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		c := b.reviewCase(t, "cursor-1")
		first, last := review.MinTime.UnixMicro(), review.MaxTime.UnixMicro()
		for _, us := range []int64{first - 1, last + 1, -210866803200000001, math.MinInt64, math.MaxInt64} {
			if _, err := b.s.Queue(b.ctx, store.QueueFilter{After: fmt.Sprintf("0.%d.x", us)}, 10); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("queue cursor at %d µs: %v, want ErrInvalid", us, err)
			}
			if _, err := b.s.BrowseOperations(b.ctx, nil, store.BrowseFilter{}, fmt.Sprintf("%d.op_x", us), 10); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("browser cursor at %d µs: %v, want ErrInvalid", us, err)
			}
		}
		for _, tc := range []struct {
			us         int64
			queue, ops int // rows after the cursor
		}{{first, 1, 0}, {last, 0, 1}} {
			q, err := b.s.Queue(b.ctx, store.QueueFilter{After: fmt.Sprintf("%d.%d.x", c.Priority, tc.us)}, 10)
			if err != nil || len(q.Cases) != tc.queue {
				t.Errorf("queue after %d µs: %v, %v; want %d cases", tc.us, q, err, tc.queue)
			}
			p, err := b.s.BrowseOperations(b.ctx, nil, store.BrowseFilter{}, fmt.Sprintf("%d.op_x", tc.us), 10)
			if err != nil || len(p.Rows) != tc.ops {
				t.Errorf("browser after %d µs: %v, %v; want %d operations", tc.us, p, err, tc.ops)
			}
		}
	})
}
