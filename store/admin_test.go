package store_test

import (
	"cmp"
	"context"
	"encoding/json"
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

func addUser(t *testing.T, s *store.Store, email string, role review.Role, scope string) *store.User {
	t.Helper()
	sc, err := review.ParseScope(scope)
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.AddUser(context.Background(), review.Operator("test"), store.NewUser{Email: email, Password: "correct horse battery", Role: role, Scope: sc})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestScopedAdminStaysInScope replays the review's attack: an admin of
// tenant tb listed every tenant's users, disabled a ta reviewer, created
// all-tenants users and gave itself role=admin, tenants=*. Each step is
// refused where the data is read and written, whoever calls the store.
func TestScopedAdminStaysInScope(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		root := addUser(t, s, "root@example.com", review.RoleAdmin, "*")
		tbAdmin := addUser(t, s, "tb-admin@example.com", review.RoleAdmin, "tb")
		taRev := addUser(t, s, "ta-rev@example.com", review.RoleReviewer, "ta")
		tbRev := addUser(t, s, "tb-rev@example.com", review.RoleReviewer, "tb")
		both := addUser(t, s, "both@example.com", review.RoleSupport, "ta,tb")
		by := tbAdmin.Principal()

		us, err := s.ListUsers(ctx, by)
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, u := range us {
			seen = append(seen, u.Email)
		}
		if want := []string{"tb-admin@example.com", "tb-rev@example.com"}; !slices.Equal(seen, want) {
			t.Errorf("tb admin lists %v, want %v", seen, want)
		}

		for _, u := range []*store.User{taRev, both, root} {
			_, err := s.UpdateUser(ctx, by, u.ID, store.UserChange{Role: u.Role, Scope: u.Scope(), Disabled: true})
			if !errors.Is(err, review.ErrNotFound) {
				t.Errorf("tb admin disables %s: %v, want not found", u.Email, err)
			}
		}
		for _, nu := range []store.NewUser{
			{Email: "all@example.com", Role: review.RoleReviewer, Scope: review.Scope{All: true}},
			{Email: "ta2@example.com", Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"ta"}}},
			{Email: "adm2@example.com", Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{"tb"}}},
		} {
			nu.Password = "correct horse battery"
			if _, err := s.AddUser(ctx, by, nu); !errors.Is(err, review.ErrForbidden) {
				t.Errorf("tb admin adds %s (%s, %s): %v, want forbidden", nu.Email, nu.Role, nu.Scope, err)
			}
		}
		if _, err := s.UpdateUser(ctx, by, tbAdmin.ID, store.UserChange{Role: review.RoleAdmin, Scope: review.Scope{All: true}}); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("tb admin widens itself to *: %v, want forbidden", err)
		}
		if _, err := s.UpdateUser(ctx, by, tbRev.ID, store.UserChange{Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{"tb"}}}); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("tb admin promotes its reviewer to admin: %v, want forbidden", err)
		}
		if _, err := s.UpdateUser(ctx, by, tbRev.ID, store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"ta", "tb"}}}); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("tb admin widens its reviewer to ta: %v, want forbidden", err)
		}
		// What stays allowed: its own tenant's users, within its tenant.
		if _, err := s.AddUser(ctx, by, store.NewUser{Email: "tb-new@example.com", Password: "correct horse battery", Role: review.RoleSupport,
			Scope: review.Scope{Tenants: []string{"tb"}}}); err != nil {
			t.Errorf("tb admin adds a tb support user: %v", err)
		}
		if _, err := s.UpdateUser(ctx, by, tbRev.ID, store.UserChange{Role: review.RoleSupport, Scope: review.Scope{Tenants: []string{"tb"}}, Disabled: true}); err != nil {
			t.Errorf("tb admin disables its reviewer: %v", err)
		}
		// Nothing of the refused acts was written.
		for _, u := range []*store.User{taRev, both, root, tbAdmin} {
			got, err := s.UserByID(ctx, u.ID)
			if err != nil || got.DisabledAt != nil || got.Role != u.Role || got.TenantsText != u.TenantsText {
				t.Errorf("%s changed: %+v %v", u.Email, got, err)
			}
		}
		for _, email := range []string{"all@example.com", "ta2@example.com", "adm2@example.com"} {
			if _, err := s.UserByEmail(ctx, email); !errors.Is(err, review.ErrNotFound) {
				t.Errorf("%s was created: %v", email, err)
			}
		}

		// Tokens: only its tenant's, listed, made and revoked.
		taTok, err := s.CreateToken(ctx, review.Operator("test"), "ta", "ta")
		if err != nil || taTok == "" {
			t.Fatal(err)
		}
		if _, err := s.CreateToken(ctx, by, "ta", "mine now"); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("tb admin makes a ta token: %v", err)
		}
		if _, err := s.CreateToken(ctx, by, "tb", "ok"); err != nil {
			t.Errorf("tb admin makes a tb token: %v", err)
		}
		toks, _ := s.ListTokens(ctx, review.Operator("test"))
		mine, _ := s.ListTokens(ctx, by)
		if len(toks) != 2 || len(mine) != 1 || mine[0].Tenant != "tb" {
			t.Fatalf("tokens: all %+v, tb admin's %+v", toks, mine)
		}
		for _, tk := range toks {
			if tk.Tenant == "ta" {
				if err := s.RevokeToken(ctx, by, tk.ID); !errors.Is(err, review.ErrNotFound) {
					t.Errorf("tb admin revokes a ta token: %v", err)
				}
			}
		}
		if _, err := s.TenantForToken(ctx, taTok); err != nil {
			t.Errorf("the ta token was revoked: %v", err)
		}
		if _, err := s.ListTokens(ctx, tbRev.Principal()); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("a reviewer lists tokens: %v", err)
		}
	})
}

