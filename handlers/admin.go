package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// principal is the signed-in user as the store checks their acts.
func principal(c echo.Context) review.Principal { return session(c).User.Principal() }

// AdminUsers lists the users the admin sees.
func (h *Handlers) AdminUsers(c echo.Context) error {
	return h.renderUsers(c, http.StatusOK, web.AdminUsersView{})
}

func (h *Handlers) renderUsers(c echo.Context, status int, v web.AdminUsersView) error {
	by := principal(c)
	us, err := h.Store.ListUsers(c.Request().Context(), by)
	if err != nil {
		return err
	}
	v.Nav, v.Users = nav(c), us
	if v.Refused != "" {
		// A refused change to a row names whose row it was.
		who := v.Refused
		for _, u := range us {
			if u.ID == v.Refused {
				who = u.Email
			}
		}
		v.Problem = web.Msg("User %s was not changed: %s", who, v.Problem.In(c.Request().Context()))
	}
	v.Grantable = by.Scope.String()
	v.Roles = grantableRoles(by)
	v.Editable = map[string]bool{}
	for _, u := range us {
		g := u.Grant()
		// The row offers a change only when some change is allowed: the
		// same rule the store applies, asked with the user's own grant.
		v.Editable[u.ID] = by.CheckUserChange(u.ID, &g, review.Grant{Role: review.RoleSupport, Scope: g.Scope}) == nil
	}
	return render(c, status, web.AdminUsersPage(v))
}

// grantableRoles lists the roles by may give, least powerful first.
func grantableRoles(by review.Principal) []string {
	var rs []string
	for _, r := range []review.Role{review.RoleSupport, review.RoleReviewer, review.RoleManager, review.RoleAdmin} {
		if by.CheckUserChange("", nil, review.Grant{Role: r, Scope: by.Scope}) == nil {
			rs = append(rs, string(r))
		}
	}
	return rs
}

// AdminAddUser adds a user with a generated password, shown once.
func (h *Handlers) AdminAddUser(c echo.Context) error {
	entered := enteredForm(c, "email", "role", "tenants")
	scope, err := review.ParseScope(c.FormValue("tenants"))
	if err != nil {
		return h.renderUsers(c, http.StatusUnprocessableEntity, web.AdminUsersView{Problem: problemText(c, err), Entered: entered})
	}
	pw := store.GeneratePassword()
	u, err := h.Store.AddUser(c.Request().Context(), principal(c), store.NewUser{Email: c.FormValue("email"), Password: pw,
		Role: review.Role(c.FormValue("role")), Scope: scope})
	if status := adminProblemStatus(err); status != 0 {
		return h.renderUsers(c, status, web.AdminUsersView{Problem: problemText(c, err), Entered: entered})
	}
	if err != nil {
		return err
	}
	unknown, err := h.Store.UnknownTenants(c.Request().Context(), scope.List())
	if err != nil {
		return err
	}
	return h.renderUsers(c, http.StatusOK, web.AdminUsersView{Created: u.Email, Password: pw, Unknown: unknownTenants(u.Email, unknown)})
}

