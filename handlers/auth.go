package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

const tokenKey = "limbo.token"

// requireToken resolves the bearer token to its tenant. Deny by default:
// no token, an unknown one or a revoked one is 401.
func (h *Handlers) requireToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		auth := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return problemf(http.StatusUnauthorized, "unauthorized", "Unauthorized", "send Authorization: Bearer <token>")
		}
		ti, err := h.Store.TenantForToken(c.Request().Context(), strings.TrimSpace(token))
		if errors.Is(err, review.ErrNotFound) {
			return problemf(http.StatusUnauthorized, "unauthorized", "Unauthorized", "unknown or revoked token")
		}
		if err != nil {
			return err
		}
		c.Set(tokenKey, ti)
		return next(c)
	}
}

// caller is the token behind the request (set by requireToken).
func caller(c echo.Context) *store.TokenInfo {
	return c.Get(tokenKey).(*store.TokenInfo)
}

// actor names the caller in the audit trail.
func actor(c echo.Context) string {
	ti := caller(c)
	return "token:" + ti.ID + " (" + ti.Name + ")"
}
