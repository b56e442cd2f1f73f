package review

import (
	"reflect"
	"strings"
	"testing"
)

func TestDiffJSON(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want []FieldDiff
	}{
		{"same", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, nil},
		{"changed", `{"a":1}`, `{"a":2}`, []FieldDiff{{Path: "$.a", Old: "1", New: "2"}}},
		{"added and removed", `{"a":1}`, `{"b":true}`, []FieldDiff{{Path: "$.a", Old: "1"}, {Path: "$.b", New: "true"}}},
		{"nested array", `{"x":{"l":[1,2,3]}}`, `{"x":{"l":[1,9]}}`, []FieldDiff{{Path: "$.x.l[1]", Old: "2", New: "9"}, {Path: "$.x.l[2]", Old: "3"}}},
		{"type change", `{"a":"1"}`, `{"a":1}`, []FieldDiff{{Path: "$.a", Old: `"1"`, New: "1"}}},
		{"garbage", `{`, `{}`, []FieldDiff{{Path: "$", Old: "{", New: "{}"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DiffJSON([]byte(tt.a), []byte(tt.b)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DiffJSON = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	got := string(Redact([]byte(`{"card":"4242","to":[{"email":"a@b.c","name":"A"}],"amount":5}`), []string{"card", "email"}))
	if strings.Contains(got, "4242") || strings.Contains(got, "a@b.c") || !strings.Contains(got, `"name":"A"`) || !strings.Contains(got, `"amount":5`) {
		t.Errorf("Redact = %s", got)
	}
	if got := string(Redact([]byte(`{"a":1}`), nil)); got != `{"a":1}` {
		t.Errorf("no fields: %s", got)
	}
}
