package store

import (
	"sync"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// A snapshot is an operation exactly as this process last wrote or read it,
// identified by its version and detail_version. Every change to what the API
// answers about an operation moves one of the two (state changes and
// attempts move version; evidence and jobs move detail_version), so a write
// guarded in SQL by both succeeds only while the snapshot is still exact.
// That lets the attempt cycle decide in Go from the snapshot and write with
// one statement (see fastpath.go); when the guard fails, the ordinary path
// reads under a lock and decides again. A snapshot is never a source of
// truth on its own: it only saves the read that the guard re-checks.
type snapshot struct {
	// op has its attempts, evidence and jobs. It is never changed once
	// stored: a write stores a new snapshot.
	op             *review.Operation
	firstAttemptAt *time.Time
	detailVersion  int64
	size           int
}

// snapshotBudget bounds the memory the snapshots take (payloads dominate).
const snapshotBudget = 32 << 20

// snapshots holds the snapshots of operations in progress, by id.
type snapshots struct {
	// off: none are kept (Options.NoFastPath), so every call of the
	// attempt cycle takes the ordinary path.
	off   bool
	mu    sync.Mutex
	m     map[string]*snapshot
	bytes int
}

// get returns the tenant's snapshot of operation id, or nil.
func (c *snapshots) get(tenant, id string) *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	sn := c.m[id]
	if sn == nil || sn.op.Tenant != tenant {
		return nil
	}
	return sn
}

// put stores sn, replacing the operation's previous snapshot. An operation
// in a terminal state is dropped instead: the attempt cycle is over.
func (c *snapshots) put(sn *snapshot) {
	if c.off {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(sn.op.ID)
	if sn.op.State.Terminal() {
		return
	}
	sn.size = 1024 + len(sn.op.Payload) + 512*(len(sn.op.Attempts)+len(sn.op.Evidence)+len(sn.op.Jobs))
	if sn.size > snapshotBudget/64 {
		return // a huge payload is read from the database when needed
	}
	if c.m == nil {
		c.m = map[string]*snapshot{}
	}
	for id := range c.m { // map order is random: a cheap random eviction
		if c.bytes+sn.size <= snapshotBudget {
			break
		}
		c.dropLocked(id)
	}
	c.m[sn.op.ID] = sn
	c.bytes += sn.size
}

// drop forgets an operation's snapshot.
func (c *snapshots) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(id)
}

func (c *snapshots) dropLocked(id string) {
	if old := c.m[id]; old != nil {
		c.bytes -= old.size
		delete(c.m, id)
	}
}

// copyOperation copies op deeply enough that the copy's fields and slices
// can be changed without touching op (payload and candidates are shared:
// nothing changes them).
func copyOperation(op *review.Operation) *review.Operation {
	c := *op
	c.Flags = append([]review.Flag{}, op.Flags...)
	c.Attempts = append([]review.Attempt{}, op.Attempts...)
	c.Evidence = append([]review.Evidence{}, op.Evidence...)
	c.Jobs = append([]review.Job{}, op.Jobs...)
	return &c
}
