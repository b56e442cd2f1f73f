package store

import (
	"database/sql"
	"database/sql/driver"
)

// Array arguments for PostgreSQL, written directly.
//
// pq.GenericArray finds its way through the value by reflection on every
// call; on the fast path's batches that was 9 % of the attempt cycle's CPU
// (issue 19's profile). These write the same text form — every element
// quoted, NULL bare — for the one element type the batches use.

// textArray is a text[] argument.
type textArray []sql.NullString

func (a textArray) Value() (driver.Value, error) {
	n := 2 + len(a)*5 // braces, and per element quotes, a comma or NULL
	for _, e := range a {
		n += len(e.String) + len(e.String)/8 // room for a few escapes
	}
	return string(appendTextArray(make([]byte, 0, n), a)), nil
}

func appendTextArray(b []byte, a []sql.NullString) []byte {
	b = append(b, '{')
	for i, e := range a {
		if i > 0 {
			b = append(b, ',')
		}
		if !e.Valid {
			b = append(b, "NULL"...)
			continue
		}
		b = append(b, '"')
		for j := 0; j < len(e.String); j++ {
			if c := e.String[j]; c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, e.String[j])
		}
		b = append(b, '"')
	}
	return append(b, '}')
}
