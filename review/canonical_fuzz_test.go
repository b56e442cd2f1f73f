package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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
		`{"a":{"B":1}}`,
		`{"\u0041":1,"b":[{"c\u00e9":2}]}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"h":18}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := Canonicalize(raw)
		// CheckJSON accepts and refuses exactly what Canonicalize does,
		// with the same error.
		lower, checkErr := CheckJSON(raw)
		if fmt.Sprint(err) != fmt.Sprint(checkErr) {
			t.Fatalf("CheckJSON(%q) = %v, Canonicalize: %v", raw, checkErr, err)
		}
		if err == nil && lower != lowerNamesOf(t, raw) {
			t.Fatalf("CheckJSON(%q): lowerNames %v, want %v", raw, lower, !lower)
		}
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

// lowerNamesOf decodes raw with encoding/json and reports whether every
// member name is lower-case ASCII: what CheckJSON's lowerNames must say.
func lowerNamesOf(t *testing.T, raw []byte) bool {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("encoding/json rejects accepted input %q: %v", raw, err)
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.ToLower(k) != k || !isASCII(k) || !walk(e) {
					return false
				}
			}
		case []any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		}
		return true
	}
	return walk(v)
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
