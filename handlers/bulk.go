package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// bulkLimit bounds one bulk decision; a bigger set is narrowed first. A
// confirm lists at most this many cases.
const bulkLimit = 500

// bulkChanged is why a case a bulk dry run listed is skipped when
// applying: it is no longer at the versions the dry run showed.
const bulkChanged = "it changed since the preview; list the cases again to decide it"

// bulkNotApplicable is why a case is skipped whose operation's state does
// not take the bulk decision (review.CheckDecision), so the preview does
// not offer what applying it would refuse.
const bulkNotApplicable = "this decision does not apply to the case in its operation's current state; open the case to decide it"

// Bulk applies one decision — fail, confirm or compensate the resource
// each case recommends, or each case's own recommendation — to the open
// cases the queue filter selects: first a dry run listing each case with
// what would be decided on it (review.PlanBulk), whose confirm form
// carries the cases it would decide with the versions it showed
// (web.BulkShown); then, confirmed, one decision (and its audit events)
// on each of those cases, and only those, while still at those versions.
// Cases the user may not decide, that name no resource for the action,
// or that changed since the dry run are skipped, never forced. A form
// refused comes back as a form (422), as it was typed.
func (h *Handlers) Bulk(c echo.Context) error {
	ctx := c.Request().Context()
	s := session(c)
	form := web.QueueForm{Tenant: c.FormValue("tenant"), Destination: c.FormValue("destination"), Action: c.FormValue("action_filter"),
		Reason: c.FormValue("reason_filter"), Flag: c.FormValue("flag"), Claimed: c.FormValue("claimed"), Age: c.FormValue("age"), Q: c.FormValue("q"),
		Decidable: c.FormValue("decidable") == "1"}
	v := web.BulkView{Nav: nav(c), Filter: form, Action: c.FormValue("action"), Reason: c.FormValue("reason"), Compensation: c.FormValue("compensation")}
	reason, problem := bulkFormProblem(ctx, v)
	if problem.Key != "" {
		v.Problem = problem
		return render(c, http.StatusUnprocessableEntity, web.BulkPage(v))
	}
	f, err := queueFilter(form, s)
	var refused *ConsoleError
	if errors.As(err, &refused) {
		v.Problem = refused.Message
		return render(c, http.StatusUnprocessableEntity, web.BulkPage(v))
	}
	if err != nil {
		return err
	}
	if c.FormValue("confirm") == "1" {
		return h.bulkApply(c, s, f.Scope, v, reason)
	}
	page, err := h.Store.Queue(ctx, f, bulkLimit)
	if err != nil {
		return err
	}
	v.Matching = page.Total
	for i := range page.Cases {
		cs := &page.Cases[i]
		row := bulkItem(ctx, cs, v)
		if row.Skip == "" {
			op, err := h.Store.OperationByID(ctx, cs.OperationID, f.Scope)
			if err != nil {
				return err
			}
			row = bulkAllowed(ctx, s, cs, op, row, h.Store.Now())
		}
		if row.Skip != "" {
			v.Skipped++
		}
		v.Cases = append(v.Cases, row)
	}
	return render(c, http.StatusOK, web.BulkPage(v))
}

