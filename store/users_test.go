package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

func TestUsersAndSessions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
		s := storetest.Open(t, e, store.Options{Clock: clk.Now})
		pol := store.SessionPolicy{Idle: 30 * time.Minute, Absolute: 12 * time.Hour}

		for _, bad := range []store.NewUser{
			{Email: "not-an-email", Password: "long enough pass", Role: review.RoleSupport, Scope: review.Scope{All: true}},
			{Email: "a@example.com", Password: "short", Role: review.RoleSupport, Scope: review.Scope{All: true}},
			{Email: "a@example.com", Password: "long enough pass", Role: "boss", Scope: review.Scope{All: true}},
			{Email: "a@example.com", Password: "long enough pass", Role: review.RoleSupport},
			{Email: strings.Repeat("a", 250) + "@example.com", Password: "long enough pass", Role: review.RoleSupport, Scope: review.Scope{All: true}},
		} {
			if _, err := s.AddUser(ctx, review.Operator("test"), bad); !errors.Is(err, review.ErrInvalid) {
				t.Errorf("AddUser(%+v) = %v, want ErrInvalid", bad, err)
			}
		}
		u, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "Sam@Example.com", Password: "correct horse battery", Role: review.RoleSupport,
			Scope: review.Scope{Tenants: []string{"acme"}}})
		if err != nil {
			t.Fatal(err)
		}
		if u.Email != "sam@example.com" || u.Scope().Allows("other") || !u.Scope().Allows("acme") {
			t.Fatalf("user = %+v", u)
		}
		if _, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "sam@example.com", Password: "another long one", Role: review.RoleAdmin,
			Scope: review.Scope{All: true}}); !errors.Is(err, review.ErrConflict) {
			t.Fatalf("duplicate email: %v", err)
		}

		if _, _, err := s.Login(ctx, "sam@example.com", "wrong password!", "10.0.0.1", pol); !errors.Is(err, store.ErrBadCredentials) {
			t.Fatalf("wrong password: %v", err)
		}
		if _, _, err := s.Login(ctx, "nobody@example.com", "whatever pass", "10.0.0.1", pol); !errors.Is(err, store.ErrBadCredentials) {
			t.Fatalf("unknown user: %v", err)
		}
		id, sess, err := s.Login(ctx, "SAM@example.com", "correct horse battery", "10.0.0.1", pol)
		if err != nil || sess.User.ID != u.ID || sess.CSRFToken == "" {
			t.Fatalf("login: %v %+v", err, sess)
		}
		id2, _, err := s.Login(ctx, "sam@example.com", "correct horse battery", "10.0.0.1", pol)
		if err != nil || id2 == id {
			t.Fatalf("a new sign-in must get a new session id: %v", err)
		}
		if got, err := s.Session(ctx, id, pol); err != nil || got.User.ID != u.ID {
			t.Fatalf("session: %v", err)
		}

		// Idle timeout: 29 minutes of use keeps it, 30 idle ends it.
		clk.Advance(29 * time.Minute)
		if _, err := s.Session(ctx, id, pol); err != nil {
			t.Fatalf("session after 29 min: %v", err)
		}
		clk.Advance(30 * time.Minute)
		if _, err := s.Session(ctx, id, pol); !errors.Is(err, review.ErrNotFound) {
			t.Fatalf("idle session still valid: %v", err)
		}

		// Logout ends the session even if the cookie is replayed.
		id3, _, err := s.Login(ctx, "sam@example.com", "correct horse battery", "10.0.0.1", pol)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Logout(ctx, id3, u.Principal()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(ctx, id3, pol); !errors.Is(err, review.ErrNotFound) {
			t.Fatalf("session after logout: %v", err)
		}

		// Absolute timeout, however active.
		id4, _, err := s.Login(ctx, "sam@example.com", "correct horse battery", "10.0.0.1", pol)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 25; i++ {
			clk.Advance(29 * time.Minute)
			if _, err := s.Session(ctx, id4, pol); err != nil {
				if i*29 < 12*60-29 {
					t.Fatalf("active session ended after %d min: %v", (i+1)*29, err)
				}
				break
			}
			if (i+1)*29 >= 12*60 {
				t.Fatalf("session outlived the absolute timeout")
			}
		}

		// Throttling slows the failing address, not the account: after 5
		// failures from 10.0.0.2 (the last two refused), the owner signs in
		// from 10.0.0.3 with the right password. (The old throttle locked the
		// account for everyone here.)
		var th *store.ThrottledError
		for i := 0; i < 5; i++ {
			_, _, err := s.Login(ctx, "sam@example.com", "wrong again!!", "10.0.0.2", pol)
			if i < 3 && !errors.Is(err, store.ErrBadCredentials) || i >= 3 && !errors.As(err, &th) {
				t.Fatalf("failure %d from 10.0.0.2: %v", i+1, err)
			}
		}
		if _, _, err := s.Login(ctx, "sam@example.com", "correct horse battery", "10.0.0.3", pol); err != nil {
			t.Fatalf("the owner from a clean address: %v", err)
		}
		if _, _, err := s.Login(ctx, "sam@example.com", "correct horse battery", "10.0.0.2", pol); !errors.As(err, &th) {
			t.Fatalf("the failing address with the right password: %v, want throttled", err)
		}
		clk.Advance(th.RetryAfter)
		if _, _, err := s.Login(ctx, "sam@example.com", "correct horse battery", "10.0.0.2", pol); err != nil {
			t.Fatalf("the failing address once its wait is over: %v", err)
		}
		if rep := storetest.Sealed(t, s); !rep.OK {
			t.Fatalf("audit: %+v", rep)
		}
	})
}

