package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// The console speaks English and Italian. Every string a person reads is
// written in English in the template, through T or Tf, and looked up in
// the catalog: English is the key, so a template reads as it renders for
// most engineers, and the Italian translation lives beside the others in
// catalog_it*.go. TestCatalogComplete fails when a T/Tf key has no Italian
// translation and TestTemplatesTranslated when a template holds bare text.

// Languages the console offers, in the order the preference menu lists them.
var Languages = []Language{{"en", "English"}, {"it", "Italiano"}}

// Language is a language the console offers: its BCP 47 tag and its own name.
type Language struct{ Tag, Name string }

var (
	tags    = []language.Tag{language.English, language.Italian}
	matcher = language.NewMatcher(tags)
)

// ValidLang reports whether tag is a language the console offers.
func ValidLang(tag string) bool {
	for _, l := range Languages {
		if l.Tag == tag {
			return true
		}
	}
	return false
}

// NegotiateLang is the language for a request: the user's saved preference
// when there is one, else the best match for Accept-Language, else English.
func NegotiateLang(pref string, r *http.Request) string {
	if ValidLang(pref) {
		return pref
	}
	if r != nil {
		if al := r.Header.Get("Accept-Language"); al != "" {
			wanted, _, err := language.ParseAcceptLanguage(al)
			if err == nil && len(wanted) > 0 {
				_, i, conf := matcher.Match(wanted...)
				if conf != language.No {
					return Languages[i].Tag
				}
			}
		}
	}
	return "en"
}

type langKey struct{}

// WithLang returns ctx carrying the console language for the request.
func WithLang(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, langKey{}, tag)
}

// Lang is the console language ctx carries ("en" when none).
func Lang(ctx context.Context) string {
	if ctx != nil {
		if t, ok := ctx.Value(langKey{}).(string); ok && ValidLang(t) {
			return t
		}
	}
	return "en"
}

// italian is the Italian catalog: English key → Italian text. Each
// catalog_it*.go file adds its part from init with addItalian, so the
// parts of the console can be translated without touching one shared map.
var italian = map[string]string{}

// catalogConflicts are keys two catalog files translate differently (the
// first one read wins); TestCatalogConsistent fails on any. The same key
// with the same translation in two files is fine.
var catalogConflicts []string

func addItalian(m map[string]string) {
	for k, v := range m {
		if was, dup := italian[k]; dup {
			if was != v {
				catalogConflicts = append(catalogConflicts, fmt.Sprintf("%q: %q or %q", k, was, v))
			}
			continue
		}
		italian[k] = v
	}
}

var (
	printersOnce sync.Once
	printers     map[string]*message.Printer
)

// printer is the message printer for a language: it translates a format
// through the catalog and formats numbers its way (1,234.5 / 1.234,5).
func printer(tag string) *message.Printer {
	printersOnce.Do(func() {
		b := catalog.NewBuilder(catalog.Fallback(language.English))
		for k, v := range italian {
			if err := b.SetString(language.Italian, k, v); err != nil {
				panic(err)
			}
			en := k
			if w, ok := english[k]; ok {
				en = w
			}
			if err := b.SetString(language.English, k, en); err != nil {
				panic(err)
			}
		}
		printers = map[string]*message.Printer{
			"en": message.NewPrinter(language.English, message.Catalog(b)),
			"it": message.NewPrinter(language.Italian, message.Catalog(b)),
		}
	})
	if p, ok := printers[tag]; ok {
		return p
	}
	return printers["en"]
}

// Missing, when set (tests do), is told of every key looked up in Italian
// that the catalog lacks.
var Missing func(key string)

// T is s in the request's language. s is an English catalog key without
// format verbs.
func T(ctx context.Context, s string) string {
	if Lang(ctx) != "it" {
		return s
	}
	if v, ok := italian[s]; ok {
		return v
	}
	if Missing != nil {
		Missing(s)
	}
	return s
}

// Tf is format, translated, applied to args in the request's language:
// numbers are grouped the language's way.
func Tf(ctx context.Context, format string, args ...any) string {
	tag := Lang(ctx)
	if tag == "it" {
		if _, ok := italian[format]; !ok && Missing != nil {
			Missing(format)
		}
	}
	return printer(tag).Sprintf(format, args...)
}

// Number is n formatted the request language's way (1,234 / 1.234).
func Number(ctx context.Context, n int) string {
	return printer(Lang(ctx)).Sprint(n)
}

// Keys is every key of the Italian catalog, sorted (for tests).
func Keys() []string {
	ks := make([]string, 0, len(italian))
	for k := range italian {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Message is text for a person decided outside a template (a handler's
// refusal): an English catalog key and its arguments, translated when it
// is rendered, in the reader's language.
type Message struct {
	Key  string
	Args []any
}

// Msg is a Message.
func Msg(key string, args ...any) Message { return Message{Key: key, Args: args} }

// String is the message in English (logs, tests).
func (m Message) String() string { return fmt.Sprintf(m.Key, m.Args...) }

// In is the message in ctx's language.
func (m Message) In(ctx context.Context) string {
	if len(m.Args) == 0 && !strings.Contains(m.Key, "%") {
		return T(ctx, m.Key)
	}
	return Tf(ctx, m.Key, m.Args...)
}

var monthsIT = [...]string{"gen", "feb", "mar", "apr", "mag", "giu", "lug", "ago", "set", "ott", "nov", "dic"}

// FormatTime is t as the server writes it before the browser rewrites it in
// the viewer's zone: UTC, named, the language's order ("3 Dec 2026, 14:05
// UTC" / "3 dic 2026, 14:05 UTC").
func FormatTime(ctx context.Context, t time.Time) string {
	t = t.UTC()
	if Lang(ctx) == "it" {
		return fmt.Sprintf("%d %s %d, %02d:%02d UTC", t.Day(), monthsIT[t.Month()-1], t.Year(), t.Hour(), t.Minute())
	}
	return t.Format("2 Jan 2006, 15:04") + " UTC"
}
