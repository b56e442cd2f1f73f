package web

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/a-h/templ/parser/v2"
)

// keyCall finds catalog keys written as literals: T(ctx, "…"), Tf(ctx,
// "…", …), Msg("…", …) and consoleError(status, "…", …), in web and in the
// handlers that pass messages.
var keyCall = regexp.MustCompile(`\b(?:T|Tf)\(\s*ctx\s*,\s*"((?:[^"\\]|\\.)*)"|\bMsg\(\s*"((?:[^"\\]|\\.)*)"|\bconsoleError\(\s*[^,]+,\s*"((?:[^"\\]|\\.)*)"`)

// TestCatalogComplete fails for every literal key that has no Italian.
func TestCatalogComplete(t *testing.T) {
	var files []string
	for _, glob := range []string{"*.templ", "*.go", "../handlers/*.go"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_templ.go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range keyCall.FindAllStringSubmatch(string(src), -1) {
			key := m[1] + m[2] + m[3]
			key = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n").Replace(key)
			seen++
			if _, ok := italian[key]; !ok {
				t.Errorf("%s: %q has no Italian translation (add it to a catalog_it*.go)", f, key)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no catalog keys found: the pattern is wrong")
	}
}

// TestCatalogConsistent fails for a key two catalog files translate
// differently: one part of the console would say it one way, one another.
func TestCatalogConsistent(t *testing.T) {
	for _, c := range catalogConflicts {
		t.Errorf("translated two ways: %s", c)
	}
}

// TestCatalogFormats fails for a translation whose format verbs differ
// from its key's: Tf would print %!d(MISSING) or drop an argument.
func TestCatalogFormats(t *testing.T) {
	verb := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)
	for k, v := range italian {
		a, b := verb.FindAllString(k, -1), verb.FindAllString(v, -1)
		if strings.Join(a, ",") != strings.Join(b, ",") {
			t.Errorf("%q → %q: verbs %v vs %v", k, v, a, b)
		}
		if strings.TrimSpace(v) == "" {
			t.Errorf("%q has an empty translation", k)
		}
	}
}

// visibleAttrs are the attributes a person reads (or a screen reader says).
var visibleAttrs = map[string]bool{"title": true, "aria-label": true, "placeholder": true, "alt": true, "aria-description": true}

// TestTemplatesTranslated fails for text written straight into a template
// (a text node or a visible attribute with letters in it, or a string
// literal in braces): it would show in English to an Italian reader.
func TestTemplatesTranslated(t *testing.T) {
	files, _ := filepath.Glob("*.templ")
	for _, f := range files {
		tf, err := parser.Parse(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, n := range tf.Nodes {
			if h, ok := n.(*parser.HTMLTemplate); ok {
				walkText(t, f, h.Children)
			}
		}
	}
}

func hasLetter(s string) bool {
	return strings.IndexFunc(s, unicode.IsLetter) >= 0
}

func walkText(t *testing.T, file string, nodes []parser.Node) {
	t.Helper()
	for _, n := range nodes {
		switch n := n.(type) {
		case *parser.Text:
			if hasLetter(n.Value) {
				t.Errorf("%s:%d: bare text %q: write it as { T(ctx, …) }", file, n.Range.From.Line+1, strings.TrimSpace(n.Value))
			}
		case *parser.StringExpression:
			if e := strings.TrimSpace(n.Expression.Value); strings.HasPrefix(e, `"`) && hasLetter(e) {
				t.Errorf("%s:%d: literal %s: write it as T(ctx, …)", file, n.Expression.Range.From.Line+1, e)
			}
		case *parser.Element:
			if n.Name == "script" || n.Name == "style" {
				continue
			}
			for _, a := range n.Attributes {
				if ca, ok := a.(*parser.ConstantAttribute); ok {
					if k, ok := ca.Key.(parser.ConstantAttributeKey); ok && visibleAttrs[k.Name] && hasLetter(ca.Value) {
						t.Errorf("%s:%d: attribute %s=%q: write it as { T(ctx, …) }", file, ca.Range.From.Line+1, k.Name, ca.Value)
					}
				}
			}
			walkText(t, file, n.Children)
		case *parser.IfExpression:
			walkText(t, file, n.Then)
			for _, e := range n.ElseIfs {
				walkText(t, file, e.Then)
			}
			walkText(t, file, n.Else)
		case *parser.ForExpression:
			walkText(t, file, n.Children)
		case *parser.SwitchExpression:
			for _, c := range n.Cases {
				walkText(t, file, c.Children)
			}
		case *parser.TemplElementExpression:
			walkText(t, file, n.Children)
		}
	}
}

func TestNegotiateLang(t *testing.T) {
	r, _ := http.NewRequest("GET", "/", nil)
	for _, c := range []struct{ pref, accept, want string }{
		{"", "", "en"},
		{"", "it-IT,it;q=0.9,en;q=0.8", "it"},
		{"", "de-DE,de;q=0.9", "en"},
		{"en", "it", "en"},
		{"it", "en-US", "it"},
		{"xx", "it", "it"},
		{"", "garbage;;q=", "en"},
	} {
		r.Header.Set("Accept-Language", c.accept)
		if got := NegotiateLang(c.pref, r); got != c.want {
			t.Errorf("pref %q, Accept-Language %q: %q, want %q", c.pref, c.accept, got, c.want)
		}
	}
}

func TestNumbersAndTimesPerLanguage(t *testing.T) {
	it := WithLang(context.Background(), "it")
	if got := Number(it, 1234567); got != "1.234.567" {
		t.Errorf("Italian number: %q", got)
	}
	if got := Number(context.Background(), 1234567); got != "1,234,567" {
		t.Errorf("English number: %q", got)
	}
}
