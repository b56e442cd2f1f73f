package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestSearchAuditPages: a page of the audit trail, bounded to tenants
// (a scoped reader, a tenant filter, both), holds exactly the events the
// filter means — a tenant's own events, and those about console users
// shown to it or to every tenant — newest first, each once, page after
// page. The bounded page is read tenant by tenant (AuditFilter.page);
// this holds it to a reading of every event by the filter's meaning.
// Both engines.
func TestSearchAuditPages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, nil)
		const tenantC = "tenant-c"
		for i, tenant := range []string{tenantA, tenantB, tenantA, tenantC, tenantA, tenantB, tenantA, tenantA, tenantB, tenantA, tenantB, tenantB} {
			b.clk.Advance(time.Second)
			r := intention(fmt.Sprintf("doc-%d", i), review.RiskRead, "plain")
			r.Tenant = tenant
			b.register(t, r)
		}
		// More events about users than a page holds, each read part too.
		a, ab, every := review.Scope{Tenants: []string{tenantA}}, review.Scope{Tenants: []string{tenantA, tenantB}}, review.Scope{All: true}
		for i, sc := range []review.Scope{a, ab, every, {Tenants: []string{tenantC}}, a, every, ab, a, every, a} {
			b.clk.Advance(time.Second)
			if _, err := b.s.AddUser(b.ctx, review.Operator("admin"), store.NewUser{Email: fmt.Sprintf("u%d@example.com", i), Password: ownerPassword,
				Role: review.RoleReviewer, Scope: sc}); err != nil {
				t.Fatal(err)
			}
		}
		// An instance whose clock is behind: its events are newer than
		// others by seq, older by time.
		b.clk.Advance(-15 * time.Second)
		late := intention("doc-late", review.RiskRead, "plain")
		late.Tenant = tenantA
		b.register(t, late)
		b.clk.Advance(15 * time.Second)
		all := events(t, b.s)
		shownTo := map[int64][]string{}
		rows, err := b.s.DB().Query(`SELECT seq, tenant FROM audit_event_tenants`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var seq int64
			var tenant string
			if err := rows.Scan(&seq, &tenant); err != nil {
				t.Fatal(err)
			}
			shownTo[seq] = append(shownTo[seq], tenant)
		}
		rows.Close()
		// about is aboutTenants' meaning: nil, every event; else the
		// tenants' own, and those about users shown to one of them or to all.
		about := func(ev store.AuditEvent, tenants []string) bool {
			switch {
			case tenants == nil:
				return true
			case ev.Tenant != "":
				return slices.Contains(tenants, ev.Tenant)
			case len(tenants) == 0:
				return false
			}
			return slices.ContainsFunc(shownTo[ev.Seq], func(s string) bool { return s == "*" || slices.Contains(tenants, s) })
		}
		// Times that cut the trail, both inside the late instance's
		// events: the fourth event's and the eighteenth's.
		from, to := all[4].At, all[18].At
		// want is the filter's meaning, newest first: by time, then seq,
		// when it bounds the times (AuditFilter.page).
		want := func(f store.AuditFilter) []int64 {
			var evs []store.AuditEvent
			for _, ev := range all {
				if about(ev, f.Scope) && (f.Tenant == "" || about(ev, []string{f.Tenant})) &&
					(f.Action == "" || strings.HasPrefix(ev.Action, strings.ToLower(f.Action)) || slices.Contains(f.Named, ev.Action)) &&
					(f.From.IsZero() || !ev.At.Before(f.From)) && (f.To.IsZero() || ev.At.Before(f.To)) {
					evs = append(evs, ev)
				}
			}
			byTime := !f.From.IsZero() || !f.To.IsZero()
			slices.SortFunc(evs, func(a, b store.AuditEvent) int {
				if c := b.At.Compare(a.At); byTime && c != 0 {
					return c
				}
				return int(b.Seq - a.Seq)
			})
			var seqs []int64
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
			}
			return seqs
		}
		for _, f := range []store.AuditFilter{
			{}, {Scope: []string{tenantA}}, {Scope: []string{tenantB}}, {Scope: []string{tenantC}}, {Scope: []string{tenantA, tenantB}},
			{Scope: []string{}}, {Scope: []string{"nobody"}}, {Tenant: tenantA}, {Tenant: tenantC}, {Scope: []string{tenantA, tenantB}, Tenant: tenantB},
			{Scope: []string{tenantB}, Tenant: tenantA}, {Scope: []string{tenantA}, Action: "user."}, {Tenant: tenantB, Action: "operation."},
			// Read action by action, and by time.
			{Action: "o"}, {Action: "OPERATION."}, {Action: "operation_"}, {Action: "user.\x00"}, {Action: "\xff"},
			{From: from}, {To: to}, {From: from, To: to}, {From: from, To: to, Scope: []string{tenantA}},
			{From: from, Tenant: tenantB, Action: "operation."}, {To: to, Action: "user."}, {From: to, To: from},
			// Actions named by their label (web.AuditActionsNamed), with
			// those the text begins, and one the trail does not hold.
			{Action: "utente", Named: []string{"user.added"}}, {Action: "user.", Named: []string{"operation.registered", "case.opened"}},
			{Action: "x", Named: []string{"operation.registered"}, Scope: []string{tenantB}}, {Action: "x", Named: []string{"nothing.here"}},
			{Action: "x", Named: []string{"user.added"}, From: from, To: to},
		} {
			var got []int64
			for page := 0; ; page++ {
				if page > 50 {
					t.Fatalf("%+v: no last page", f)
				}
				evs, next, err := b.s.SearchAudit(b.ctx, f, 2)
				if err != nil {
					t.Fatalf("%+v: %v", f, err)
				}
				for _, ev := range evs {
					got = append(got, ev.Seq)
				}
				if next == 0 {
					break
				}
				f.Before = next
			}
			f.Before = 0
			w := want(f)
			if !slices.Equal(got, w) {
				t.Errorf("%+v: pages hold %v, want %v", f, got, w)
			}
			// The export: the same events, oldest first.
			slices.Reverse(w)
			var exported []int64
			if err := b.s.EachAudit(b.ctx, f, func(ev store.AuditEvent) error {
				exported = append(exported, ev.Seq)
				return nil
			}); err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			if !slices.Equal(exported, w) {
				t.Errorf("%+v: the export holds %v, want %v", f, exported, w)
			}
		}
	})
}