// TestAdminActsOnItsCurrentGrant: the principal comes from a session read
// when the request began; an admin demoted or disabled since then cannot
// finish an act its old grant allowed.
func TestAdminActsOnItsCurrentGrant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		root := addUser(t, s, "root@example.com", review.RoleAdmin, "*")
		other := addUser(t, s, "other@example.com", review.RoleAdmin, "*")
		rev := addUser(t, s, "rev@example.com", review.RoleReviewer, "ta")
		stale := other.Principal() // as its session said
		if _, err := s.UpdateUser(ctx, root.Principal(), other.ID, store.UserChange{Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{"tb"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, stale, rev.ID, store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{All: true}}); !errors.Is(err, review.ErrNotFound) && !errors.Is(err, review.ErrForbidden) {
			t.Errorf("a narrowed admin still acts on its old grant: %v", err)
		}
		if _, err := s.CreateToken(ctx, stale, "ta", "x"); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("a narrowed admin makes a ta token: %v", err)
		}
		if _, err := s.UpdateUser(ctx, root.Principal(), other.ID, store.UserChange{Role: review.RoleAdmin, Scope: review.Scope{All: true}, Disabled: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddUser(ctx, stale, store.NewUser{Email: "x@example.com", Password: "correct horse battery", Role: review.RoleSupport, Scope: review.Scope{All: true}}); !errors.Is(err, review.ErrForbidden) {
			t.Errorf("a disabled admin adds a user: %v", err)
		}
	})
}

// TestLastRootAdminRemains: the last enabled all-tenants admin cannot be
// demoted, narrowed or disabled — and two admins demoting each other at
// the same moment leave one of them standing.
func TestLastRootAdminRemains(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		a := addUser(t, s, "a@example.com", review.RoleAdmin, "*")
		b := addUser(t, s, "b@example.com", review.RoleAdmin, "*")
		if _, err := s.UpdateUser(ctx, a.Principal(), b.ID, store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
			t.Fatalf("demoting one of two root admins: %v", err)
		}
		op := review.Operator("cli:root")
		for _, ch := range []store.UserChange{
			{Role: review.RoleReviewer, Scope: review.Scope{All: true}},
			{Role: review.RoleAdmin, Scope: review.Scope{Tenants: []string{"ta"}}},
			{Role: review.RoleAdmin, Scope: review.Scope{All: true}, Disabled: true},
		} {
			if _, err := s.UpdateUser(ctx, op, a.ID, ch); !errors.Is(err, review.ErrForbidden) {
				t.Errorf("changing the last root admin to %+v: %v, want forbidden", ch, err)
			}
		}
		if got, _ := s.UserByID(ctx, a.ID); !got.Grant().IsRootAdmin() {
			t.Fatalf("the last root admin is now %+v", got)
		}

		// Two root admins demote each other at once, round after round:
		// exactly one succeeds, and one root admin always remains.
		for round := 0; round < 5; round++ {
			x := addUser(t, s, fmt.Sprintf("x%d@example.com", round), review.RoleAdmin, "*")
			// a and x are the only root admins now.
			var wg sync.WaitGroup
			errs := make([]error, 2)
			pairs := [][2]*store.User{{a, x}, {x, a}}
			for i, p := range pairs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = s.UpdateUser(ctx, p[0].Principal(), p[1].ID, store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{All: true}})
				}()
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case errors.Is(err, review.ErrForbidden):
				default:
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d demotions succeeded (%v), want 1", round, won, errs)
			}
			ga, _ := s.UserByID(ctx, a.ID)
			gx, _ := s.UserByID(ctx, x.ID)
			if ga.Grant().IsRootAdmin() == gx.Grant().IsRootAdmin() {
				t.Fatalf("round %d: root admins afterwards: a %v, x %v", round, ga.Grant().IsRootAdmin(), gx.Grant().IsRootAdmin())
			}
			if !ga.Grant().IsRootAdmin() { // keep a as the survivor for the next round
				if _, err := s.UpdateUser(ctx, gx.Principal(), a.ID, store.UserChange{Role: review.RoleAdmin, Scope: review.Scope{All: true}}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.UpdateUser(ctx, ga.Principal(), x.ID, store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
					// ga is a reviewer now: the operator does it.
					if _, err := s.UpdateUser(ctx, op, x.ID, store.UserChange{Role: review.RoleReviewer, Scope: review.Scope{All: true}}); err != nil {
						t.Fatal(err)
					}
				}
				a, _ = s.UserByID(ctx, a.ID)
			}
		}
	})
}

