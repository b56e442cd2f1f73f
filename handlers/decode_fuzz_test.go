package handlers

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/limbo-dev/limbo/review"
)

// FuzzDecodeJSON checks that DecodeJSON never panics and that every failure
// is a *FieldError.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"op","count":3,"limit":5,"ratio":0.5,"enabled":true,"tags":["a"],"payload":{"k":[1]},"nested":{"ref":"r"}}`,
		`{"count":"3"}`,
		`{"nested":{"ref":"a","ref":"b"}}`,
		`{"Nested":{"Ref":1}}`,
		`{"deadline":"2025-03-14T12:00:00Z","size":-1}`,
		`{"deadline":"tomorrow"}`,
		`{"nam":"x"}`,
		`{"items":[{"ref":"a","n":1},{"ref":"b","N":2}]}`,
		`{"name":"\u004e"}`,
		`{"count":1.5}`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v decodeTarget
		err := DecodeJSON(body, &v)
		// The shortcut for lower-case names answers exactly what the
		// checked path answers: the same value, or the same error.
		var slow decodeTarget
		slowErr := decodeAlwaysChecked(body, &slow)
		if fmt.Sprint(err) != fmt.Sprint(slowErr) {
			t.Fatalf("DecodeJSON(%q) = %v, checked path: %v", body, err, slowErr)
		}
		if err == nil && !reflect.DeepEqual(v, slow) {
			t.Fatalf("DecodeJSON(%q) = %+v, checked path: %+v", body, v, slow)
		}
		if err == nil {
			return
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("DecodeJSON(%q) = %v (%T), want *FieldError", body, err, err)
		}
		if fe.Problem == "" {
			t.Fatalf("DecodeJSON(%q): empty problem", body)
		}
	})
}

// decodeAlwaysChecked is DecodeJSON without its shortcut: every body through
// checkValue.
func decodeAlwaysChecked(body []byte, v any) error {
	if _, err := review.CheckJSON(body); err != nil {
		return DecodeJSON(body, v) // the same refusal, from the same scan
	}
	return decodeChecked(body, v)
}
