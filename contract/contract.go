// Package contract reads a destination's OpenAPI document into the
// destination block of Limbo's configuration file: its probes, from the
// operations the document marks (x-limbo-probe: status, search, job or
// history) or the operationIds the user names, and the request schemas of
// the operations its actions are sent as, so that a registration whose
// body breaks one is refused before anything is sent.
//
// The document is read with kin-openapi (OpenAPI 3.0 and 3.1, $refs inside
// the document resolved; a $ref to a file or URL is refused), and the
// block it writes is passed through review.ParseConfig, which compiles the
// schemas with santhosh-tekuri/jsonschema: what Import returns is a
// configuration Limbo accepts.
package contract

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/limbo-dev/limbo/review"
)

// ProbeKinds are the probes a document can mark, in the order they are
// written.
var ProbeKinds = []string{"status", "search", "job", "history"}

// Options say what to import and how.
type Options struct {
	// Name is the destination's name in the configuration.
	Name string
	// Base is the destination's address; "" for the document's first
	// server.
	Base string
	// Probes names, by kind, the operationId of a probe the document does
	// not mark (or marks otherwise): the user's word wins.
	Probes map[string]string
	// Actions maps Limbo actions to the operationIds they are sent as.
	Actions map[string]string
	// Body is where, in an action's payload, the request body is ("body"
	// for {"method", "path", "body"}); "" for the payload itself.
	Body string
	// AuthHeader and AuthEnv are the probes' credential: a read-only one,
	// apart from the integration's write credential (WriteAuthEnv).
	AuthHeader, AuthEnv, WriteAuthEnv string
	// AllowPostSearch accepts a search operation that is a POST.
	AllowPostSearch bool
	// AllowInternal lets the probes reach the base's host when it is a
	// loopback or private address (allow_internal).
	AllowInternal bool
	// Source names the document in the block's opening comment.
	Source string
}

