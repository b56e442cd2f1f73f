package handlers

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// FieldError is a problem with an API request body. Field is the path of the
// offending member ("max_attempts", "resource.ref", "candidates[1].ref"), or
// empty when the problem concerns the body as a whole.
type FieldError struct {
	Field   string
	Problem string
}

// Error formats the problem as `field "max_attempts": expected integer, got
// string`, or just the problem when Field is empty.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Problem)
}

// DecodeJSON strictly decodes the request body into v, which must be a
// non-nil pointer (usually to a struct). Every problem with the body is
// returned as a *FieldError:
//   - an empty body;
//   - anything review.Canonicalize rejects: invalid JSON (with its offset),
//     data after the value, duplicate member names at any depth, invalid
//     UTF-8, unpaired surrogates, numbers beyond float64;
//   - a member that matches no field exactly (encoding/json would otherwise
//     match names case-insensitively, so {"KEY":…} would set Key);
//   - a value of the wrong type, naming the field and the expected type.
//
// json.RawMessage fields accept any JSON value. A v that is not a pointer is
// a programming error and yields encoding/json's error unchanged.
//
// The common body — every member name lower-case ASCII, decoded into a type
// whose names are too — takes one strict scan and one decode: there a
// case-insensitive match can only be exact, so encoding/json with
// DisallowUnknownFields refuses what checkValue would. Any failure there, and
// any other body, goes through checkValue, whose errors name the field.
func DecodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return &FieldError{Problem: "request body is empty"}
	}
	lowerNames, err := review.CheckJSON(body)
	if err != nil {
		return canonicalProblem(err)
	}
	if t := reflect.TypeOf(v); lowerNames && t != nil && lowerFields(t) {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if dec.Decode(v) == nil {
			return nil // Canonicalize's checks refused trailing data
		}
		// Decode may have set some fields: checkValue and a second decode
		// into v give the error, as they would have without this shortcut.
	}
	return decodeChecked(body, v)
}

// decodeChecked is DecodeJSON after the strict scan: member names and
// custom-unmarshalled values checked against the type first, then decoded.
func decodeChecked(body []byte, v any) error {
	// Check member names (exact match) and custom-unmarshalled values
	// against the target type first: this is where paths are known.
	var generic any
	gd := json.NewDecoder(bytes.NewReader(body))
	gd.UseNumber()
	if err := gd.Decode(&generic); err != nil {
		return decodeProblem(err) // cannot happen after Canonicalize
	}
	if t := reflect.TypeOf(v); t != nil {
		if fe := checkValue(generic, t, ""); fe != nil {
			return fe
		}
	}

	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var invalid *json.InvalidUnmarshalError
		if errors.As(err, &invalid) {
			return err
		}
		return decodeProblem(err)
	}
	// Canonicalize already refused trailing data; this keeps DecodeJSON
	// correct on its own.
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return &FieldError{Problem: fmt.Sprintf("invalid JSON: trailing data after the value at offset %d", dec.InputOffset())}
	}
	return nil
}

// canonicalProblem turns an error from review.Canonicalize into a FieldError.
func canonicalProblem(err error) *FieldError {
	var ce *review.CanonicalError
	if !errors.As(err, &ce) {
		return &FieldError{Problem: "invalid JSON: " + strings.TrimPrefix(err.Error(), review.ErrInvalid.Error()+": ")}
	}
	field := strings.TrimPrefix(strings.TrimPrefix(ce.Path, "$"), ".")
	if ce.Member != "" {
		return &FieldError{Field: joinPath(field, ce.Member), Problem: "duplicate member"}
	}
	return &FieldError{Field: field, Problem: fmt.Sprintf("invalid JSON: %s at offset %d", ce.Problem, ce.Offset)}
}

// decodeProblem turns an encoding/json error into a FieldError.
func decodeProblem(err error) *FieldError {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return &FieldError{
			Field:   typeErr.Field,
			Problem: fmt.Sprintf("expected %s, got %s", typeWord(typeErr.Type), valueWord(typeErr.Value)),
		}
	case errors.As(err, &syntaxErr):
		return &FieldError{Problem: fmt.Sprintf("invalid JSON: %s at offset %d", strings.TrimPrefix(syntaxErr.Error(), "json: "), syntaxErr.Offset)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &FieldError{Problem: "invalid JSON: unexpected end of input"}
	}
	msg := err.Error()
	// DisallowUnknownFields reports `json: unknown field "x"` as a plain
	// error; checkValue normally catches these first, with a full path.
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if name, err := strconv.Unquote(rest); err == nil {
			return &FieldError{Field: name, Problem: "unknown field"}
		}
	}
	return &FieldError{Problem: strings.TrimPrefix(msg, "json: ")}
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	timeType        = reflect.TypeFor[time.Time]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// typeWord names a Go type in the words an API client understands.
func typeWord(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "RFC 3339 date-time string"
	case t == rawMessageType:
		return "JSON value"
	case reflect.PointerTo(t).Implements(textType):
		return "string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 string" // how encoding/json reads []byte
		}
		return "array"
	case reflect.Array:
		return "array"
	}
	return "value"
}

