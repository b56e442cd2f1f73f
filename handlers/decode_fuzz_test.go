package handlers

import (
	"errors"
	"testing"
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
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v decodeTarget
		err := DecodeJSON(body, &v)
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
