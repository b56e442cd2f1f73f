package handlers

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// auditFilter reads the audit search from the query string.
func auditFilter(c echo.Context) (store.AuditFilter, web.AuditForm, error) {
	q := func(name string) string { return strings.TrimSpace(c.QueryParam(name)) }
	form := web.AuditForm{Actor: q("actor"), Tenant: q("tenant"), Operation: q("operation"),
		Action: q("action"), From: q("from"), To: q("to")}
	f := store.AuditFilter{Scope: session(c).User.Scope().List(), Actor: form.Actor, Tenant: form.Tenant,
		OperationID: form.Operation, Action: form.Action, Named: web.AuditActionsNamed(c.Request().Context(), form.Action)}
	if strings.Contains(f.Actor, "@") {
		// A person is named by their email, stored in lower case
		// (store.canonicalEmail): "Anna@Example.com" finds her acts.
		f.Actor = review.NFC(strings.ToLower(f.Actor))
	}
	// A date is a day in UTC, within years 0001–9999 as every time Limbo
	// takes (review.InTimeRange): "from" is its start, "to" the start of
	// the next day, where the events stop. The day after 9999-12-31 is in
	// year 10000, which SQLite compares as text ("10000-…" sorts before
	// "2026-…") and PostgreSQL as a time: a "to" of 9999-12-31 showed
	// nothing on one and everything on the other. It is taken as no upper
	// bound instead of refused: it is a date a person may type, and its
	// end is past every time stored, so every event is before it.
	for _, d := range []struct {
		v   string
		dst *time.Time
		add time.Duration
	}{{form.From, &f.From, 0}, {form.To, &f.To, 24 * time.Hour}} {
		if d.v == "" {
			continue
		}
		t, err := time.Parse("2006-01-02", d.v)
		switch {
		case err != nil:
			return f, form, consoleError(http.StatusBadRequest, "Dates are written 2026-11-29.")
		case !review.InTimeRange(t):
			return f, form, consoleError(http.StatusBadRequest, "Dates are from 0001-01-01 to 9999-12-31.")
		case review.InTimeRange(t.Add(d.add)):
			*d.dst = t.Add(d.add)
		}
	}
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return f, form, consoleError(http.StatusBadRequest, "That page link is broken.")
		}
		f.Before = n
	}
	return f, form, nil
}

// AuditPage shows the audit history, newest first.
func (h *Handlers) AuditPage(c echo.Context) error {
	v, err := h.auditView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, web.AuditPage(v))
}

// auditView is the audit history the query asks for: its page of events,
// the link to older ones, and the same filter's export and verification.
func (h *Handlers) auditView(c echo.Context) (web.AuditView, error) {
	f, form, err := auditFilter(c)
	if err != nil {
		return web.AuditView{}, err
	}
	evs, next, err := h.Store.SearchAudit(c.Request().Context(), f, 100)
	if err != nil {
		return web.AuditView{}, err
	}
	q := c.QueryParams()
	q.Del("before")
	v := web.AuditView{Nav: nav(c), Form: form, Events: evs, CSVURL: "/audit.csv?" + q.Encode(), VerifyURL: "/audit/verify?" + q.Encode()}
	if next > 0 {
		nq := url.Values{}
		for k, vs := range q {
			nq[k] = vs
		}
		nq.Set("before", strconv.FormatInt(next, 10))
		v.NextURL = "/audit?" + nq.Encode()
	}
	return v, nil
}

// AuditVerify checks the chain with the server's public key — against the
// anchor directory too, when one is configured — and shows the result
// above the history. The server is running, so the newest checkpoint's age
// is checked as well: a cut-off tail shows even without an anchor.
func (h *Handlers) AuditVerify(c echo.Context) error {
	ctx := c.Request().Context()
	if _, _, err := auditFilter(c); err != nil {
		return err // before the chain is read: a bad filter is the page's only answer
	}
	// The whole chain is checked for everyone; a scoped reader is told
	// about their tenants' events only (VerifyOptions.Scope).
	opt := store.VerifyOptions{PublicKey: h.Store.AuditPublicKey(), Scope: session(c).User.Scope().List()}
	if opt.PublicKey == nil {
		return consoleError(http.StatusServiceUnavailable, "This server has no audit key, so it cannot verify the chain.")
	}
	if h.AuditAnchor != "" {
		anchors, err := anchor.Read(h.AuditAnchor)
		if err != nil {
			return err
		}
		opt.Anchors = anchors
	}
	rep, err := h.Store.VerifyAudit(ctx, opt)
	if err != nil {
		return err
	}
	v, err := h.auditView(c)
	if err != nil {
		return err
	}
	v.Verify, v.AnchorDir = rep, h.AuditAnchor
	return render(c, http.StatusOK, web.AuditPage(v))
}

// AuditCSV streams the matching events as CSV, oldest first. Cells that a
// spreadsheet would run as a formula are neutralised. A read that fails
// mid-way aborts the response: a partial export never looks whole.
func (h *Handlers) AuditCSV(c echo.Context) error {
	f, _, err := auditFilter(c)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="limbo-audit.csv"`)
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seq", "at", "actor", "tenant", "operation_id", "action", "from_state", "to_state", "detail", "hash"})
	err = h.Store.EachAudit(c.Request().Context(), f, func(e store.AuditEvent) error {
		return cw.Write([]string{strconv.FormatInt(e.Seq, 10), e.At.Format(time.RFC3339Nano), CSVCell(e.Actor), CSVCell(e.Tenant),
			CSVCell(e.OperationID), CSVCell(e.Action), e.FromState, e.ToState, CSVCell(e.Detail), e.Hash})
	})
	cw.Flush()
	if err != nil {
		h.Log.Error("audit export interrupted", "err", err)
		// The 200 and the rows so far are on their way: end the response
		// without its end (net/http closes the connection), so the download
		// fails rather than passing for the whole export.
		panic(http.ErrAbortHandler)
	}
	return nil
}

// CSVCell neutralises a cell a spreadsheet would evaluate (=, +, -, @, and
// tab or carriage return that some treat alike) by prefixing a quote.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
