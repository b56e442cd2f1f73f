package review

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kind TextKind
		max  int
		in   string
		want string // substring of the problem; "" for accepted
	}{
		{"printable ASCII", Identifier, 10, "abc-_ 1.2", ""},
		{"empty", Identifier, 10, "", ""},
		{"non-ASCII letters", Identifier, 4, "café", ""},
		{"length in characters, not bytes", Identifier, 3, "ééé", ""},
		{"one character over", Identifier, 3, "éééé", "at most 3 characters, got 4"},
		{"NUL", Identifier, 10, "a\x00b", "NUL"},
		{"NUL in free text", FreeText, 10, "a\x00b", "NUL"},
		{"invalid UTF-8", Identifier, 10, "a\xffb", "not valid UTF-8"},
		{"truncated UTF-8", FreeText, 10, "caf\xc3", "not valid UTF-8"},
		{"C0 control", Identifier, 10, "a\x1bb", "U+001B"},
		{"DEL", Identifier, 10, "a\x7fb", "U+007F"},
		{"C1 control", Identifier, 10, "a\u0085b", "U+0085"},
		{"last C1 control", FreeText, 10, "a\u009fb", "U+009F"},
		{"first character after C1", Identifier, 10, "a\u00a0b", ""},
		{"tab in an identifier", Identifier, 10, "a\tb", "U+0009"},
		{"newline in an identifier", Identifier, 10, "a\nb", "U+000A"},
		{"tab and newline in free text", FreeText, 10, "a\tb\nc", ""},
		{"carriage return in free text", FreeText, 10, "a\r\nb", "U+000D"},
		{"line separator in an identifier", Identifier, 10, "a\u2028b", "line breaks"},
		{"line separator in free text", FreeText, 10, "a\u2028b", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText("f", tc.kind, tc.max, tc.in)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckText(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckText(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `field "f"`) {
				t.Fatalf("CheckText(%q) = %v: must wrap ErrInvalid and name the field", tc.in, err)
			}
		})
	}
}

// FuzzTextRule checks that the patterns the OpenAPI document publishes say
// what CheckText does — a valid UTF-8 string passes the rule exactly when it
// matches its kind's pattern — and that FitText's result always passes.
func FuzzTextRule(f *testing.F) {
	for _, s := range []string{"", "abc", "a\tb", "a\nb", "a\r", "\x00", "\u0085", "\u009f\u00a0", "\u2028", "é\x7f", "\xff"} {
		f.Add(s)
	}
	patterns := map[TextKind]*regexp.Regexp{
		Identifier: regexp.MustCompile(Identifier.Pattern()),
		FreeText:   regexp.MustCompile(FreeText.Pattern()),
	}
	f.Fuzz(func(t *testing.T, s string) {
		for kind, re := range patterns {
			ok := TextProblem(kind, len(s), s) == ""
			if want := utf8.ValidString(s) && re.MatchString(s); ok != want {
				t.Fatalf("%v %q: CheckText accepts: %v, the pattern (and valid UTF-8) says %v", kind, s, ok, want)
			}
			// FitText always fits, and leaves what fits alone.
			for _, max := range []int{1, 5, len(s) + 1} {
				fit := FitText(kind, max, s)
				if p := TextProblem(kind, max, fit); p != "" {
					t.Fatalf("FitText(%v, %d, %q) = %q: %s", kind, max, s, fit, p)
				}
				if TextProblem(kind, max, s) == "" && fit != s {
					t.Fatalf("FitText(%v, %d, %q) = %q, want it unchanged", kind, max, s, fit)
				}
			}
		}
	})
}

func TestNormalizeTenant(t *testing.T) {
	t.Parallel()
	composed, decomposed := "caf\u00e9", "cafe\u0301"
	for _, in := range []string{composed, decomposed, " " + decomposed + " "} {
		got, err := NormalizeTenant(in)
		if err != nil || got != composed {
			t.Errorf("NormalizeTenant(%q) = %q, %v; want %q", in, got, err, composed)
		}
	}
	for _, in := range []string{"", "  ", "a,b", "*", "a\x00", "a\tb", "a\u0085b", "\xff", strings.Repeat("é", MaxFieldLen+1)} {
		if got, err := NormalizeTenant(in); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `field "tenant"`) {
			t.Errorf("NormalizeTenant(%q) = %q, %v; want an invalid-input error naming tenant", in, got, err)
		}
	}
	if _, err := NormalizeTenant(strings.Repeat("é", MaxFieldLen)); err != nil {
		t.Errorf("a tenant of %d characters: %v", MaxFieldLen, err)
	}
}

func TestRegistrationNFC(t *testing.T) {
	t.Parallel()
	reg := func(s string) Registration {
		return Registration{Tenant: "t" + s, SourceRef: "ref-" + s, LogicalVersion: "v-" + s, Action: "act-" + s,
			Destination: "dest-" + s, Risk: RiskRead, Payload: []byte(`{}`)}
	}
	a, b := reg("caf\u00e9"), reg("cafe\u0301")
	if err := a.Normalize(classifyNow); err != nil {
		t.Fatal(err)
	}
	if err := b.Normalize(classifyNow); err != nil {
		t.Fatal(err)
	}
	if a.Key != b.Key {
		t.Errorf("composed and decomposed intentions derive different keys: %s, %s", a.Key, b.Key)
	}
	if a.Tenant != b.Tenant || a.SourceRef != b.SourceRef || a.LogicalVersion != b.LogicalVersion || a.Action != b.Action || a.Destination != b.Destination {
		t.Errorf("identity fields differ after Normalize: %+v vs %+v", a, b)
	}
	if b.SourceRef != "ref-caf\u00e9" {
		t.Errorf("source_ref = %q, want the composed form", b.SourceRef)
	}
}
