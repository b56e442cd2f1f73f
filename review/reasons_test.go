package review

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// TestWhyFormats: every reason format reasons.go declares is listed once
// (as many formats as constants, none twice), uses the verbs %s and %d
// only, and has text of its own (a console reads a stored reason back by
// its format: one made of verbs alone would match anything).
func TestWhyFormats(t *testing.T) {
	t.Parallel()
	fs := token.NewFileSet()
	f, err := goparser.ParseFile(fs, "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			for _, id := range v.Names {
				if strings.HasPrefix(id.Name, "Why") {
					declared = append(declared, id.Name)
				}
			}
		}
		return true
	})
	formats := WhyFormats()
	if len(declared) != len(formats) {
		t.Errorf("reasons.go declares %d Why constants, WhyFormats lists %d", len(declared), len(formats))
	}
	verb := regexp.MustCompile(`%.`)
	seen := map[string]bool{}
	for _, s := range formats {
		if seen[s] {
			t.Errorf("%q is listed twice", s)
		}
		seen[s] = true
		for _, v := range verb.FindAllString(s, -1) {
			if v != "%s" && v != "%d" {
				t.Errorf("%q: verb %s (only %%s and %%d)", s, v)
			}
		}
		if strings.TrimSpace(strings.Trim(verb.ReplaceAllString(s, ""), ";:,. ")) == "" {
			t.Errorf("%q has no text of its own", s)
		}
	}
}