// bulkFormProblem is why the bulk form v is refused (an empty Message
// when it is not), and else the reason each of its decisions records:
// the one typed, normalized, with review.BulkReasonSuffix. It checks what
// every decision checks (review.ValidateDecision) before anything is
// listed, so a form the dry run accepts is not refused case by case.
func bulkFormProblem(ctx context.Context, v web.BulkView) (string, web.Message) {
	switch v.Action {
	case review.DecideFail, review.DecideConfirm, review.DecideCompensate, review.BulkRecommended:
	default:
		return "", web.Msg("A bulk decision fails, confirms or compensates, or applies each case's recommendation; retries, approvals and compensations are settled one case at a time.")
	}
	reason, err := review.NormalizeReason(v.Reason)
	if err != nil {
		return "", errorMessage(ctx, err)
	}
	if n := utf8.RuneCountInString(reason); n > review.MaxBulkReasonLen {
		return "", web.Msg("A bulk decision records its reason with “ (bulk)” after it, so the reason may be at most %d characters; this one has %d.",
			review.MaxBulkReasonLen, n)
	}
	if err := review.CheckText("compensation", review.FreeText, review.MaxReasonLen, strings.TrimSpace(v.Compensation)); err != nil {
		return "", errorMessage(ctx, err)
	}
	if v.Action == review.DecideCompensate && strings.TrimSpace(v.Compensation) == "" {
		return "", web.Msg("Say what is undone, and how, for a bulk compensate.")
	}
	return reason + review.BulkReasonSuffix, web.Message{}
}

// bulkItem is what the bulk decision v plans for case cs
// (review.PlanBulk), before the role's right to it.
func bulkItem(ctx context.Context, cs *store.Case, v web.BulkView) web.BulkCase {
	rec := review.Recommendation{Action: cs.RecommendedAction, Ref: cs.RecommendedRef}
	row := web.BulkCase{BulkShown: web.BulkShown{CaseID: cs.ID}, Recommended: rec, BulkItem: review.PlanBulk(v.Action, rec)}
	switch {
	case row.Skip != "":
		row.Why = withLabels(ctx, domainMessage(nil, row.Skip))
	case row.Action == review.DecideCompensate && strings.TrimSpace(v.Compensation) == "":
		row.Skip, row.Why = "an undo needs what is undone, and how", web.Msg("an undo needs what is undone, and how")
	}
	return row
}

// bulkAllowed is row, planned for case cs of operation op, skipped when
// the user's role may not decide it, the case does not take that
// decision in its operation's state (review.CheckDecision: an approval
// case takes approve or refuse, a compensating operation the word on its
// undo), or another person holds its claim at now (review.CheckClaim:
// only the holder decides), else with the versions it is planned at.
func bulkAllowed(ctx context.Context, s *store.Session, cs *store.Case, op *review.Operation, row web.BulkCase, now time.Time) web.BulkCase {
	if !s.User.Role.CanDecide(op, row.Action) {
		row.Skip, row.Why = "your role may not decide this case", web.Msg("your role may not decide this case")
		return row
	}
	if err := review.CheckClaim(cs.ID, cs.ClaimedBy, cs.ClaimUntil, s.User.Email, now); err != nil {
		row.Skip, row.Why = err.Error(), errorMessage(ctx, err)
		return row
	}
	if _, err := review.CheckDecision(op.State, cs.Reasons, row.Action); err != nil {
		row.Skip, row.Why = bulkNotApplicable, web.Msg(bulkNotApplicable)
		return row
	}
	row.Version, row.OpVersion = cs.Version, op.Version
	return row
}

// bulkApply decides the cases the confirm form lists (bulkShown), each at
// the versions the dry run showed, with reason.
func (h *Handlers) bulkApply(c echo.Context, s *store.Session, scope []string, v web.BulkView, reason string) error {
	shown, err := bulkShown(c)
	if err != nil {
		return err
	}
	v.Done = true
	for _, sh := range shown {
		row, err := h.bulkDecide(c, s, scope, sh, v, reason)
		if err != nil {
			return err
		}
		v.Cases = append(v.Cases, row)
		if row.Skip != "" {
			v.Skipped++
		} else {
			v.Applied++
		}
	}
	return render(c, http.StatusOK, web.BulkPage(v))
}