// TestEmailIsOneUser: an address typed composed, decomposed or in capitals
// is one user: a second account for it is refused, and each spelling finds
// the user (and signs in).
func TestEmailIsOneUser(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		const composed, decomposed = "\u00e9lodie@example.com", "e\u0301lodie@example.com"
		u, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: decomposed, Password: "correct horse battery",
			Role: review.RoleSupport, Scope: review.Scope{All: true}})
		if err != nil {
			t.Fatal(err)
		}
		if u.Email != composed {
			t.Errorf("stored as %q, want the composed %q", u.Email, composed)
		}
		for _, again := range []string{composed, "\u00c9lodie@example.com", "E\u0301lodie@Example.com"} {
			if _, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: again, Password: "correct horse battery",
				Role: review.RoleAdmin, Scope: review.Scope{All: true}}); !errors.Is(err, review.ErrConflict) {
				t.Errorf("a second account as %q: %v, want ErrConflict", again, err)
			}
			if got, err := s.UserByEmail(ctx, again); err != nil || got.ID != u.ID {
				t.Errorf("UserByEmail(%q) = %v, %v; want %s", again, got, err, u.ID)
			}
		}
		// A user added before addresses were normalised keeps the form it
		// was stored in: still found by every form, still one user.
		if _, err := s.DB().Exec(s.DB().Rebind(`UPDATE users SET email = ? WHERE id = ?`), decomposed, u.ID); err != nil {
			t.Fatal(err)
		}
		for _, form := range []string{composed, decomposed, "\u00c9lodie@example.com"} {
			if got, err := s.UserByEmail(ctx, form); err != nil || got.ID != u.ID {
				t.Errorf("stored decomposed, UserByEmail(%q) = %v, %v; want %s", form, got, err, u.ID)
			}
			if _, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: form, Password: "correct horse battery",
				Role: review.RoleAdmin, Scope: review.Scope{All: true}}); !errors.Is(err, review.ErrConflict) {
				t.Errorf("stored decomposed, a second account as %q: %v, want ErrConflict", form, err)
			}
		}
		if _, err := s.UserByEmail(ctx, "nobody@example.com"); !errors.Is(err, review.ErrNotFound) {
			t.Errorf("an unknown address: %v, want ErrNotFound", err)
		}
	})
}

