package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

// inboundBody is what Limbo reads from a destination's webhook: the
// operation it concerns (top level or under "data") and what it reports.
// Other members are allowed and kept as received (in the stored body).
type inboundBody struct {
	Type           string `json:"type" text:"id,255"`
	OperationID    string `json:"operation_id" text:"id,255"`
	LogicalVersion string `json:"logical_version" text:"id,255"`
	Ref            string `json:"ref" text:"id,255"`
	JobRef         string `json:"job_ref" text:"id,255"`
	Status         string `json:"status" text:"id,255"`
	OutputRef      string `json:"output_ref" text:"id,255"`
	Data           *struct {
		OperationID    string `json:"operation_id" text:"id,255"`
		LogicalVersion string `json:"logical_version" text:"id,255"`
		Ref            string `json:"ref" text:"id,255"`
	} `json:"data"`
}

// decodeWebhook reads a destination's webhook body: the same strict scan as
// every API body (duplicate members, invalid UTF-8, trailing data → 400),
// then the members Limbo reads, held to their rules. Unlike DecodeJSON it
// allows members Limbo does not read: a destination sends what it sends.
func decodeWebhook(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return &FieldError{Problem: "request body is empty"}
	}
	if _, err := review.CheckJSON(body); err != nil {
		return canonicalProblem(err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return decodeProblem(err)
	}
	return checkStrings(v)
}

// webhookIDRule is the rule for the webhook-id header, which is stored.
var webhookIDRule = textRule{kind: review.Identifier, max: review.MaxFieldLen}

// Inbound receives a destination's signed webhook (Standard Webhooks):
// verified against the destination's secrets, deduplicated by event id,
// attached to its operation as evidence, and a probe is triggered. A
// webhook alone never confirms a write.
func (h *Handlers) Inbound(c echo.Context) error {
	source := c.Param("source")
	cfg := h.Store.Config()
	if cfg == nil {
		return review.ErrNotFound
	}
	dest, ok := cfg.Destinations[source]
	if !ok {
		return review.ErrNotFound
	}
	secrets := dest.WebhookSecrets
	if dest.WebhookSecretEnv != "" {
		if v := os.Getenv(dest.WebhookSecretEnv); v != "" {
			secrets = append(append([]string{}, secrets...), v)
		}
	}
	if len(secrets) == 0 {
		return review.ErrNotFound // no webhooks configured for this source
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	id, err := webhook.Verify(secrets, c.Request().Header, body, h.Store.Now(), 0)
	if err != nil {
		return problemf(http.StatusUnauthorized, "invalid-signature", "Invalid webhook signature", "%v", err)
	}
	if p := webhookIDRule.check(id); p != "" {
		return &FieldError{Field: webhook.HeaderID, Problem: p}
	}
	var in inboundBody
	if err := decodeWebhook(body, &in); err != nil {
		return err
	}
	ev := store.InboundEvent{Source: source, EventID: id, OperationID: in.OperationID, Body: string(body), Note: in.Type}
	ref, version := in.Ref, in.LogicalVersion
	if in.Data != nil {
		ev.OperationID = cmp.Or(ev.OperationID, in.Data.OperationID)
		ref, version = cmp.Or(ref, in.Data.Ref), cmp.Or(version, in.Data.LogicalVersion)
	}
	if ref = cmp.Or(in.OutputRef, ref, in.JobRef); ref != "" {
		ev.Candidates = []review.Candidate{{Ref: ref, Version: version, OperationID: ev.OperationID}}
	}
	if ev.OperationID == "" {
		return &FieldError{Field: "operation_id", Problem: "the webhook names no operation"}
	}
	dup, err := h.Store.Inbound(c.Request().Context(), ev)
	if errors.Is(err, review.ErrNotFound) {
		return problemf(http.StatusNotFound, "not-found", "Not found", "no operation %s at destination %s", ev.OperationID, source)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"event_id": id, "duplicate": dup})
}

// decisionPage is one page of the decisions feed.
type decisionPage struct {
	Decisions  []store.Decision `json:"decisions"`
	NextCursor string           `json:"next_cursor"`
}

// operationDecisions is GET /api/v1/operations/{id}/decisions's answer.
type operationDecisions struct {
	OperationID string           `json:"operation_id"`
	State       review.State     `json:"state"`
	Decisions   []store.Decision `json:"decisions"`
}

// OperationDecisions lists every decision on one of the tenant's
// operations, oldest first, with its state: what client.WaitDecision
// polls while a person is asked.
func (h *Handlers) OperationDecisions(c echo.Context) error {
	op, ds, err := h.Store.OperationDecisions(c.Request().Context(), caller(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, operationDecisions{OperationID: op.ID, State: op.State, Decisions: ds})
}

// ListDecisions is the feed of reviewer decisions on the tenant's
// operations, in order; pass next_cursor back to continue.
func (h *Handlers) ListDecisions(c echo.Context) error {
	ds, next, err := h.Store.Decisions(c.Request().Context(), caller(c).Tenant, c.QueryParam("cursor"), 100)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []store.Decision{}
	}
	return c.JSON(http.StatusOK, decisionPage{Decisions: ds, NextCursor: next})
}
