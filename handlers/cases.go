package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/web"
)

// CasePage renders a case with its operation, evidence and decision form.
func (h *Handlers) CasePage(c echo.Context) error {
	v, err := h.caseView(c, c.Param("id"))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, web.CasePage(*v))
}

func (h *Handlers) caseView(c echo.Context, id string) (*web.CaseView, error) {
	return h.caseViewRevealed(c, id, false)
}

// caseViewRevealed builds the case page; reveal shows redacted fields.
func (h *Handlers) caseViewRevealed(c echo.Context, id string, reveal bool) (*web.CaseView, error) {
	ctx := c.Request().Context()
	s := session(c)
	scope := s.User.Scope().List()
	cs, err := h.Store.GetCase(ctx, id, scope)
	if err != nil {
		return nil, err
	}
	op, err := h.Store.OperationByID(ctx, cs.OperationID, scope)
	if err != nil {
		return nil, err
	}
	detail, children, running, err := h.operationDetail(c, op, reveal)
	if err != nil {
		return nil, err
	}
	ds, err := h.Store.CaseDecisions(ctx, cs.ID)
	if err != nil {
		return nil, err
	}
	fields := h.redactFields(op)
	v := &web.CaseView{Nav: nav(c), OperationDetail: detail, Case: cs, Decisions: ds, Me: s.User.Email, Now: h.Store.Now(),
		CanCheck: h.Checker != nil && review.Checkable(op, h.Store.Config().Destination(op.Destination)) &&
			s.User.Role.Can(review.PermClaim) && s.User.Role.MayClaim(cs.Reasons),
		LastAsked: review.LastAsked(op), LastAnswers: review.LastAnswers(op),
		UndoByLimbo: h.Store.Config().Destination(op.Destination).Undo != nil, UndoRunning: running, Claimed: review.ClaimedDuplicate(op)}
	for _, k := range children {
		if k.ID == running && k.State == review.NeedsReview {
			v.UndoInReview = true
		}
	}
	for _, k := range detail.Compensations {
		if k.ByHand && !k.State.Terminal() {
			v.UndoByHand = true
			if v.UndoByHandBy.IsZero() || k.Deadline.Before(v.UndoByHandBy) {
				v.UndoByHandBy = k.Deadline.UTC()
			}
		}
	}
	if slices.Contains(cs.Reasons, review.ReasonPayloadMismatch) && op.PayloadPurgedAt == nil {
		rejected, err := h.Store.RejectedPayloads(ctx, cs.ID)
		if err != nil {
			return nil, err
		}
		if n := len(rejected); n > 0 {
			v.Diffs = review.DiffJSON(review.Redact(op.Payload, fields), review.Redact([]byte(rejected[n-1].Payload), fields))
		}
	}
	var void map[string]string
	if slices.ContainsFunc(ds, func(d store.Decision) bool { return d.Status == store.DecisionFirstApproval }) {
		// Only then: the check reads the approvers in a transaction.
		if void, err = h.Store.VoidApprovals(ctx, cs, op); err != nil {
			return nil, err
		}
	}
	v.VoidApprovals = void
	if v.DecidesOn = review.DecidesOn(op.State, cs.Reasons); v.DecidesOn == review.OnApproval {
		v.Approval = approvalView(op, cs, ds, void, h.Store.Config())
	}
	// Only the decisions the case's situation allows (review.CheckDecision
	// refuses the others anyway): a form must not make the wrong one easy.
	// A word on an undo that may be happening right now is refused too,
	// and so is undoing an undo, and an undo Limbo would send of a
	// resource the operation is not known to have.
	// A compensation_done is judged on the resource it names by default.
	var last *review.PriorDecision
	for i := range ds {
		if ds[i].Status == store.DecisionApplied {
			last = ds[i].Prior()
		}
	}
	doneRef := review.DoneRef("", last, cs.RecommendedRef)
	for _, a := range review.DecisionsAllowed(op.State, cs.Reasons) {
		if _, running := review.SettlesByHand(a, doneRef, children); s.User.Role.CanDecide(op, a) && running == nil && !review.UndoesAnUndo(op, a) &&
			!review.NothingLimboCanUndo(op, h.Store.Config().Destination(op.Destination), a) {
			v.Actions = append(v.Actions, a)
		}
	}
	// The form's defaults follow the recommendation: its action, and for a
	// duplicate the resource to keep apart from the one to undo (a fresh
	// assessment knows which; it is used only while it agrees with the case).
	v.Recommendation = review.Recommendation{Action: cs.RecommendedAction, Ref: cs.RecommendedRef, Rationale: cs.Rationale}
	if fresh := review.Assess(op, cs.Reasons, h.Store.Now()).Recommendation; fresh.Action == cs.RecommendedAction && fresh.Ref == cs.RecommendedRef {
		v.Recommendation.Keep = fresh.Keep
	}
	switch {
	case v.Recommendation.Keep != "" && slices.Contains(v.Actions, review.DecideKeepAndUndo):
		v.Default = review.DecideKeepAndUndo // a duplicate: keep one, undo the other, in one decision
	case slices.Contains(v.Actions, v.Recommendation.Action):
		v.Default = v.Recommendation.Action
	}
	return v, nil
}

