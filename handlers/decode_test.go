package handlers

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// decodeTarget is shaped like the API's request bodies.
type decodeTarget struct {
	Name     string          `json:"name"`
	Count    int             `json:"count"`
	Limit    *int            `json:"limit,omitempty"`
	Ratio    float64         `json:"ratio"`
	Enabled  bool            `json:"enabled"`
	Tags     []string        `json:"tags"`
	Payload  json.RawMessage `json:"payload"`
	Nested   *decodeNested   `json:"nested"`
	Items    []decodeNested  `json:"items"`
	Deadline *time.Time      `json:"deadline"`
	Size     uint            `json:"size"`
	Ignored  string          `json:"-"`
	internal string
}

type decodeNested struct {
	Ref     string `json:"ref"`
	Version string `json:"version"`
	N       int    `json:"n"`
}

func TestDecodeJSONValid(t *testing.T) {
	body := `{
		"name": "op", "count": 3, "limit": 5, "ratio": 0.25, "enabled": true,
		"tags": ["a", "b"], "payload": {"z": [1, {"y": null}], "a": "\u00e9"},
		"nested": {"ref": "r1", "version": "v2"}, "items": [{"ref": "x", "n": 2}],
		"deadline": "2025-03-14T12:00:00Z", "size": 7
	}`
	var got decodeTarget
	if err := DecodeJSON([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "op" || got.Count != 3 || got.Limit == nil || *got.Limit != 5 || got.Ratio != 0.25 ||
		!got.Enabled || len(got.Tags) != 2 || got.Nested == nil || got.Nested.Version != "v2" ||
		len(got.Items) != 1 || got.Items[0].N != 2 || got.Deadline == nil || got.Deadline.Year() != 2025 || got.Size != 7 {
		t.Errorf("decoded %+v", got)
	}
	if !strings.Contains(string(got.Payload), `"z": [1, {"y": null}]`) {
		t.Errorf("payload = %s", got.Payload)
	}
}

func TestDecodeJSONRawMessageAcceptsAnyValue(t *testing.T) {
	for _, p := range []string{`null`, `1.5`, `"s"`, `[1,2]`, `{"a":{}}`, `true`} {
		var got decodeTarget
		if err := DecodeJSON([]byte(`{"payload":`+p+`}`), &got); err != nil {
			t.Errorf("payload %s: %v", p, err)
		}
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		wantField   string
		wantProblem string // substring
	}{
		{"empty", ``, "", "request body is empty"},
		{"blank", " \n\t", "", "request body is empty"},
		{"syntax", `{"name": "a",}`, "", "invalid JSON"},
		{"syntax offset", `{"name": tru}`, "name", "offset 9"},
		{"truncated", `{"name": "a"`, "", "end of input"},
		{"trailing data", `{"name":"a"} {"name":"b"}`, "", "trailing data"},
		{"trailing garbage", `{"name":"a"}x`, "", "trailing data"},
		{"duplicate root", `{"name":"a","name":"b"}`, "name", "duplicate member"},
		{"duplicate nested", `{"nested":{"ref":"a","ref":"b"}}`, "nested.ref", "duplicate member"},
		{"duplicate in payload", `{"payload":{"x":[{"k":1,"k":2}]}}`, "payload.x[0].k", "duplicate member"},
		{"invalid UTF-8", "{\"name\":\"\xff\"}", "name", "invalid UTF-8"},
		{"lone surrogate", `{"name":"\ud800"}`, "name", "unpaired surrogate"},
		{"huge number", `{"ratio":1e400}`, "ratio", "not a finite"},
		{"unknown root", `{"name":"a","bogus":1}`, "bogus", "unknown field"},
		{"unknown nested", `{"nested":{"ref":"a","extra":true}}`, "nested.extra", "unknown field"},
		{"unknown in array element", `{"items":[{},{"ref":"a","x":1}]}`, "items[1].x", "unknown field"},
		{"case folded name", `{"Name":"a"}`, "Name", `did you mean "name"`},
		{"dash-tagged field", `{"Ignored":"a"}`, "Ignored", "unknown field"},
		{"unexported field", `{"internal":"a"}`, "internal", "unknown field"},
		{"string for int", `{"count":"3"}`, "count", "expected integer, got string"},
		{"fraction for int", `{"count":1.5}`, "count", "expected integer, got number 1.5"},
		{"overflow int", `{"count":123456789012345678901234567890}`, "count", "expected integer"},
		{"negative uint", `{"size":-1}`, "size", "expected non-negative integer, got number -1"},
		{"string for *int", `{"limit":"5"}`, "limit", "expected integer, got string"},
		{"bool for float", `{"ratio":true}`, "ratio", "expected number, got boolean"},
		{"number for bool", `{"enabled":1}`, "enabled", "expected boolean, got number"},
		{"number for string", `{"name":7}`, "name", "expected string, got number"},
		{"string for array", `{"tags":"a"}`, "tags", "expected array, got string"},
		{"number in string array", `{"tags":["a",1]}`, "tags", "expected string, got number"},
		{"array for object", `{"nested":[]}`, "nested", "expected object, got array"},
		{"wrong type nested", `{"nested":{"ref":1}}`, "nested.ref", "expected string, got number"},
		{"not an object", `[1,2]`, "", "expected object, got array"},
		{"bad date", `{"deadline":"tomorrow"}`, "deadline", `expected RFC 3339 date-time, got "tomorrow"`},
		{"number for date", `{"deadline":5}`, "deadline", "expected RFC 3339 date-time string, got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got decodeTarget
			err := DecodeJSON([]byte(tt.body), &got)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("DecodeJSON(%q) = %v (%T), want *FieldError", tt.body, err, err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("Field = %q, want %q (problem %q)", fe.Field, tt.wantField, fe.Problem)
			}
			if !strings.Contains(fe.Problem, tt.wantProblem) {
				t.Errorf("Problem = %q, want it to contain %q", fe.Problem, tt.wantProblem)
			}
		})
	}
}

func TestFieldErrorText(t *testing.T) {
	tests := []struct {
		err  FieldError
		want string
	}{
		{FieldError{"max_attempts", "expected integer, got string"}, `field "max_attempts": expected integer, got string`},
		{FieldError{"", "request body is empty"}, "request body is empty"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestDecodeJSONEmbeddedAndMap(t *testing.T) {
	type Base struct {
		ID string `json:"id"`
	}
	type withEmbedded struct {
		Base
		Labels map[string]decodeNested `json:"labels"`
	}
	var got withEmbedded
	if err := DecodeJSON([]byte(`{"id":"x","labels":{"a":{"ref":"r"}}}`), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "x" || got.Labels["a"].Ref != "r" {
		t.Errorf("decoded %+v", got)
	}
	err := DecodeJSON([]byte(`{"labels":{"a":{"nope":1}}}`), &got)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "labels.a.nope" {
		t.Errorf("got %v, want unknown field labels.a.nope", err)
	}
}

func TestDecodeJSONNonPointer(t *testing.T) {
	var got decodeTarget
	err := DecodeJSON([]byte(`{}`), got)
	var fe *FieldError
	if err == nil || errors.As(err, &fe) {
		t.Errorf("non-pointer target: got %v, want encoding/json's InvalidUnmarshalError", err)
	}
}

// TestRequestTypesTakeTheShortcut: the API's request bodies name their
// members in lower case, so DecodeJSON decodes them with one scan and one
// decode (a type that loses this still decodes correctly, only slower).
func TestRequestTypesTakeTheShortcut(t *testing.T) {
	for _, v := range []any{&registerRequest{}, &attemptRequest{}, &review.Outcome{}, &evidenceRequest{}, &jobRequest{}, &decodeTarget{}} {
		if !lowerFields(reflect.TypeOf(v)) {
			t.Errorf("%T: a member name is not lower-case ASCII", v)
		}
	}
	type mixed struct {
		Name string `json:"Name"`
	}
	if lowerFields(reflect.TypeFor[*struct {
		Inner []mixed `json:"inner"`
	}]()) {
		t.Error("a nested upper-case member name was not seen")
	}
}
