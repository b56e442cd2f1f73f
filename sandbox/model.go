package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// The sandbox model: POST /v1/chat/completions answers OpenAI-shaped chat
// completions, deterministically, so an agent can be driven end to end
// without a real provider:
//
//   - a request with response_format json_schema (a structured output)
//     answers a plan: {"steps": [the offered tools' names, or "respond"]};
//   - otherwise it calls the first offered tool that has no result in
//     the conversation yet (a result whose content carries an "error"
//     member does not count: the call is proposed again), with each
//     argument set to its schema's first example (else its default); once
//     every tool has a result it answers "done".
//
// Every answer reports usage (prompt and completion tokens, counted from
// the request's and the answer's size). Faults are scripted: POST
// /v1/_faults {"faults": [...]} queues one fault for each of the next
// completions (ModelFaults lists them), so a test names the exact row of
// the provider boundary it drives.

// ModelFaults are the scripted faults of the sandbox model.
var ModelFaults = []string{
	"timeout_after_accept", // the generation happens (and is counted), then the answer never comes
	"rate_limit",           // 429 rate_limit_exceeded, retry-after-ms, x-should-retry: true
	"quota",                // 429 insufficient_quota, x-should-retry: false
	"billing",              // 429 billing_hard_limit_reached
	"server_error",         // 500, no x-should-retry
	"should_not_retry",     // 500 with x-should-retry: false
	"conflict",             // 409 (a lock timeout at the provider)
	"request_timeout",      // 408
	"malformed_arguments",  // a tool call whose arguments break the tool's schema
	"malformed_output",     // a structured output that breaks its schema
	"repeat_call",          // the previous tool call proposed again, identical
	"reordered_call",       // the previous tool call again, its arguments' members in reverse order
}

type chatRequest struct {
	Model          string        `json:"model"`
	Messages       []chatMessage `json:"messages"`
	Tools          []chatTool    `json:"tools"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

type chatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ModelCalls is how many completions the sandbox model generated (an
// answer lost after the generation counts: the provider did the work).
func (s *Sandbox) ModelCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modelCalls
}

// QueueModelFaults scripts the next completions' faults, in order.
func (s *Sandbox) QueueModelFaults(faults ...string) error {
	for _, f := range faults {
		if !slices.Contains(ModelFaults, f) {
			return fmt.Errorf("sandbox: unknown model fault %q (known: %s)", f, strings.Join(ModelFaults, ", "))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modelFaults = append(s.modelFaults, faults...)
	return nil
}

func (s *Sandbox) nextModelFault() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.modelFaults) == 0 {
		return ""
	}
	f := s.modelFaults[0]
	s.modelFaults = s.modelFaults[1:]
	return f
}

func (s *Sandbox) scriptModelFaults(w http.ResponseWriter, r *http.Request) {
	var v struct {
		Faults []string `json:"faults"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "invalid_request", Detail: err.Error()})
		return
	}
	if err := s.QueueModelFaults(v.Faults...); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "invalid_request", Detail: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"queued": len(v.Faults)})
}

// modelError is a scripted fault answered as the provider's error.
type modelError struct {
	status         int
	typ, code, msg string
	headers        map[string]string
}

// modelErrors are the faults that answer an error instead of generating.
var modelErrors = map[string]modelError{
	"rate_limit": {http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests",
		map[string]string{"Retry-After-Ms": "200", "Retry-After": "1", "X-Should-Retry": "true"}},
	"quota": {http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota", "You exceeded your current quota",
		map[string]string{"X-Should-Retry": "false"}},
	"billing":      {http.StatusTooManyRequests, "billing_hard_limit_reached", "billing_hard_limit_reached", "Billing hard limit has been reached", nil},
	"server_error": {http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request", nil},
	"should_not_retry": {http.StatusInternalServerError, "server_error", "", "The server had an error; do not retry",
		map[string]string{"X-Should-Retry": "false"}},
	"conflict":        {http.StatusConflict, "conflict", "", "Another request holds the lock", nil},
	"request_timeout": {http.StatusRequestTimeout, "timeout", "", "Request timed out", nil},
}

// providerError is an OpenAI-shaped error answer.
type providerError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func writeProviderError(w http.ResponseWriter, status int, typ, code, msg string) {
	var e providerError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	writeJSON(w, status, e)
}

func (s *Sandbox) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		writeProviderError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "model and messages are required")
		return
	}
	fault := s.nextModelFault()
	if e, ok := modelErrors[fault]; ok {
		for k, v := range e.headers {
			w.Header().Set(k, v)
		}
		writeProviderError(w, e.status, e.typ, e.code, e.msg)
		return
	}
	msg, finish := s.complete(req, fault)
	s.mu.Lock()
	s.modelCalls++
	n := s.modelCalls
	s.mu.Unlock()
	if fault == "timeout_after_accept" {
		// Generated (and billed) but never answered: the client times out
		// after sending, and whether anything happened is unknown to it.
		<-r.Context().Done()
		return
	}
	out, _ := json.Marshal(msg)
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      fmt.Sprintf("chatcmpl-sandbox-%d", n),
		"object":  "chat.completion",
		"model":   req.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]int{"prompt_tokens": len(body)/4 + 1, "completion_tokens": len(out)/4 + 1,
			"total_tokens": len(body)/4 + len(out)/4 + 2},
	})
}

