package handlers

import (
	"errors"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// AdminUsers lists users.
func (h *Handlers) AdminUsers(c echo.Context) error {
	return h.renderUsers(c, http.StatusOK, web.AdminUsersView{})
}

func (h *Handlers) renderUsers(c echo.Context, status int, v web.AdminUsersView) error {
	us, err := h.Store.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	v.Nav, v.Users = nav(c), us
	return render(c, status, web.AdminUsersPage(v))
}

// AdminAddUser adds a user with a generated password, shown once.
func (h *Handlers) AdminAddUser(c echo.Context) error {
	scope, err := review.ParseScope(c.FormValue("tenants"))
	if err != nil {
		return h.renderUsers(c, http.StatusUnprocessableEntity, web.AdminUsersView{Problem: err.Error()})
	}
	pw := store.GeneratePassword()
	u, err := h.Store.AddUser(c.Request().Context(), store.NewUser{Email: c.FormValue("email"), Password: pw,
		Role: review.Role(c.FormValue("role")), Scope: scope, Actor: session(c).User.Email})
	if errors.Is(err, review.ErrInvalid) || errors.Is(err, review.ErrConflict) {
		return h.renderUsers(c, http.StatusUnprocessableEntity, web.AdminUsersView{Problem: err.Error()})
	}
	if err != nil {
		return err
	}
	return h.renderUsers(c, http.StatusOK, web.AdminUsersView{Created: u.Email, Password: pw})
}

// AdminUpdateUser changes role, tenants or enablement; the user's sessions end.
func (h *Handlers) AdminUpdateUser(c echo.Context) error {
	scope, err := review.ParseScope(c.FormValue("tenants"))
	if err != nil {
		return h.renderUsers(c, http.StatusUnprocessableEntity, web.AdminUsersView{Problem: err.Error()})
	}
	if c.Param("id") == session(c).User.ID && (c.FormValue("disabled") != "" || c.FormValue("role") != string(review.RoleAdmin)) {
		return h.renderUsers(c, http.StatusUnprocessableEntity, web.AdminUsersView{Problem: "You cannot disable yourself or give up your own admin role."})
	}
	_, err = h.Store.UpdateUser(c.Request().Context(), c.Param("id"), store.UserChange{Role: review.Role(c.FormValue("role")),
		Scope: scope, Disabled: c.FormValue("disabled") != "", Actor: session(c).User.Email})
	if errors.Is(err, review.ErrInvalid) {
		return h.renderUsers(c, http.StatusUnprocessableEntity, web.AdminUsersView{Problem: err.Error()})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

// AdminTokens lists API tokens in the admin's scope.
func (h *Handlers) AdminTokens(c echo.Context) error {
	return h.renderTokens(c, http.StatusOK, web.AdminTokensView{})
}

func (h *Handlers) renderTokens(c echo.Context, status int, v web.AdminTokensView) error {
	ts, err := h.Store.ListTokens(c.Request().Context(), session(c).User.Scope().List())
	if err != nil {
		return err
	}
	v.Nav, v.Tokens = nav(c), ts
	return render(c, status, web.AdminTokensPage(v))
}

// AdminCreateToken creates a token and shows it once.
func (h *Handlers) AdminCreateToken(c echo.Context) error {
	tenant := c.FormValue("tenant")
	if !session(c).User.Scope().Allows(tenant) {
		return h.renderTokens(c, http.StatusUnprocessableEntity, web.AdminTokensView{Problem: "That tenant is outside your scope."})
	}
	tok, err := h.Store.CreateToken(c.Request().Context(), tenant, c.FormValue("name"), session(c).User.Email)
	if errors.Is(err, review.ErrInvalid) {
		return h.renderTokens(c, http.StatusUnprocessableEntity, web.AdminTokensView{Problem: err.Error()})
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderTokens(c, http.StatusOK, web.AdminTokensView{NewToken: tok})
}

// AdminRevokeToken revokes a token at once.
func (h *Handlers) AdminRevokeToken(c echo.Context) error {
	if err := h.Store.RevokeToken(c.Request().Context(), c.Param("id"), session(c).User.Scope().List(), session(c).User.Email); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/tokens")
}

// AdminDestinations shows the configuration file the server started with,
// webhook secrets hidden.
func (h *Handlers) AdminDestinations(c echo.Context) error {
	text := "# no configuration file: every destination gets the safe defaults\n"
	if cfg := h.Store.Config(); cfg != nil && cfg.Source != "" {
		text = webhookSecret.ReplaceAllString(cfg.Source, "whsec_(hidden)")
	}
	return render(c, http.StatusOK, web.AdminDestinationsPage(nav(c), text))
}

var webhookSecret = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)
