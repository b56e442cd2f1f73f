package handlers

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/limbo-dev/limbo/review"
)

// The intake rule at the boundary: every string that arrives — each member
// of a decoded API body (checkStrings), each path and query parameter
// (checkParams), each console form field (checkForm) — is held to
// review.CheckText, with a kind and a limit declared where the field is
// declared. The API's limits are the ones openapi.json publishes as
// maxLength and pattern (TestIntakeLimitsMatchDocument keeps them equal).
//
// Body fields declare theirs in a struct tag:
//
//	SourceRef string `json:"source_ref" text:"id,255"`
//	Reason    string `json:"reason" text:"free,2000"`
//	Key       string `json:"key" text:"id,255,key"`
//
// "id" is review.Identifier, "free" review.FreeText, the number the most
// characters, and an optional third element a format the value must also
// have (textFormats). The tag of a slice applies to its elements. A string
// without a tag is a programming error: checkStrings refuses the request
// with an error that is not the caller's (a 500), and
// TestRequestTypesDeclareEveryString finds it before that.

// textRule is a declared kind, limit and format.
type textRule struct {
	kind   review.TextKind
	max    int
	format string // "" or a key of textFormats
}

// check applies the rule to s; it returns the problem in words, or "".
func (r textRule) check(s string) string {
	if p := review.TextProblem(r.kind, r.max, s); p != "" {
		return p
	}
	if f, ok := textFormats[r.format]; ok && s != "" {
		if err := f.check(s); err != nil {
			return f.problem(err)
		}
	}
	return ""
}

// textFormat is a syntax a string field may have beyond the text rule, with
// the pattern openapi.json publishes for it.
type textFormat struct {
	pattern string
	check   func(string) error
	problem func(error) string
}

var textFormats = map[string]textFormat{
	"key": {
		pattern: review.KeyPattern,
		check:   review.ValidateKey,
		problem: func(err error) string { return strings.TrimPrefix(err.Error(), review.ErrInvalid.Error()+": ") },
	},
	"date-time": {
		pattern: review.TimePattern,
		check:   func(s string) error { _, err := review.ParseRFC3339(s); return err },
		problem: func(err error) string {
			return "expected an RFC 3339 date-time such as 2030-01-02T15:04:05Z: " + err.Error()
		},
	},
}

// parseTextTag reads a `text:"…"` tag.
func parseTextTag(tag string) (textRule, error) {
	parts := strings.Split(tag, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return textRule{}, fmt.Errorf("text tag %q: want kind,max[,format]", tag)
	}
	var r textRule
	switch parts[0] {
	case "id":
		r.kind = review.Identifier
	case "free":
		r.kind = review.FreeText
	default:
		return textRule{}, fmt.Errorf("text tag %q: kind must be id or free", tag)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 {
		return textRule{}, fmt.Errorf("text tag %q: max must be a positive integer", tag)
	}
	r.max = n
	if len(parts) == 3 {
		if _, ok := textFormats[parts[2]]; !ok {
			return textRule{}, fmt.Errorf("text tag %q: unknown format %q", tag, parts[2])
		}
		r.format = parts[2]
	}
	return r, nil
}

// textField is one member of a struct as the walker sees it.
type textField struct {
	index int
	name  string    // the JSON member name
	rule  *textRule // nil: no tag
}

// textPlan is a struct type's members that can hold strings, or the error
// that makes its tags unusable.
type textPlan struct {
	fields []textField
	err    error
}

var textPlans sync.Map // reflect.Type → *textPlan

// planFor lists the members of struct type t that the walker visits.
func planFor(t reflect.Type) *textPlan {
	if p, ok := textPlans.Load(t); ok {
		return p.(*textPlan)
	}
	p := &textPlan{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || !mayHoldText(f.Type) {
			continue
		}
		if f.Anonymous {
			p.err = fmt.Errorf("%v.%s: embedded fields are not supported by the intake walker", t, f.Name)
			break
		}
		if name == "" {
			name = f.Name
		}
		tf := textField{index: i, name: name}
		if tag, ok := f.Tag.Lookup("text"); ok {
			r, err := parseTextTag(tag)
			if err != nil {
				p.err = fmt.Errorf("%v.%s: %w", t, f.Name, err)
				break
			}
			tf.rule = &r
		}
		p.fields = append(p.fields, tf)
	}
	textPlans.Store(t, p)
	return p
}

// mayHoldText reports whether a value of type t can contain a string the
// walker must check. json.RawMessage (the payload) is raw JSON, already
// held to the strict scan; its strings are data, stored escaped.
func mayHoldText(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String, reflect.Struct, reflect.Interface, reflect.Map:
		return t != timeType
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8 && mayHoldText(t.Elem())
	}
	return false
}

