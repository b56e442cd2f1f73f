package bench

// audit_p50_ms and audit_p99_ms of `limbo bench`: the audit page and its
// export, whole, over the trail store.BulkLoad writes beside its ledger
// (each operation's operation.registered event, oldest first, about its
// tenant bench-(x%10)), as managers of every tenant, of bench-3 alone, and
// of a tenant with no events.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// quietTenant has no operations, so no events: its reader's page must not
// read the trail looking for them.
const quietTenant = "bench-quiet"

// benchAudit signs in three managers and times n audit requests of each
// kind below, the first of each kind a warm-up.
func benchAudit(ctx context.Context, st *store.Store, base string, f *browseFigures, ops, n int) error {
	// reader signs in a new manager of scope (a reused ledger holds
	// earlier runs' managers), and says who.
	reader := func(scope review.Scope) (*benchBrowser, string, error) {
		pw := store.GeneratePassword()
		email := "bench-manager-" + strings.ToLower(pw[:8]) + "@example.com"
		if _, err := st.AddUser(ctx, review.Operator("cli:bench"), store.NewUser{Email: email, Password: pw, Role: review.RoleManager,
			Scope: scope}); err != nil {
			return nil, "", err
		}
		br, err := benchLogin(ctx, base, email, pw)
		return br, email, err
	}
	all, _, err := reader(review.Scope{All: true})
	if err != nil {
		return err
	}
	defer all.c.CloseIdleConnections()
	one, _, err := reader(review.Scope{Tenants: []string{"bench-3"}})
	if err != nil {
		return err
	}
	defer one.c.CloseIdleConnections()
	quiet, quietEmail, err := reader(review.Scope{Tenants: []string{quietTenant}})
	if err != nil {
		return err
	}
	defer quiet.c.CloseIdleConnections()

	// A deep page: "Older events" twenty pages in.
	deep := "/audit"
	for range 20 {
		body, _, err := all.get(ctx, deep)
		if err != nil {
			return err
		}
		m := benchAuditNext.FindStringSubmatch(body)
		if m == nil {
			break
		}
		deep = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	// The day operation ops-1 was registered, the oldest: BulkLoad dates
	// operation x x seconds before the load.
	oldest := time.Now().UTC().Add(-time.Duration(ops-1) * time.Second).Format("2006-01-02")
	rnd := rand.New(rand.NewPCG(19, 1))
	type timedBy struct {
		br *benchBrowser
		r  benchRequest
	}
	kinds := []func() timedBy{
		func() timedBy {
			return timedBy{all, benchRequest{kind: "audit:first", path: "/audit", want: "op_bench"}}
		},
		func() timedBy {
			return timedBy{all, benchRequest{kind: "audit:tenant", path: "/audit?tenant=bench-3", want: benchOpID(3)}}
		},
		func() timedBy {
			x := rnd.IntN(ops)
			return timedBy{all, benchRequest{kind: "audit:operation", path: "/audit?operation=" + benchOpID(x), want: benchOpID(x)}}
		},
		func() timedBy { // an actor who never acted: nothing to show
			return timedBy{all, benchRequest{kind: "audit:actor-none", path: "/audit?actor=" + url.QueryEscape(fmt.Sprintf("nobody-%d@example.com", rnd.IntN(1e9))),
				want: `<p class="empty">`}}
		},
		func() timedBy { return timedBy{all, benchRequest{kind: "audit:deep", path: deep, want: "op_bench"}} },
		func() timedBy { // an action nobody took: the trail's actions are listed, none matches
			return timedBy{all, benchRequest{kind: "audit:action-none", path: "/audit?action=token.revoked", want: `<p class="empty">`}}
		},
		func() timedBy { // a rare action (the managers' creation): read from audit_events_action
			return timedBy{all, benchRequest{kind: "audit:action-rare", path: "/audit?action=user.", want: `data-action="user.added"`}}
		},
		func() timedBy { // the same for one tenant's manager: read tenant by tenant (SQLite reads the tenant's events)
			return timedBy{one, benchRequest{kind: "audit:action-rare-scoped", path: "/audit?action=user.", want: `data-action="user.added"`}}
		},
		func() timedBy { // the day of the oldest events: read by time, from audit_events_at
			return timedBy{all, benchRequest{kind: "audit:day-oldest", path: "/audit?from=" + oldest + "&to=" + oldest, want: auditRows}}
		},
		func() timedBy { // the same day for one tenant's manager
			return timedBy{one, benchRequest{kind: "audit:day-oldest-scoped", path: "/audit?from=" + oldest + "&to=" + oldest, want: auditRows}}
		},
		func() timedBy {
			return timedBy{one, benchRequest{kind: "audit:scoped", path: "/audit", want: benchOpID(3)}}
		},
		func() timedBy { // only the event of its own manager's creation
			return timedBy{quiet, benchRequest{kind: "audit:scoped-quiet", path: "/audit", want: quietEmail}}
		},
		func() timedBy {
			x := rnd.IntN(ops)
			return timedBy{all, benchRequest{kind: "audit:export-operation", path: "/audit.csv?operation=" + benchOpID(x), want: benchOpID(x)}}
		},
		func() timedBy {
			return timedBy{quiet, benchRequest{kind: "audit:export-quiet", path: "/audit.csv", want: quietEmail}}
		},
	}
	for i := range n + len(kinds) {
		t := kinds[i%len(kinds)]()
		took, err := t.br.timed(ctx, t.r)
		if err != nil {
			return fmt.Errorf("%w (a ledger loaded by an earlier limbo bench has no audit trail: load it again)", err)
		}
		if i >= len(kinds) {
			f.audit = append(f.audit, took)
			f.kinds[t.r.kind] = append(f.kinds[t.r.kind], took)
		}
	}
	slices.Sort(f.audit)
	for _, d := range f.kinds {
		slices.Sort(d)
	}
	return nil
}

// auditRows shows an audit page lists events. A day's page is read by
// time: at a small --queue-ops the oldest day is today, and its newest
// events are the cycle's, timed before the ledger was loaded.
const auditRows = `<table class="audit cards">`

var benchAuditNext = regexp.MustCompile(`href="(/audit\?[^"]*before=[^"]+)"`)
