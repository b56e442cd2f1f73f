package review

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxCanonicalDepth is the deepest nesting of arrays and objects Canonicalize
// accepts. It bounds the recursion of the parser so hostile input cannot
// exhaust the stack.
const MaxCanonicalDepth = 200

// CanonicalError explains why Canonicalize rejected its input. It wraps
// ErrInvalid, so errors.Is(err, ErrInvalid) holds for every such error.
type CanonicalError struct {
	// Offset is the byte offset into the input where the problem was found.
	Offset int
	// Path locates the value being read, e.g. "$", "$.x[2]" or `$["a b"]`.
	// For a duplicate member it is the path of the object holding it.
	Path string
	// Member is the repeated member name when the problem is a duplicate;
	// empty otherwise.
	Member string
	// Problem says what is wrong, e.g. `duplicate member "a"`.
	Problem string
}

// Error formats the problem as "invalid input: <problem> at <path> (offset N)".
func (e *CanonicalError) Error() string {
	return fmt.Sprintf("%s: %s at %s (offset %d)", ErrInvalid, e.Problem, e.Path, e.Offset)
}

// Unwrap returns ErrInvalid.
func (e *CanonicalError) Unwrap() error { return ErrInvalid }

// Canonicalize reads one strict JSON value from raw and returns its RFC 8785
// (JSON Canonicalization Scheme) serialisation.
//
// Intake is stricter than RFC 8259 allows parsers to be, because the result is
// hashed and shown to reviewers as "exactly what will run": it rejects invalid
// JSON, data after the value, duplicate member names at any depth (compared
// after unescaping), invalid UTF-8, unpaired surrogate escapes, numbers that
// overflow an IEEE-754 double, and nesting deeper than MaxCanonicalDepth.
// Every error is a *CanonicalError wrapping ErrInvalid.
//
// Output has no whitespace, object members sorted by the UTF-16 code units of
// their names, strings escaped as JCS prescribes and numbers written as
// ECMAScript's Number.prototype.toString writes them.
func Canonicalize(raw []byte) ([]byte, error) {
	p := &parser{data: raw}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(raw)))
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return nil, p.fail("trailing data after the JSON value")
	}
	return out, nil
}

// CheckJSON reads one strict JSON value from raw exactly as Canonicalize
// does, with the same errors, but builds no canonical form: for intake that
// only needs to know the value is acceptable. lowerNames reports whether
// every member name, at every depth and after unescaping, is free of ASCII
// upper-case letters and non-ASCII characters — so that a case-insensitive
// match against lower-case names can only be an exact one.
func CheckJSON(raw []byte) (lowerNames bool, err error) {
	p := &parser{data: raw, check: true, lowerNames: true}
	p.skipSpace()
	if _, err := p.value(nil); err != nil {
		return false, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return false, p.fail("trailing data after the JSON value")
	}
	return p.lowerNames, nil
}

// PayloadHash returns the lowercase hex SHA-256 of canonical, which should be
// the output of Canonicalize.
func PayloadHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// pathElem is one step of the location of the value being parsed: a member
// name or an array index.
type pathElem struct {
	name    []byte
	index   int
	isIndex bool
}

// parser is a recursive-descent JSON reader that writes canonical output as it
// goes. The path is only rendered to text when an error is reported.
type parser struct {
	data  []byte
	pos   int
	depth int
	path  []pathElem
	// check: validate only (CheckJSON), append nothing.
	check bool
	// lowerNames stays true while every member name met is lower-case
	// ASCII (see CheckJSON).
	lowerNames bool
}

// fail builds an error at the current position and path.
func (p *parser) fail(format string, args ...any) error {
	return p.failAt(p.pos, format, args...)
}

func (p *parser) failAt(offset int, format string, args ...any) error {
	return &CanonicalError{Offset: offset, Path: renderPath(p.path), Problem: fmt.Sprintf(format, args...)}
}