// TestUpdateUserUnchanged: saving a user as they are (a console row's Save
// pressed without a change) changes nothing: the user stays signed in and
// no user.changed event is written; a real change still ends the sessions
// and is audited. Before, every Save signed the user out and recorded a
// "User changed" that changed nothing.
func TestUpdateUserUnchanged(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s := storetest.Open(t, e, store.Options{})
		ctx := t.Context()
		op := review.Operator("test")
		u, err := s.AddUser(ctx, op, store.NewUser{Email: "sup@example.com", Password: "correct horse battery", Role: review.RoleSupport,
			Scope: review.Scope{Tenants: []string{"acme"}}})
		if err != nil {
			t.Fatal(err)
		}
		sid, _, err := s.Login(ctx, "sup@example.com", "correct horse battery", "127.0.0.1", store.SessionPolicy{})
		if err != nil {
			t.Fatal(err)
		}
		changes := func() int {
			evs, _, err := s.SearchAudit(ctx, store.AuditFilter{Action: "user.changed"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			return len(evs)
		}
		same := store.UserChange{Role: review.RoleSupport, Scope: review.Scope{Tenants: []string{"acme"}}}
		if _, err := s.UpdateUser(ctx, op, u.ID, same); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(ctx, sid, store.SessionPolicy{}); err != nil {
			t.Errorf("saving the user unchanged ended their session: %v", err)
		}
		if n := changes(); n != 0 {
			t.Errorf("saving the user unchanged wrote %d user.changed events", n)
		}
		if _, err := s.UpdateUser(ctx, op, u.ID, store.UserChange{Role: review.RoleReviewer, Scope: same.Scope}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(ctx, sid, store.SessionPolicy{}); err == nil {
			t.Error("a role change left the session alive")
		}
		if n := changes(); n != 1 {
			t.Errorf("a role change wrote %d user.changed events, want 1", n)
		}
	})
}

// TestUnreadableScopeOnlyForRootAdmins: a user whose stored tenants no
// longer read as a scope (written before tenant names were checked, or by
// hand) allows nothing, and is administered by an all-tenants admin only.
// Its empty scope lay inside every admin's, so a tenant's admin listed the
// user and could move them into its own tenant.
func TestUnreadableScopeOnlyForRootAdmins(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s := storetest.Open(t, e, store.Options{})
		ctx := t.Context()
		op := review.Operator("test")
		u, err := s.AddUser(ctx, op, store.NewUser{Email: "old@example.com", Password: "correct horse battery", Role: review.RoleSupport,
			Scope: review.Scope{Tenants: []string{"beta"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().Exec(s.DB().Rebind(`UPDATE users SET tenants = ? WHERE id = ?`), "beta,*", u.ID); err != nil {
			t.Fatal(err)
		}
		admin := func(email string, sc review.Scope) review.Principal {
			a, err := s.AddUser(ctx, op, store.NewUser{Email: email, Password: "correct horse battery", Role: review.RoleAdmin, Scope: sc})
			if err != nil {
				t.Fatal(err)
			}
			return a.Principal()
		}
		acmeAdmin := admin("acme-admin@example.com", review.Scope{Tenants: []string{"acme"}})
		root := admin("root@example.com", review.Scope{All: true})
		us, err := s.ListUsers(ctx, acmeAdmin)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range us {
			if x.ID == u.ID {
				t.Errorf("a tenant's admin lists a user whose scope does not read: %+v", x)
			}
		}
		_, err = s.UpdateUser(ctx, acmeAdmin, u.ID, store.UserChange{Role: review.RoleSupport, Scope: review.Scope{Tenants: []string{"acme"}}})
		if !errors.Is(err, review.ErrNotFound) {
			t.Errorf("a tenant's admin moves the user into its tenant: %v, want ErrNotFound", err)
		}
		if _, err := s.UpdateUser(ctx, root, u.ID, store.UserChange{Role: review.RoleSupport, Scope: review.Scope{Tenants: []string{"beta"}}}); err != nil {
			t.Errorf("an all-tenants admin mends the user's scope: %v", err)
		}
	})
}

// TestPasswordCountsCharacters: "at least 12 characters" counts
// characters. It counted bytes, so six accented letters (12 bytes) passed
// for a password of twelve; and a password of 12 characters is taken
// whatever bytes they take.
func TestPasswordCountsCharacters(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		s := storetest.Open(t, e, store.Options{})
		for i, pw := range []string{"éééééé", "ééééé€", "密码密码密码"} {
			_, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: fmt.Sprintf("short%d@example.com", i), Password: pw,
				Role: review.RoleSupport, Scope: review.Scope{All: true}})
			if !errors.Is(err, review.ErrInvalid) || !strings.Contains(err.Error(), `field "password"`) {
				t.Errorf("AddUser with %q (%d characters, %d bytes) = %v, want refused", pw, len([]rune(pw)), len(pw), err)
			}
		}
		if _, err := s.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "ok@example.com", Password: "perché così!",
			Role: review.RoleSupport, Scope: review.Scope{All: true}}); err != nil {
			t.Errorf("AddUser with 12 characters: %v", err)
		}
		if _, _, err := s.Login(ctx, "ok@example.com", "perché così!", "10.0.0.1", store.SessionPolicy{}); err != nil {
			t.Errorf("sign-in with it: %v", err)
		}
	})
}

