package review

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
func TestAppendNumberRFC8785AppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
		// Not in the RFC table: the double after 1e-6.
		{0x3eb0c6f7a0b5ed8e, "0.0000010000000000000002"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%016x", tt.bits), func(t *testing.T) {
			f := math.Float64frombits(tt.bits)
			if got := string(appendNumber(nil, f)); got != tt.want {
				t.Errorf("appendNumber(%#016x) = %s, want %s", tt.bits, got, tt.want)
			}
			// The same through the parser: the RFC's text must be a fixed point.
			got, err := Canonicalize([]byte(tt.want))
			if err != nil || string(got) != tt.want {
				t.Errorf("Canonicalize(%s) = %s, %v; want itself", tt.want, got, err)
			}
		})
	}
}

func TestCanonicalizeNumbers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1e21", "1e+21"},
		{"1e+21", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"100000000000000000000", "100000000000000000000"},
		{"1e-7", "1e-7"},
		{"1e-6", "0.000001"},
		{"0.000001", "0.000001"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0e10", "0"},
		{"1E3", "1000"},
		{"1.0", "1"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"-1.5E-10", "-1.5e-10"},
		{"123456789012345678901234567890", "1.2345678901234568e+29"},
		{"9007199254740993", "9007199254740992"}, // rounds to the nearest double
		{"1e-400", "0"},                          // underflow rounds to zero: finite
		{"0.1", "0.1"},
		{"12.34e1", "123.4"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalizeRFC8785Examples(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{
			name: "3.2.2 sample",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			name: "3.2.3 sorting",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
				"\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\"," +
				"\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalizeStrings(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"escapes become literal UTF-8", `"\u00e9\u4e2d\ud83d\ude00"`, `"é中😀"`},
		{"literal UTF-8 kept", `"é中😀"`, `"é中😀"`},
		{"short escapes", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"other controls lower hex", `"\u0000\u001F\u000b"`, `"\u0000\u001f\u000b"`},
		{"solidus unescaped", `"a\/b"`, `"a/b"`},
		{"DEL and U+2028 literal", `"\u007f\u2028"`, "\"\x7f\u2028\""},
		{"html characters literal", `"<&>"`, `"<&>"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"upper-case hex escape", `"\u00C9"`, `"É"`},
		{"replacement char is valid", "\"\uFFFD\"", "\"\uFFFD\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalizeOrderAndWhitespaceInsensitive(t *testing.T) {
	variants := []string{
		`{"a":1,"b":[true,{"y":"2","x":null}],"c":{"e":1.0,"d":"z"}}`,
		`{"c":{"d":"z","e":1},"b":[true,{"x":null,"y":"2"}],"a":1}`,
		" \t\r\n{ \"b\" : [ true , { \"y\" : \"2\" , \"x\" : null } ] ,\n\"a\":1E0, \"c\":{\"e\":10e-1,\"d\":\"\\u007a\"} }\n",
	}
	const want = `{"a":1,"b":[true,{"x":null,"y":"2"}],"c":{"d":"z","e":1}}`
	var hash string
	for i, v := range variants {
		got, err := Canonicalize([]byte(v))
		if err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
		if string(got) != want {
			t.Errorf("variant %d = %s, want %s", i, got, want)
		}
		if h := PayloadHash(got); hash == "" {
			hash = h
		} else if h != hash {
			t.Errorf("variant %d hash %s, want %s", i, h, hash)
		}
	}
}

func TestCanonicalizeSortsByUTF16(t *testing.T) {
	// U+FF61 is above the surrogates' range in UTF-16 (0xFF61 > 0xD83D) but
	// below U+1F600 in code points and in UTF-8 byte order.
	in := "{\"\U0001F600\":1,\"\uFF61\":2,\"a\":3,\"\":4}"
	want := "{\"\":4,\"a\":3,\"\U0001F600\":1,\"\uFF61\":2}"
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxCanonicalDepth+1) + strings.Repeat("]", MaxCanonicalDepth+1)
	tests := []struct {
		name, in string
		wantErr  string // substring of the error text
	}{
		{"empty", ``, "unexpected end of input"},
		{"only space", "  \n", "unexpected end of input"},
		{"trailing data", `{"a":1} {}`, "trailing data"},
		{"trailing garbage", `1x`, "trailing data"},
		{"two values", `1 2`, "trailing data"},
		{"duplicate at root", `{"a":1,"a":2}`, `duplicate member "a" at $ `},
		{"duplicate at depth", `{"x":[0,1,{"b":1,"a":1,"a":2}]}`, `duplicate member "a" at $.x[2]`},
		{"duplicate by escape", `{"a":1,"\u0061":2}`, `duplicate member "a"`},
		{"duplicate under odd name", `{"a b":{"k":1,"k":1}}`, `duplicate member "k" at $["a b"]`},
		{"invalid UTF-8", "\"\xff\"", "invalid UTF-8"},
		{"truncated UTF-8", "\"\xe2\x82\"", "invalid UTF-8"},
		{"overlong UTF-8", "\"\xc0\xaf\"", "invalid UTF-8"},
		{"encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8"},
		{"lone high surrogate", `"\ud800"`, "unpaired surrogate"},
		{"high then letter", `"\ud800x"`, "unpaired surrogate"},
		{"high then high", `"\ud800\ud800"`, "unpaired surrogate"},
		{"lone low surrogate", `"\udc00"`, "unpaired surrogate"},
		{"number overflow", `1e400`, "not a finite"},
		{"negative overflow", `[-1e309]`, "not a finite"},
		{"huge integer", strings.Repeat("9", 400), "not a finite"},
		{"NaN", `NaN`, "expected a value"},
		{"Infinity", `Infinity`, "expected a value"},
		{"leading zero", `01`, "leading zero"},
		{"leading plus", `+1`, "expected a value"},
		{"bare dot", `1.`, "after '.'"},
		{"bare exponent", `1e`, "exponent"},
		{"lone minus", `-`, "expected a digit"},
		{"hex number", `0x10`, "trailing data"},
		{"single quotes", `'a'`, "expected a value"},
		{"unquoted name", `{a:1}`, "member name"},
		{"trailing comma object", `{"a":1,}`, "member name"},
		{"trailing comma array", `[1,]`, "expected a value"},
		{"missing colon", `{"a" 1}`, "expected ':'"},
		{"unclosed object", `{"a":1`, "end of input"},
		{"unclosed array", `[1`, "end of input"},
		{"unclosed string", `"abc`, "end of input"},
		{"raw newline in string", "\"a\nb\"", "control character"},
		{"raw tab in string", "\"a\tb\"", "control character"},
		{"bad escape", `"\x"`, "invalid escape"},
		{"short unicode escape", `"\u12"`, "escape"},
		{"bad hex", `"\u12g4"`, "invalid \\u escape"},
		{"bad literal", `tru`, "expected true"},
		{"BOM", "\xef\xbb\xbf{}", "expected a value"},
		{"form feed is not whitespace", "\f1", "expected a value"},
		{"comment", `{"a":1 /* c */}`, "expected ',' or '}'"},
		{"too deep", deep, "nesting deeper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %s, want error", tt.in, got)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var ce *CanonicalError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *CanonicalError", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCanonicalizeDuplicateDetails(t *testing.T) {
	in := `{"x":[0,1,{"a":1,"a":2}]}`
	_, err := Canonicalize([]byte(in))
	var ce *CanonicalError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want *CanonicalError", err)
	}
	if ce.Member != "a" || ce.Path != "$.x[2]" || ce.Offset != strings.LastIndex(in, `"a"`) {
		t.Errorf("got %+v", ce)
	}
}

func TestCanonicalizeDepthLimit(t *testing.T) {
	ok := strings.Repeat(`{"a":[`, MaxCanonicalDepth/2) + strings.Repeat(`]}`, MaxCanonicalDepth/2)
	if _, err := Canonicalize([]byte(ok)); err != nil {
		t.Errorf("depth %d rejected: %v", MaxCanonicalDepth, err)
	}
	tooDeep := "[" + ok + "]"
	if _, err := Canonicalize([]byte(tooDeep)); err == nil {
		t.Errorf("depth %d accepted", MaxCanonicalDepth+1)
	}
}

func TestCanonicalizeScalarsAndEmpty(t *testing.T) {
	tests := []struct{ in, want string }{
		{`null`, `null`},
		{` true `, `true`},
		{`false`, `false`},
		{`{}`, `{}`},
		{`{ }`, `{}`},
		{`[ ]`, `[]`},
		{`[[],{},""]`, `[[],{},""]`},
		{`{"":""}`, `{"":""}`},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestPayloadHash(t *testing.T) {
	// SHA-256 of the empty string and of "{}".
	tests := []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"{}", "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	}
	for _, tt := range tests {
		if got := PayloadHash([]byte(tt.in)); got != tt.want {
			t.Errorf("PayloadHash(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestCompareUTF16 checks the allocation-free member order against the
// UTF-16 code units themselves, around the range where UTF-16 order and
// code point order disagree.
func TestCompareUTF16(t *testing.T) {
	names := []string{"", "a", "ab", "b", "\u00e9", "\u20ac", "\ue000", "\uffff", "\U00010000", "\U0001f600",
		"\U0001f600a", "\U0001f601", "\U0010ffff", "a\U0001f600", "a\uffff", "\ud7ff"}
	for _, a := range names {
		for _, b := range names {
			want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
			if got := compareUTF16([]byte(a), []byte(b)); got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestCheckJSON: CheckJSON refuses what Canonicalize refuses, with the same
// error, and says whether every member name is lower-case ASCII.
func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		lower bool
	}{
		{`{"source_ref":"A","payload":{"x":[{"y_1":"Z"}]}}`, true},
		{`{"Source_ref":"a"}`, false},
		{`{"a":{"b":[{"C":1}]}}`, false},
		{`{"\u0061":1}`, true},
		{`{"\u0041":1}`, false},
		{`{"\u017f":1}`, false}, // ſ folds to s in encoding/json
		{`["A",{"b":"C"}]`, true},
		{`"X"`, true},
	} {
		lower, err := CheckJSON([]byte(tc.in))
		if err != nil || lower != tc.lower {
			t.Errorf("CheckJSON(%s) = %v, %v; want %v, nil", tc.in, lower, err, tc.lower)
		}
	}
	var many strings.Builder
	many.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&many, `"m%d":%d,`, i, i)
	}
	many.WriteString(`"m33":0}`)
	for _, in := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"\u0062":2}}`, many.String(), `[1,]`, `{"a":1} x`, "\"\xff\"", `1e999`, `"\ud800"`} {
		_, err := CheckJSON([]byte(in))
		_, want := Canonicalize([]byte(in))
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("CheckJSON(%q) = %v, want Canonicalize's %v", in, err, want)
		}
	}
}