// openable is the other operations op's candidates name that the reader
// may open: only those are linked. A destination may name an operation
// Limbo never registered, or another tenant's.
func (h *Handlers) openable(c echo.Context, op *review.Operation) (map[string]bool, error) {
	out := map[string]bool{}
	scope := session(c).User.Scope().List()
	for _, ev := range op.Evidence {
		for _, cand := range ev.Candidates {
			id := cand.OperationID
			if _, seen := out[id]; seen || id == "" || id == op.ID {
				continue
			}
			ok, err := h.Store.OperationIDInScope(c.Request().Context(), scope, id)
			if err != nil {
				return nil, err
			}
			out[id] = ok
		}
	}
	return out, nil
}

// operationDetail is what the case page and the operation page both show
// of op (web.OperationDetail): its history, compensations, structured
// outputs, the payload as hashed (redacted unless reveal) and its
// policy. It returns too the compensations not yet settled, as review
// judges a reviewer's word on the undo (review.SettlesByHand), and the
// one whose attempt may be having its effect right now ("" when none).
func (h *Handlers) operationDetail(c echo.Context, op *review.Operation, reveal bool) (web.OperationDetail, []review.ChildCompensation, string, error) {
	ctx := c.Request().Context()
	d := web.OperationDetail{Op: op, Policy: h.policyNote(c, op)}
	var err error
	if d.Openable, err = h.openable(c, op); err != nil {
		return d, nil, "", err
	}
	if d.History, err = h.Store.OperationHistory(ctx, op.ID); err != nil {
		return d, nil, "", err
	}
	if d.Dependents, err = h.Store.Dependents(ctx, session(c).User.Scope().List(), op.ID, store.MaxDependentsShown+1); err != nil {
		return d, nil, "", err
	}
	if len(d.Dependents) > store.MaxDependentsShown {
		d.Dependents, d.MoreDependents = d.Dependents[:store.MaxDependentsShown], true
	}
	redact := h.redactFields(op)
	kept, err := h.Store.AttemptOutputs(ctx, op.ID)
	if err != nil {
		return d, nil, "", err
	}
	for _, o := range kept {
		if o.PurgedAt != nil {
			d.Outputs = append(d.Outputs, web.OutputView{N: o.N, PurgedAt: o.PurgedAt})
			continue
		}
		d.Outputs = append(d.Outputs, web.OutputView{N: o.N, Output: pretty(o.Output, redact), Invalid: o.Invalid})
	}
	if reveal {
		redact = nil
	}
	d.Payload = web.NewPayloadView(op, redact)
	comps, err := h.Store.Compensations(ctx, op.ID)
	if err != nil {
		return d, nil, "", err
	}
	var open []review.ChildCompensation
	running := ""
	for _, k := range comps {
		hist, err := h.Store.OperationHistory(ctx, k.OperationID)
		if err != nil {
			return d, nil, "", err
		}
		d.Compensations = append(d.Compensations, web.CompensationView{Compensation: k, History: hist})
		if !k.State.Terminal() {
			open = append(open, review.ChildCompensation{ID: k.OperationID, State: k.State, Ref: k.ResourceRef})
			if _, err := review.SettlesByHand(review.DecideCompensationDone, k.ResourceRef, open[len(open)-1:]); err != nil {
				running = k.OperationID
			}
		}
	}
	return d, open, running, nil
}

