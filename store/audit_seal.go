package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Checkpoint seals a set of audit events into the chain. Each checkpoint
// hashes the previous one and the (seq, hash) of every event it covers, the
// way CloudTrail's digest files chain log files. Export the newest one and
// keep it elsewhere: with it, even a rewrite of the whole table shows.
type Checkpoint struct {
	ID       int64     `json:"id" db:"id"`
	SealedAt time.Time `json:"sealed_at" db:"sealed_at"`
	// Seqs are the covered sequence numbers as ranges: "1-500,502-731".
	Seqs       string `json:"seqs" db:"seqs"`
	EventCount int64  `json:"event_count" db:"event_count"`
	// Horizon: every event with txid below it (PostgreSQL), or seq up to it
	// (SQLite), is covered by this checkpoint or an earlier one.
	Horizon      int64  `json:"horizon" db:"horizon"`
	EventsDigest string `json:"events_digest" db:"events_digest"`
	// EventHashes holds the first 16 hex digits of each covered event's
	// hash, in seq order. The digest proves; these only point verification
	// at the first event that differs.
	EventHashes string `json:"-" db:"event_hashes"`
	PrevHash    string `json:"prev_hash" db:"prev_hash"`
	Hash        string `json:"hash" db:"hash"`
}

// sealBatch caps how many events one checkpoint covers, so a backlog after
// a bulk load is sealed in bounded memory.
const sealBatch = 50000