// Import reads an OpenAPI document (JSON or YAML) and returns the
// configuration holding the destination's block, checked by
// review.ParseConfig.
func Import(ctx context.Context, data []byte, o Options) ([]byte, error) {
	if !nameRE.MatchString(o.Name) {
		return nil, fmt.Errorf("--name %q: a destination name is letters, digits, _ and -", o.Name)
	}
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = false
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	if err := doc.Validate(ctx, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	var raw any
	if err := json.Unmarshal(mustJSON(doc), &raw); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	base, err := baseOf(doc, o.Base)
	if err != nil {
		return nil, err
	}
	ops := operations(doc)
	probes, err := pickProbes(ops, o.Probes)
	if err != nil {
		return nil, err
	}
	b := block{o: o, base: base, raw: raw}
	b.line("# The %q destination, written by limbo destination import from %s (%s, version %s).", o.Name,
		cmp.Or(o.Source, "an OpenAPI document"), oneLine(doc.Info.Title), oneLine(doc.Info.Version))
	b.line("# Review it before use: the probes read what the document says its answers hold.")
	b.line("destinations:")
	b.line("  %s:", o.Name)
	if o.AllowPostSearch {
		b.line("    allow_post_search: true")
	}
	if o.WriteAuthEnv != "" {
		b.line("    write_auth_env: %s", o.WriteAuthEnv)
	}
	if o.AllowInternal {
		u, _ := url.Parse(base)
		b.line("    allow_internal: [%s]", quote(u.Hostname()))
	}
	if len(probes) > 0 {
		b.line("    probes:")
		for _, kind := range ProbeKinds {
			if op, ok := probes[kind]; ok {
				if err := b.probe(kind, op); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(o.Actions) > 0 {
		b.line("    actions:")
		names := make([]string, 0, len(o.Actions))
		for a := range o.Actions {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			if err := b.action(a, o.Actions[a], ops); err != nil {
				return nil, err
			}
		}
	}
	out := []byte(b.String())
	if _, err := review.ParseConfig(out); err != nil {
		return nil, fmt.Errorf("the imported block is not a configuration Limbo accepts: %w", err)
	}
	return out, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// operation is one operation of the document, with where it is.
type operation struct {
	method, path string
	op           *openapi3.Operation
	params       openapi3.Parameters
}

// operations lists the document's operations by operationId.
func operations(doc *openapi3.T) map[string]operation {
	out := map[string]operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				continue
			}
			params := slices.Clone(item.Parameters)
			params = append(params, op.Parameters...)
			out[op.OperationID] = operation{method: strings.ToUpper(method), path: path, op: op, params: params}
		}
	}
	return out
}

// pickProbes finds each probe's operation: the one the user names, or the
// one the document marks. Two operations marked for one kind, or a mark
// Limbo does not know, is an error.
func pickProbes(ops map[string]operation, named map[string]string) (map[string]operation, error) {
	out := map[string]operation{}
	for kind, id := range named {
		if !slices.Contains(ProbeKinds, kind) {
			return nil, fmt.Errorf("--%s: a probe is one of %s", kind, strings.Join(ProbeKinds, ", "))
		}
		op, ok := ops[id]
		if !ok {
			return nil, fmt.Errorf("--%s %s: the document has no operation with that operationId", kind, id)
		}
		out[kind] = op
	}
	ids := make([]string, 0, len(ops))
	for id := range ops {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		mark, ok := ops[id].op.Extensions["x-limbo-probe"]
		if !ok {
			continue
		}
		kind, _ := mark.(string)
		if !slices.Contains(ProbeKinds, kind) {
			return nil, fmt.Errorf("operation %s: x-limbo-probe %v is not one of %s", id, mark, strings.Join(ProbeKinds, ", "))
		}
		if _, byUser := named[kind]; byUser {
			continue
		}
		if prev, taken := out[kind]; taken {
			return nil, fmt.Errorf("operations %s and %s are both marked x-limbo-probe: %s; name the one to use with --%s",
				prev.op.OperationID, id, kind, kind)
		}
		out[kind] = ops[id]
	}
	return out, nil
}

// baseOf is the destination's address: the one given, or the document's
// first server (absolute, http or https).
func baseOf(doc *openapi3.T, given string) (string, error) {
	base := given
	if base == "" {
		if len(doc.Servers) == 0 {
			return "", errors.New("the document names no server: give the destination's address with --base")
		}
		base = doc.Servers[0].URL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Contains(base, "{") {
		return "", fmt.Errorf("server %q is not an absolute http(s) address: give the destination's address with --base", base)
	}
	return strings.TrimSuffix(base, "/"), nil
}

// block is the configuration being written.
type block struct {
	strings.Builder
	o    Options
	base string
	// raw is the document as plain JSON, for resolving $refs in schemas.
	raw any
}

func (b *block) line(format string, args ...any) {
	fmt.Fprintf(b, format, args...)
	b.WriteByte('\n')
}

// fieldOf is the operation field a probe's path parameter takes: the ref
// a lookup asks about.
var fieldOf = map[string]string{"status": "{{.ResourceRef}}", "history": "{{.ResourceRef}}", "job": "{{.JobRef}}"}

// probe writes one probe from its operation: method (a GET, or a POST
// search where allowed), URL with its parameters bound to the operation's
// fields, and where the answer holds what it reads.
func (b *block) probe(kind string, op operation) error {
	id := op.op.OperationID
	switch {
	case op.method == "GET":
	case op.method == "POST" && kind == "search" && b.o.AllowPostSearch:
	case op.method == "POST" && kind == "search":
		return fmt.Errorf("search operation %s is a POST: a probe is read-only, so Limbo takes a POST search only with --allow-post-search", id)
	default:
		return fmt.Errorf("%s operation %s is a %s: a probe only reads (GET)", kind, id, op.method)
	}
	path := op.path
	var pathParams []string
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		pathParams = append(pathParams, m[1])
	}
	var query []string
	var cursorParam string
	answer := answerSchema(op.op)
	switch kind {
	case "search":
		if len(pathParams) > 0 {
			return fmt.Errorf("search operation %s has path parameters (%s): a search asks by operation id alone", id, strings.Join(pathParams, ", "))
		}
		byID := ""
		for _, p := range op.params {
			if p.Value == nil || p.Value.In != "query" {
				continue
			}
			switch n := p.Value.Name; {
			case slices.Contains([]string{"operation_id", "operationId", "operation"}, n):
				byID = n
			case slices.Contains([]string{"cursor", "page_token", "pageToken", "after", "starting_after"}, n):
				cursorParam = n
			}
		}
		if byID == "" && op.method == "GET" {
			return fmt.Errorf("search operation %s has no operation_id query parameter: Limbo searches by the operation's id", id)
		}
		if byID != "" {
			query = append(query, byID+"={{.ID}}")
		}
	default:
		if len(pathParams) != 1 {
			return fmt.Errorf("%s operation %s has %d path parameters: a lookup takes one, the ref it asks about", kind, id, len(pathParams))
		}
		path = strings.Replace(path, "{"+pathParams[0]+"}", fieldOf[kind], 1)
	}
	u := b.base + path
	if len(query) > 0 {
		u += "?" + strings.Join(query, "&")
	}
	b.line("      %s: # %s %s (%s)", kind, op.method, op.path, id)
	if op.method == "POST" {
		b.line("        method: POST")
		b.line("        body: %s", quote(`{"operation_id": "{{.ID}}"}`))
	}
	b.line("        url: %s", quote(u))
	switch kind {
	case "search", "history":
		list, next := listOf(answer)
		if list == "" {
			return fmt.Errorf("%s operation %s: its 200 answer's schema names no list (an array member) to read candidates from", kind, id)
		}
		b.line("        candidates: %s", quote("$."+list))
		if kind == "search" && next != "" && cursorParam != "" {
			b.line("        next: %s", quote("$."+next))
			b.line("        cursor_param: %s", cursorParam)
		}
	}
	if b.o.AuthEnv != "" {
		b.line("        auth_header: %s", cmp.Or(b.o.AuthHeader, "Authorization"))
		b.line("        auth_env: %s", b.o.AuthEnv)
	}
	return nil
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// answerSchema is the JSON schema of an operation's 200 answer, nil when
// the document describes none: a probe reads only a 200 (another 2xx
// proves nothing; reconcile.readable).
func answerSchema(op *openapi3.Operation) *openapi3.Schema {
	if op.Responses == nil {
		return nil
	}
	r := op.Responses.Map()["200"]
	if r == nil || r.Value == nil {
		return nil
	}
	if mt := r.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
		return mt.Schema.Value
	}
	return nil
}

// listOf names an answer's list member (the one array property) and its
// next-page cursor (a text property named next, next_cursor or
// next_page_token).
func listOf(s *openapi3.Schema) (list, next string) {
	if s == nil {
		return "", ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var lists []string
	for _, n := range names {
		p := s.Properties[n]
		if p == nil || p.Value == nil {
			continue
		}
		switch {
		case p.Value.Type.Includes("array"):
			lists = append(lists, n)
		case p.Value.Type.Includes("string") && slices.Contains([]string{"next", "next_cursor", "next_page_token", "nextPageToken"}, n):
			next = n
		}
	}
	if len(lists) != 1 {
		return "", ""
	}
	return lists[0], next
}

// action writes an action's request contract: the operation it is sent as
// and its request body's schema, every $ref resolved.
func (b *block) action(action, id string, ops map[string]operation) error {
	op, ok := ops[id]
	if !ok {
		return fmt.Errorf("--action %s=%s: the document has no operation with that operationId", action, id)
	}
	if op.op.RequestBody == nil || op.op.RequestBody.Value == nil {
		return fmt.Errorf("--action %s=%s: the operation takes no request body, so there is nothing to check", action, id)
	}
	mt := op.op.RequestBody.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return fmt.Errorf("--action %s=%s: the operation's request body is not described as application/json", action, id)
	}
	var schema any
	if err := json.Unmarshal(mustJSON(mt.Schema), &schema); err != nil {
		return err
	}
	schema, err := inline(schema, b.raw, nil)
	if err != nil {
		return fmt.Errorf("--action %s=%s: %w", action, id, err)
	}
	b.line("      %s:", quote(action))
	b.line("        request:")
	b.line("          operation: %s", quote(id))
	b.line("          method: %s", op.method)
	b.line("          path: %s", quote(op.path))
	if b.o.Body != "" {
		b.line("          body: %s", quote(b.o.Body))
	}
	// JSON is YAML: the schema stays as the document wrote it.
	b.line("          schema: %s", mustJSON(schema))
	return nil
}

// inline replaces every $ref inside the document ("#/components/…") by
// what it names; a recursive schema cannot be inlined and is refused.
func inline(v, doc any, stack []string) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok {
			if slices.Contains(stack, ref) {
				return nil, fmt.Errorf("the request schema refers to itself through %s; Limbo keeps schemas without recursion", ref)
			}
			target, err := pointer(doc, ref)
			if err != nil {
				return nil, err
			}
			return inline(target, doc, append(stack, ref))
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			r, err := inline(e, doc, stack)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := inline(e, doc, stack)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// pointer resolves a JSON pointer inside the document ("#/a/b").
func pointer(doc any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q points outside the document", ref)
	}
	v := doc
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q names nothing in the document", ref)
		}
		if v, ok = m[part]; !ok {
			return nil, fmt.Errorf("$ref %q names nothing in the document", ref)
		}
	}
	return v, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // documents kin-openapi loaded marshal
	}
	return b
}

// quote writes s as a YAML double-quoted scalar (JSON's escaping is YAML's).
func quote(s string) string { return string(mustJSON(s)) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
