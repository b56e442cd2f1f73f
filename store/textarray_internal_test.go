package store

import (
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/lib/pq"
)

// textArray and textMatrix write what pq.GenericArray writes, without its
// reflection: every element quoted, quotes and backslashes escaped, NULL
// bare.
func TestTextArraysWriteWhatPqWrites(t *testing.T) {
	vals := []sql.NullString{
		{String: "", Valid: true}, {}, {String: "plain", Valid: true}, {String: `a "quoted" \ back\slash`, Valid: true},
		{String: "{braces},commas, spaces ", Valid: true}, {String: "NULL", Valid: true}, {String: "è ü 日本", Valid: true},
		{String: "line\nbreak\ttab", Valid: true},
	}
	for _, tc := range []struct {
		name string
		ours driver.Valuer
		pq   driver.Valuer
	}{
		{"empty", textArray{}, pq.GenericArray{A: []sql.NullString{}}},
		{"array", textArray(vals), pq.GenericArray{A: vals}},
		{"matrix", textMatrix{vals, vals[2:], vals[:1]}, pq.GenericArray{A: [][]sql.NullString{vals, vals[2:], vals[:1]}}},
	} {
		got, _ := tc.ours.Value()
		want, err := tc.pq.Value()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s:\nours %v\npq   %v", tc.name, got, want)
		}
	}
}

// A batch of 16 attempt-cycle calls, as limbo_fast_batch receives it.
func BenchmarkFastBatchArgs(b *testing.B) {
	row := make([]sql.NullString, 21)
	for i := range row {
		row[i] = sql.NullString{String: "op_01JC8Z5W3QF0S7V4S9PQXYZ123", Valid: i%5 != 4}
	}
	m := make([][]sql.NullString, 16)
	for i := range m {
		m[i] = row
	}
	b.Run("textMatrix", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			textMatrix(m).Value()
		}
	})
	b.Run("pq.GenericArray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pq.GenericArray{A: m}.Value()
		}
	})
}
