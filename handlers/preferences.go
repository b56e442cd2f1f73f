package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/web"
)

// withLanguage puts the request's console language in its context, from
// Accept-Language; requireUser replaces it with the user's saved choice.
func withLanguage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		setLanguage(c, "")
		return next(c)
	}
}

// setLanguage chooses the language for the rest of the request: pref when
// the console offers it, else Accept-Language.
func setLanguage(c echo.Context, pref string) {
	r := c.Request()
	c.SetRequest(r.WithContext(web.WithLang(r.Context(), web.NegotiateLang(pref, r))))
}

// SetLanguage saves the signed-in user's language ("" = follow the
// browser) and goes back to the page the menu was on.
func (h *Handlers) SetLanguage(c echo.Context) error {
	lang := c.Request().PostFormValue("language")
	if lang != "" && !web.ValidLang(lang) {
		return consoleError(http.StatusBadRequest, "Choose English, Italiano or the browser's language.")
	}
	s := session(c)
	if err := h.Store.SetLanguage(c.Request().Context(), s.User.Principal(), lang); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(c.Request().PostFormValue("next")))
}
