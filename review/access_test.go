package review

import (
	"errors"
	"strings"
	"testing"
)

func scopeOf(t *testing.T, s string) Scope {
	t.Helper()
	sc, err := ParseScope(s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestParseScope: a scope is * alone, or a list of tenant names, each as
// tenants are named (NormalizeTenant: trimmed, NFC, no control characters,
// bounded, no ',' or '*'); anything else is refused naming the entry.
func TestParseScope(t *testing.T) {
	for in, want := range map[string]string{"*": "*", " * ": "*", "acme": "acme", " b , a ,a,, ": "a,b", "cafe\u0301": "caf\u00e9"} {
		if sc, err := ParseScope(in); err != nil || sc.String() != want {
			t.Errorf("ParseScope(%q) = %q, %v; want %q", in, sc.String(), err, want)
		}
	}
	for _, in := range []string{"", " , ", "acme,*", "*,acme", "a*b", "a\x01b", strings.Repeat("t", 600)} {
		if sc, err := ParseScope(in); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "tenants") {
			t.Errorf("ParseScope(%q) = %q, %v; want refused, naming tenants", in, sc.String(), err)
		}
	}
}

// TestScopeList: nil lists all tenants, so only Scope{All: true} may
// give it; a scope of no tenant lists none.
func TestScopeList(t *testing.T) {
	if got := (Scope{All: true}).List(); got != nil {
		t.Errorf("all tenants: %#v, want nil", got)
	}
	for _, s := range []Scope{{}, {Tenants: []string{}}} {
		if got := s.List(); got == nil || len(got) != 0 {
			t.Errorf("%#v.List() = %#v, want an empty list, not nil (all)", s, got)
		}
	}
	if got := (Scope{Tenants: []string{"a", "b"}}).List(); len(got) != 2 {
		t.Errorf("two tenants: %#v", got)
	}
}

func TestScopeCovers(t *testing.T) {
	for _, tc := range []struct {
		s, o string
		want bool
	}{
		{"*", "*", true},
		{"*", "ta", true},
		{"ta", "*", false},
		{"ta", "ta", true},
		{"ta,tb", "tb", true},
		{"ta,tb", "ta,tb", true},
		{"tb", "ta,tb", false},
		{"ta", "tb", false},
	} {
		if got := scopeOf(t, tc.s).Covers(scopeOf(t, tc.o)); got != tc.want {
			t.Errorf("%q covers %q = %v, want %v", tc.s, tc.o, got, tc.want)
		}
	}
}

// TestCheckUserChange is the rule for administering users, cell by cell:
// who acts × whom × what they are given.
func TestCheckUserChange(t *testing.T) {
	admin := func(scope string) Principal {
		return Principal{Name: "a@x", UserID: "usr_actor", Role: RoleAdmin, Scope: scopeOf(t, scope)}
	}
	grant := func(r Role, scope string) *Grant { return &Grant{Role: r, Scope: scopeOf(t, scope)} }
	for _, tc := range []struct {
		name   string
		by     Principal
		target string // user id; "" with before == nil: a new user
		before *Grant
		to     *Grant
		want   error // nil, ErrNotFound or ErrForbidden
	}{
		{"root admin adds a root admin", admin("*"), "", nil, grant(RoleAdmin, "*"), nil},
		{"root admin changes a scoped admin", admin("*"), "u1", grant(RoleAdmin, "ta"), grant(RoleAdmin, "ta,tb"), nil},
		{"scoped admin adds a reviewer in scope", admin("tb"), "", nil, grant(RoleReviewer, "tb"), nil},
		{"scoped admin adds a user for another tenant", admin("tb"), "", nil, grant(RoleReviewer, "ta"), ErrForbidden},
		{"scoped admin adds a user for some tenants it lacks", admin("tb"), "", nil, grant(RoleSupport, "ta,tb"), ErrForbidden},
		{"scoped admin adds an all-tenants user", admin("tb"), "", nil, grant(RoleSupport, "*"), ErrForbidden},
		{"scoped admin adds an admin, even in scope", admin("tb"), "", nil, grant(RoleAdmin, "tb"), ErrForbidden},
		{"scoped admin changes another tenant's reviewer", admin("tb"), "u1", grant(RoleReviewer, "ta"), grant(RoleSupport, "ta"), ErrNotFound},
		{"scoped admin changes a user reaching beyond it", admin("tb"), "u1", grant(RoleReviewer, "ta,tb"), grant(RoleReviewer, "tb"), ErrNotFound},
		{"scoped admin changes an all-tenants user", admin("tb"), "u1", grant(RoleManager, "*"), grant(RoleManager, "tb"), ErrNotFound},
		{"scoped admin disables a reviewer in scope", admin("ta,tb"), "u1", grant(RoleReviewer, "ta"), &Grant{Role: RoleReviewer, Scope: scopeOf(t, "ta"), Disabled: true}, nil},
		{"scoped admin widens a reviewer beyond itself", admin("tb"), "u1", grant(RoleReviewer, "tb"), grant(RoleReviewer, "ta,tb"), ErrForbidden},
		{"scoped admin promotes a reviewer to admin", admin("tb"), "u1", grant(RoleReviewer, "tb"), grant(RoleAdmin, "tb"), ErrForbidden},
		{"scoped admin changes an admin in its scope", admin("tb"), "u1", grant(RoleAdmin, "tb"), grant(RoleSupport, "tb"), ErrForbidden},
		{"scoped admin widens itself", admin("tb"), "usr_actor", grant(RoleAdmin, "tb"), grant(RoleAdmin, "*"), ErrForbidden},
		{"root admin demotes itself", admin("*"), "usr_actor", grant(RoleAdmin, "*"), grant(RoleReviewer, "*"), ErrForbidden},
		{"a reviewer adds a user", Principal{Role: RoleReviewer, Scope: Scope{All: true}}, "", nil, grant(RoleSupport, "ta"), ErrForbidden},
		{"a manager changes a user", Principal{Role: RoleManager, Scope: Scope{All: true}}, "u1", grant(RoleSupport, "ta"), grant(RoleSupport, "ta"), ErrForbidden},
		{"the zero principal may nothing", Principal{}, "", nil, grant(RoleSupport, "ta"), ErrForbidden},
		{"the operator adds a root admin", Operator("cli:root"), "", nil, grant(RoleAdmin, "*"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.by.CheckUserChange(tc.target, tc.before, *tc.to)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestKeepsAnAdmin(t *testing.T) {
	root := Grant{Role: RoleAdmin, Scope: Scope{All: true}}
	for _, tc := range []struct {
		name   string
		to     Grant
		others int
		ok     bool
	}{
		{"demote the last", Grant{Role: RoleReviewer, Scope: Scope{All: true}}, 0, false},
		{"narrow the last", Grant{Role: RoleAdmin, Scope: Scope{Tenants: []string{"ta"}}}, 0, false},
		{"disable the last", Grant{Role: RoleAdmin, Scope: Scope{All: true}, Disabled: true}, 0, false},
		{"keep the last as it is", root, 0, true},
		{"demote one of two", Grant{Role: RoleReviewer, Scope: Scope{All: true}}, 1, true},
	} {
		if err := KeepsAnAdmin(root, tc.to, tc.others); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A user who is not a root admin never counts.
	if err := KeepsAnAdmin(Grant{Role: RoleAdmin, Scope: Scope{All: true}, Disabled: true}, Grant{Role: RoleSupport, Scope: Scope{All: true}}, 0); err != nil {
		t.Errorf("a disabled admin is not the last root admin: %v", err)
	}
}

func TestCheckAdministers(t *testing.T) {
	if err := (Principal{Role: RoleAdmin, Scope: Scope{Tenants: []string{"tb"}}}).CheckAdministers("ta"); !errors.Is(err, ErrForbidden) {
		t.Errorf("a tb admin makes a token for ta: %v", err)
	}
	if err := (Principal{Role: RoleAdmin, Scope: Scope{Tenants: []string{"tb"}}}).CheckAdministers("tb"); err != nil {
		t.Errorf("a tb admin makes a token for tb: %v", err)
	}
	if err := (Principal{Role: RoleReviewer, Scope: Scope{All: true}}).CheckAdministers("tb"); !errors.Is(err, ErrForbidden) {
		t.Errorf("a reviewer makes a token: %v", err)
	}
}
