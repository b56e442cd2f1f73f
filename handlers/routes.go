package handlers

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/limbo-dev/limbo/buildinfo"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/static"
)

// MaxBodyBytes is the largest request body the API reads (1 MiB → 413 beyond).
const MaxBodyBytes = 1 << 20

// NewServer returns an Echo server with every route of Limbo registered.
func NewServer(h *Handlers) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = h.HandleError
	e.IPExtractor = clientAddress(h.TrustedProxies)
	e.Pre(headAsGet)
	e.Use(headRestored, h.accessLog, middleware.Recover(), h.bodyDeadline, securityHeaders, withLanguage)
	if h.Metrics != nil {
		e.Use(h.Metrics.Middleware)
	}
	h.Routes(e)
	return e
}

// clientAddress is how c.RealIP() finds the client — the one source of
// the address that login throttling and the audit trail record. Without
// trusted proxies it is the connection's peer and X-Forwarded-For /
// X-Real-IP are ignored: any client can write them. With them, it is the
// nearest address in X-Forwarded-For not in a trusted range, and the header
// counts only when the peer itself is trusted. Loopback, link-local and
// private ranges are not trusted unless listed: on a shared network, a
// neighbour must not pick its own address.
func clientAddress(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// HEAD is answered on every GET route in one place rather than with a HEAD
// twin per route: headAsGet routes a HEAD as the GET it mirrors, and
// headRestored gives the request back its method before any handler runs,
// so net/http (which holds the same request) sends the GET's status and
// headers without the body, and handlers know not to write one.
const headKey = "limbo.head"

// headAsGet makes the router find the GET route for a HEAD. Echo routes on
// the request it was given, so the method is changed in place.
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r := c.Request(); r.Method == http.MethodHead {
			r.Method = http.MethodGet
			c.Set(headKey, true)
		}
		return next(c)
	}
}

// headRestored, the first middleware after routing, puts HEAD back.
func headRestored(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Get(headKey) != nil {
			c.Request().Method = http.MethodHead
		}
		return next(c)
	}
}

