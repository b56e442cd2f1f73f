package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/web"
)

// Dashboard shows queue health over a window (?window=24h, 7d or 30d, or
// any Go duration up to 90 days; default 7 days).
func (h *Handlers) Dashboard(c echo.Context) error {
	window := 7 * 24 * time.Hour
	if w := c.QueryParam("window"); w != "" {
		d, err := time.ParseDuration(w)
		if n, ok := strings.CutSuffix(w, "d"); ok {
			days, perr := strconv.Atoi(n)
			d, err = time.Duration(days)*24*time.Hour, perr
		}
		if err != nil || d < time.Minute || d > 90*24*time.Hour {
			return consoleError(http.StatusBadRequest, "The window is a duration between 1m and 2160h, such as 24h.")
		}
		window = d
	}
	d, err := h.Store.Dashboard(c.Request().Context(), session(c).User.Scope().List(), window, 48)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, web.DashboardPage(web.DashboardView{Nav: nav(c), D: d, Window: window}))
}
