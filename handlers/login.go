package handlers

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// LoginForm shows the sign-in form with a fresh login CSRF cookie (a
// double-submit token: there is no session yet to hold one).
func (h *Handlers) LoginForm(c echo.Context) error {
	if h.Console == nil {
		return echo.ErrNotFound
	}
	c.Set(signedOutKey, c.QueryParam("signed_out") == "1")
	return h.renderLogin(c, http.StatusOK, "", c.QueryParam("next"), web.Message{})
}

// deviceCookie holds the browser's device token for the account it last
// signed in to: with it, an attacker's failures at the same address do
// not lock that account's owner out (store.LoginWithDevice).
const deviceCookie = "limbo_device"

// signedOutKey marks a login form shown right after signing out, which
// says so (the session is gone; the message comes from the redirect).
const signedOutKey = "limbo.signed_out"

// renderLogin shows the sign-in form; problem, when it has a key, is why
// the last sign-in was refused, in the reader's language.
func (h *Handlers) renderLogin(c echo.Context, status int, email, next string, problem web.Message) error {
	token := randomCSRF()
	c.SetCookie(&http.Cookie{Name: loginCSRF, Value: token, Path: "/login", HttpOnly: true, Secure: h.Console.SecureCookies,
		SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	signedOut, _ := c.Get(signedOutKey).(bool)
	text := ""
	if problem.Key != "" {
		text = problem.In(c.Request().Context())
	}
	return render(c, status, web.LoginPage(email, safeNext(next), token, text, signedOut))
}

// Login checks the credentials, rotates the session (a new id at every
// sign-in) and redirects to where the user was going.
func (h *Handlers) Login(c echo.Context) error {
	if h.Console == nil {
		return echo.ErrNotFound
	}
	ck, err := c.Cookie(loginCSRF)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(csrfToken(c))) != 1 {
		// Nothing is checked. The form again, with a fresh token and the
		// email as typed (never the password), rather than an error page:
		// a sign-in page left open longer than its token lives (an hour,
		// after a session idled out) is the usual way here.
		return h.renderLogin(c, http.StatusForbidden, strings.TrimSpace(bodyValue(c, "email")), bodyValue(c, "next"),
			web.Msg("The sign-in form had expired (or came from another site), so nothing was checked. Sign in again."))
	}
	// From the body only: a password in a query string ends up in logs.
	email, password, next := strings.TrimSpace(bodyValue(c, "email")), bodyValue(c, "password"), bodyValue(c, "next")
	var device string
	if ck, err := c.Cookie(deviceCookie); err == nil {
		device = ck.Value
	}
	id, _, device, err := h.Store.LoginWithDevice(c.Request().Context(), email, password, c.RealIP(), device, h.Console.Policy)
	var th *store.ThrottledError
	switch {
	case errors.As(err, &th):
		c.Response().Header().Set("Retry-After", strconv.Itoa(th.Seconds()))
		return h.renderLogin(c, http.StatusTooManyRequests, email, next, throttledMessage(th))
	case errors.Is(err, store.ErrBadCredentials):
		return h.renderLogin(c, http.StatusUnauthorized, email, next, web.Msg("Wrong email or password."))
	case errors.Is(err, review.ErrInvalid):
		// Not given back: what was typed holds what a form cannot show.
		return h.renderLogin(c, http.StatusBadRequest, "", next, web.Msg("No account can have that email address. Check what was typed."))
	case err != nil:
		return err
	}
	// A session this browser still holds (another user's, signed in
	// before on this computer) ends now, server-side: the new cookie
	// replaces it, and a copy of the old one must not stay live.
	if old, _ := h.Console.Cookies.Get(c.Request(), sessionCookie); old != nil {
		if prev, _ := old.Values["sid"].(string); prev != "" && prev != id {
			if sess, err := h.Store.SessionLive(c.Request().Context(), prev, h.Console.Policy); err == nil {
				if err := h.Store.Logout(c.Request().Context(), prev, sess.User.Principal()); err != nil {
					return err
				}
			}
		}
	}
	// The browser's device token for this account (store.LoginWithDevice),
	// sent only to the sign-in form's handler.
	c.SetCookie(&http.Cookie{Name: deviceCookie, Value: device, Path: "/login", HttpOnly: true, Secure: h.Console.SecureCookies,
		SameSite: http.SameSiteStrictMode, MaxAge: int(store.DeviceTokenLife / time.Second)})
	cs, _ := h.Console.Cookies.New(c.Request(), sessionCookie)
	cs.Values = map[any]any{"sid": id}
	if err := cs.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// throttledMessage says when a throttled sign-in may be tried again, as
// store.ThrottledError does in English: whole seconds up to a minute, then
// whole minutes (rounded up), one message per number so each language
// writes its singular and plural.
func throttledMessage(th *store.ThrottledError) web.Message {
	n := th.Seconds()
	if n > 60 {
		if n = (n + 59) / 60; n == 1 {
			return web.Msg("Too many failed sign-ins. Try again in 1 minute.")
		}
		return web.Msg("Too many failed sign-ins. Try again in %d minutes.", n)
	}
	if n == 1 {
		return web.Msg("Too many failed sign-ins. Try again in 1 second.")
	}
	return web.Msg("Too many failed sign-ins. Try again in %d seconds.", n)
}

// Logout ends the server-side session, so even a copied cookie is dead.
func (h *Handlers) Logout(c echo.Context) error {
	cs, _ := h.Console.Cookies.Get(c.Request(), sessionCookie)
	if id, _ := cs.Values["sid"].(string); id != "" {
		if err := h.Store.Logout(c.Request().Context(), id, session(c).User.Principal()); err != nil {
			return err
		}
	}
	cs.Options.MaxAge = -1
	if err := cs.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login?signed_out=1")
}

// safeNext is where to go after sign-in: next when it is a path on this
// site, else "/". It is the one place that decides; see sameSitePath.
func safeNext(next string) string {
	if !sameSitePath(next) {
		return "/"
	}
	return next
}

// sameSitePath reports whether p, used as a Location, stays on this site.
// Browsers read a Location leniently — "//x" and "/\x" are other hosts,
// tab, CR and LF are dropped ("/\t/x" is "//x"), a backslash is a slash —
// so only a plain path passes: printable ASCII (no whitespace, control
// characters or backslash), starting with "/" but not "//", with no scheme,
// host or user info. Its percent-decoded forms (a proxy or browser may
// normalise "/%2F/x" to "//x") must not start like another host either, nor
// hold control characters.
func sameSitePath(p string) bool {
	if p == "/" {
		return true
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !plainPath(p) {
		return false
	}
	// Decode until nothing changes ("/%252F" is "/%2F" is "//").
	for s, i := p, 0; ; i++ {
		d := unescapeLenient(s)
		if d == s {
			return true
		}
		if i == maxDecodes || !leadsHere(d) || strings.ContainsFunc(d, isControl) {
			return false
		}
		s = d
	}
}

// maxDecodes bounds sameSitePath's rounds of percent-decoding: a path still
// encoded deeper than this is not one anyone meant.
const maxDecodes = 4

// unescapeLenient decodes every valid %XX in s and keeps anything else as
// it is, the way a lenient normaliser would (url.PathUnescape gives up on
// the whole string at the first bad escape, which would hide the rest).
func unescapeLenient(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// plainPath: printable ASCII without backslash, and leadsHere.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f || p[i] == '\\' {
			return false
		}
	}
	return leadsHere(p)
}

// leadsHere: "/" followed by anything but a second slash or a backslash.
func leadsHere(p string) bool {
	if p == "/" {
		return true
	}
	return len(p) >= 2 && p[0] == '/' && p[1] != '/' && p[1] != '\\'
}

// isControl: C0, DEL or C1 (and invalid UTF-8, read as U+FFFD, is not).
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }
