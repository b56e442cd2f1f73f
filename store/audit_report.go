package store

import (
	"fmt"
	"strings"
)

// String is the report as `limbo audit verify` prints it.
func (r *VerifyReport) String() string {
	if !r.OK {
		return fmt.Sprintf("audit chain broken at seq %d: %s", r.BrokenSeq, r.Problem)
	}
	var b strings.Builder
	if r.Checkpoints == 0 {
		// Nothing is signed yet: say so, not which key signed it.
		fmt.Fprintf(&b, "audit chain holds: %d events, none sealed yet (no checkpoint to check against key %s)", r.Events, r.KeyID)
		if r.MaxAge > 0 {
			fmt.Fprintf(&b, "; every event younger than %s", r.MaxAge)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "audit chain holds: %d events, %d checkpoints, %d not yet sealed; signed by key %s",
		r.Events, r.Checkpoints, r.Unsealed, r.KeyID)
	if r.Carried > 0 {
		fmt.Fprintf(&b, "; %d earlier checkpoints signed by key %s, since replaced, carried over (vouched for by hash by key %s's first)",
			r.Carried, strings.Join(r.RetiredKeys, ", "), r.KeyID)
	}
	if r.Anchors > 0 {
		fmt.Fprintf(&b, "; complete up to anchored checkpoint %d (%d anchors checked)", r.Anchored, r.Anchors)
	}
	if r.MaxAge > 0 {
		fmt.Fprintf(&b, "; newest checkpoint younger than %s", r.MaxAge)
	} else {
		b.WriteString("; age not checked")
	}
	return b.String()
}
