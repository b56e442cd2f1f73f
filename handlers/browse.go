package handlers

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// browsePageSize is how many operations one page of the browser shows.
const browsePageSize = 50

// Operations renders the operations browser: every operation in the
// user's scope, open and settled, with counts per state, filters and a
// search. A search that is exactly an operation id in scope goes straight
// to that operation. Input the filters cannot take answers the page again,
// 400, saying what was wrong.
func (h *Handlers) Operations(c echo.Context) error {
	ctx := c.Request().Context()
	s := session(c)
	scope := s.User.Scope().List()
	form := web.BrowseForm{Q: c.QueryParam("q"), Tenant: c.QueryParam("tenant"), Destination: c.QueryParam("destination"),
		Action: c.QueryParam("action"), Risk: c.QueryParam("risk"), Flag: c.QueryParam("flag"), State: c.QueryParam("state"),
		Within: c.QueryParam("within"), Older: c.QueryParam("older"), HasCase: c.QueryParam("has_case")}
	after := c.QueryParam("after")
	v := web.BrowseView{Nav: nav(c), Filter: form}
	q := maps.Clone(c.QueryParams()) // Echo's own map: QueryParam reads it
	q.Del("after")
	v.Query = q
	f, problem := browseFilter(form)
	if problem != nil {
		v.Problem = problem
		return render(c, http.StatusBadRequest, web.OperationsPage(v))
	}
	if id := strings.TrimSpace(form.Q); id != "" {
		found, err := h.Store.OperationIDInScope(ctx, scope, id)
		if err != nil {
			return err
		}
		if found {
			return c.Redirect(http.StatusSeeOther, "/operations/"+url.PathEscape(id))
		}
	}
	page, err := h.Store.BrowseOperations(ctx, scope, f, after, browsePageSize)
	if errors.Is(err, review.ErrInvalid) {
		v.Problem = browseRefusal(err)
		return render(c, http.StatusBadRequest, web.OperationsPage(v))
	}
	if err != nil {
		return err
	}
	v.Page = page
	if page.Next != "" {
		nq := maps.Clone(q)
		nq.Set("after", page.Next)
		v.NextURL = "/operations?" + nq.Encode()
	}
	return render(c, http.StatusOK, web.OperationsPage(v))
}

// browseFilter reads the browser's form, or says in the reader's language
// what it cannot take.
func browseFilter(form web.BrowseForm) (store.BrowseFilter, *web.Message) {
	f := store.BrowseFilter{Tenant: form.Tenant, Destination: form.Destination, Action: form.Action,
		Risk: review.Risk(form.Risk), Flag: review.Flag(form.Flag), State: review.State(form.State), HasCase: form.HasCase, Search: form.Q}
	switch {
	case f.State != "" && !f.State.Valid():
		return f, msg(web.Msg("%q is not a state of an operation.", form.State))
	case f.Risk != "" && !f.Risk.Valid():
		return f, msg(web.Msg("%q is not a risk class.", form.Risk))
	case f.Flag != "" && !f.Flag.Valid():
		return f, msg(web.Msg("%q is not a flag.", form.Flag))
	case !slices.Contains([]string{"", "yes", "no"}, form.HasCase):
		return f, msg(web.Msg("Open case must be yes or no."))
	}
	for _, a := range []struct {
		value string
		into  *time.Duration
	}{{form.Within, &f.CreatedWithin}, {form.Older, &f.CreatedBefore}} {
		if a.value == "" {
			continue
		}
		d, err := time.ParseDuration(a.value)
		if err != nil || d < 0 {
			return f, msg(web.Msg("Age must be a duration such as 1h or 24h."))
		}
		*a.into = d
	}
	return f, nil
}

func msg(m web.Message) *web.Message { return &m }

// browseRefusal is why the store refused a link's filters, for a person:
// a cursor ("after") that is stale or was edited is a broken page link,
// said as the audit page says it; any other refusal (browseFilter checks
// the filters first, so rarely) names its filter as the form does.
func browseRefusal(err error) *web.Message {
	if m := fieldInMessage.FindStringSubmatch(err.Error()); m != nil && m[1] == "after" {
		return msg(web.Msg("That page link is broken."))
	}
	return msg(web.Msg("This link's filters are not valid: %s", domainSentence(err)))
}