// TestResetPassword: a user who lost their password, or whose password
// leaked, had no way back in (limbo user add refuses an existing email):
// an admin who administers them gives them a new one. The old password
// stops working, the user's sessions end, the reset is audited (without
// the password). A tenant's admin resets its own tenants' users only, not
// an admin's nor its own; the password rule holds.
func TestResetPassword(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		s := storetest.Open(t, e, store.Options{})
		ctx := t.Context()
		op := review.Operator("test")
		add := func(email string, role review.Role, sc review.Scope) *store.User {
			u, err := s.AddUser(ctx, op, store.NewUser{Email: email, Password: "correct horse battery", Role: role, Scope: sc})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		acme := review.Scope{Tenants: []string{"acme"}}
		sup := add("sup@example.com", review.RoleSupport, acme)
		other := add("beta@example.com", review.RoleSupport, review.Scope{Tenants: []string{"beta"}})
		acmeAdmin := add("acme-admin@example.com", review.RoleAdmin, acme)
		root := add("root@example.com", review.RoleAdmin, review.Scope{All: true})
		sid, _, err := s.Login(ctx, "sup@example.com", "correct horse battery", "127.0.0.1", store.SessionPolicy{})
		if err != nil {
			t.Fatal(err)
		}

		if _, err := s.ResetPassword(ctx, acmeAdmin.Principal(), sup.ID, "short"); !errors.Is(err, review.ErrInvalid) {
			t.Errorf("a short password: %v, want ErrInvalid", err)
		}
		if _, err := s.ResetPassword(ctx, acmeAdmin.Principal(), sup.ID, "a new and longer secret"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Login(ctx, "sup@example.com", "correct horse battery", "127.0.0.2", store.SessionPolicy{}); err == nil {
			t.Error("the old password still signs in")
		}
		if _, _, err := s.Login(ctx, "sup@example.com", "a new and longer secret", "127.0.0.2", store.SessionPolicy{}); err != nil {
			t.Errorf("the new password: %v", err)
		}
		if _, err := s.Session(ctx, sid, store.SessionPolicy{}); err == nil {
			t.Error("the session from before the reset is still live")
		}
		evs, _, err := s.SearchAudit(ctx, store.AuditFilter{Action: "user.password_reset"}, 10)
		if err != nil || len(evs) != 1 || evs[0].Actor != "acme-admin@example.com" || strings.Contains(string(evs[0].Detail), "secret") {
			t.Errorf("audit: %+v, %v; want one reset by acme-admin, without the password", evs, err)
		}
		for _, c := range []struct {
			name string
			by   review.Principal
			id   string
			want error
		}{
			{"another tenant's user", acmeAdmin.Principal(), other.ID, review.ErrNotFound},
			{"an all-tenants admin", acmeAdmin.Principal(), root.ID, review.ErrNotFound},
			{"its own", acmeAdmin.Principal(), acmeAdmin.ID, review.ErrForbidden},
			{"nobody", root.Principal(), "usr_nope", review.ErrNotFound},
			{"as a support user", sup.Principal(), other.ID, review.ErrForbidden},
		} {
			if _, err := s.ResetPassword(ctx, c.by, c.id, "yet another long secret"); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		if _, err := s.ResetPassword(ctx, root.Principal(), acmeAdmin.ID, "yet another long secret"); err != nil {
			t.Errorf("an all-tenants admin resets a tenant's admin: %v", err)
		}
	})
}