// Routes is the route table: every route Limbo serves, with who may call it.
func (h *Handlers) Routes(e *echo.Echo) {
	// Public: probes for load balancers and orchestrators, and the API's
	// own description.
	// Assets: htmx carries its version in its name; the rest changes rarely.
	e.Group("/static", cacheFor(24*time.Hour)).StaticFS("/", static.FS)

	// Console: a signed-in user with a live server-side session; every
	// mutating route checks the CSRF token; each route names the
	// permission its role needs (deny by default).
	e.GET("/login", h.LoginForm, checkParams)
	formLimit := middleware.BodyLimit(strconv.Itoa(maxFormBytes)) // before anything reads the form
	e.POST("/login", h.Login, formLimit, checkParams, checkForm)
	// (Not an Echo group: a group with middleware catches every unmatched
	// path, which would turn an API 405 into a console redirect.)
	ui := func(method, path string, fn echo.HandlerFunc, p review.Permission) {
		mw := []echo.MiddlewareFunc{formLimit, checkParams, h.requireUser, requireCSRF}
		if p != "" {
			mw = append(mw, requirePerm(p))
		}
		mw = append(mw, checkForm)
		e.Add(method, path, fn, mw...)
	}
	ui(http.MethodPost, "/logout", h.Logout, "")
	ui(http.MethodPost, "/preferences/language", h.SetLanguage, "")
	ui(http.MethodPost, "/session/still-here", h.StillHere, "")
	ui(http.MethodGet, "/", h.Queue, review.PermRead)
	ui(http.MethodGet, "/cases/:id", h.CasePage, review.PermRead)
	ui(http.MethodGet, "/operations", h.Operations, review.PermRead)
	ui(http.MethodGet, "/operations/:id", h.OperationPage, review.PermRead)
	ui(http.MethodGet, "/events", h.Events, review.PermRead)
	ui(http.MethodGet, "/cases/:id/live", h.CaseLive, review.PermRead)
	ui(http.MethodPost, "/cases/:id/claim", h.ClaimCase, review.PermClaim)
	ui(http.MethodPost, "/cases/:id/release", h.ReleaseCase, review.PermClaim)
	ui(http.MethodPost, "/cases/:id/takeover", h.TakeOverCase, review.PermClaim)
	ui(http.MethodPost, "/cases/:id/decision", h.Decide, review.PermDecide)
	ui(http.MethodPost, "/cases/:id/reveal", h.RevealPayload, review.PermClaim)
	ui(http.MethodPost, "/cases/:id/check", h.CheckDestination, review.PermClaim)
	ui(http.MethodPost, "/bulk", h.Bulk, review.PermDecide)
	ui(http.MethodGet, "/dashboard", h.Dashboard, review.PermRead)
	ui(http.MethodGet, "/audit", h.AuditPage, review.PermReadAudit)
	ui(http.MethodGet, "/audit.csv", h.AuditCSV, review.PermReadAudit)
	ui(http.MethodGet, "/audit/verify", h.AuditVerify, review.PermReadAudit)
	ui(http.MethodGet, "/admin", func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/admin/users") }, review.PermAdmin)
	ui(http.MethodGet, "/admin/users", h.AdminUsers, review.PermAdmin)
	ui(http.MethodPost, "/admin/users", h.AdminAddUser, review.PermAdmin)
	ui(http.MethodPost, "/admin/users/:id", h.AdminUpdateUser, review.PermAdmin)
	ui(http.MethodPost, "/admin/users/:id/password", h.AdminResetPassword, review.PermAdmin)
	ui(http.MethodGet, "/admin/tokens", h.AdminTokens, review.PermAdmin)
	ui(http.MethodPost, "/admin/tokens", h.AdminCreateToken, review.PermAdmin)
	ui(http.MethodPost, "/admin/tokens/:id/revoke", h.AdminRevokeToken, review.PermAdmin)
	ui(http.MethodGet, "/admin/destinations", h.AdminDestinations, review.PermAdmin)
	ui(http.MethodGet, "/admin/actions", h.AdminActions, review.PermAdmin)
	ui(http.MethodGet, "/admin/webhooks", h.AdminWebhooks, review.PermAdmin)
	ui(http.MethodPost, "/admin/webhooks", h.AdminAddWebhook, review.PermAdmin)
	ui(http.MethodGet, "/admin/webhooks/:id", h.AdminDeliveries, review.PermAdmin)
	ui(http.MethodPost, "/admin/webhooks/:id/disable", h.AdminDisableWebhook, review.PermAdmin)
	ui(http.MethodPost, "/admin/webhooks/:id/enable", h.AdminEnableWebhook, review.PermAdmin)
	ui(http.MethodPost, "/admin/webhooks/:id/redeliver", h.AdminRedeliverWebhook, review.PermAdmin)
	e.GET("/healthz", h.Healthz)
	e.GET("/readyz", h.Readyz)
	e.GET("/api/v1/openapi.json", h.OpenAPI)
	if h.Metrics != nil {
		// Prometheus exposition: counts and latencies, no tenant data.
		e.GET("/metrics", echo.WrapHandler(h.Metrics.Handler()))
	}

	// Destination webhooks: authenticated by their signature, not a token.
	e.POST("/api/v1/inbound/:source", h.Inbound, checkParams, middleware.BodyLimit(strconv.Itoa(MaxBodyBytes)))

	// Integration API: a bearer token belongs to one tenant; everything
	// below is scoped to it.
	// Every route that reads parameters holds each path and query parameter
	// to its rule (checkParams) before authentication or a handler reads
	// one; the probes, the document and static files read none.
	api := e.Group("/api/v1", checkParams, middleware.BodyLimit(strconv.Itoa(MaxBodyBytes)), h.requireToken)
	// Bulk intake reads a larger body, so it is not in the group.
	e.POST("/api/v1/operations/batch", h.RegisterOperations, checkParams,
		bodyLimit(MaxBatchBodyBytes, "a batch's body is limited to 16 MiB"), h.requireToken)
	api.POST("/operations", h.RegisterOperation)
	api.GET("/operations", h.ListOperations)
	api.GET("/operations/:id", h.GetOperation)
	api.POST("/operations/:id/attempts", h.StartAttempt)
	api.POST("/operations/:id/attempts/:n/outcome", h.RecordOutcome)
	api.GET("/operations/:id/attempts/:n/output", h.AttemptOutput)
	api.POST("/operations/:id/evidence", h.AddEvidence)
	api.PUT("/operations/:id/jobs/:ref", h.PutJob)
	api.GET("/operations/:id/decisions", h.OperationDecisions)
	api.GET("/decisions", h.ListDecisions)
	api.GET("/actions", h.ListActions)

	// Anything else under /api answers a problem, not an HTML page: 405
	// with Allow for a route's path asked with a method it does not take
	// (as outside /api), else 404.
	api.Any("/*", func(c echo.Context) error {
		if allow := allowedMethods(e, echo.GetPath(c.Request())); allow != "" {
			c.Response().Header().Set(echo.HeaderAllow, allow)
			return echo.ErrMethodNotAllowed
		}
		return echo.ErrNotFound
	})
}

// apiCatchAll is the path of the catch-all, which every request under
// /api/v1 reaches when no other route takes its method and path.
const apiCatchAll = "/api/v1/*"

// allowedMethods is the Allow header for path: the methods a route other
// than the catch-all takes there (HEAD with GET, which headAsGet answers),
// "" when there is none. Echo's own 405 never comes under /api/v1: the
// catch-all takes every method of every path.
func allowedMethods(e *echo.Echo, path string) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		c := e.NewContext(nil, nil)
		e.Router().Find(m, path, c)
		if p := c.Path(); p != "" && p != apiCatchAll {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	return strings.Join(allow, ", ")
}

// Healthz answers 200 while the process is up.
func (h *Handlers) Healthz(c echo.Context) error {
	v := buildinfo.Read()
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "version": v.Version, "revision": v.Revision, "go": v.GoVersion})
}

