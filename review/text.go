package review

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TextKind is which characters a string from outside may hold. Every string
// Limbo accepts — API bodies, path and query parameters, tenant names — is
// checked against one kind by CheckText; there is no other rule.
type TextKind uint8

const (
	// Identifier is for names, references, codes and ids: no control
	// character at all, and no line or paragraph separator (U+2028, U+2029).
	Identifier TextKind = iota + 1
	// FreeText is for prose a person writes: tab and newline are allowed;
	// every other control character is not.
	FreeText
)

// The rule as a regular expression, for the OpenAPI document's pattern. The
// control characters stand in the pattern as themselves, so the syntax is
// both RE2's and ECMA-262's (openapi.json writes them as \u escapes).
const (
	IdentifierPattern = "^[^\x00-\x1f\x7f-\u009f\u2028\u2029]*$"
	FreeTextPattern   = "^[^\x00-\x08\x0b-\x1f\x7f-\u009f]*$"
)

// Pattern is the kind's rule as a regular expression (see IdentifierPattern).
func (k TextKind) Pattern() string {
	if k == FreeText {
		return FreeTextPattern
	}
	return IdentifierPattern
}

// String names the kind as struct tags and messages write it.
func (k TextKind) String() string {
	switch k {
	case Identifier:
		return "identifier"
	case FreeText:
		return "free text"
	}
	return fmt.Sprintf("TextKind(%d)", k)
}

// CheckText is the one rule for text that arrives from outside: valid UTF-8;
// no NUL, no C0 control (U+0000–U+001F), DEL or C1 control (U+007F–U+009F),
// except tab and newline in FreeText; no U+2028/U+2029 in an Identifier; at
// most max characters, counted in code points as JSON Schema's maxLength
// counts them. PostgreSQL cannot store NUL or invalid UTF-8 at all, and the
// other controls make logs, CSV exports and the console lie, so SQLite is
// held to the same rule. The error wraps ErrInvalid and names field.
func CheckText(field string, kind TextKind, max int, s string) error {
	if p := TextProblem(kind, max, s); p != "" {
		return fmt.Errorf("%w: field %q: %s", ErrInvalid, field, p)
	}
	return nil
}

// TextProblem is CheckText's verdict in words: "" when s is acceptable.
func TextProblem(kind TextKind, max int, s string) string {
	n := 0
	for i := 0; i < len(s); n++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			i++ // printable ASCII: the common case
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Sprintf("not valid UTF-8 (byte %d)", i)
		case r == 0:
			return fmt.Sprintf("must not contain NUL (character %d)", n+1)
		case (r == '\t' || r == '\n') && kind == FreeText:
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Sprintf("must not contain control characters (U+%04X at character %d)", r, n+1)
		case (r == '\u2028' || r == '\u2029') && kind != FreeText:
			return fmt.Sprintf("must not contain line breaks (U+%04X at character %d)", r, n+1)
		}
		i += size
	}
	if n > max {
		return fmt.Sprintf("at most %d characters, got %d", max, n)
	}
	return ""
}

// FitText is the closest string to s that CheckText accepts: invalid UTF-8
// and characters the kind forbids become U+FFFD, and it is cut to max
// characters. For text Limbo passes on rather than checks — a provider's
// error code or request id read from an answer — so that a report is never
// refused for what the destination sent.
func FitText(kind TextKind, max int, s string) string {
	if TextProblem(kind, max, s) == "" {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if n == max {
			break
		}
		if TextProblem(kind, 1, string(r)) != "" {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// NFC returns s in Unicode Normalization Form C, so that one name typed
// composed ("café" as U+00E9) or decomposed ("cafe" and U+0301) is one name:
// identity fields are normalised before a key is derived from them or they
// are stored.
func NFC(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s // the common case, without an allocation
	}
	return norm.NFC.String(s)
}

// NormalizeTenant checks a tenant name and returns it as stored: trimmed,
// in NFC, an Identifier of 1–MaxFieldLen characters without ',' or '*'
// (they separate and widen user scopes). The error wraps ErrInvalid and
// names the field "tenant".
func NormalizeTenant(name string) (string, error) {
	name = NFC(strings.TrimSpace(name))
	if name == "" {
		return "", fmt.Errorf("%w: field \"tenant\": required", ErrInvalid)
	}
	if err := CheckText("tenant", Identifier, MaxFieldLen, name); err != nil {
		return "", err
	}
	if strings.ContainsAny(name, ",*") {
		return "", fmt.Errorf("%w: field \"tenant\": must not contain ',' or '*'", ErrInvalid)
	}
	return name, nil
}