// errUndeclaredText is a request type with a string its author gave no
// rule: the server's fault, never the caller's.
var errUndeclaredText = errors.New("intake: a string field has no text tag")

// undeclaredError names where errUndeclaredText was met.
type undeclaredError struct{ path, what string }

func (e *undeclaredError) Error() string { return errUndeclaredText.Error() + ": " + e.path + e.what }
func (e *undeclaredError) Unwrap() error { return errUndeclaredText }

// checkStrings holds every string in v (a decoded request body) to its
// declared rule. The first problem is a *FieldError naming the member by
// its path ("candidates[1].ref"). Paths are built only on the way out of a
// problem: a body that passes costs no allocation.
func checkStrings(v any) error {
	return walkText(reflect.ValueOf(v), nil)
}

func walkText(v reflect.Value, rule *textRule) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return walkText(v.Elem(), rule)
	case reflect.String:
		if rule == nil {
			return &undeclaredError{what: " (" + v.Type().String() + ")"}
		}
		if p := rule.check(v.String()); p != "" {
			return &FieldError{Problem: p}
		}
	case reflect.Struct:
		if v.Type() == timeType {
			return nil
		}
		plan := planFor(v.Type())
		if plan.err != nil {
			return plan.err
		}
		for _, f := range plan.fields {
			if err := walkText(v.Field(f.index), f.rule); err != nil {
				return within(err, f.name)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i := range v.Len() {
			if err := walkText(v.Index(i), rule); err != nil {
				return within(err, "["+strconv.Itoa(i)+"]")
			}
		}
	case reflect.Map:
		// Member names are strings from outside too; no request type has
		// a map today, so none has a rule for them.
		if v.Len() > 0 {
			return &undeclaredError{what: ": maps are not supported by the intake walker"}
		}
	}
	return nil
}

// within puts step (a member name, or "[i]") in front of the path of the
// problem err reports.
func within(err error, step string) error {
	join := func(path string) string {
		if path == "" || path[0] == '[' {
			return step + path
		}
		return step + "." + path
	}
	switch e := err.(type) {
	case *FieldError:
		e.Field = join(e.Field)
	case *undeclaredError:
		e.path = join(e.path)
	}
	return err
}

// Path and query parameters.

// pathParams are the rules for path parameters, by name, on every route.
// A name missing here gets defaultParam.
var pathParams = map[string]textRule{
	"id":     {kind: review.Identifier, max: 64},
	"n":      {kind: review.Identifier, max: 20},
	"ref":    {kind: review.Identifier, max: review.MaxFieldLen},
	"source": {kind: review.Identifier, max: review.MaxFieldLen},
}

// queryParams are the rules for the API's query parameters, by route and
// name. Any other query parameter, on any route, gets defaultParam.
var queryParams = map[string]map[string]textRule{
	"/api/v1/operations": {
		"state":      {kind: review.Identifier, max: 32},
		"cursor":     {kind: review.Identifier, max: 64},
		"source_ref": {kind: review.Identifier, max: review.MaxFieldLen},
		"limit":      {kind: review.Identifier, max: 10},
	},
	"/api/v1/decisions": {
		"cursor": {kind: review.Identifier, max: 39}, // the store checks the form (store.DecisionCursorPattern)
	},
	// The console's operations browser (browse.go); the store checks the
	// values (a state, a risk, a cursor of its form).
	"/operations": {
		"q":           {kind: review.Identifier, max: review.MaxFieldLen},
		"tenant":      {kind: review.Identifier, max: review.MaxFieldLen},
		"destination": {kind: review.Identifier, max: review.MaxFieldLen},
		"action":      {kind: review.Identifier, max: review.MaxFieldLen},
		"risk":        {kind: review.Identifier, max: 32},
		"flag":        {kind: review.Identifier, max: 32},
		"state":       {kind: review.Identifier, max: 32},
		"within":      {kind: review.Identifier, max: 20},
		"older":       {kind: review.Identifier, max: 20},
		"has_case":    {kind: review.Identifier, max: 3},
		"after":       {kind: review.Identifier, max: 100},
	},
}

// defaultParam is the rule for parameters the API does not document (the
// console's filters and search): no control characters, and bounded.
var defaultParam = textRule{kind: review.Identifier, max: 1000}