// complete is the model's deterministic answer to req.
func (s *Sandbox) complete(req chatRequest, fault string) (chatMessage, string) {
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_schema" {
		steps := []string{}
		for _, t := range req.Tools {
			steps = append(steps, t.Function.Name)
		}
		if len(steps) == 0 {
			steps = append(steps, "respond")
		}
		var content []byte
		if fault == "malformed_output" {
			content = []byte(`{"steps":"all of them"}`)
		} else {
			content, _ = json.Marshal(map[string]any{"steps": steps})
		}
		return chatMessage{Role: "assistant", Content: string(content)}, "stop"
	}
	// Which offered tools have a result: tool messages name the call they
	// answer, the assistant's earlier messages the call's tool.
	names := map[string]string{}
	done := map[string]bool{}
	var last *toolCall
	for i := range req.Messages {
		m := &req.Messages[i]
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
		if m.Role == "tool" && !isToolError(m.Content) {
			done[names[m.ToolCallID]] = true
		}
		if len(m.ToolCalls) > 0 {
			last = &m.ToolCalls[len(m.ToolCalls)-1]
		}
	}
	if (fault == "repeat_call" || fault == "reordered_call") && last != nil {
		call := *last
		call.ID += "-again"
		if fault == "reordered_call" {
			call.Function.Arguments = reverseMembers(call.Function.Arguments)
		}
		return chatMessage{Role: "assistant", ToolCalls: []toolCall{call}}, "tool_calls"
	}
	next := -1
	for i, t := range req.Tools {
		if !done[t.Function.Name] {
			next = i
			break
		}
	}
	if next < 0 {
		return chatMessage{Role: "assistant", Content: "done"}, "stop"
	}
	results := next
	t := req.Tools[results].Function
	args := exampleArguments(t.Parameters)
	if fault == "malformed_arguments" {
		args = `{"unexpected": true}`
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s:%s", results, t.Name, args)))
	call := toolCall{ID: "call_" + hex.EncodeToString(sum[:6]), Type: "function"}
	call.Function.Name, call.Function.Arguments = t.Name, args
	return chatMessage{Role: "assistant", ToolCalls: []toolCall{call}}, "tool_calls"
}

// exampleArguments builds a tool's arguments from its JSON Schema: each
// property's first example, else its default; members in schema order.
func exampleArguments(schema json.RawMessage) string {
	var sc struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &sc) != nil || len(sc.Properties) == 0 {
		return "{}"
	}
	dec := json.NewDecoder(strings.NewReader(string(sc.Properties)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "{}"
	}
	var b strings.Builder
	b.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "{}"
		}
		name, _ := t.(string)
		var prop struct {
			Examples []json.RawMessage `json:"examples"`
			Default  json.RawMessage   `json:"default"`
		}
		if dec.Decode(&prop) != nil {
			return "{}"
		}
		v := prop.Default
		if len(prop.Examples) > 0 {
			v = prop.Examples[0]
		}
		if v == nil {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}

// reverseMembers writes a JSON object's members in reverse order (the same
// object, as a model might write it a second time).
func reverseMembers(obj string) string {
	dec := json.NewDecoder(strings.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return obj
	}
	var members []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return obj
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return obj
		}
		k, _ := json.Marshal(t)
		members = append(members, string(k)+":"+string(v))
	}
	slices.Reverse(members)
	return "{" + strings.Join(members, ",") + "}"
}

// isToolError: a tool result that says the call was refused or failed.
func isToolError(content string) bool {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal([]byte(content), &v) == nil && len(v.Error) > 0 && string(v.Error) != "null"
}
