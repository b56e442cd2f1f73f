package sandbox

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// route is one of the sandbox's routes: the mux and the OpenAPI document
// (GET /openapi.json) are both built from the one table, so the document
// cannot forget a route.
type route struct {
	method, path, operationID, summary string
	// probe is the route's x-limbo-probe (status, search, job, history):
	// a read-only route reconciliation may use.
	probe string
	// body is the request body's JSON Schema (nil: none).
	body map[string]any
	// query names the query parameters (search).
	query []string
	// answers is the success status; answer its JSON Schema (nil: not
	// described).
	answers int
	answer  map[string]any
}

// metadataSchema is what every create names: the operation and version.
var metadataSchema = map[string]any{"type": "object", "properties": map[string]any{
	"operation_id":    map[string]any{"type": "string"},
	"logical_version": map[string]any{"type": []string{"string", "number"}},
}}

func object(required []string, props map[string]any) map[string]any {
	props["metadata"] = metadataSchema
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

var (
	str      = map[string]any{"type": "string", "minLength": 1}
	anyStr   = map[string]any{"type": "string"}
	positive = map[string]any{"type": "number", "exclusiveMinimum": 0}
)

// The answers of the probe routes, described so that an importer can read
// where a search's candidates and next cursor are, and a history's
// versions.
var (
	nullableStr    = map[string]any{"type": []string{"string", "null"}}
	resourceAnswer = map[string]any{"type": "object", "required": []string{"ref", "kind"}, "properties": map[string]any{
		"ref": anyStr, "kind": anyStr, "version": anyStr, "logical_version": anyStr, "operation_id": anyStr,
		"status": anyStr, "folder_ref": anyStr, "job_ref": anyStr, "output_ref": anyStr, "current_version": map[string]any{"type": "integer"},
	}}
	searchAnswer = map[string]any{"type": "object", "required": []string{"items"}, "properties": map[string]any{
		"items": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
			"ref": anyStr, "kind": anyStr, "version": anyStr, "operation_id": anyStr, "logical_version": anyStr}}},
		"next": nullableStr,
	}}
	jobAnswer = map[string]any{"type": "object", "required": []string{"ref", "status"}, "properties": map[string]any{
		"ref": anyStr, "status": map[string]any{"enum": []string{"queued", "running", "succeeded", "failed", "canceled"}},
		"output_ref": anyStr, "operation_id": anyStr, "logical_version": anyStr, "input_version": anyStr,
	}}
	historyAnswer = map[string]any{"type": "object", "required": []string{"ref", "versions"}, "properties": map[string]any{
		"ref": anyStr,
		"versions": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
			"n": map[string]any{"type": "integer"}, "ref": anyStr, "operation_id": anyStr, "logical_version": anyStr,
			"size": map[string]any{"type": "integer"}, "created_at": map[string]any{"type": "string", "format": "date-time"}}}},
	}}
)

