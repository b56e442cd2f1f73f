package handlers

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// Console holds what the console needs beyond the API: the cookie store
// and the session policy.
type Console struct {
	Cookies *sessions.CookieStore
	Policy  store.SessionPolicy
	// SecureCookies marks cookies Secure (set when served over TLS).
	SecureCookies bool
}

const (
	sessionCookie = "limbo_session"
	loginCSRF     = "limbo_login_csrf"
	sessionKey    = "limbo.session"
)

// NewConsole builds the cookie store from keys every instance shares.
func NewConsole(hashKey, blockKey []byte, secure bool, pol store.SessionPolicy) *Console {
	cs := sessions.NewCookieStore(hashKey, blockKey)
	absolute := pol.Absolute
	if absolute <= 0 {
		absolute = 12 * time.Hour
	}
	cs.Options = &sessions.Options{Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode, MaxAge: int(absolute.Seconds())}
	return &Console{Cookies: cs, Policy: pol, SecureCookies: secure}
}

// session is the signed-in user's session (set by requireUser).
func session(c echo.Context) *store.Session {
	s, _ := c.Get(sessionKey).(*store.Session)
	return s
}

func nav(c echo.Context) web.Nav {
	s := session(c)
	if s == nil {
		return web.Nav{}
	}
	r := c.Request()
	return web.Nav{Email: s.User.Email, Role: string(s.User.Role), CSRF: s.CSRFToken, Path: r.URL.Path, Back: backTo(r), Language: s.User.Language}
}

// backTo is where the language menu returns: this page, query and all,
// when it was a GET; after a form (whose target has no page of its own)
// the page the form was on, as the browser says, else the queue. The
// preference handler still checks it is a path of this console.
func backTo(r *http.Request) string {
	if r.Method == http.MethodGet {
		return r.URL.RequestURI()
	}
	if u, err := url.Parse(r.Referer()); err == nil && u.Path != "" && (u.Host == "" || u.Host == r.Host) {
		return u.RequestURI()
	}
	return "/"
}

// requireUser resolves the session cookie to a live server-side session.
// Without one, a page request is sent to the login form and an htmx
// request is told to go there (HX-Redirect).
func (h *Handlers) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h.Console == nil {
			return echo.ErrNotFound
		}
		cs, _ := h.Console.Cookies.Get(c.Request(), sessionCookie)
		id, _ := cs.Values["sid"].(string)
		if id != "" {
			resolve := h.Store.Session
			if backgroundPoll(c) {
				resolve = h.Store.SessionLive // not the user's doing: not use
			}
			sess, err := resolve(c.Request().Context(), id, h.Console.Policy)
			if err == nil {
				c.Set(sessionKey, sess)
				setLanguage(c, sess.User.Language)
				c.Response().Header().Set("Cache-Control", "no-store")
				return next(c)
			}
			if !errors.Is(err, review.ErrNotFound) {
				return err
			}
		}
		// Back here after signing in: this page when it was one; after a
		// form (a session that ended while a reason was typed) the page
		// the form was on — the form's own address takes no GET.
		next := c.Request().URL.RequestURI()
		if m := c.Request().Method; m != http.MethodGet && m != http.MethodHead {
			next = backTo(c.Request())
		}
		to := "/login?next=" + url.QueryEscape(next)
		if isHTMX(c) {
			// Any htmx request, boosted or not: htmx follows HX-Redirect.
			c.Response().Header().Set("HX-Redirect", to)
			return c.NoContent(http.StatusUnauthorized)
		}
		return c.Redirect(http.StatusSeeOther, to)
	}
}

// backgroundPoll reports whether a request is one an open page sends on
// its own — the queue's refresh (htmx, from the element #queue: every 5 s
// and on a live update), the case page's poll of /cases/:id/live, the
// live stream (EventSource connects again by itself) — rather than one
// the user made. It does not count as use of the session, or a tab left
// open would keep a session from ever idling out.
func backgroundPoll(c echo.Context) bool {
	switch c.Path() {
	case "/cases/:id/live", "/events":
		return true
	}
	r := c.Request()
	return r.Method == http.MethodGet && isHTMX(c) && r.Header.Get("HX-Trigger") == "queue"
}

