package handlers

import (
	"bytes"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// How the console answers htmx. A console handler renders either a page or
// one region of it (a fragment: the queue's table, a case's decision
// panel), and decides which with isFragment alone.

// isHTMX reports whether htmx sent the request (any kind of htmx request).
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// isFragment reports whether the request wants a region of a page rather
// than the page: an htmx request that is neither boosted (a link or form
// htmx took over, which swaps in the whole body) nor a history restore
// (htmx reloading a page missing from its cache, which needs the whole
// page).
func isFragment(c echo.Context) bool {
	h := c.Request().Header
	return isHTMX(c) && h.Get("HX-Boosted") != "true" && h.Get("HX-History-Restore-Request") != "true"
}

// fragmentVary names the request headers isFragment reads: a cache must
// not answer one kind of request with the other's body.
const fragmentVary = "HX-Request, HX-Boosted, HX-History-Restore-Request"

// render buffers a component, then writes it, so a failing template never
// leaves half a page behind.
func render(c echo.Context, status int, cmp templ.Component) error {
	var buf bytes.Buffer
	if err := cmp.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	c.Response().Header().Set("Vary", fragmentVary)
	return c.HTMLBlob(status, buf.Bytes())
}

// renderPageOr renders the fragment for a fragment request, else the page.
func renderPageOr(c echo.Context, status int, page, fragment templ.Component) error {
	if isFragment(c) {
		return render(c, status, fragment)
	}
	return render(c, status, page)
}