// bulkShown is the cases a confirm form lists: at least one, at most
// bulkLimit, each once, each as web.BulkShown.String writes it;
// anything else is a 400 (a form that lists none is from before the
// confirm carried them, or not from a dry run).
func bulkShown(c echo.Context) ([]web.BulkShown, error) {
	params, err := c.FormParams()
	if err != nil {
		return nil, err
	}
	vals := params["case"]
	switch {
	case len(vals) == 0:
		return nil, consoleError(http.StatusBadRequest,
			"This confirmation does not list the cases its preview showed (it is incomplete or from an older page): list the cases again.")
	case len(vals) > bulkLimit:
		return nil, consoleError(http.StatusBadRequest,
			"A bulk decision applies to at most %d cases, and this confirmation lists %d: list the cases again, with a narrower filter.", bulkLimit, len(vals))
	}
	out := make([]web.BulkShown, 0, len(vals))
	seen := make(map[string]bool, len(vals))
	for _, val := range vals {
		sh, ok := web.ParseBulkShown(val)
		if !ok || seen[sh.CaseID] {
			return nil, consoleError(http.StatusBadRequest,
				"This confirmation's list of cases is not one a preview makes (a case is malformed or listed twice): list the cases again.")
		}
		seen[sh.CaseID] = true
		out = append(out, sh)
	}
	return out, nil
}

// bulkDecide decides case sh as the dry run planned it, if it is still
// at the versions the dry run showed: a case out of the user's scope (or
// none), decided or changed since, is skipped, saying so, as is one the
// decision refuses.
func (h *Handlers) bulkDecide(c echo.Context, s *store.Session, scope []string, sh web.BulkShown, v web.BulkView, reason string) (web.BulkCase, error) {
	ctx := c.Request().Context()
	row := web.BulkCase{BulkShown: sh}
	skip := func(err error) (web.BulkCase, error) {
		if errors.Is(err, review.ErrStale) {
			row.Skip, row.Why = bulkChanged, web.Msg("it changed since the preview; list the cases again to decide it")
		} else {
			row.Skip, row.Why = err.Error(), errorMessage(ctx, err)
		}
		return row, nil
	}
	cs, err := h.Store.GetCase(ctx, sh.CaseID, scope)
	switch {
	case errors.Is(err, review.ErrNotFound):
		row.Skip, row.Why = "not found among the cases you may see", web.Msg("not found among the cases you may see")
		return row, nil
	case err != nil:
		return row, err
	case cs.Status != store.CaseOpen:
		already := &review.AlreadyDecidedError{CaseID: cs.ID, By: cs.ResolvedBy, Action: cs.Resolution}
		if cs.ResolvedAt != nil {
			already.At = *cs.ResolvedAt
		}
		return skip(already)
	case cs.Version != sh.Version:
		return skip(review.ErrStale)
	}
	op, err := h.Store.OperationByID(ctx, cs.OperationID, scope)
	if err != nil {
		return row, err
	}
	if op.Version != sh.OpVersion {
		return skip(review.ErrStale)
	}
	if row = bulkAllowed(ctx, s, cs, op, bulkItem(ctx, cs, v), h.Store.Now()); row.Skip != "" {
		return row, nil
	}
	// The store decides only at the versions shown (review.ErrStale
	// otherwise), in the user's scope.
	_, err = h.Store.Decide(ctx, store.DecisionRequest{CaseID: cs.ID, Scope: scope, Action: row.Action, Ref: row.Ref,
		Compensation: v.Compensation, Reason: reason, Actor: s.User.Email, UserID: s.User.ID, CaseVersion: sh.Version, OpVersion: sh.OpVersion})
	var already *review.AlreadyDecidedError
	var held *review.ClaimHeldError
	switch {
	case err == nil:
	case errors.As(err, &already), errors.As(err, &held), errors.Is(err, review.ErrInvalidTransition), errors.Is(err, review.ErrInvalid),
		errors.Is(err, review.ErrSecondApprover), errors.Is(err, review.ErrOwnRequest), errors.Is(err, review.ErrStale), errors.Is(err, review.ErrNotFound), errors.Is(err, review.ErrForbidden):
		return skip(err)
	default:
		return row, err
	}
	return row, nil
}