// StillHere answers the page's "still here" (static/limbo.js): sent,
// at most once a minute, while the user types or changes a choice in a
// console form. Typing a careful reason is use of the session even though
// no page is asked for; requireUser has already counted this request as
// use (it is not a backgroundPoll), so there is nothing left to do. A
// session that has already ended stays ended: requireUser refuses it.
func (h *Handlers) StillHere(c echo.Context) error {
	return c.NoContent(http.StatusNoContent)
}

// requireCSRF refuses a mutating console request whose token (header
// X-CSRF-Token or the body's "csrf" field) is not the session's: 403.
func requireCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method == http.MethodGet || c.Request().Method == http.MethodHead {
			return next(c)
		}
		s := session(c)
		if c.Request().Header.Get("X-CSRF-Token") == "" {
			// The token is in the body: one that did not arrive (or
			// arrived cut short) is said so, not taken for a forgery.
			if err := parseForm(c.Request()); err != nil {
				return err
			}
		}
		got := csrfToken(c)
		if s == nil || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRFToken)) != 1 {
			return consoleError(http.StatusForbidden, "The form was stale or forged (CSRF token missing or wrong). Reload the page and try again.")
		}
		return next(c)
	}
}

// csrfToken is the CSRF token a request carries: the X-CSRF-Token header
// (htmx sends it) or the "csrf" field of the body. Never the query string:
// a token there leaks through logs, history and Referer, and a link is all
// it would take to replay it.
func csrfToken(c echo.Context) string {
	if t := c.Request().Header.Get("X-CSRF-Token"); t != "" {
		return t
	}
	return bodyValue(c, "csrf")
}

// bodyValue is a field of the request body (urlencoded or multipart), never
// of the query string — unlike c.FormValue, which reads both.
func bodyValue(c echo.Context, name string) string {
	return c.Request().PostFormValue(name)
}

// requirePerm refuses users whose role lacks p: 403, deny by default.
func requirePerm(p review.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			s := session(c)
			if s == nil || !s.User.Role.Can(p) {
				return consoleError(http.StatusForbidden, "Your role may not do this.")
			}
			return next(c)
		}
	}
}

// ConsoleError is an error answered as a readable page or fragment. Its
// message is a catalog key and its arguments, translated when it is
// rendered, in the reader's language.
type ConsoleError struct {
	Status  int
	Message web.Message
}

// Error is the message in English (logs, tests).
func (e *ConsoleError) Error() string { return e.Message.String() }

// consoleError is a console refusal: key is an English catalog key (with
// its Italian in a web/catalog_it*.go; TestCatalogComplete finds the
// literal keys of consoleError calls too), args its format's arguments.
func consoleError(status int, key string, args ...any) error {
	return &ConsoleError{Status: status, Message: web.Msg(key, args...)}
}

// renderConsoleError answers a console error as HTML, in the request's
// language: the message alone for htmx, or inside the layout.
func (h *Handlers) renderConsoleError(c echo.Context, status int, msg web.Message) {
	// The page is rendered even when the request's context has ended
	// (templ renders nothing then): a body that timed out cancels it, and
	// its client is still there to read why.
	c.SetRequest(c.Request().WithContext(context.WithoutCancel(c.Request().Context())))
	text := msg.In(c.Request().Context())
	n := nav(c)
	n.Flash = text
	if err := renderPageOr(c, status, web.ErrorPage(n, status, text), web.ErrorFragment(text)); err != nil {
		h.Log.Error("rendering error page", "err", err)
	}
}

// isConsolePath tells console requests (HTML answers) from API requests.
func isConsolePath(p string) bool {
	return !strings.HasPrefix(p, "/api/") && p != "/healthz" && p != "/readyz" && p != "/metrics"
}

func randomCSRF() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