// undoRef is what a keep_and_undo undoes: the resource to undo.
func undoRef(f web.DecisionForm) string {
	if f.Action == review.DecideKeepAndUndo {
		return f.UndoRef
	}
	return ""
}

// approvalView is what an approval case asks a reviewer: the approvals
// given, those needed (the canonical payload is the page's payload
// section).
func approvalView(op *review.Operation, cs *store.Case, ds []store.Decision, void map[string]string, cfg *review.Config) *web.ApprovalView {
	a := &web.ApprovalView{Needed: cfg.Destination(op.Destination).ApprovalsNeeded(op),
		RequestedBy: cs.RequestedBy, ExpiresAt: cs.ExpiresAt}
	for _, d := range ds {
		if d.Status == store.DecisionFirstApproval && d.Action == review.DecideApprove {
			if void[d.ID] != "" {
				a.Voided = append(a.Voided, d)
			} else {
				a.Given = append(a.Given, d)
			}
		}
	}
	return a
}

// ClaimCase gives the case to the signed-in user for a while.
func (h *Handlers) ClaimCase(c echo.Context) error {
	s := session(c)
	_, err := h.Store.ClaimCase(c.Request().Context(), c.Param("id"), s.User.Principal(), s.User.Scope().List())
	return h.afterCaseAction(c, err)
}

// CheckDestination asks the case's destination about its operation now,
// at the signed-in user's word (review.Checkable): the store says first
// whether they may, the probes are sent, and what they answer is
// recorded, the case recommending again from it. The case page shows the
// answers; a refusal (decided meanwhile, held by another, asked a moment
// ago) is said on it.
func (h *Handlers) CheckDestination(c echo.Context) error {
	ctx := c.Request().Context()
	s := session(c)
	if h.Checker == nil {
		return h.afterCaseAction(c, fmt.Errorf("%w: this instance does not ask destinations", review.ErrConflict))
	}
	op, err := h.Store.CheckCase(ctx, c.Param("id"), s.User.Principal(), s.User.Scope().List())
	if err == nil {
		var a review.CheckAnswers
		if a, err = h.Checker.Check(ctx, op); err == nil {
			err = h.Store.RecordCheck(ctx, c.Param("id"), s.User.Principal(), s.User.Scope().List(), a)
		}
	}
	return h.afterCaseAction(c, err)
}

// ReleaseCase gives the claim up.
func (h *Handlers) ReleaseCase(c echo.Context) error {
	s := session(c)
	_, err := h.Store.ReleaseCase(c.Request().Context(), c.Param("id"), s.User.Principal(), s.User.Scope().List())
	return h.afterCaseAction(c, err)
}

// TakeOverCase takes a case someone else holds, with a reason (audited).
// A reason that is missing or too long re-renders the page with it kept.
func (h *Handlers) TakeOverCase(c echo.Context) error {
	ctx := c.Request().Context()
	s := session(c)
	reason := c.FormValue("takeover_reason")
	_, err := h.Store.TakeOverCase(ctx, c.Param("id"), s.User.Principal(), reason, s.User.Scope().List())
	if errors.Is(err, review.ErrInvalid) {
		v, verr := h.caseView(c, c.Param("id"))
		if verr != nil {
			return verr
		}
		v.TakeOver, v.TakeOverProblem = reason, takeOverProblem(ctx, err)
		return render(c, http.StatusUnprocessableEntity, web.CasePage(*v))
	}
	return h.afterCaseAction(c, err)
}