// checkParams holds every path parameter and every query parameter to its
// rule, on every route that reads any (the API group, inbound webhooks and
// the console; routes.go); the first problem answers 400 naming the
// parameter.
// Path parameters are unescaped here when Echo left them escaped (it routes
// on the raw path when the request escapes characters it need not, such as
// %2F or lower-case hex), so handlers always see the decoded value.
// net/http itself refuses a path with a malformed escape (400, plain text)
// before any handler runs; a malformed escape in the query, which
// url.Values would silently drop, is refused here.
func checkParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		names, values := c.ParamNames(), c.ParamValues()
		escaped := c.Request().URL.RawPath != ""
		for i, name := range names {
			if i >= len(values) {
				break
			}
			if name == "*" {
				continue // a static file or the API's catch-all: no parameter
			}
			if escaped {
				v, err := url.PathUnescape(values[i])
				if err != nil {
					return &FieldError{Field: name, Problem: "malformed percent-escape"}
				}
				values[i] = v
			}
			rule, ok := pathParams[name]
			if !ok {
				rule = defaultParam
			}
			if p := rule.check(values[i]); p != "" {
				return &FieldError{Field: name, Problem: p}
			}
		}
		if escaped {
			c.SetParamValues(values...)
		}
		if raw := c.Request().URL.RawQuery; raw != "" {
			if err := checkQuery(raw, queryParams[c.Path()]); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// checkQuery reads a raw query string pair by pair, as url.ParseQuery does,
// but names the parameter whose escape is malformed instead of dropping it.
func checkQuery(raw string, rules map[string]textRule) error {
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return &FieldError{Problem: "invalid query: ';' is not a separator"}
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return &FieldError{Problem: "invalid query: malformed percent-escape in a parameter name"}
		}
		if p := defaultParam.check(name); p != "" {
			return &FieldError{Problem: "invalid query: parameter name " + p}
		}
		if redirectTargets[name] {
			continue
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return &FieldError{Field: name, Problem: "malformed percent-escape"}
		}
		rule, ok := rules[name]
		if !ok {
			rule = defaultParam
		}
		if p := rule.check(value); p != "" {
			return &FieldError{Field: name, Problem: p}
		}
	}
	return nil
}

// Console forms.

// formRules are the console's form fields that are prose; every other field
// (emails, tenants, URLs, ids, filters, the CSRF token) is held to
// defaultParam.
var formRules = map[string]textRule{
	"reason":          {kind: review.FreeText, max: review.MaxReasonLen},
	"takeover_reason": {kind: review.FreeText, max: review.MaxReasonLen}, // store.TakeOverCase: review.NormalizeReason
	"compensation":    {kind: review.FreeText, max: 2000},
	"description":     {kind: review.FreeText, max: 500},
	// What their inputs allow (maxlength) and the store keeps: longer
	// than defaultParam's 1,000, which refused a long list of tenants or a
	// long signed URL the form had taken.
	"tenants": {kind: review.Identifier, max: 2000},
	"url":     {kind: review.Identifier, max: 2048}, // store.AddWebhookEndpoint: 2048 bytes
}

// formUnchecked are fields read as bytes and never stored or shown.
var formUnchecked = map[string]bool{"password": true}

// redirectTargets are parameters (query or form) naming where to go next:
// they are never refused, since safeNext decides what is followed and sends
// anything that is not a same-site path to "/" (issue 11: a `next` with a
// control character is not an error for the person signing in).
var redirectTargets = map[string]bool{"next": true}

// maxFormBytes bounds a console form body (routes.go), as MaxBodyBytes
// bounds the API's.
const maxFormBytes = MaxBodyBytes

// checkForm holds every field of a console form to its rule, after the
// user and the CSRF token are checked: the first problem answers a 400 page
// naming the field. Browsers send a textarea's line breaks as CRLF; in prose
// fields they become LF first, so the free-text rule (tab and newline only)
// holds for what is stored.
// parseForm reads a form's body, once (later calls find it read): a body
// that did not arrive is the client's bodyError, anything else a form that
// is not one. Multipart bodies are parsed too, so their fields are held to
// the same rules and PostFormValue finds them (ParseForm alone would leave
// PostForm empty for them, and later reads would see nothing).
func parseForm(r *http.Request) error {
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); mt == "multipart/form-data" {
		err = r.ParseMultipartForm(maxFormBytes)
	} else {
		err = r.ParseForm()
	}
	var body *bodyError
	if errors.As(err, &body) {
		return body
	}
	if err != nil {
		return &FieldError{Problem: "invalid form: " + err.Error()}
	}
	return nil
}

func checkForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodPost {
			return next(c)
		}
		if err := parseForm(r); err != nil {
			return err
		}
		for name, values := range r.PostForm {
			if formUnchecked[name] || redirectTargets[name] {
				continue
			}
			rule, prose := formRules[name]
			if !prose {
				rule = defaultParam
			}
			for i, v := range values {
				if prose && strings.Contains(v, "\r\n") {
					v = strings.ReplaceAll(v, "\r\n", "\n")
					values[i] = v
				}
				if p := rule.check(v); p != "" {
					return &FieldError{Field: name, Problem: p}
				}
			}
			if prose {
				// r.Form holds its own copy of the posted values, first.
				copy(r.Form[name], values)
			}
		}
		return next(c)
	}
}
