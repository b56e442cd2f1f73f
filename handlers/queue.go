package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// queuePageSize is how many cases one queue page shows.
const queuePageSize = 50

// allReasons are the queue filter's reasons, as review defines them.
var allReasons = func() []string {
	var out []string
	for _, r := range review.AllReasons() {
		out = append(out, string(r))
	}
	return out
}()

// Queue renders the review queue: the whole page, or for htmx (the live
// poll) only the table fragment.
func (h *Handlers) Queue(c echo.Context) error {
	v, err := h.queueView(c)
	if err != nil {
		return err
	}
	return renderPageOr(c, http.StatusOK, web.QueuePage(*v), web.QueueTable(*v))
}

func (h *Handlers) queueView(c echo.Context) (*web.QueueView, error) {
	s := session(c)
	canDecide, _ := s.User.Role.DecidesCases()
	form := web.QueueForm{Tenant: c.QueryParam("tenant"), Destination: c.QueryParam("destination"), Action: c.QueryParam("action"),
		Reason: c.QueryParam("reason"), Flag: c.QueryParam("flag"), Claimed: c.QueryParam("claimed"), Age: c.QueryParam("age"), Q: c.QueryParam("q"),
		Decidable: decidable(c.QueryParam("decidable"), canDecide)}
	f, err := queueFilter(form, s)
	if err != nil {
		return nil, err
	}
	f.After = c.QueryParam("after")
	page, err := h.Store.Queue(c.Request().Context(), f, queuePageSize)
	if errors.Is(err, review.ErrInvalid) {
		if m := fieldInMessage.FindStringSubmatch(err.Error()); m != nil && m[1] == "after" {
			// A cursor stale or edited: said as the browser and the audit page say it.
			return nil, consoleError(http.StatusBadRequest, "That page link is broken.")
		}
	}
	if err != nil {
		return nil, err
	}
	// The live region refreshes the page shown: with its cursor, or the
	// second page would turn into the first at the next poll.
	rows := c.Request().URL.Query()
	q := c.QueryParams()
	q.Del("after")
	v := &web.QueueView{Nav: nav(c), Filter: form, Page: page, Reasons: allReasons, Now: h.Store.Now(),
		RowsURL: "/?" + rows.Encode(), CanBulk: s.User.Role.Can(review.PermDecide), CanDecide: canDecide,
		Filtered: form.Tenant != "" || form.Destination != "" || form.Action != "" || form.Reason != "" || form.Flag != "" ||
			form.Claimed != "" || form.Age != "" || form.Q != ""}
	if canDecide {
		// The other choice, every other filter kept.
		tq := url.Values{}
		for k, vs := range q {
			tq[k] = vs
		}
		tq.Set("decidable", "1")
		if form.Decidable {
			tq.Set("decidable", "0")
		}
		v.ToggleURL = "/?" + tq.Encode()
	}
	if page.Next != "" {
		nq := url.Values{}
		for k, vs := range q {
			nq[k] = vs
		}
		nq.Set("after", page.Next)
		v.NextURL = "/?" + nq.Encode()
	}
	return v, nil
}

// decidable reads the queue's "cases I can decide" choice: "1" on, "0"
// off, absent on for a role that decides cases (support and reviewers
// open the queue on what they can act on) and off for the others, whose
// decidable cases would be none.
func decidable(param string, canDecide bool) bool {
	return canDecide && param != "0"
}

// queueFilter turns the queue form into the store's filter, within the
// user's scope. The queue page and bulk decisions read it the same way.
func queueFilter(form web.QueueForm, s *store.Session) (store.QueueFilter, error) {
	f := store.QueueFilter{Scope: s.User.Scope().List(), Tenant: form.Tenant, Destination: form.Destination, Action: form.Action,
		Reason: form.Reason, Flag: form.Flag, Search: form.Q}
	if form.Decidable {
		f.DecidableBy = s.User.Role
	}
	if form.Flag != "" && !review.Flag(form.Flag).Valid() {
		// Refused as the operations browser refuses it (browseFilter): the
		// engines' LIKE read such a flag apart, and a bulk decision with it
		// decided other cases on each.
		return f, consoleError(http.StatusBadRequest, "%q is not a flag.", form.Flag)
	}
	if form.Reason != "" && !slices.Contains(allReasons, form.Reason) {
		// Said here, in the reader's language: the store's refusal is an
		// English sentence for the API.
		return f, consoleError(http.StatusBadRequest, "%q is not an escalation reason.", form.Reason)
	}
	switch form.Claimed {
	case "me":
		f.ClaimedBy = s.User.Email
	case "none":
		f.Unclaimed = true
	}
	if form.Age != "" {
		d, err := time.ParseDuration(form.Age)
		if err != nil || d < 0 {
			return f, consoleError(http.StatusBadRequest, "Age must be a duration such as 1h or 24h.")
		}
		f.MinAge = d
	}
	return f, nil
}
