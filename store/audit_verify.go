package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"
)

// VerifyReport is the result of checking the audit trail.
type VerifyReport struct {
	OK          bool  `json:"ok"`
	Events      int64 `json:"events"`
	Checkpoints int64 `json:"checkpoints"`
	// Unsealed counts events newer than the newest checkpoint.
	Unsealed int64 `json:"unsealed"`
	// BrokenSeq is the first sequence number where the trail does not hold
	// (0 when OK, or when only a checkpoint with no events is broken).
	BrokenSeq int64  `json:"broken_seq,omitempty"`
	Problem   string `json:"problem,omitempty"`
}

func (r *VerifyReport) fail(seq int64, format string, args ...any) {
	if r.OK || seq < r.BrokenSeq {
		r.OK = false
		r.BrokenSeq = seq
		r.Problem = fmt.Sprintf(format, args...)
	}
}

// covered is one range of a checkpoint's seqs, with where its short hashes
// start in that checkpoint's list.
type covered struct {
	seqRange
	cp     int
	offset int64
}

const (
	/* Store.VerifyAudit */
	selectCheckpoints = `
SELECT id, sealed_at, seqs, event_count, horizon, events_digest, event_hashes, prev_hash, hash
FROM audit_checkpoints ORDER BY id`
	/* Store.VerifyAudit: streamed, so memory stays flat on a long trail. */
	selectAllEvents = `
SELECT seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash
FROM audit_events ORDER BY seq`
)

// VerifyAudit checks every event's hash, the chain of checkpoints, and that
// every sealed event is still there, unchanged, and nothing was slipped in
// between. anchor, when given, is a checkpoint exported earlier: the stored
// checkpoint with its id must be identical. It reports the first broken
// sequence number.
func (s *Store) VerifyAudit(ctx context.Context, anchor *Checkpoint) (*VerifyReport, error) {
	rep := &VerifyReport{OK: true}
	var cps []Checkpoint
	if err := s.db.SelectContext(ctx, &cps, selectCheckpoints); err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	rep.Checkpoints = int64(len(cps))

	var ranges []covered
	prevHash := ""
	for i := range cps {
		c := &cps[i]
		rs, err := parseRanges(c.Seqs)
		first := int64(0)
		if len(rs) > 0 {
			first = rs[0].lo
		}
		switch {
		case err != nil:
			rep.fail(0, "checkpoint %d: %v", c.ID, err)
			continue
		case c.ID != int64(i+1):
			rep.fail(first, "checkpoint %d is out of order (expected %d)", c.ID, i+1)
		case c.PrevHash != prevHash:
			rep.fail(first, "checkpoint %d does not chain to checkpoint %d", c.ID, c.ID-1)
		case checkpointHash(c) != c.Hash:
			rep.fail(first, "checkpoint %d content does not match its hash", c.ID)
		}
		prevHash = c.Hash
		var off, n int64
		for _, r := range rs {
			ranges = append(ranges, covered{seqRange: r, cp: i, offset: off})
			off += r.hi - r.lo + 1
		}
		n = off
		if n != c.EventCount || int64(len(c.EventHashes)) != 16*n {
			rep.fail(first, "checkpoint %d lists %d events but counts %d", c.ID, n, c.EventCount)
		}
	}
	if anchor != nil {
		if anchor.ID < 1 || anchor.ID > int64(len(cps)) {
			rep.fail(0, "exported checkpoint %d is missing from the database", anchor.ID)
		} else if c := cps[anchor.ID-1]; c.Hash != anchor.Hash {
			rs, _ := parseRanges(c.Seqs)
			first := int64(0)
			if len(rs) > 0 {
				first = rs[0].lo
			}
			rep.fail(first, "checkpoint %d differs from the exported copy", anchor.ID)
		}
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].lo < ranges[j].lo })
	for i := 1; i < len(ranges); i++ {
		if ranges[i].lo <= ranges[i-1].hi {
			rep.fail(ranges[i].lo, "seq %d is covered by two checkpoints", ranges[i].lo)
		}
	}
	var horizon int64
	if len(cps) > 0 {
		horizon = cps[len(cps)-1].Horizon
	}

	digests := make([]hash.Hash, len(cps))
	for i := range digests {
		digests[i] = sha256.New()
	}
	rows, err := s.db.QueryxContext(ctx, selectAllEvents)
	if err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	defer rows.Close()
	ip := 0
	expect := int64(0)
	if len(ranges) > 0 {
		expect = ranges[0].lo
	}
	for rows.Next() {
		var e AuditEvent
		if err := rows.StructScan(&e); err != nil {
			return nil, fmt.Errorf("store.VerifyAudit: %w", err)
		}
		rep.Events++
		if EventHash(&e) != e.Hash {
			rep.fail(e.Seq, "event %d does not match its hash (edited or moved)", e.Seq)
		}
		for ip < len(ranges) && ranges[ip].hi < e.Seq {
			if expect <= ranges[ip].hi {
				rep.fail(expect, "sealed event %d is missing (deleted)", expect)
			}
			ip++
			if ip < len(ranges) {
				expect = ranges[ip].lo
			}
		}
		if ip < len(ranges) && ranges[ip].lo <= e.Seq {
			r := ranges[ip]
			if expect < e.Seq {
				rep.fail(expect, "sealed event %d is missing (deleted)", expect)
			}
			cp := &cps[r.cp]
			at := 16 * (r.offset + e.Seq - r.lo)
			if at+16 <= int64(len(cp.EventHashes)) && cp.EventHashes[at:at+16] != shortHash(e.Hash) {
				rep.fail(e.Seq, "event %d differs from what checkpoint %d sealed", e.Seq, cp.ID)
			}
			digestAdd(digests[r.cp], e.Seq, e.Hash)
			expect = e.Seq + 1
			continue
		}
		// Not covered by any checkpoint: either newer than the last seal, or
		// slipped into sealed history.
		sealed := e.Seq <= horizon
		if s.engine == Postgres {
			sealed = e.TxID < horizon
		}
		if sealed {
			rep.fail(e.Seq, "event %d was inserted into sealed history", e.Seq)
		} else {
			rep.Unsealed++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	for ; ip < len(ranges); ip++ {
		if expect <= ranges[ip].hi {
			rep.fail(expect, "sealed event %d is missing (deleted)", expect)
		}
		if ip+1 < len(ranges) {
			expect = ranges[ip+1].lo
		}
	}
	for i := range cps {
		if hex.EncodeToString(digests[i].Sum(nil)) != cps[i].EventsDigest {
			rs, _ := parseRanges(cps[i].Seqs)
			first, last := int64(0), int64(0)
			if len(rs) > 0 {
				first, last = rs[0].lo, rs[len(rs)-1].hi
			}
			if !rep.OK && rep.BrokenSeq >= first && rep.BrokenSeq <= last {
				continue // an event of this checkpoint is already named
			}
			rep.fail(first, "events of checkpoint %d do not match its digest", cps[i].ID)
		}
	}
	return rep, nil
}