// routeTable lists every route; handlers are bound in routes().
var routeTable = []route{
	{method: "POST", path: "/folders", operationID: "createFolder", summary: "Create a folder", answers: 201,
		body: object([]string{"name"}, map[string]any{"name": str})},
	{method: "POST", path: "/files", operationID: "uploadFile", summary: "Upload a file (its version 1)", answers: 201,
		body: object([]string{"name"}, map[string]any{"name": str, "folder_ref": anyStr, "content": anyStr})},
	{method: "POST", path: "/files/{ref}/versions", operationID: "uploadFileVersion", summary: "Upload the next version of a file", answers: 201,
		body: object(nil, map[string]any{"content": anyStr})},
	{method: "POST", path: "/jobs", operationID: "queueTransformation", summary: "Queue a transformation job", answers: 202,
		body: object([]string{"input_ref", "format"}, map[string]any{"input_ref": str, "format": str})},
	{method: "POST", path: "/links", operationID: "publishShareLink", summary: "Publish a share link", answers: 201,
		body: object([]string{"file_ref"}, map[string]any{"file_ref": str})},
	{method: "POST", path: "/emails", operationID: "sendEmail", summary: "Send an email", answers: 201,
		body: object([]string{"to", "subject"}, map[string]any{"to": str, "subject": str})},
	{method: "POST", path: "/charges", operationID: "createCharge", summary: "Charge an amount", answers: 201,
		body: object([]string{"amount", "currency"}, map[string]any{"amount": positive, "currency": str})},
	{method: "POST", path: "/resources/{ref}/move", operationID: "moveResource", summary: "Move a resource to a folder (its ref does not change)", answers: 200,
		body: object([]string{"folder_ref"}, map[string]any{"folder_ref": str})},
	{method: "DELETE", path: "/resources/{ref}", operationID: "deleteResource", summary: "Undo a resource (compensation)", answers: 204},
	{method: "GET", path: "/resources/{ref}", operationID: "getResource", summary: "Look a resource up", probe: "status", answers: 200, answer: resourceAnswer},
	{method: "GET", path: "/resources/{ref}/history", operationID: "getResourceHistory", summary: "A resource's versions, oldest first", probe: "history", answers: 200, answer: historyAnswer},
	{method: "GET", path: "/jobs/{ref}", operationID: "getJob", summary: "Look a job up", probe: "job", answers: 200, answer: jobAnswer},
	{method: "GET", path: "/search", operationID: "searchByOperation", summary: "Resources whose metadata names an operation", probe: "search", answers: 200,
		query: []string{"operation_id", "kind", "limit", "cursor", "include_outputs"}, answer: searchAnswer},
	{method: "GET", path: "/truth", operationID: "getTruth", summary: "Every effect performed (the test's ground truth)", answers: 200},
	{method: "POST", path: "/v1/chat/completions", operationID: "createChatCompletion", summary: "An OpenAI-shaped chat completion (the sandbox model)", answers: 200,
		body: map[string]any{"type": "object", "required": []string{"model", "messages"}}},
	{method: "POST", path: "/v1/_faults", operationID: "scriptModelFaults", summary: "Queue the sandbox model's next faults", answers: 200,
		body: map[string]any{"type": "object", "properties": map[string]any{"faults": map[string]any{"type": "array", "items": map[string]any{"enum": ModelFaults}}}}},
	{method: "GET", path: "/releases/{version}", operationID: "getRelease", summary: "A release's changes (a read for agents)", answers: 200},
	{method: "GET", path: "/healthz", operationID: "healthz", summary: "The sandbox is up", answers: 200},
	{method: "GET", path: "/openapi.json", operationID: "getOpenAPI", summary: "This document", answers: 200},
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// OpenAPI is the sandbox's OpenAPI 3.1 document: every route, with its
// operationId, request schema, and x-limbo-probe on the probe routes. base
// (the address it is served at, as http://host:port) is its server; "" for
// none.
func OpenAPI(base string) []byte {
	paths := map[string]map[string]any{}
	for _, r := range routeTable {
		answer := map[string]any{"description": http.StatusText(r.answers)}
		if r.answer != nil {
			answer["content"] = map[string]any{"application/json": map[string]any{"schema": r.answer}}
		}
		op := map[string]any{"operationId": r.operationID, "summary": r.summary,
			"responses": map[string]any{strconv.Itoa(r.answers): answer}}
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(r.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": anyStr})
		}
		for _, q := range r.query {
			params = append(params, map[string]any{"name": q, "in": "query", "required": q == "operation_id", "schema": anyStr})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if r.body != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": r.body}}}
		}
		if r.method == "POST" && r.probe == "" && !strings.HasPrefix(r.path, "/v1/") {
			op["parameters"] = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "schema": anyStr,
				"description": "The sandbox deduplicates by it (unless run with --no-key-support)"})
		}
		if r.probe != "" {
			op["x-limbo-probe"] = r.probe
		}
		if paths[r.path] == nil {
			paths[r.path] = map[string]any{}
		}
		paths[r.path][strings.ToLower(r.method)] = op
	}
	doc := map[string]any{"openapi": "3.1.0",
		"info":  map[string]any{"title": "Limbo sandbox", "version": "1", "description": "The fake file and transformation API (and model) Limbo's tests, demo and fault runs use."},
		"paths": paths}
	if base != "" {
		doc["servers"] = []map[string]any{{"url": base}}
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return b
}

func itoa3(n int) string {
	return string(rune('0'+n/100)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}
