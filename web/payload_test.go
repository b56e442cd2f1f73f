package web

import (
	"context"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
)

func joined(p PayloadView, put string) string {
	var b strings.Builder
	for _, part := range p.Parts {
		if part.Redacted {
			b.WriteString(put)
		} else {
			b.WriteString(part.Text)
		}
	}
	return b.String()
}

// The parts are the canonical bytes as hashed, a redacted member's value
// cut out wherever it stands (nested, in arrays, several times); with
// nothing to redact, the stored bytes untouched.
func TestPayloadViewCutsOnlyTheRedactedValues(t *testing.T) {
	raw := `{"z":"<b>&</b> \u0000limbo-redacted","card":"4242","list":[{"card":{"n":1}},{"x":"card"}],"a":1e21,"k":"é😀\n"}`
	canon, err := review.Canonicalize([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	op := &review.Operation{Payload: canon, PayloadHash: review.PayloadHash(canon), Key: "k-1"}

	plain := NewPayloadView(op, nil)
	if plain.Redacted || len(plain.Parts) != 1 || plain.Parts[0].Text != string(canon) || plain.Hash != op.PayloadHash || plain.Key != "k-1" {
		t.Fatalf("unredacted: %+v", plain)
	}
	if absent := NewPayloadView(op, []string{"password"}); absent.Redacted || joined(absent, "") != string(canon) {
		t.Fatalf("a redacted field the payload lacks changed the bytes: %+v", absent)
	}

	p := NewPayloadView(op, []string{"card"})
	n := 0
	for _, part := range p.Parts {
		if part.Redacted {
			n++
		}
	}
	if !p.Redacted || n != 2 {
		t.Fatalf("want the two card values cut out, got %d in %+v", n, p.Parts)
	}
	// Put back in order, the values make the canonical bytes again.
	values := []string{`"4242"`, `{"n":1}`}
	var b strings.Builder
	i := 0
	for _, part := range p.Parts {
		if part.Redacted {
			b.WriteString(values[i])
			i++
		} else {
			b.WriteString(part.Text)
		}
	}
	if b.String() != string(canon) {
		t.Fatalf("cut and put back:\n got %s\nwant %s", b.String(), canon)
	}
	if strings.Contains(joined(p, ""), "4242") {
		t.Fatal("a redacted value is shown")
	}

	var html strings.Builder
	if err := canonicalBytes(p.Parts).Render(WithLang(context.Background(), "it"), &html); err != nil {
		t.Fatal(err)
	}
	if got := html.String(); strings.Count(got, `<mark class="redacted" title="oscurato: il valore è nascosto">&#34;••• oscurato&#34;</mark>`) != 2 ||
		!strings.Contains(got, "&lt;b&gt;&amp;&lt;/b&gt;") {
		t.Fatalf("rendered: %s", got)
	}
}