// valueWord rewrites encoding/json's description of a JSON value ("bool",
// "number 1.5", "string"…) in the same plain words as typeWord.
func valueWord(v string) string {
	if v == "bool" {
		return "boolean"
	}
	return v
}

// checkValue walks a generically decoded body alongside the Go type it will
// be decoded into. It reports members that match no field exactly, and runs
// custom unmarshallers (time.Time…) on their own value so that their errors
// name the field; encoding/json reports neither with a path.
// Type mismatches are left to encoding/json, which reports them well.
func checkValue(v any, t reflect.Type, path string) *FieldError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || v == nil {
		return nil // any value is fine; null leaves the field alone
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(unmarshalerType) {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return &FieldError{Field: path, Problem: customProblem(t, v, err)}
		}
		return nil
	}
	if pt.Implements(textType) {
		if s, ok := v.(string); ok {
			if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
				return &FieldError{Field: path, Problem: customProblem(t, v, err)}
			}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for _, name := range sortedKeys(obj) {
			ft, ok := fields[name]
			if !ok {
				return &FieldError{Field: joinPath(path, name), Problem: unknownProblem(name, fields)}
			}
			if fe := checkValue(obj[name], ft, joinPath(path, name)); fe != nil {
				return fe
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, name := range sortedKeys(obj) {
			if fe := checkValue(obj[name], t.Elem(), joinPath(path, name)); fe != nil {
				return fe
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range arr {
			if fe := checkValue(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// customProblem words an error from a custom unmarshaller.
func customProblem(t reflect.Type, v any, err error) string {
	if t == timeType {
		if s, ok := v.(string); ok {
			return fmt.Sprintf("expected RFC 3339 date-time, got %q", s)
		}
		return "expected RFC 3339 date-time string, got " + jsonKind(v)
	}
	return err.Error()
}

// jsonKind names the kind of a generically decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// unknownProblem explains an unknown member, pointing out a field that only
// differs in case.
func unknownProblem(name string, fields map[string]reflect.Type) string {
	for known := range fields {
		if strings.EqualFold(known, name) {
			return fmt.Sprintf("unknown field (names are case-sensitive; did you mean %q?)", known)
		}
	}
	return "unknown field"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// lowerCache remembers lowerFields per type.
var lowerCache sync.Map // reflect.Type → bool

// lowerFields reports whether every member name encoding/json would match
// in t, at every depth, is lower-case ASCII (see review.CheckJSON). Values
// decoded by their own unmarshallers have no members of t's to match.
func lowerFields(t reflect.Type) bool {
	if ok, found := lowerCache.Load(t); found {
		return ok.(bool)
	}
	ok := lowerFieldsIn(t, map[reflect.Type]bool{})
	lowerCache.Store(t, ok)
	return ok
}

func lowerFieldsIn(t reflect.Type, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] || t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textType) {
		return true
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Struct:
		for name, ft := range jsonFields(t) {
			for _, c := range []byte(name) {
				if (c >= 'A' && c <= 'Z') || c >= 0x80 {
					return false
				}
			}
			if !lowerFieldsIn(ft, seen) {
				return false
			}
		}
	case reflect.Map, reflect.Slice, reflect.Array:
		return lowerFieldsIn(t.Elem(), seen)
	case reflect.Interface:
		return true // decoded generically: no names to match
	}
	return true
}

// fieldCache maps a struct type to its JSON member names and their types.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields lists the members encoding/json decodes into struct type t:
// exported fields under their tag name (or Go name), skipping `json:"-"`,
// with the fields of untagged embedded structs promoted. As in
// encoding/json, a field of the outer struct hides a promoted one.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(m, t, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]reflect.Type, t reflect.Type, depth int) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := m[name]; !taken {
			m[name] = f.Type
		}
	}
	if depth < 8 { // embedding cycles through pointers are possible
		for _, et := range embedded {
			addFields(m, et, depth+1)
		}
	}
}
