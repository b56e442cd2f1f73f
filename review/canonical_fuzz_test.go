package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzCanonicalize checks that Canonicalize never panics, that every error
// wraps ErrInvalid, and that any output is valid JSON which canonicalises to
// itself and means the same to encoding/json as the input.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null]}`,
		`{"a":1,"a":2}`,
		`"\ud83d\ude00\u0000\/"`,
		`[1e21,1e-7,-0,1E3,0.1,5e-324]`,
		"\"\xff\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := Canonicalize(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("accepted input encoding/json calls invalid: %q", raw)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		// Same data before and after, as encoding/json reads it.
		var before, after any
		if err := json.Unmarshal(raw, &before); err != nil {
			t.Fatalf("encoding/json rejects accepted input %q: %v", raw, err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("encoding/json rejects output %q: %v", out, err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("meaning changed:\n%q\n%q", raw, out)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("canonical output %q rejected: %v", out, err)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
	})
}