// readiness is GET /readyz's answer.
type readiness struct {
	Status   string   `json:"status"`
	Warnings []string `json:"warnings,omitempty"`
}

// Readyz answers 200 when the database is reachable and its schema current,
// listing h.Warnings. A warning is not a 503: a load balancer would take a
// healthy instance out for a misconfigured probe — the API, the console and
// every other destination work, and what the warned destination cannot
// reconcile goes to review, not wrong.
//
// Audit sealing that has fallen behind (an event older than the sealer's
// interval that no checkpoint covers: store.SealLag) is a warning too, not
// a 503. The events are still written, each with its hash, and a sealer
// that comes back seals them; while one does not, every instance sharing
// the database would answer 503 alike, so the whole API would stop without
// sealing starting again. An operator sees it here, in
// limbo_audit_unsealed_oldest_age_seconds and in its alert.
func (h *Handlers) Readyz(c echo.Context) error {
	ctx := c.Request().Context()
	if err := h.Store.Ping(ctx); err != nil {
		return problemf(http.StatusServiceUnavailable, "not-ready", "Not ready", "database unreachable")
	}
	ok, err := h.Store.SchemaCurrent(ctx)
	if err != nil || !ok {
		return problemf(http.StatusServiceUnavailable, "not-ready", "Not ready", "database schema is not current; run limbo migrate")
	}
	warnings := h.Warnings
	if lag, err := h.Store.SealLag(ctx); err == nil && lag > h.Store.SealMax() {
		warnings = append(slices.Clip(warnings), fmt.Sprintf("audit sealing has stalled: the oldest audit event no checkpoint covers is %s old "+
			"(a checkpoint is due every %s); see limbo_audit_unsealed_oldest_age_seconds and `limbo audit verify`",
			lag.Round(time.Second), h.Store.SealMax()))
	}
	return c.JSON(http.StatusOK, readiness{Status: "ready", Warnings: warnings})
}

// cacheFor sets Cache-Control on what it wraps.
func cacheFor(d time.Duration) echo.MiddlewareFunc {
	v := "public, max-age=" + strconv.Itoa(int(d.Seconds()))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Header().Set("Cache-Control", v)
			return next(c)
		}
	}
}
