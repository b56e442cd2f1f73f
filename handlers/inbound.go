package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

// inboundBody is what Limbo reads from a destination's webhook: the
// operation it concerns (top level or under "data") and what it reports.
// Other members are allowed and kept as received (in the stored body).
type inboundBody struct {
	Type           string       `json:"type" text:"id,255"`
	OperationID    string       `json:"operation_id" text:"id,255"`
	LogicalVersion string       `json:"logical_version" text:"id,255"`
	Ref            string       `json:"ref" text:"id,255"`
	JobRef         string       `json:"job_ref" text:"id,255"`
	Status         string       `json:"status" text:"id,255"`
	OutputRef      string       `json:"output_ref" text:"id,255"`
	Data           *inboundData `json:"data"`
}

// inboundData is the "data" member of a webhook (the Standard Webhooks
// envelope), where a destination may name the operation instead.
type inboundData struct {
	OperationID    string `json:"operation_id" text:"id,255"`
	LogicalVersion string `json:"logical_version" text:"id,255"`
	Ref            string `json:"ref" text:"id,255"`
}

// decodeWebhook reads a destination's webhook body: the same strict scan as
// every API body (duplicate members, invalid UTF-8, trailing data → 400),
// then the members Limbo reads, held to their rules. Unlike DecodeJSON it
// allows members Limbo does not read: a destination sends what it sends.
// A member counts only spelled exactly as Limbo reads it: encoding/json
// would take "OPERATION_ID" for operation_id, and the last of two
// spellings would win.
func decodeWebhook(body []byte) (*inboundBody, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &FieldError{Problem: "request body is empty"}
	}
	if _, err := review.CheckJSON(body); err != nil {
		return nil, canonicalProblem(err)
	}
	var in inboundBody
	top, err := readMembers(body, "", &in)
	if err != nil {
		return nil, err
	}
	if data, ok := top["data"]; ok && string(data) != "null" {
		in.Data = &inboundData{}
		if _, err := readMembers(data, "data", in.Data); err != nil {
			return nil, err
		}
	}
	if err := checkStrings(&in); err != nil {
		return nil, err
	}
	return &in, nil
}

// readMembers reads the JSON object raw (at path) into v, a pointer to a
// struct: each string field from the member its json tag names exactly,
// in the struct's order (so the same member is named every time); null or
// absent leaves it empty. It returns every member, for the caller to read
// deeper.
func readMembers(raw []byte, path string, v any) (map[string]json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		fe := decodeProblem(err)
		fe.Field = path
		return nil, fe
	}
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		value, ok := members[name]
		if f.Type.Kind() != reflect.String || !ok {
			continue
		}
		if err := json.Unmarshal(value, rv.Field(i).Addr().Interface()); err != nil {
			fe := decodeProblem(err)
			fe.Field = joinPath(path, name)
			return nil, fe
		}
	}
	return members, nil
}

// agree returns the member of the webhook's top level and of its data,
// naming the data member when both are given and differ: which one the
// event is about cannot be told, so nothing is recorded.
func agree(top, data, field string) (string, error) {
	if top != "" && data != "" && top != data {
		return "", &FieldError{Field: "data." + field, Problem: fmt.Sprintf("disagrees with the top-level %s", field)}
	}
	return cmp.Or(top, data), nil
}

// reportsFailure says whether a webhook's status is a job's that ended
// without succeeding (review.JobStatus: failed, canceled). Such a notice
// claims no effect: it is kept as evidence without candidates. It proves
// no absence either — a webhook is never authoritative — so an operation
// in flight is still reconciled as before.
func reportsFailure(status string) bool {
	s := review.JobStatus(status)
	return s.Done() && s != review.JobSucceeded
}

// webhookIDRule is the rule for the webhook-id header, which is stored.
var webhookIDRule = textRule{kind: review.Identifier, max: review.MaxFieldLen}

// Inbound receives a destination's signed webhook (Standard Webhooks):
// verified against the destination's secrets, deduplicated by event id,
// attached to its operation as evidence, and a probe is triggered. A
// webhook alone never confirms a write.
func (h *Handlers) Inbound(c echo.Context) error {
	source := review.NFC(c.Param("source")) // as the configuration and operations write it
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
	in, err := decodeWebhook(body)
	if err != nil {
		return err
	}
	ev, err := inboundEvent(source, id, body, in)
	if err != nil {
		return err
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

// inboundEvent is what a decoded webhook records: the operation it names,
// and the resource it reports as a candidate unless its status says the
// job failed. Refused (400, before anything is stored, so the event id is
// not taken) when it names no operation or its top level and data disagree.
func inboundEvent(source, id string, body []byte, in *inboundBody) (store.InboundEvent, error) {
	ev := store.InboundEvent{Source: source, EventID: id, OperationID: in.OperationID, Body: string(body), Note: in.Type}
	ref, version := in.Ref, in.LogicalVersion
	if d := in.Data; d != nil {
		var err error
		if ev.OperationID, err = agree(ev.OperationID, d.OperationID, "operation_id"); err != nil {
			return ev, err
		}
		if ref, err = agree(ref, d.Ref, "ref"); err != nil {
			return ev, err
		}
		if version, err = agree(version, d.LogicalVersion, "logical_version"); err != nil {
			return ev, err
		}
	}
	if ev.OperationID == "" {
		return ev, &FieldError{Field: "operation_id", Problem: "the webhook names no operation"}
	}
	if ref = cmp.Or(in.OutputRef, ref, in.JobRef); ref != "" && !reportsFailure(in.Status) {
		ev.Candidates = []review.Candidate{{Ref: ref, Version: version, OperationID: ev.OperationID}}
	}
	return ev, nil
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