// AdminResetPassword gives a user a new password, generated and shown once,
// once the admin has confirmed it: the row's button asks first, naming the
// user, since their current password stops working and they are signed
// out at once. The store decides about whom it may ask (UserSeenBy: others
// are not found) and who may reset (ResetPassword).
func (h *Handlers) AdminResetPassword(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	u, err := h.Store.UserSeenBy(ctx, principal(c), id)
	if err != nil {
		return err
	}
	if c.Request().PostFormValue("confirm") == "" {
		return h.renderUsers(c, http.StatusOK, web.AdminUsersView{Resetting: &web.UserPasswordReset{ID: u.ID, Email: u.Email}})
	}
	pw := store.GeneratePassword()
	_, err = h.Store.ResetPassword(ctx, principal(c), id, pw)
	if status := adminProblemStatus(err); status != 0 {
		return h.renderUsers(c, status, web.AdminUsersView{Problem: problemText(c, err)})
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderUsers(c, http.StatusOK, web.AdminUsersView{Reset: u.Email, Password: pw})
}

// unknownTenants says that user was given tenants no tenant has yet (a typo,
// or one ahead of time): saved, but they see nothing there.
func unknownTenants(user string, unknown []string) web.Message {
	if len(unknown) == 0 {
		return web.Message{}
	}
	return web.Msg("No tenant is named %s yet: %s sees nothing there until it has an API token or operations. Check the spelling.",
		strings.Join(unknown, ", "), user)
}

// AdminUpdateUser changes role, tenants or enablement; the user's sessions end.
// A refused change shows the page again with that user's row as typed.
func (h *Handlers) AdminUpdateUser(c echo.Context) error {
	refused := func(status int, err error) error {
		return h.renderUsers(c, status, web.AdminUsersView{Problem: problemText(c, err), Refused: c.Param("id"),
			Changed: enteredForm(c, "role", "tenants", "disabled")})
	}
	scope, err := review.ParseScope(c.FormValue("tenants"))
	if err != nil {
		return refused(http.StatusUnprocessableEntity, err)
	}
	ch := store.UserChange{Role: review.Role(c.FormValue("role")), Scope: scope, Disabled: c.FormValue("disabled") != ""}
	if f := c.Request().PostForm; f.Has("was_role") {
		// The row as the page showed it: a change from a page older than
		// another admin's change to the user is refused, not laid over it.
		ch.Seen = &store.UserSeen{Role: review.Role(f.Get("was_role")), Tenants: f.Get("was_tenants"), Disabled: f.Get("was_disabled") != ""}
		if ch.Disabled && !ch.Seen.Disabled && f.Get("confirm") == "" {
			// Disabling signs the user out at once, mid-review: a box
			// ticked on the wrong row is asked about before it is saved.
			return h.confirmDisable(c)
		}
	}
	u, err := h.Store.UpdateUser(c.Request().Context(), principal(c), c.Param("id"), ch)
	if errors.Is(err, store.ErrUserChangedMeanwhile) {
		// The row shows the user as they are now, not as typed over
		// what the page showed before.
		return h.renderUsers(c, http.StatusConflict, web.AdminUsersView{Problem: problemText(c, err), Refused: c.Param("id")})
	}
	if status := adminProblemStatus(err); status != 0 {
		return refused(status, err)
	}
	if err != nil {
		return err
	}
	unknown, err := h.Store.UnknownTenants(c.Request().Context(), scope.List())
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		// Saved, and said, rather than a redirect that would not tell.
		return h.renderUsers(c, http.StatusOK, web.AdminUsersView{Unknown: unknownTenants(u.Email, unknown)})
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

// confirmDisable asks the admin to confirm disabling the user of the
// posted row, carrying the row as sent.
func (h *Handlers) confirmDisable(c echo.Context) error {
	u, err := h.Store.UserSeenBy(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return h.renderUsers(c, http.StatusOK, web.AdminUsersView{Disabling: &web.UserDisabling{ID: u.ID, Email: u.Email,
		Form: enteredForm(c, "role", "tenants", "disabled", "was_role", "was_tenants", "was_disabled")}})
}

// adminProblemStatus tells which store refusals are answered on the form
// itself (and with which status); 0 means none of them.
func adminProblemStatus(err error) int {
	switch {
	case errors.Is(err, review.ErrInvalid), errors.Is(err, review.ErrConflict):
		return http.StatusUnprocessableEntity
	case errors.Is(err, review.ErrForbidden):
		return http.StatusForbidden
	}
	return 0
}

// problemText is a refusal as the person reads it, in their language:
// without the sentinel's own words ("forbidden: ", "invalid input: ") in
// front, and a field named the way the form labels it (`field "url": …`
// reads "url: …"); see domainMessages.
func problemText(c echo.Context, err error) web.Message {
	return errorMessage(c.Request().Context(), err)
}

// enteredForm keeps what the admin typed into fields, to show a refused
// form again with it (the password is never among them).
func enteredForm(c echo.Context, fields ...string) web.Entered {
	e := web.Entered{}
	for _, f := range fields {
		e[f] = c.Request().PostFormValue(f)
	}
	return e
}

// AdminTokens lists API tokens in the admin's scope.
func (h *Handlers) AdminTokens(c echo.Context) error {
	return h.renderTokens(c, http.StatusOK, web.AdminTokensView{})
}

func (h *Handlers) renderTokens(c echo.Context, status int, v web.AdminTokensView) error {
	ts, err := h.Store.ListTokens(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	v.Nav, v.Tokens, v.Grantable = nav(c), ts, principal(c).Scope.String()
	// Each drawing of the form its own id: the same form sent twice makes
	// one token (store.CreateTokenOnce).
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	v.FormID = hex.EncodeToString(id[:])
	return render(c, status, web.AdminTokensPage(v))
}

// AdminCreateToken creates a token and shows it once.
func (h *Handlers) AdminCreateToken(c echo.Context) error {
	tok, err := h.Store.CreateTokenOnce(c.Request().Context(), principal(c), c.FormValue("tenant"), c.FormValue("name"), c.FormValue("form_id"))
	var twice *store.TokenFormSentTwice
	if errors.As(err, &twice) {
		return h.renderTokens(c, http.StatusConflict, web.AdminTokensView{Problem: problemText(c, err)})
	}
	if status := adminProblemStatus(err); status != 0 {
		return h.renderTokens(c, status, web.AdminTokensView{Problem: problemText(c, err), Entered: enteredForm(c, "tenant", "name")})
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderTokens(c, http.StatusOK, web.AdminTokensView{NewToken: tok})
}

// AdminRevokeToken revokes a token at once, once the admin has confirmed
// it: the row's button asks first (naming the token and its tenant), since
// a revoked token cannot be used again and every integration sending it
// is refused from then on. A token already revoked (by another admin
// meanwhile) is left as it is.
func (h *Handlers) AdminRevokeToken(c echo.Context) error {
	id := c.Param("id")
	if c.Request().PostFormValue("confirm") == "" {
		ts, err := h.Store.ListTokens(c.Request().Context(), principal(c))
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ts, func(t store.Token) bool { return t.ID == id })
		switch {
		case i < 0:
			return review.ErrNotFound
		case ts[i].RevokedAt != nil:
			return c.Redirect(http.StatusSeeOther, "/admin/tokens")
		}
		return h.renderTokens(c, http.StatusOK, web.AdminTokensView{Revoking: &ts[i]})
	}
	if err := h.Store.RevokeToken(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/tokens")
}

// AdminDestinations shows each tenant's retry budget in the admin's scope
// and the configuration file the server started with, webhook secrets
// hidden.
func (h *Handlers) AdminDestinations(c echo.Context) error {
	v := web.DestinationsView{Nav: nav(c), Note: web.Msg("No configuration file: every destination gets the safe defaults.")}
	cfg := h.Store.Config()
	switch {
	case cfg != nil && cfg.Source != "":
		v.YAML = webhookSecret.ReplaceAllString(cfg.Source, "whsec_(hidden)")
	case cfg != nil && len(cfg.Destinations) > 0:
		// The demo configures its destinations itself.
		v.Note = web.Msg("No configuration file: the server configured %s itself (the demo); their action policies are at Actions. Every other destination gets the safe defaults.",
			strings.Join(slices.Sorted(maps.Keys(cfg.Destinations)), ", "))
	}
	budgets, err := h.Store.RetryBudgets(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	v.Budgets, v.Budget, v.Probes = budgets, cfg.Budget(), cfg.ProbeCredentials(os.Getenv)
	return render(c, http.StatusOK, web.AdminDestinationsPage(v))
}

var webhookSecret = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)