// TestUserEventsReachTheirTenants: the events about a console user (added,
// changed, disabled, password reset) have no tenant, so only a reader of
// every tenant saw them, and a manager of acme could not read who was given
// or lost access to acme. A scoped reader now sees those about a user who
// had or has one of its tenants (before and after a change), and an
// all-tenants user's, who has them all; not another tenant's user's. A
// search by tenant finds them too, and a scoped check of the chain counts
// what the scoped search shows.
func TestUserEventsReachTheirTenants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := t.Context()
		s := storetest.Open(t, e, store.Options{})
		op := review.Operator("test")
		root := addUser(t, s, "root@example.com", review.RoleAdmin, "*")
		acmeRev := addUser(t, s, "acme-rev@example.com", review.RoleReviewer, "acme")
		betaRev := addUser(t, s, "beta-rev@example.com", review.RoleReviewer, "beta")
		mover := addUser(t, s, "mover@example.com", review.RoleSupport, "beta")
		if _, err := s.CreateToken(ctx, op, "acme", "acme's"); err != nil {
			t.Fatal(err)
		}
		acme, beta := review.Scope{Tenants: []string{"acme"}}, review.Scope{Tenants: []string{"beta"}}
		if _, err := s.UpdateUser(ctx, root.Principal(), acmeRev.ID, store.UserChange{Role: review.RoleReviewer, Scope: acme, Disabled: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, root.Principal(), betaRev.ID, store.UserChange{Role: review.RoleReviewer, Scope: beta, Disabled: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ResetPassword(ctx, root.Principal(), acmeRev.ID, "a new and longer secret"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ResetPassword(ctx, root.Principal(), betaRev.ID, "a new and longer secret"); err != nil {
			t.Fatal(err)
		}
		// From beta to acme: a user event about both.
		if _, err := s.UpdateUser(ctx, root.Principal(), mover.ID, store.UserChange{Role: review.RoleSupport, Scope: acme}); err != nil {
			t.Fatal(err)
		}

		read := func(f store.AuditFilter) []string {
			t.Helper()
			evs, _, err := s.SearchAudit(ctx, f, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				var d struct {
					Email string `json:"email"`
				}
				if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.Action+" "+d.Email)
			}
			slices.Reverse(got)
			return got
		}
		wantAcme := []string{
			"user.added root@example.com",
			"user.added acme-rev@example.com",
			"token.created ",
			"user.changed acme-rev@example.com",
			"user.password_reset acme-rev@example.com",
			"user.changed mover@example.com",
		}
		if got := read(store.AuditFilter{Scope: []string{"acme"}}); !slices.Equal(got, wantAcme) {
			t.Errorf("an acme reader reads\n%q\nwant\n%q", got, wantAcme)
		}
		if got := read(store.AuditFilter{Tenant: "acme"}); !slices.Equal(got, wantAcme) {
			t.Errorf("a search for tenant acme finds\n%q\nwant\n%q", got, wantAcme)
		}
		wantBeta := []string{
			"user.added root@example.com",
			"user.added beta-rev@example.com",
			"user.added mover@example.com",
			"user.changed beta-rev@example.com",
			"user.password_reset beta-rev@example.com",
			"user.changed mover@example.com",
		}
		if got := read(store.AuditFilter{Scope: []string{"beta"}}); !slices.Equal(got, wantBeta) {
			t.Errorf("a beta reader reads\n%q\nwant\n%q", got, wantBeta)
		}
		if got := read(store.AuditFilter{Scope: []string{"gamma"}}); !slices.Equal(got, []string{"user.added root@example.com"}) {
			t.Errorf("a gamma reader reads %q, want only the all-tenants admin's", got)
		}
		if got := read(store.AuditFilter{Scope: []string{}}); len(got) != 0 {
			t.Errorf("a reader of no tenant reads %q", got)
		}

		rep, err := s.VerifyAudit(ctx, store.VerifyOptions{PublicKey: s.AuditPublicKey(), SkipAge: true, Scope: []string{"acme"}})
		if err != nil || !rep.OK || rep.Events != int64(len(wantAcme)) {
			t.Errorf("the acme reader's check: %+v, %v; want OK and %d events", rep, err, len(wantAcme))
		}
	})
}