// renderPath writes path in the "$.a[2]" notation; names that are not plain
// identifiers are quoted: $["a b"].
func renderPath(path []pathElem) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, e := range path {
		switch {
		case e.isIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
		case isPlainName(e.name):
			b.WriteByte('.')
			b.Write(e.name)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(string(e.name)))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isPlainName(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for i, c := range s {
		letter := c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// skipSpace skips the four whitespace bytes JSON allows.
func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// describe names the byte at the current position for an error message.
func (p *parser) describe() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	c := p.data[p.pos]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// value parses the value at the current position (whitespace already
// skipped) and appends its canonical form to out.
func (p *parser) value(out []byte) ([]byte, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail("unexpected end of input, expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(out)
	case c == '[':
		return p.array(out)
	case c == '"':
		s, err := p.str()
		if err != nil || p.check {
			return nil, err
		}
		return appendString(out, s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	default:
		return nil, p.fail("unexpected %s, expected a value", p.describe())
	}
}

func (p *parser) literal(out []byte, word string) ([]byte, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return nil, p.fail("invalid literal, expected %s", word)
	}
	p.pos += len(word)
	if p.check {
		return nil, nil
	}
	return append(out, word...), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxCanonicalDepth {
		return p.fail("nesting deeper than %d levels", MaxCanonicalDepth)
	}
	return nil
}

func (p *parser) array(out []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	if !p.check {
		out = append(out, '[')
	}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		if p.check {
			return nil, nil
		}
		return append(out, ']'), nil
	}
	for i := 0; ; i++ {
		if i > 0 && !p.check {
			out = append(out, ',')
		}
		p.path = append(p.path, pathElem{index: i, isIndex: true})
		p.skipSpace()
		var err error
		if out, err = p.value(out); err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input, expected ',' or ']'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			if p.check {
				return nil, nil
			}
			return append(out, ']'), nil
		default:
			return nil, p.fail("unexpected %s, expected ',' or ']'", p.describe())
		}
	}
}

// member is one parsed object member: its name and its canonical value as a
// slice of the object's scratch buffer.
type member struct {
	name       []byte
	start, end int
}

// indexFrom is the member count from which duplicate names are looked up in
// a map; below it a scan of the names so far is cheaper.
const indexFrom = 16

func (p *parser) object(out []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		if p.check {
			return nil, nil
		}
		return append(out, '{', '}'), nil
	}
	var (
		members []member
		index   map[string]bool // names, once there are indexFrom of them
		scratch []byte          // canonical member values, back to back
	)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("unexpected %s, expected a member name", p.describe())
		}
		nameAt := p.pos
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if len(members) == indexFrom {
			index = make(map[string]bool, 2*indexFrom)
			for _, m := range members {
				index[string(m.name)] = true
			}
		}
		dup := index[string(name)]
		if index == nil {
			dup = slices.ContainsFunc(members, func(m member) bool { return bytes.Equal(m.name, name) })
		}
		if dup {
			e := p.failAt(nameAt, "duplicate member %s", strconv.Quote(string(name))).(*CanonicalError)
			e.Member = string(name)
			return nil, e
		}
		if index != nil {
			index[string(name)] = true
		}
		if p.lowerNames && !lowerName(name) {
			p.lowerNames = false
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("unexpected %s, expected ':' after member name", p.describe())
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, pathElem{name: name})
		start := len(scratch)
		if scratch, err = p.value(scratch); err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		members = append(members, member{name: name, start: start, end: len(scratch)})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input, expected ',' or '}'")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] != '}' {
			return nil, p.fail("unexpected %s, expected ',' or '}'", p.describe())
		}
		p.pos++
		p.depth--
		break
	}
	if p.check {
		return nil, nil
	}
	// RFC 8785 §3.2.3: sort by the UTF-16 code units of the names.
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.name)
		out = append(out, ':')
		out = append(out, scratch[m.start:m.end]...)
	}
	return append(out, '}'), nil
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units
// without converting them. UTF-8 byte order is code point order, which
// agrees with UTF-16 order except between characters above U+FFFF (written
// as surrogate pairs, from 0xD800) and U+E000–U+FFFF.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			if ka, kb := firstUnit(ra), firstUnit(rb); ka != kb {
				return cmp.Compare(ka, kb)
			}
			// Both above U+FFFF with the same high surrogate: the low
			// surrogates order as the code points do.
			return cmp.Compare(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r > 0xffff {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// lowerName reports whether a member name holds no ASCII upper-case letter
// and nothing outside ASCII (see CheckJSON).
func lowerName(name []byte) bool {
	for _, c := range name {
		if (c >= 'A' && c <= 'Z') || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// str parses a string token at the current position (which holds '"') and
// returns its decoded value, which is always valid UTF-8. A string without
// escapes is returned as a slice of the input, not copied: callers only read
// it.
func (p *parser) str() ([]byte, error) {
	p.pos++ // opening quote
	start := p.pos
	var b []byte // the decoded value, once an escape makes it differ from the input
	escaped := false
	for {
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input inside a string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			if !escaped {
				b = p.data[start:p.pos:p.pos] // capped: an append must not write into the input
			}
			p.pos++
			return b, nil
		case c < 0x20:
			return nil, p.fail("control character 0x%02x must be escaped in a string", c)
		case c == '\\':
			if !escaped {
				b, escaped = append([]byte(nil), p.data[start:p.pos]...), true
			}
			r, err := p.escape()
			if err != nil {
				return nil, err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			if escaped {
				b = append(b, c)
			}
			p.pos++
		default:
			// DecodeRune reports overlong forms, encoded surrogates and
			// truncated sequences as (RuneError, 1).
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, p.fail("invalid UTF-8 in a string")
			}
			if escaped {
				b = append(b, p.data[p.pos:p.pos+size]...)
			}
			p.pos += size
		}
	}
}

// escape decodes the escape sequence at the current position (which holds
// '\'), joining a surrogate pair written as two \u escapes.
func (p *parser) escape() (rune, error) {
	at := p.pos
	if p.pos+1 >= len(p.data) {
		return 0, p.fail("unexpected end of input inside an escape")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		return 0, p.failAt(at, "invalid escape sequence")
	}
	r, err := p.hex4(at)
	if err != nil {
		return 0, err
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00: // high surrogate: a low one must follow
		if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
			p.pos += 2
			low, err := p.hex4(at)
			if err != nil {
				return 0, err
			}
			if low >= 0xdc00 && low <= 0xdfff {
				return utf16.DecodeRune(r, low), nil
			}
		}
		return 0, p.failAt(at, "unpaired surrogate escape \\u%04x", r)
	case utf16.IsSurrogate(r):
		return 0, p.failAt(at, "unpaired surrogate escape \\u%04x", r)
	}
	return r, nil
}

// hex4 reads the four hex digits of a \u escape.
func (p *parser) hex4(escapeAt int) (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.failAt(escapeAt, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.failAt(escapeAt, "invalid \\u escape")
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, nil
}

// number checks the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and appends the ECMAScript
// form of the double it denotes.
func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
		if p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			return nil, p.failAt(start, "invalid number: leading zero")
		}
	} else if digits() == 0 {
		return nil, p.failAt(start, "invalid number: expected a digit")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.failAt(start, "invalid number: expected a digit after '.'")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.failAt(start, "invalid number: expected a digit in the exponent")
		}
	}
	text := p.data[start:p.pos]
	f, err := strconv.ParseFloat(string(text), 64)
	// The grammar was checked above, so the only possible error is a range
	// error: ±Inf for overflow. (Underflow rounds to 0 or a subnormal
	// without error, which is a finite double and accepted.)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, p.failAt(start, "number %s is not a finite IEEE-754 double", clip(string(text)))
	}
	if p.check {
		return nil, nil
	}
	return appendNumber(out, f), nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// appendNumber appends f as ECMAScript's Number.prototype.toString
