package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/store"
)

// TestVerifyReportSaysWhatWasChecked: a trail with no checkpoint yet is
// not reported as signed by a key, nor as having a newest checkpoint.
func TestVerifyReportSaysWhatWasChecked(t *testing.T) {
	none := (&store.VerifyReport{OK: true, Events: 3, Unsealed: 3, KeyID: "84e7", MaxAge: 2 * time.Minute}).String()
	if want := "audit chain holds: 3 events, none sealed yet (no checkpoint to check against key 84e7); every event younger than 2m0s"; none != want {
		t.Errorf("no checkpoint: %q, want %q", none, want)
	}
	sealed := (&store.VerifyReport{OK: true, Events: 3, Checkpoints: 1, KeyID: "84e7", MaxAge: 2 * time.Minute}).String()
	if !strings.Contains(sealed, "1 checkpoints, 0 not yet sealed; signed by key 84e7; newest checkpoint younger than 2m0s") {
		t.Errorf("one checkpoint: %q", sealed)
	}
}
