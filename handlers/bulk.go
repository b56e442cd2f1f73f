package handlers

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// bulkLimit bounds one bulk decision; a bigger set is narrowed first.
const bulkLimit = 500

// Bulk applies one decision to every open case the queue filter selects:
// first a dry-run count, then, confirmed, one decision (and its audit
// events) per case. Cases the user may not decide are skipped, never forced.
func (h *Handlers) Bulk(c echo.Context) error {
	s := session(c)
	form := web.QueueForm{Tenant: c.FormValue("tenant"), Destination: c.FormValue("destination"), Action: c.FormValue("action_filter"),
		Reason: c.FormValue("reason_filter"), Flag: c.FormValue("flag"), Claimed: c.FormValue("claimed"), Age: c.FormValue("age"), Q: c.FormValue("q")}
	v := web.BulkView{Nav: nav(c), Filter: form, Action: c.FormValue("action"), Reason: c.FormValue("reason"), Compensation: c.FormValue("compensation")}
	switch v.Action {
	case review.DecideApproveRetry:
		return consoleError(http.StatusBadRequest, "Retries are approved one case at a time.")
	case review.DecideCompensationDone, review.DecideCompensationFailed:
		// Each says what a person saw of one undo.
		return consoleError(http.StatusBadRequest, "A compensation is settled one case at a time.")
	}
	if err := review.ValidateDecision(v.Action, "bulk", v.Compensation, v.Reason); err != nil {
		return consoleError(http.StatusBadRequest, err.Error())
	}
	f, err := queueFilter(form, s)
	if err != nil {
		return err
	}
	page, err := h.Store.Queue(c.Request().Context(), f, bulkLimit)
	if err != nil {
		return err
	}
	if c.FormValue("confirm") != "1" {
		v.Matching = page.Total
		return render(c, http.StatusOK, web.BulkPage(v))
	}
	v.Done = true
	for _, cs := range page.Cases {
		op, err := h.Store.OperationByID(c.Request().Context(), cs.OperationID, f.Scope)
		if err != nil {
			return err
		}
		ref := ""
		if v.Action == review.DecideConfirm {
			if cs.RecommendedAction != review.RecommendConfirm || cs.RecommendedRef == "" {
				v.Skipped++
				v.Problems = append(v.Problems, fmt.Sprintf("%s: no single resource is recommended to confirm", cs.ID))
				continue
			}
			ref = cs.RecommendedRef
		}
		if !s.User.Role.CanDecide(op, v.Action) {
			v.Skipped++
			v.Problems = append(v.Problems, fmt.Sprintf("%s: your role may not decide this case", cs.ID))
			continue
		}
		_, err = h.Store.Decide(c.Request().Context(), store.DecisionRequest{CaseID: cs.ID, Scope: f.Scope, Action: v.Action, Ref: ref,
			Compensation: v.Compensation, Reason: v.Reason + " (bulk)", Actor: s.User.Email, CaseVersion: cs.Version, OpVersion: op.Version})
		var already *review.AlreadyDecidedError
		var held *review.ClaimHeldError
		switch {
		case err == nil:
			v.Applied++
		case errors.As(err, &already), errors.As(err, &held), errors.Is(err, review.ErrInvalidTransition), errors.Is(err, review.ErrInvalid),
			errors.Is(err, review.ErrSecondApprover), errors.Is(err, review.ErrOwnRequest), errors.Is(err, review.ErrStale):
			v.Skipped++
			v.Problems = append(v.Problems, fmt.Sprintf("%s: %v", cs.ID, err))
		default:
			return err
		}
	}
	return render(c, http.StatusOK, web.BulkPage(v))
}
