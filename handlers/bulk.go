package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// bulkLimit bounds one bulk decision; a bigger set is narrowed first.
const bulkLimit = 500

// Bulk applies one decision — fail, confirm or compensate the resource
// each case recommends, or each case's own recommendation — to every open
// case the queue filter selects: first a dry run listing each case with
// what would be decided on it (review.PlanBulk), then, confirmed, one
// decision (and its audit events) per case. Cases the user may not decide,
// or that name no resource for the action, are skipped, never forced.
func (h *Handlers) Bulk(c echo.Context) error {
	s := session(c)
	form := web.QueueForm{Tenant: c.FormValue("tenant"), Destination: c.FormValue("destination"), Action: c.FormValue("action_filter"),
		Reason: c.FormValue("reason_filter"), Flag: c.FormValue("flag"), Claimed: c.FormValue("claimed"), Age: c.FormValue("age"), Q: c.FormValue("q"),
		Decidable: c.FormValue("decidable") == "1"}
	v := web.BulkView{Nav: nav(c), Filter: form, Action: c.FormValue("action"), Reason: c.FormValue("reason"), Compensation: c.FormValue("compensation")}
	switch v.Action {
	case review.DecideFail, review.DecideConfirm, review.DecideCompensate, review.BulkRecommended:
	default:
		return consoleError(http.StatusBadRequest, "A bulk decision fails, confirms or compensates, or applies each case's recommendation; retries, approvals and compensations are settled one case at a time.")
	}
	if _, err := review.NormalizeReason(v.Reason); err != nil {
		return &ConsoleError{Status: http.StatusBadRequest, Message: errorMessage(c.Request().Context(), err)}
	}
	if v.Action == review.DecideCompensate && strings.TrimSpace(v.Compensation) == "" {
		return consoleError(http.StatusBadRequest, "Say what is undone, and how, for a bulk compensate.")
	}
	f, err := queueFilter(form, s)
	if err != nil {
		return err
	}
	page, err := h.Store.Queue(c.Request().Context(), f, bulkLimit)
	if err != nil {
		return err
	}
	apply := c.FormValue("confirm") == "1"
	v.Matching, v.Done = page.Total, apply
	for _, cs := range page.Cases {
		row, err := h.bulkCase(c, s, f, cs, v, apply)
		if err != nil {
			return err
		}
		v.Cases = append(v.Cases, row)
		switch {
		case row.Skip != "":
			v.Skipped++
		case apply:
			v.Applied++
		}
	}
	return render(c, http.StatusOK, web.BulkPage(v))
}

// bulkCase is what the bulk decision v does to case cs: planned
// (review.PlanBulk, and the role's right to it), and when apply, decided.
func (h *Handlers) bulkCase(c echo.Context, s *store.Session, f store.QueueFilter, cs store.Case, v web.BulkView, apply bool) (web.BulkCase, error) {
	rec := review.Recommendation{Action: cs.RecommendedAction, Ref: cs.RecommendedRef}
	row := web.BulkCase{CaseID: cs.ID, Recommended: rec, BulkItem: review.PlanBulk(v.Action, rec)}
	if row.Skip != "" {
		row.Why = domainMessage(nil, row.Skip)
		return row, nil
	}
	if row.Action == review.DecideCompensate && strings.TrimSpace(v.Compensation) == "" {
		row.Skip, row.Why = "an undo needs what is undone, and how", web.Msg("an undo needs what is undone, and how")
		return row, nil
	}
	op, err := h.Store.OperationByID(c.Request().Context(), cs.OperationID, f.Scope)
	if err != nil {
		return row, err
	}
	if !s.User.Role.CanDecide(op, row.Action) {
		row.Skip, row.Why = "your role may not decide this case", web.Msg("your role may not decide this case")
		return row, nil
	}
	if !apply {
		return row, nil
	}
	_, err = h.Store.Decide(c.Request().Context(), store.DecisionRequest{CaseID: cs.ID, Scope: f.Scope, Action: row.Action, Ref: row.Ref,
		Compensation: v.Compensation, Reason: v.Reason + " (bulk)", Actor: s.User.Email, CaseVersion: cs.Version, OpVersion: op.Version})
	var already *review.AlreadyDecidedError
	var held *review.ClaimHeldError
	switch {
	case err == nil:
	case errors.As(err, &already), errors.As(err, &held), errors.Is(err, review.ErrInvalidTransition), errors.Is(err, review.ErrInvalid),
		errors.Is(err, review.ErrSecondApprover), errors.Is(err, review.ErrOwnRequest), errors.Is(err, review.ErrStale):
		row.Skip, row.Why = err.Error(), errorMessage(c.Request().Context(), err)
	default:
		return row, err
	}
	return row, nil
}
