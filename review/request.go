package review

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// RequestContract is the destination operation an action's payload is sent
// as, and the JSON Schema its request body must satisfy: the destination's
// own contract, usually written by `limbo destination import` from its
// OpenAPI document. A registration whose body breaks it is refused (400,
// naming the field) before anything is recorded or sent: the destination
// would refuse it too, and a payload it refuses is no operation to keep.
type RequestContract struct {
	// Operation is the operationId in the destination's document.
	Operation string `yaml:"operation"`
	Method    string `yaml:"method"`
	Path      string `yaml:"path"`
	// Body is the dot path, in the payload, of the request body ("body"
	// for a payload {"method", "path", "body"}); empty: the payload is
	// the body.
	Body string `yaml:"body"`
	// Schema is the body's JSON Schema (2020-12, as OpenAPI 3.1 writes
	// it), in YAML or JSON, every $ref resolved.
	Schema any `yaml:"schema"`

	compiled *jsonschema.Schema
}

// compile checks the contract and compiles its schema once, at start: a
// schema that does not compile fails the configuration, not the first
// registration.
func (rc *RequestContract) compile(name string) error {
	if rc.Schema == nil {
		return errors.New("request: schema is required (the request body's JSON Schema)")
	}
	if err := checkJSONPath("request: body", rc.Body); err != nil {
		return err
	}
	raw, err := json.Marshal(rc.Schema)
	if err != nil {
		return fmt.Errorf("request: schema: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("request: schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// A loader for no scheme: a $ref to a file or a URL is refused, never
	// fetched.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "mem://request/" + name
	if err := c.AddResource(url, doc); err != nil {
		return fmt.Errorf("request: schema: %v", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("request: schema does not compile: %v", err)
	}
	rc.compiled = s
	return nil
}

// Check validates a canonical payload's request body against the schema.
// The error wraps ErrInvalid and names the first field that breaks it as
// `field "payload.body.name": …`, which the API returns as the problem's
// field.
func (rc *RequestContract) Check(payload []byte) error {
	if rc == nil || rc.compiled == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("%w: field \"payload\": not JSON: %v", ErrInvalid, err)
	}
	prefix := []string{"payload"}
	if path := JSONPath(rc.Body); path != nil {
		body, ok := memberAt(v, strings.Join(path, "."))
		if !ok {
			return fmt.Errorf("%w: field %q: required: the payload carries the request body of %s there",
				ErrInvalid, "payload."+strings.Join(path, "."), cmp.Or(rc.Operation, "the destination's operation"))
		}
		v, prefix = body, append(prefix, path...)
	}
	err = rc.compiled.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	at, why := firstCause(ve)
	field := strings.Join(append(prefix, at...), ".")
	return fmt.Errorf("%w: field %q: %s (the request schema of %s)", ErrInvalid, field, why, cmp.Or(rc.Operation, "the destination's operation"))
}

var printer = message.NewPrinter(language.English)

// firstCause is the deepest first cause of a validation error: where in
// the body it is, and what is wrong. A missing member is named as the
// member itself, not as the object that lacks it.
func firstCause(ve *jsonschema.ValidationError) ([]string, string) {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	at := slices.Clone(ve.InstanceLocation)
	if r, ok := ve.ErrorKind.(*kind.Required); ok && len(r.Missing) > 0 {
		return append(at, r.Missing[0]), "required"
	}
	return at, ve.ErrorKind.LocalizedString(printer)
}