// takeOverProblem is why a take-over's reason was refused. The store
// checks it as it checks a decision's (review.NormalizeReason), whose
// missing-reason sentence speaks of a decision: a take-over says it its
// own way.
func takeOverProblem(ctx context.Context, err error) web.Message {
	m := errorMessage(ctx, err)
	if m.Key == reasonMissing.Key {
		return web.Msg("A take-over needs a reason: say in a few words why you take the case from its holder.")
	}
	return m
}

// reasonMissing is review.NormalizeReason's refusal of a blank reason, as
// domainMessages lists it.
var reasonMissing = web.Msg("reason: every decision needs a reason, in a few words")

// afterCaseAction redirects to the case page (303) or, for a refusal a
// person can act on, re-renders it with the reason.
func (h *Handlers) afterCaseAction(c echo.Context, err error) error {
	var already *review.AlreadyDecidedError
	var held *review.ClaimHeldError
	switch {
	case err == nil:
		return c.Redirect(http.StatusSeeOther, "/cases/"+c.Param("id"))
	case errors.As(err, &already), errors.As(err, &held), errors.Is(err, review.ErrConflict):
		v, verr := h.caseView(c, c.Param("id"))
		if verr != nil {
			return verr
		}
		v.Nav.Flash = errorMessage(c.Request().Context(), err).In(c.Request().Context())
		return render(c, http.StatusConflict, web.CasePage(*v))
	}
	return err
}

// Decide applies a reviewer's decision. Validation problems and losing a
// race re-render the decision panel with the reason (nothing is
// overwritten, the typed reason kept); success redirects to the case,
// which htmx swaps in whole: state, summary and history reflect it.
//
// The form must carry the case's and the operation's versions the
// reviewer saw (the stale-form guard is not optional): a form without
// them is refused, and so is one older than either.
func (h *Handlers) Decide(c echo.Context) error {
	ctx := c.Request().Context()
	s := session(c)
	// "candidate" is the one field older forms had for both resources.
	form := web.DecisionForm{Action: c.FormValue("action"), Reason: c.FormValue("reason"),
		ConfirmRef: cmp.Or(c.FormValue("confirm_ref"), c.FormValue("candidate")), UndoRef: cmp.Or(c.FormValue("undo_ref"), c.FormValue("candidate")),
		Compensation: c.FormValue("compensation")}
	v, err := h.caseView(c, c.Param("id"))
	if err != nil {
		return err
	}
	if !s.User.Role.CanDecide(v.Op, form.Action) {
		return consoleError(http.StatusForbidden, "Your role may not take this action on this case.")
	}
	caseVersion, err1 := strconv.ParseInt(c.FormValue("version"), 10, 64)
	opVersion, err2 := strconv.ParseInt(c.FormValue("op_version"), 10, 64)
	if err1 != nil || err2 != nil || caseVersion <= 0 || opVersion <= 0 {
		err = fmt.Errorf("%w: this form does not say which version of the case you saw (it is incomplete or from an older page): reload the case and decide again",
			review.ErrStale)
	} else {
		_, err = h.Store.Decide(ctx, store.DecisionRequest{CaseID: v.Case.ID, Scope: s.User.Scope().List(), Action: form.Action,
			Ref: form.Ref(), UndoRef: undoRef(form), Compensation: form.Compensation, Reason: form.Reason, Actor: s.User.Email, UserID: s.User.ID,
			CaseVersion: caseVersion, OpVersion: opVersion})
	}
	status := http.StatusOK
	var already *review.AlreadyDecidedError
	var held *review.ClaimHeldError
	switch {
	case err == nil:
		return c.Redirect(http.StatusSeeOther, "/cases/"+v.Case.ID)
	case errors.Is(err, review.ErrStale):
		status, v.Form = http.StatusConflict, form
	case errors.As(err, &already):
		status = http.StatusConflict
	case errors.As(err, &held):
		status, v.Form = http.StatusConflict, form
	case errors.Is(err, review.ErrInvalid), errors.Is(err, review.ErrInvalidTransition), errors.Is(err, review.ErrSecondApprover),
		errors.Is(err, review.ErrOwnRequest):
		status, v.Form = http.StatusUnprocessableEntity, form
	default:
		return err
	}
	v.Problem = errorMessage(ctx, err)
	fresh, verr := h.caseView(c, v.Case.ID)
	if verr != nil {
		return verr
	}
	fresh.Problem, fresh.Form = v.Problem, v.Form
	return render(c, status, web.CasePage(*fresh))
}