// TestSignInEventsReachTheirTenants: a user's sign-ins, failed guesses at
// their account, sign-outs and language changes were audited with no
// tenant, so a manager of acme never read who signed in to acme. They now
// reach the user's tenants' readers, as the user events do; a guess at an
// account nobody has stays with the readers of every tenant.
func TestSignInEventsReachTheirTenants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := t.Context()
		s := storetest.Open(t, e, store.Options{})
		for _, who := range []struct{ email, scope string }{{"ann@acme.example", "acme"}, {"bob@beta.example", "beta"}} {
			u := addUser(t, s, who.email, review.RoleReviewer, who.scope)
			if _, _, err := s.Login(ctx, who.email, "not the password", "10.0.9.1", store.SessionPolicy{}); !errors.Is(err, store.ErrBadCredentials) {
				t.Fatalf("a wrong password: %v", err)
			}
			id, _, err := s.Login(ctx, who.email, "correct horse battery", "10.0.9.2", store.SessionPolicy{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetLanguage(ctx, u.Principal(), "it"); err != nil {
				t.Fatal(err)
			}
			if err := s.Logout(ctx, id, u.Principal()); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.Login(ctx, "nobody@acme.example", "a guess at nothing", "10.0.9.3", store.SessionPolicy{}); !errors.Is(err, store.ErrBadCredentials) {
			t.Fatalf("an unknown account: %v", err)
		}
		read := func(scope []string) []string {
			t.Helper()
			evs, _, err := s.SearchAudit(ctx, store.AuditFilter{Scope: scope}, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				if strings.HasPrefix(ev.Action, "login.") || ev.Action == "logout" || ev.Action == "user.language" {
					var d struct{ Email string }
					_ = json.Unmarshal([]byte(ev.Detail), &d)
					got = append(got, ev.Action+" "+cmp.Or(d.Email, ev.Actor))
				}
			}
			slices.Reverse(got)
			return got
		}
		want := []string{"login.failed ann@acme.example", "login.succeeded ann@acme.example", "user.language ann@acme.example", "logout ann@acme.example"}
		if got := read([]string{"acme"}); !slices.Equal(got, want) {
			t.Errorf("an acme reader reads\n%q\nwant\n%q", got, want)
		}
		if got := read(nil); len(got) != 9 || got[8] != "login.failed nobody@acme.example" {
			t.Errorf("a reader of every tenant reads %q, want all nine", got)
		}
	})
}

// TestUserSeenBy: the user a page asks about before acting on them (a
// password reset, a disable) is read through the rule that lists users
// (SeesUser), in the store, not checked again in each handler: a tenant's
// admin finds its own tenant's users and itself, and not another tenant's
// user, an all-tenants user, an unknown id, nor anyone as a manager.
func TestUserSeenBy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := t.Context()
		s := storetest.Open(t, e, store.Options{})
		root := addUser(t, s, "root@example.com", review.RoleAdmin, "*")
		acmeAdmin := addUser(t, s, "acme-admin@example.com", review.RoleAdmin, "acme")
		acmeRev := addUser(t, s, "acme-rev@example.com", review.RoleReviewer, "acme")
		betaRev := addUser(t, s, "beta-rev@example.com", review.RoleReviewer, "beta")
		manager := addUser(t, s, "manager@example.com", review.RoleManager, "*")
		for _, c := range []struct {
			by   *store.User
			id   string
			want error
		}{
			{acmeAdmin, acmeRev.ID, nil},
			{acmeAdmin, acmeAdmin.ID, nil},
			{acmeAdmin, betaRev.ID, review.ErrNotFound},
			{acmeAdmin, root.ID, review.ErrNotFound},
			{acmeAdmin, "usr_nope", review.ErrNotFound},
			{root, betaRev.ID, nil},
			{manager, acmeRev.ID, review.ErrNotFound},
		} {
			u, err := s.UserSeenBy(ctx, c.by.Principal(), c.id)
			if !errors.Is(err, c.want) || err == nil && u.ID != c.id {
				t.Errorf("%s reads %s: %+v, %v; want %v", c.by.Email, c.id, u, err, c.want)
			}
		}
	})
}
