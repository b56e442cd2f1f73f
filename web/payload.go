package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/limbo-dev/limbo/review"
)

// PayloadView is an operation's payload as the pages show it: the exact
// canonical bytes that were hashed, cut where a redacted member's value
// stands, with the hash and the key.
type PayloadView struct {
	// Parts, joined, are the canonical bytes (RFC 8785) of the payload; a
	// Redacted part stands for a value that is not shown.
	Parts []PayloadPart
	// Pretty is the payload indented for reading, redacted alike.
	Pretty    string
	Hash, Key string
	// Redacted: some member's value is hidden.
	Redacted bool
	// PurgedAt is when payload retention emptied the payload (nil: kept);
	// the hash and key are all that is left to show.
	PurgedAt *time.Time
}

// PayloadPart is a run of the canonical bytes, or (Redacted) the place of
// a hidden value.
type PayloadPart struct {
	Text     string
	Redacted bool
}

// NewPayloadView cuts op's canonical payload around the values of the
// members named in redact (at any depth). The payload is stored as the
// canonical bytes intake hashed, so without a redacted member the one part
// is those bytes, untouched. With one, the value is replaced by a marker
// string no payload holds and the result canonicalised again: every
// other byte is as hashed (canonical form depends only on the JSON value),
// and the marker's place is where the hidden value stands.
func NewPayloadView(op *review.Operation, redact []string) PayloadView {
	if op.PayloadPurgedAt != nil {
		return PayloadView{Hash: op.PayloadHash, Key: op.Key, PurgedAt: op.PayloadPurgedAt}
	}
	p := PayloadView{Hash: op.PayloadHash, Key: op.Key, Pretty: indented(review.Redact(op.Payload, redact))}
	p.Parts = []PayloadPart{{Text: string(op.Payload)}}
	if len(redact) == 0 {
		return p
	}
	marker := "\x00limbo-redacted"
	for n := 0; bytes.Contains(op.Payload, []byte(marker)); n++ {
		marker = "\x00limbo-redacted-" + strconv.Itoa(n)
	}
	dec := json.NewDecoder(bytes.NewReader(op.Payload))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return p
	}
	names := map[string]bool{}
	for _, f := range redact {
		names[f] = true
	}
	if !mark(v, names, marker) {
		return p
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return p
	}
	canon, err := review.Canonicalize(raw)
	if err != nil {
		return p
	}
	m, _ := json.Marshal(marker)
	quoted, _ := review.Canonicalize(m)
	p.Parts, p.Redacted = nil, true
	for i, s := range strings.Split(string(canon), string(quoted)) {
		if i > 0 {
			p.Parts = append(p.Parts, PayloadPart{Redacted: true})
		}
		if s != "" {
			p.Parts = append(p.Parts, PayloadPart{Text: s})
		}
	}
	return p
}

// mark replaces the values of the named members with marker, at any
// depth, and reports whether it replaced any.
func mark(v any, names map[string]bool, marker string) bool {
	found := false
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if names[k] {
				t[k], found = marker, true
			} else if mark(x, names, marker) {
				found = true
			}
		}
	case []any:
		for _, x := range t {
			if mark(x, names, marker) {
				found = true
			}
		}
	}
	return found
}

// indented is a JSON value indented for reading (as it is when it is not JSON).
func indented(p []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, p, "", "  "); err != nil {
		return string(p)
	}
	return b.String()
}

// canonicalBytes writes the parts into the <pre> with no whitespace of its
// own: what the page shows between the tags is the hashed bytes, escaped.
func canonicalBytes(parts []PayloadPart) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		for _, part := range parts {
			s := templ.EscapeString(part.Text)
			if part.Redacted {
				s = `<mark class="redacted" title="` + templ.EscapeString(T(ctx, "redacted: the value is hidden")) + `">` +
					templ.EscapeString(redactedValue(ctx)) + `</mark>`
			}
			if _, err := io.WriteString(w, s); err != nil {
				return err
			}
		}
		return nil
	})
}

// redactedValue is what stands in the canonical bytes for a hidden value.
func redactedValue(ctx context.Context) string {
	return `"••• ` + T(ctx, "redacted") + `"`
}
