package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/store"
)

const requestIDKey = "limbo.request_id"

// requestID is the request's id: the one the request itself set, for
// X-Request-Id, or "" outside a request (tests calling handlers directly).
func requestID(c echo.Context) string {
	id, _ := c.Get(requestIDKey).(string)
	return id
}

// accessLog gives every request an id and logs one line when it ends.
//
// The id is X-Request-Id as a trusted proxy sent it (so a line here joins
// the proxy's own), else a new one; it is echoed in the answer and in every
// problem+json, so a user who reports an error can quote it. A header from
// anyone else is ignored: a client must not choose the id of its lines in
// our logs.
//
// The line holds method, route (the pattern, not the path: no ids or
// query, which may carry what a user typed), status, duration, bytes, the
// id, and who asked: the tenant for the API, the user for the console.
// Never a header, a token, a password or a session id.
func (h *Handlers) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		id := ""
		if h.trustedPeer(c.Request()) {
			id = wellFormedRequestID(c.Request().Header.Get(echo.HeaderXRequestID))
		}
		if id == "" {
			id = newRequestID()
		}
		c.Set(requestIDKey, id)
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		if err := next(c); err != nil {
			// Answered here, so the line has the status sent.
			c.Error(err)
		}
		h.logRequest(c, id, time.Since(start))
		return nil
	}
}

func (h *Handlers) logRequest(c echo.Context, id string, took time.Duration) {
	route := c.Path()
	if route == "" {
		route = "unmatched"
	}
	status := c.Response().Status
	level := slog.LevelInfo
	if status >= http.StatusInternalServerError {
		level = slog.LevelError
	}
	if !h.Log.Enabled(c.Request().Context(), level) {
		return // (a benchmark's quiet logger: no line to build)
	}
	attrs := []slog.Attr{
		slog.String("method", c.Request().Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.Int64("bytes", c.Response().Size),
		slog.String("request_id", id),
	}
	if ti, ok := c.Get(tokenKey).(*store.TokenInfo); ok {
		attrs = append(attrs, slog.String("tenant", ti.Tenant))
	}
	if s := session(c); s != nil {
		attrs = append(attrs, slog.String("user", s.User.Email))
	}
	h.Log.LogAttrs(c.Request().Context(), level, "request", attrs...)
}

// trustedPeer: the connection comes from one of the trusted proxies.
func (h *Handlers) trustedPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	for _, n := range h.TrustedProxies {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// wellFormedRequestID is id when it is 1–128 characters of letters,
// digits and . _ - : (what proxies generate: UUIDs, hex, ULIDs), else "".
// Anything else could forge log lines or fill them.
func wellFormedRequestID(id string) string {
	if len(id) == 0 || len(id) > 128 {
		return ""
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == ':') {
			return ""
		}
	}
	return id
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
