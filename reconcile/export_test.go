package reconcile

import (
	"slices"

	"github.com/limbo-dev/limbo/review"
)

// PanicProbing makes every probe request about the operations ids panic,
// as a bug reading an odd answer would; none ends that.
func (p *Prober) PanicProbing(ids ...string) {
	p.beforeRequest = func(op *review.Operation) {
		if slices.Contains(ids, op.ID) {
			panic("injected: probing " + op.ID)
		}
	}
}