// RevealPayload shows the case's payload with its redacted fields, and
// records who looked in the audit trail.
func (h *Handlers) RevealPayload(c echo.Context) error {
	v, err := h.caseViewRevealed(c, c.Param("id"), true)
	if err != nil {
		return err
	}
	if err := h.Store.RecordReveal(c.Request().Context(), v.Op, session(c).User.Email); err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, web.CasePage(*v))
}

// OperationPage shows an operation in the user's scope as fully as its
// case page does, and its cases with the decisions taken on them.
func (h *Handlers) OperationPage(c echo.Context) error {
	ctx := c.Request().Context()
	op, err := h.Store.OperationByID(ctx, c.Param("id"), session(c).User.Scope().List())
	if err != nil {
		return err
	}
	cases, err := h.Store.CasesForOperation(ctx, op.ID)
	if err != nil {
		return err
	}
	detail, _, _, err := h.operationDetail(c, op, false)
	if err != nil {
		return err
	}
	v := web.OperationView{Nav: nav(c), OperationDetail: detail}
	for _, cs := range cases {
		ds, err := h.Store.CaseDecisions(ctx, cs.ID)
		if err != nil {
			return err
		}
		v.Cases = append(v.Cases, web.CaseDecisions{Case: cs, Decisions: ds})
	}
	return render(c, http.StatusOK, web.OperationPage(v))
}

// redactFields are the payload members the configuration hides for op:
// the configuration's, and its action policy's.
func (h *Handlers) redactFields(op *review.Operation) []string {
	cfg := h.Store.Config()
	if cfg == nil {
		return nil
	}
	ac, _ := cfg.Policy(op.Destination, op.Action)
	return append(slices.Clone(cfg.RedactFields), ac.RedactFields...)
}

// policyNote says which policy governs op's action, or that it has none
// and got the safe defaults.
func (h *Handlers) policyNote(c echo.Context, op *review.Operation) string {
	ctx := c.Request().Context()
	if review.IsCompensation(op.Action) {
		return web.T(ctx, "a compensation: it follows the policy of the operation it undoes")
	}
	ac, ok := h.Store.Config().Policy(op.Destination, op.Action)
	if !ok {
		return web.Tf(ctx, "no policy for %s at %s: safe defaults (risk “%s” unless the registration named one, the default budgets, no approval)",
			op.Action, op.Destination, web.RiskLabel(ctx, review.SafeRisk))
	}
	if ac.Owner == "" {
		return web.T(ctx, "the action's policy (no owner stated)")
	}
	return web.Tf(ctx, "the action's policy, owned by %s", ac.Owner)
}

// pretty indents a payload for reading, with the named fields redacted.
func pretty(payload []byte, redact []string) string {
	p := review.Redact(payload, redact)
	var b bytes.Buffer
	if err := json.Indent(&b, p, "", "  "); err != nil {
		return string(p)
	}
	return b.String()
}
