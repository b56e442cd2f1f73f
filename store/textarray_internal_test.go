package store

import (
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/lib/pq"
)

// textArray writes what pq.GenericArray writes, without its
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

// A batch of 16 attempt-cycle calls, as limbo_fast_batch receives it:
// one text array per parameter.
func BenchmarkFastBatchArgs(b *testing.B) {
	batch := make([]*fastCall, 16)
	for i := range batch {
		c := &fastCall{}
		for p := range c.text {
			c.text[p] = sql.NullString{String: "op_01JC8Z5W3QF0S7V4S9PQXYZ123", Valid: p%3 != 2}
			c.set |= 1 << p
		}
		batch[i] = c
	}
	b.Run("textArray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, args := batchArgs(batch)
			for _, a := range args {
				a.(textArray).Value()
			}
		}
	})
	b.Run("pq.GenericArray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, args := batchArgs(batch)
			for _, a := range args {
				pq.GenericArray{A: []sql.NullString(a.(textArray))}.Value()
			}
		}
	})
}
