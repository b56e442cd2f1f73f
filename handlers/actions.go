package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/web"
)

// actionPage is GET /api/v1/actions's answer.
type actionPage struct {
	Actions []review.PublishedPolicy `json:"actions"`
}

// ListActions publishes the action policies open to the caller's tenant:
// what the tool-call controller (package agent) reads to derive a call's
// key and to know whether it waits for approval. An action not listed has
// no policy and gets the safe defaults.
func (h *Handlers) ListActions(c echo.Context) error {
	out := actionPage{Actions: []review.PublishedPolicy{}}
	tenant := caller(c).Tenant
	for _, e := range review.Catalog(h.Store.Config()) {
		if e.OpenTo(tenant) {
			out.Actions = append(out.Actions, e.Published())
		}
	}
	return c.JSON(http.StatusOK, out)
}

// AdminActions shows the action policy catalog, read-only, with the
// checklist items each policy leaves unanswered (what `limbo policy lint`
// reports).
func (h *Handlers) AdminActions(c echo.Context) error {
	return render(c, http.StatusOK, web.AdminActionsPage(nav(c), review.Catalog(h.Store.Config())))
}
