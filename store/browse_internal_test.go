package store

import "testing"

// TestNumberRun: the part of a search the trigram index looks for on
// PostgreSQL (the whole text decides after).
func TestNumberRun(t *testing.T) {
	for q, want := range map[string]string{
		"FILE-345678.PDF": "-345678.", "src-77777": "-77777", "123456": "123456", "Run-7F3A/Step_2": "-7F3A/",
		"file.pdf": "", "42": "", "a-42-b": "", "x%123_y": "%123_", "ab12-cd345678": "-cd345678",
	} {
		if got := numberRun(q); got != want {
			t.Errorf("numberRun(%q) = %q, want %q", q, got, want)
		}
	}
}
