package web

import (
	"context"
	"strings"
	"testing"
)

// TestResetPasswordAsksAboutItsUser: the reset's confirmation is a view of
// its own (UserPasswordReset), not a disable's with a form left unused: it
// names the user and posts the confirmed reset to that user's password,
// carrying nothing of the row (no role, tenants or disabled box).
func TestResetPasswordAsksAboutItsUser(t *testing.T) {
	var b strings.Builder
	v := AdminUsersView{Nav: Nav{Email: "root@example.com", CSRF: "tok"}, Resetting: &UserPasswordReset{ID: "usr_1", Email: "anna@example.com"}}
	if err := AdminUsersPage(v).Render(WithLang(context.Background(), "en"), &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	start := strings.Index(page, `action="/admin/users/usr_1/password"`)
	end := strings.Index(page[max(start, 0):], "</form>")
	if start < 0 || end < 0 || !strings.Contains(page, "Give anna@example.com a new password?") {
		t.Fatalf("no confirmation for anna's reset:\n%s", page)
	}
	form := page[start : start+end]
	if !strings.Contains(form, `name="confirm" value="1"`) {
		t.Errorf("the confirmation does not confirm:\n%s", form)
	}
	for _, field := range []string{`name="role"`, `name="tenants"`, `name="disabled"`} {
		if strings.Contains(form, field) {
			t.Errorf("the confirmation carries %s:\n%s", field, form)
		}
	}
}
