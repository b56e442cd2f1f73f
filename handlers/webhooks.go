package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// AdminWebhooks lists webhook endpoints in the admin's scope.
func (h *Handlers) AdminWebhooks(c echo.Context) error {
	return h.renderWebhooks(c, http.StatusOK, web.AdminWebhooksView{})
}

func (h *Handlers) renderWebhooks(c echo.Context, status int, v web.AdminWebhooksView) error {
	es, err := h.Store.ListWebhookEndpoints(c.Request().Context(), session(c).User.Scope().List())
	if err != nil {
		return err
	}
	v.Nav, v.Endpoints, v.Grantable = nav(c), es, principal(c).Scope.String()
	return render(c, status, web.AdminWebhooksPage(v))
}

// AdminAddWebhook adds an endpoint and shows its signing secret once.
func (h *Handlers) AdminAddWebhook(c echo.Context) error {
	e, err := h.Store.AddWebhookEndpoint(c.Request().Context(), principal(c), store.NewWebhookEndpoint{Tenant: c.FormValue("tenant"),
		URL: c.FormValue("url"), Description: c.FormValue("description")})
	if status := adminProblemStatus(err); status != 0 {
		return h.renderWebhooks(c, status, web.AdminWebhooksView{Problem: problemText(c, err), Entered: enteredForm(c, "tenant", "url", "description")})
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderWebhooks(c, http.StatusOK, web.AdminWebhooksView{NewSecret: e.Secret, NewURL: e.URL})
}

// AdminDisableWebhook stops deliveries to an endpoint.
func (h *Handlers) AdminDisableWebhook(c echo.Context) error {
	if err := h.Store.DisableWebhookEndpoint(c.Request().Context(), principal(c), c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks")
}

// AdminEnableWebhook lets a disabled endpoint receive decisions again, and
// shows its page: where its given-up messages can be delivered again.
func (h *Handlers) AdminEnableWebhook(c echo.Context) error {
	id := c.Param("id")
	if err := h.Store.EnableWebhookEndpoint(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+url.PathEscape(id))
}

// AdminRedeliverWebhook delivers an endpoint's given-up messages again.
func (h *Handlers) AdminRedeliverWebhook(c echo.Context) error {
	id := c.Param("id")
	_, err := h.Store.RedeliverWebhookMessages(c.Request().Context(), principal(c), id)
	if status := adminProblemStatus(err); status != 0 {
		return h.renderDeliveries(c, status, web.DeliveriesView{Problem: problemText(c, err)})
	}
	if err != nil {
		return err
	}
	// The page says how many are on their way again, counted from the
	// messages: true after a reload, unlike a number in the URL.
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+url.PathEscape(id))
}

// AdminDeliveries shows one endpoint's delivery history, and how many of
// its messages were given up or are being delivered again.
func (h *Handlers) AdminDeliveries(c echo.Context) error {
	return h.renderDeliveries(c, http.StatusOK, web.DeliveriesView{})
}

func (h *Handlers) renderDeliveries(c echo.Context, status int, v web.DeliveriesView) error {
	ctx := c.Request().Context()
	scope := session(c).User.Scope().List()
	e, err := h.Store.GetWebhookEndpoint(ctx, c.Param("id"), scope)
	if err != nil {
		return err
	}
	page, err := h.Store.DeliveryHistory(ctx, e.ID, scope, c.QueryParam("cursor"), 100)
	if err != nil {
		return err
	}
	if v.Redelivery, err = h.Store.RedeliveryOf(ctx, e.ID, scope); err != nil {
		return err
	}
	if page.Next != "" {
		v.Next = "/admin/webhooks/" + e.ID + "?cursor=" + url.QueryEscape(page.Next)
	}
	v.Nav, v.Endpoint, v.Page = nav(c), e, page
	return render(c, status, web.DeliveriesPage(v))
}
