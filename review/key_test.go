package review

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestDeriveKeyDeterministic(t *testing.T) {
	a := DeriveKey("acme", "contract-583", "convert_pdf", "v7")
	for range 10 {
		if b := DeriveKey("acme", "contract-583", "convert_pdf", "v7"); b != a {
			t.Fatalf("DeriveKey is not deterministic: %s then %s", a, b)
		}
	}
	if len(a) != 64 {
		t.Errorf("len(DeriveKey) = %d, want 64 (hex SHA-256)", len(a))
	}
	if _, err := hex.DecodeString(a); err != nil || strings.ToLower(a) != a {
		t.Errorf("DeriveKey = %q, want lower-case hex", a)
	}
	// A derived key is always acceptable where a caller key would be.
	if err := ValidateKey(a); err != nil {
		t.Errorf("ValidateKey(DeriveKey) = %v", err)
	}
	if err := ValidateKey(DeriveKey("", "", "", "")); err != nil {
		t.Errorf("ValidateKey(DeriveKey of empty fields) = %v", err)
	}
}

func TestDeriveKeyDiffers(t *testing.T) {
	type fields struct{ tenant, sourceRef, action, version string }
	base := fields{"acme", "contract-583", "convert_pdf", "v7"}
	tests := []struct {
		name string
		f    fields
	}{
		{"tenant", fields{"globex", "contract-583", "convert_pdf", "v7"}},
		{"source_ref", fields{"acme", "contract-584", "convert_pdf", "v7"}},
		{"action", fields{"acme", "contract-583", "convert_docx", "v7"}},
		{"logical_version", fields{"acme", "contract-583", "convert_pdf", "v8"}},
		{"case of a field", fields{"ACME", "contract-583", "convert_pdf", "v7"}},
		{"trailing space", fields{"acme", "contract-583 ", "convert_pdf", "v7"}},
		{"fields swapped", fields{"contract-583", "acme", "convert_pdf", "v7"}},
		{"boundary moved between tenant and source_ref", fields{"acmec", "ontract-583", "convert_pdf", "v7"}},
		{"boundary moved between action and version", fields{"acme", "contract-583", "convert_pdfv", "7"}},
		{"all fields in the first", fields{"acmecontract-583convert_pdfv7", "", "", ""}},
		{"all fields in the last", fields{"", "", "", "acmecontract-583convert_pdfv7"}},
		{"separator smuggled in", fields{"acme\x00contract-583", "", "convert_pdf", "v7"}},
	}
	want := DeriveKey(base.tenant, base.sourceRef, base.action, base.version)
	seen := map[string]string{want: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DeriveKey(tt.f.tenant, tt.f.sourceRef, tt.f.action, tt.f.version)
			if prev, ok := seen[got]; ok {
				t.Errorf("DeriveKey%v = %s, same as %s", tt.f, got, prev)
			}
			seen[got] = tt.name
		})
	}
}

func TestDeriveKeyConcatenation(t *testing.T) {
	tests := []struct {
		name string
		a, b [4]string
	}{
		{"ab+c vs a+bc in tenant/source_ref", [4]string{"ab", "c", "x", "1"}, [4]string{"a", "bc", "x", "1"}},
		{"ab+c vs a+bc in source_ref/action", [4]string{"t", "ab", "c", "1"}, [4]string{"t", "a", "bc", "1"}},
		{"ab+c vs a+bc in action/version", [4]string{"t", "s", "ab", "c"}, [4]string{"t", "s", "a", "bc"}},
		{"empty field moved", [4]string{"", "ab", "c", "d"}, [4]string{"ab", "", "c", "d"}},
		{"length prefix forged", [4]string{"a", "\x00\x00\x00\x00\x00\x00\x00\x01b", "c", "d"}, [4]string{"a\x00\x00\x00\x00\x00\x00\x00\x01b", "", "c", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka := DeriveKey(tt.a[0], tt.a[1], tt.a[2], tt.a[3])
			kb := DeriveKey(tt.b[0], tt.b[1], tt.b[2], tt.b[3])
			if ka == kb {
				t.Errorf("DeriveKey(%q) == DeriveKey(%q) = %s", tt.a, tt.b, ka)
			}
		})
	}
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want bool // valid
	}{
		{"15 characters", strings.Repeat("k", 15), false},
		{"16 characters", strings.Repeat("k", 16), true},
		{"255 characters", strings.Repeat("k", 255), true},
		{"256 characters", strings.Repeat("k", 256), false},
		{"empty", "", false},
		{"uuid", "7c9e6679-7425-40de-944b-e07fc1f90ae7", true},
		{"printable punctuation", "order:583/v7#1~!@$%^&*()_+={}[]|\\;'\"<>,.?`", true},
		{"inner space", "order 583 version 7", true},
		{"NUL", "order-583-v7-\x00-abcd", false},
		{"tab", "order-583-v7\tabcdef", false},
		{"newline", "order-583-v7\nabcdef", false},
		{"carriage return at end", "order-583-v7-abcdef\r", false},
		{"DEL", "order-583-v7-\x7fabcdef", false},
		{"non-ASCII letter", "commande-583-v7-é-abc", false},
		{"non-ASCII 16 bytes", "ééééééééé", false}, // 18 bytes, 9 runes
		{"invalid UTF-8", "order-583-v7-\xff-abcd", false},
		{"leading space", " order-583-v7-abcdef", false},
		{"trailing space", "order-583-v7-abcdef ", false},
		{"only spaces", strings.Repeat(" ", 20), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			if tt.want && err != nil {
				t.Errorf("ValidateKey(%q) = %v, want nil", tt.key, err)
			}
			if !tt.want && !errors.Is(err, ErrInvalid) {
				t.Errorf("ValidateKey(%q) = %v, want an error wrapping ErrInvalid", tt.key, err)
			}
		})
	}
}
