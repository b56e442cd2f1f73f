package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Live updates of the console (static/live.js): GET /events is a stream
// of Server-Sent Events, one per committed change to a case in the
// user's tenants, from whichever instance made it (store.Subscribe);
// GET /cases/:id/live is the case's state in a few fields, which the case
// page polls when the stream is unavailable. Neither is needed: without
// JavaScript, or without a stream, the queue still polls its table and a
// stale decision form is still refused by the versions it carries.

// liveHeartbeat is how often a quiet stream sends a comment: proxies keep
// the connection open, and the session is checked again.
const liveHeartbeat = 15 * time.Second

// liveStreams ends the open event streams when the server shuts down:
// http.Server.Shutdown waits for requests to finish, and a stream does
// not on its own.
type liveStreams struct {
	mu    sync.Mutex
	done  chan struct{}
	ended bool
}

func (l *liveStreams) doneCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.ended {
			close(l.done)
		}
	}
	return l.done
}

// EndStreams ends every live event stream and refuses new ones; register
// it with http.Server.RegisterOnShutdown.
func (h *Handlers) EndStreams() {
	h.live.mu.Lock()
	defer h.live.mu.Unlock()
	if h.live.ended {
		return
	}
	h.live.ended = true
	if h.live.done != nil {
		close(h.live.done)
	}
}

// liveEvent is what the stream sends of a case change: the store's event,
// and whether the signed-in user made it.
type liveEvent struct {
	store.CaseEvent
	Mine bool `json:"mine,omitempty"`
}

// Events streams the case changes of the user's tenants as Server-Sent
// Events ("case" events, JSON data; "resync" when some may have been
// lost), with a comment every liveHeartbeat. It ends when the client goes
// away, the session ends (checked at each heartbeat, without counting as
// use) or the server shuts down. A request that does not accept
// text/event-stream (a link followed, a plain GET) is answered 406 at
// once: only an EventSource gets a stream that never ends.
func (h *Handlers) Events(c echo.Context) error {
	ctx := c.Request().Context()
	if !strings.Contains(c.Request().Header.Get("Accept"), "text/event-stream") {
		return consoleError(http.StatusNotAcceptable, "This address is the console's stream of live updates; pages open it on their own.")
	}
	done := h.live.doneCh()
	select {
	case <-done:
		return consoleError(http.StatusServiceUnavailable, "Live updates are unavailable; the page refreshes on its own.")
	default:
	}
	s := session(c)
	sub, err := h.Store.Subscribe(ctx, s.User.Scope().List())
	if err != nil {
		if errors.Is(err, store.ErrLiveUnavailable) {
			// The page keeps polling; EventSource retries later.
			return consoleError(http.StatusServiceUnavailable, "Live updates are unavailable; the page refreshes on its own.")
		}
		return err
	}
	defer sub.Close()
	cs, _ := h.Console.Cookies.Get(c.Request(), sessionCookie)
	sid, _ := cs.Values["sid"].(string)

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	// retry: how long EventSource waits before it connects again.
	if _, err := fmt.Fprint(w, "retry: 5000\n: live\n\n"); err != nil {
		return nil
	}
	w.Flush()
	// ended: the session was signed out, expired, or its user disabled or
	// changed (which ends the user's sessions, scope included); say so,
	// and stop. Checked before every write, not only at the heartbeat:
	// a user who lost a tenant must not hear its next case.
	ended := func() bool {
		if _, err := h.Store.SessionLive(ctx, sid, h.Console.Policy); err != nil {
			fmt.Fprint(w, "event: end\ndata: {}\n\n")
			w.Flush()
			return true
		}
		return false
	}
	beat := time.NewTicker(liveHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-sub.Done():
			return nil
		case <-beat.C:
			if ended() {
				return nil
			}
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return nil
			}
			w.Flush()
		case <-sub.Ready():
			evs := sub.Take()
			if ended() {
				return nil
			}
			for _, ev := range evs {
				name := "case"
				if ev.Kind == store.ChangeResync {
					name = "resync"
				}
				data, err := json.Marshal(liveEvent{CaseEvent: ev, Mine: ev.Actor != "" && strings.EqualFold(ev.Actor, s.User.Email)})
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data); err != nil {
					return nil
				}
			}
			w.Flush()
		}
	}
}

// caseLive is a case's state as the case page polls it.
type caseLive struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Version int64  `json:"version"`
	// Holder is who holds the claim now ("" when nobody does).
	Holder     string `json:"holder,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`
}

// CaseLive answers a case's state (status, version, claim holder) for the
// case page's polling fallback: a few fields read by primary key, cheap
// enough every few seconds. Another tenant's case is 404, as its page.
func (h *Handlers) CaseLive(c echo.Context) error {
	s := session(c)
	cs, err := h.Store.GetCase(c.Request().Context(), c.Param("id"), s.User.Scope().List())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, caseLive{ID: cs.ID, Status: cs.Status, Version: cs.Version,
		Holder: review.ClaimHolder(cs.ClaimedBy, cs.ClaimUntil, h.Store.Now()), ResolvedBy: cs.ResolvedBy})
}
