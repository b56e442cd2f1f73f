package handlers

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// LoginForm shows the sign-in form with a fresh login CSRF cookie (a
// double-submit token: there is no session yet to hold one).
func (h *Handlers) LoginForm(c echo.Context) error {
	if h.Console == nil {
		return echo.ErrNotFound
	}
	return h.renderLogin(c, http.StatusOK, "", "")
}

func (h *Handlers) renderLogin(c echo.Context, status int, email, problem string) error {
	token := randomCSRF()
	c.SetCookie(&http.Cookie{Name: loginCSRF, Value: token, Path: "/login", HttpOnly: true, Secure: h.Console.SecureCookies,
		SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	return render(c, status, web.LoginPage(email, safeNext(c.FormValue("next")), token, problem))
}

// Login checks the credentials, rotates the session (a new id at every
// sign-in) and redirects to where the user was going.
func (h *Handlers) Login(c echo.Context) error {
	if h.Console == nil {
		return echo.ErrNotFound
	}
	ck, err := c.Cookie(loginCSRF)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(c.FormValue("csrf"))) != 1 {
		return consoleError(http.StatusForbidden, "The sign-in form was stale or forged. Reload it and try again.")
	}
	email, password := strings.TrimSpace(c.FormValue("email")), c.FormValue("password")
	id, _, err := h.Store.Login(c.Request().Context(), email, password, c.RealIP(), h.Console.Policy)
	var th *store.ThrottledError
	switch {
	case errors.As(err, &th):
		return h.renderLogin(c, http.StatusTooManyRequests, email, th.Error())
	case errors.Is(err, store.ErrBadCredentials):
		return h.renderLogin(c, http.StatusUnauthorized, email, "Wrong email or password.")
	case err != nil:
		return err
	}
	cs, _ := h.Console.Cookies.New(c.Request(), sessionCookie)
	cs.Values = map[any]any{"sid": id}
	if err := cs.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(c.FormValue("next")))
}

// Logout ends the server-side session, so even a copied cookie is dead.
func (h *Handlers) Logout(c echo.Context) error {
	cs, _ := h.Console.Cookies.Get(c.Request(), sessionCookie)
	if id, _ := cs.Values["sid"].(string); id != "" {
		if err := h.Store.Logout(c.Request().Context(), id, session(c).User.Email); err != nil {
			return err
		}
	}
	cs.Options.MaxAge = -1
	if err := cs.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps redirects on this site: a path, never a URL elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\\\") {
		return "/"
	}
	return next
}
