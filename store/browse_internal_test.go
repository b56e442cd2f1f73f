package store

import "testing"

// TestNumberRun: the part of a search the trigram index looks for on
// PostgreSQL (the whole text decides after).
func TestNumberRun(t *testing.T) {
	for q, want := range map[string]string{
		// A run of three trigrams or more, without its sides.
		"FILE-345678.PDF": "345678", "src-5554321": "5554321", "123456": "123456", "ab12-cd345678": "cd345678", "x%12345_y": "12345",
		// Fewer: with its sides, which narrow it.
		"src-77777": "-77777", "Run-7F3A/Step_2": "-7F3A/", "x%123_y": "%123_", "v-1212": "-1212",
		"file.pdf": "", "42": "", "a-42-b": "",
	} {
		if got := numberRun(q); got != want {
			t.Errorf("numberRun(%q) = %q, want %q", q, got, want)
		}
	}
}
