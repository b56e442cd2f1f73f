package review

import (
	"encoding/json"
	"fmt"
	"sort"
)

// FieldDiff is one difference between two JSON documents.
type FieldDiff struct {
	// Path is where, as $.a.b[2].
	Path string
	// Old and New are the compact JSON values; empty when absent.
	Old, New string
}

// DiffJSON lists the field-level differences between two JSON documents,
// in path order. Unreadable input yields a single difference at $.
func DiffJSON(a, b []byte) []FieldDiff {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return []FieldDiff{{Path: "$", Old: string(a), New: string(b)}}
	}
	var out []FieldDiff
	diffValue("$", va, vb, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func diffValue(path string, a, b any, out *[]FieldDiff) {
	ma, aObj := a.(map[string]any)
	mb, bObj := b.(map[string]any)
	if aObj && bObj {
		for k, va := range ma {
			if vb, ok := mb[k]; ok {
				diffValue(path+"."+k, va, vb, out)
			} else {
				*out = append(*out, FieldDiff{Path: path + "." + k, Old: compact(va)})
			}
		}
		for k, vb := range mb {
			if _, ok := ma[k]; !ok {
				*out = append(*out, FieldDiff{Path: path + "." + k, New: compact(vb)})
			}
		}
		return
	}
	la, aArr := a.([]any)
	lb, bArr := b.([]any)
	if aArr && bArr {
		for i := 0; i < max(len(la), len(lb)); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(la):
				*out = append(*out, FieldDiff{Path: p, New: compact(lb[i])})
			case i >= len(lb):
				*out = append(*out, FieldDiff{Path: p, Old: compact(la[i])})
			default:
				diffValue(p, la[i], lb[i], out)
			}
		}
		return
	}
	if ca, cb := compact(a), compact(b); ca != cb {
		*out = append(*out, FieldDiff{Path: path, Old: ca, New: cb})
	}
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Redact replaces the values of the named members, at any depth, so a
// reviewer sees the shape of a payload without its secrets.
func Redact(payload []byte, fields []string) []byte {
	if len(fields) == 0 {
		return payload
	}
	var v any
	if json.Unmarshal(payload, &v) != nil {
		return payload
	}
	names := map[string]bool{}
	for _, f := range fields {
		names[f] = true
	}
	v = redactValue(v, names)
	out, err := json.Marshal(v)
	if err != nil {
		return payload
	}
	return out
}

func redactValue(v any, names map[string]bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if names[k] {
				t[k] = "••• redacted"
			} else {
				t[k] = redactValue(x, names)
			}
		}
	case []any:
		for i, x := range t {
			t[i] = redactValue(x, names)
		}
	}
	return v
}