// writes it (ECMA-262 Number::toString, as required by RFC 8785 §3.2.2.3):
// the shortest digits that round-trip, in plain notation for decimal
// exponents in [-6, 21), exponent notation otherwise; -0 is written "0".
// f must be finite.
func appendNumber(out []byte, f float64) []byte {
	if f == 0 {
		return append(out, '0') // also -0
	}
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// 'e' with precision -1 gives the shortest round-tripping digits as
	// d.ddddde±XX; split it into the digit string and n, the position of
	// the decimal point relative to the digits (value = 0.digits × 10^n).
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	n := e + 1
	k := len(digits)
	switch {
	case k <= n && n <= 21: // integer: digits then n-k zeros
		out = append(out, digits...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21: // decimal point inside the digits
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case -6 < n && n <= 0: // 0.000ddd
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digits...)
	default: // exponent notation: d[.ddd]e±x
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, int64(n-1), 10)
	}
	return out
}

// appendString appends s (valid UTF-8) as a JCS string literal: only '"',
// '\' and control characters are escaped, the latter with the short forms
// \b \f \n \r \t where they exist and \u00xx (lower-case hex) otherwise.
// Everything else, including U+007F and U+2028, is written literally.
func appendString(out []byte, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			out = append(out, '\\', '"')
		case c == '\\':
			out = append(out, '\\', '\\')
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