func checkpointHash(c *Checkpoint) string {
	content := struct {
		ID           int64  `json:"id"`
		SealedAt     string `json:"sealed_at"`
		Seqs         string `json:"seqs"`
		EventCount   int64  `json:"event_count"`
		Horizon      int64  `json:"horizon"`
		EventsDigest string `json:"events_digest"`
		EventHashes  string `json:"event_hashes"`
		PrevHash     string `json:"prev_hash"`
	}{c.ID, c.SealedAt.UTC().Format(time.RFC3339Nano), c.Seqs, c.EventCount, c.Horizon, c.EventsDigest, c.EventHashes, c.PrevHash}
	b, _ := json.Marshal(content)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// digestAdd feeds one event into a checkpoint's digest.
func digestAdd(h hash.Hash, seq int64, eventHash string) {
	fmt.Fprintf(h, "%d:%s\n", seq, eventHash)
}

const (
	/* Store.Seal */
	selectLastCheckpoint = `
SELECT id, sealed_at, seqs, event_count, horizon, events_digest, event_hashes, prev_hash, hash
FROM audit_checkpoints ORDER BY id DESC LIMIT 1`
	/* Store.Seal (SQLite): anything after the last checkpoint's horizon? */
	selectAnyUnsealedSQLite = `
SELECT EXISTS (SELECT 1 FROM audit_events
    WHERE seq > COALESCE((SELECT horizon FROM audit_checkpoints ORDER BY id DESC LIMIT 1), 0))`
	/* Store.Seal (SQLite): seqs commit in order, so "after the horizon" is exact. */
	selectUnsealedSQLite = `SELECT seq, hash FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`
	/* Store.Seal (PostgreSQL): transactions below xmin have all ended, so no
	   event below it can still appear. */
	selectXmin = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`
	/* Store.Seal (PostgreSQL): cap the batch at a txid boundary. */
	selectBatchBound = `SELECT txid FROM audit_events WHERE txid >= $1 AND txid < $2 ORDER BY txid OFFSET $3 LIMIT 1`
	/* Store.Seal (PostgreSQL) */
	selectUnsealedPostgres = `SELECT seq, hash FROM audit_events WHERE txid >= $1 AND txid < $2 ORDER BY seq`
	/* Store.Seal */
	insertCheckpoint = `
INSERT INTO audit_checkpoints (id, sealed_at, seqs, event_count, horizon, events_digest, event_hashes, prev_hash, hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

type seqHash struct {
	Seq  int64  `db:"seq"`
	Hash string `db:"hash"`
}

// Seal chains the events committed since the last checkpoint into a new
// checkpoint. It returns nil when there was nothing to seal. Several
// instances may call it: the checkpoint id is a primary key, so a racing
// sealer fails cleanly and the next round picks up.
func (s *Store) Seal(ctx context.Context) (*Checkpoint, error) {
	if s.engine == SQLite {
		// Nothing new since the last checkpoint: no write transaction (see
		// Store.claim). Seqs commit in order on SQLite, so this is exact.
		var pending bool
		if err := s.get(ctx, nil, &pending, selectAnyUnsealedSQLite); err != nil {
			return nil, fmt.Errorf("store.Seal: %w", err)
		}
		if !pending {
			return nil, nil
		}
	}
	var out *Checkpoint
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		if s.engine == Postgres {
			var got bool
			if err := tx.GetContext(ctx, &got, `SELECT pg_try_advisory_xact_lock(hashtext(current_schema()))`); err != nil {
				return err
			}
			if !got {
				return nil // another instance is sealing
			}
		}
		prev := &Checkpoint{}
		if err := tx.GetContext(ctx, prev, selectLastCheckpoint); errors.Is(err, sql.ErrNoRows) {
			prev = &Checkpoint{}
		} else if err != nil {
			return err
		}
		var evs []seqHash
		var horizon int64
		if s.engine == SQLite {
			if err := tx.SelectContext(ctx, &evs, selectUnsealedSQLite, prev.Horizon, sealBatch); err != nil {
				return err
			}
			if len(evs) > 0 {
				horizon = evs[len(evs)-1].Seq
			}
		} else {
			if err := tx.GetContext(ctx, &horizon, selectXmin); err != nil {
				return err
			}
			var bound int64
			err := tx.GetContext(ctx, &bound, selectBatchBound, prev.Horizon, horizon, sealBatch)
			switch {
			case err == nil:
				horizon = max(bound, prev.Horizon+1)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			if err := tx.SelectContext(ctx, &evs, selectUnsealedPostgres, prev.Horizon, horizon); err != nil {
				return err
			}
		}
		if len(evs) == 0 {
			return nil
		}
		c := &Checkpoint{ID: prev.ID + 1, SealedAt: s.now(), EventCount: int64(len(evs)), Horizon: horizon, PrevHash: prev.Hash}
		h := sha256.New()
		seqs := make([]int64, len(evs))
		var short strings.Builder
		for i, e := range evs {
			digestAdd(h, e.Seq, e.Hash)
			seqs[i] = e.Seq
			short.WriteString(shortHash(e.Hash))
		}
		c.Seqs = formatRanges(seqs)
		c.EventsDigest = hex.EncodeToString(h.Sum(nil))
		c.EventHashes = short.String()
		c.Hash = checkpointHash(c)
		if _, err := tx.ExecContext(ctx, s.rebind(insertCheckpoint), c.ID, c.SealedAt, c.Seqs, c.EventCount,
			c.Horizon, c.EventsDigest, c.EventHashes, c.PrevHash, c.Hash); err != nil {
			if isUnique(err) {
				return nil // another sealer won this round
			}
			return err
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store.Seal: %w", err)
	}
	return out, nil
}

// SealAll seals until nothing is left (used at graceful shutdown).
func (s *Store) SealAll(ctx context.Context) error {
	for {
		c, err := s.Seal(ctx)
		if err != nil || c == nil {
			return err
		}
	}
}

// LatestCheckpoint returns the newest checkpoint, for export.
func (s *Store) LatestCheckpoint(ctx context.Context) (*Checkpoint, error) {
	c := &Checkpoint{}
	if err := s.db.GetContext(ctx, c, selectLastCheckpoint); errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("store.LatestCheckpoint: %w", err)
	}
	return c, nil
}

func shortHash(h string) string {
	if len(h) < 16 {
		return fmt.Sprintf("%-16s", h)
	}
	return h[:16]
}

// formatRanges writes sorted seqs as "1-3,5,7-9".
func formatRanges(seqs []int64) string {
	var b strings.Builder
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(seqs[i], 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(seqs[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

// seqRange is an inclusive range of sequence numbers.
type seqRange struct{ lo, hi int64 }

// parseRanges reads formatRanges' output.
func parseRanges(s string) ([]seqRange, error) {
	if s == "" {
		return nil, nil
	}
	var out []seqRange
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, "-")
		lo, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad range %q", part)
		}
		hi := lo
		if isRange {
			if hi, err = strconv.ParseInt(b, 10, 64); err != nil || hi < lo {
				return nil, fmt.Errorf("bad range %q", part)
			}
		}
		out = append(out, seqRange{lo, hi})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lo < out[j].lo })
	return out, nil
}
