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
// way CloudTrail's digest files chain log files, and is signed with a key
// kept outside the database. Copies kept elsewhere (an anchor directory,
// `limbo audit export`) expose even a rewrite of the whole table.
type Checkpoint struct {
	ID       int64     `json:"id" db:"id"`
	SealedAt time.Time `json:"sealed_at" db:"sealed_at"`
	// Seqs are the covered sequence numbers as ranges: "1-500,502-731";
	// empty for a heartbeat, a checkpoint written with no new events.
	Seqs       string `json:"seqs" db:"seqs"`
	EventCount int64  `json:"event_count" db:"event_count"`
	// Horizon: every event with txid below it (PostgreSQL), or seq up to it
	// (SQLite), is covered by this checkpoint or an earlier one.
	Horizon      int64  `json:"horizon" db:"horizon"`
	EventsDigest string `json:"events_digest" db:"events_digest"`
	// EventHashes holds the first 16 hex digits of each covered event's
	// hash, in seq order. The digest proves; these only point verification
	// at the first event that differs (also when only an anchored copy of
	// the checkpoint is left).
	EventHashes string `json:"event_hashes" db:"event_hashes"`
	PrevHash    string `json:"prev_hash" db:"prev_hash"`
	// SealMaxMS is the sealer's promise: a checkpoint at least this often
	// (milliseconds), even when idle. Hashed and signed with the rest, so
	// verification can tell a quiet trail from a cut-off one.
	SealMaxMS int64  `json:"seal_max_ms" db:"seal_max_ms"`
	KeyID     string `json:"key_id" db:"key_id"`
	Hash      string `json:"hash" db:"hash"`
	// Signature is Ed25519 over the hash (base64), by the key KeyID names.
	Signature string `json:"signature" db:"signature"`
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
		SealMaxMS    int64  `json:"seal_max_ms"`
		KeyID        string `json:"key_id"`
	}{c.ID, c.SealedAt.UTC().Format(time.RFC3339Nano), c.Seqs, c.EventCount, c.Horizon, c.EventsDigest, c.EventHashes, c.PrevHash,
		c.SealMaxMS, c.KeyID}
	b, _ := json.Marshal(content)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// digestAdd feeds one event into a checkpoint's digest.
func digestAdd(h hash.Hash, seq int64, eventHash string) {
	fmt.Fprintf(h, "%d:%s\n", seq, eventHash)
}

// checkpointColumns are a checkpoint row's columns, in Checkpoint's order.
const checkpointColumns = `id, sealed_at, seqs, event_count, horizon, events_digest, event_hashes, prev_hash,
    seal_max_ms, key_id, hash, signature`

const (
	/* Store.HandOverAudit */
	selectKeySigned = `SELECT EXISTS (SELECT 1 FROM audit_checkpoints WHERE key_id = ?)`
	/* Store.Seal */
	selectLastCheckpoint = `SELECT ` + checkpointColumns + ` FROM audit_checkpoints ORDER BY id DESC LIMIT 1`
	/* Store.Seal (SQLite): anything after the last checkpoint's horizon, or
	   is a heartbeat due (no checkpoint sealed after the given time)? */
	selectSealDueSQLite = `
SELECT EXISTS (SELECT 1 FROM audit_events
        WHERE seq > COALESCE((SELECT horizon FROM audit_checkpoints ORDER BY id DESC LIMIT 1), 0))
    OR COALESCE((SELECT sealed_at > ? FROM audit_checkpoints ORDER BY id DESC LIMIT 1), 0) = 0`
	/* Store.Seal (SQLite): seqs commit in order, so "after the horizon" is exact. */
	selectUnsealedSQLite = `SELECT seq, hash FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`
	/* Store.Seal (PostgreSQL): transactions below xmin have all ended, so no
	   event below it can still appear. */
	selectXmin = `SELECT pg_snapshot_xmin(s)::text::bigint AS xmin, pg_snapshot_xmax(s)::text::bigint AS xmax FROM pg_current_snapshot() s`
	/* Store.Seal (PostgreSQL), rebasing: the events past what the checkpoints
	   name that have ended, and those of the old horizon's cluster left unsealed. */
	selectRebasePostgres = `SELECT seq, hash FROM audit_events WHERE (seq > $1 AND txid < $2) OR txid >= $3 ORDER BY seq`
	/* Store.Seal (SQLite): is the horizon past every event? */
	selectMaxSeqSQLite = `SELECT COALESCE(MAX(seq), 0) FROM audit_events`
	/* Store.Seal (PostgreSQL): cap the batch at a txid boundary. */
	selectBatchBound = `SELECT txid FROM audit_events WHERE txid >= $1 AND txid < $2 ORDER BY txid OFFSET $3 LIMIT 1`
	/* Store.Seal (PostgreSQL) */
	selectUnsealedPostgres = `SELECT seq, hash FROM audit_events WHERE txid >= $1 AND txid < $2 ORDER BY seq`
	/* Store.Seal */
	insertCheckpoint = `INSERT INTO audit_checkpoints (` + checkpointColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`
	/* Store.CheckpointsAfter */
	selectCheckpointsAfter = `SELECT ` + checkpointColumns + ` FROM audit_checkpoints WHERE id > ? ORDER BY id LIMIT ?`
)

type seqHash struct {
	Seq  int64  `db:"seq"`
	Hash string `db:"hash"`
}

// heartbeatDue reports whether the sealer owes a checkpoint although no
// event is waiting. It writes one when half its interval has passed, so the
// newest checkpoint stays younger than the interval it promises even when
// a round comes late.
func (s *Store) heartbeatDue(prev *Checkpoint, now time.Time) bool {
	return prev.ID == 0 || !prev.SealedAt.After(now.Add(-s.sealMax/2))
}

// Seal chains the events committed since the last checkpoint into a new
// signed checkpoint; with none, it still writes an empty one (a heartbeat)
// when the last is half the sealer's interval old, so a trail whose tail
// was cut shows its age. It returns nil when there was nothing to write.
// Several instances may call it: the checkpoint id is a primary key, so a
// racing sealer fails cleanly and the next round picks up.
func (s *Store) Seal(ctx context.Context) (*Checkpoint, error) {
	if s.auditKey == nil {
		return nil, fmt.Errorf("store.Seal: %w", ErrNoAuditKey)
	}
	now := s.now()
	if s.engine == SQLite {
		// Nothing new and no heartbeat due: no write transaction (see
		// Store.claim). Seqs commit in order on SQLite, so this is exact.
		var due bool
		if err := s.get(ctx, nil, &due, selectSealDueSQLite, dbTime(now.Add(-s.sealMax/2))); err != nil {
			return nil, fmt.Errorf("store.Seal: %w", err)
		}
		if !due {
			return nil, nil
		}
	}
	out, err := inTx(ctx, s, func(tx *sqlx.Tx) (*Checkpoint, error) { return s.sealTx(ctx, tx, now) })
	if err != nil {
		return nil, fmt.Errorf("store.Seal: %w", err)
	}
	return out, nil
}

// sealTx is one round of Seal in its transaction: the checkpoint it wrote,
// or nil when another sealer holds or won the round, or nothing was due.
func (s *Store) sealTx(ctx context.Context, tx *sqlx.Tx, now time.Time) (*Checkpoint, error) {
	if s.engine == Postgres {
		got, err := s.sealLock(ctx, tx)
		if err != nil {
			return nil, err
		}
		if !got {
			return nil, nil // another instance is sealing
		}
	}
	prev := &Checkpoint{}
	if err := tx.GetContext(ctx, prev, selectLastCheckpoint); errors.Is(err, sql.ErrNoRows) {
		prev = &Checkpoint{}
	} else if err != nil {
		return nil, err
	}
	// A newest checkpoint naming another key is chained onto, not
	// refused: a forged row would otherwise stop sealing on every
	// instance, and events written meanwhile could be erased without a
	// trace; sealed over, the forgery stays in the trail for verify to
	// name. (So an instance left running with a key the trail was handed
	// over from would break the trail: stop those first.)
	evs, horizon, err := s.unsealed(ctx, tx, prev)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 && !s.heartbeatDue(prev, now) {
		return nil, nil
	}
	c := newCheckpoint(prev, evs, horizon, now, s.sealMax)
	if err := s.sign(c); err != nil {
		return nil, err
	}
	// Another sealer may have written this id meanwhile (PostgreSQL: one
	// that does not take the same lock, such as an older Limbo during a
	// rolling upgrade). DO NOTHING rather than a unique violation, which
	// would leave the transaction failed and the round logged as an error.
	res, err := tx.ExecContext(ctx, s.rebind(insertCheckpoint), c.ID, c.SealedAt, c.Seqs, c.EventCount,
		c.Horizon, c.EventsDigest, c.EventHashes, c.PrevHash, c.SealMaxMS, c.KeyID, c.Hash, c.Signature)
	if err != nil {
		if isUnique(err) {
			return nil, nil // another sealer won this round
		}
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, err // another sealer won this round
	}
	return c, nil
}

// sealLock takes the sealer's lock for tx (PostgreSQL), if free. The key
// is Limbo's own: hashtext(current_schema()) alone, as it was, is what any
// other tool locking "the schema" takes too, and while one held it no
// instance sealed. And the transaction may not sit idle longer than the
// sealer's interval: a sealer paused inside it (a frozen VM, a stopped
// process, whose connection stays up) would otherwise hold the lock, and
// every instance's sealing, until it woke; PostgreSQL ends its session
// instead, and the lock with it.
func (s *Store) sealLock(ctx context.Context, tx *sqlx.Tx) (bool, error) {
	idle := strconv.FormatInt(max(s.sealMax.Milliseconds(), 1000), 10)
	if _, err := tx.ExecContext(ctx, `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, idle); err != nil {
		return false, err
	}
	var got bool
	err := tx.GetContext(ctx, &got, `SELECT pg_try_advisory_xact_lock(hashtext('limbo-seal:' || current_schema()))`)
	return got, err
}

// unsealed reads the events the checkpoint after prev covers, at most
// sealBatch of them, in seq order, and the horizon it will record.
//
// A horizon no event can have reached yet (past SQLite's last seq, past
// PostgreSQL's next transaction id) is not trusted: it would leave every
// event written from now on unsealed, with nothing to say so but the
// heartbeats. A forged checkpoint row can have one. The sealer then
// rebases: it covers the events past the highest seq the newest
// checkpoints name (coveredTop), and records a horizon of this database's
// again; the forged row stays in the trail for verify to name.
//
// On PostgreSQL it rebases only past a checkpoint that is not validly
// signed: a valid one with such a horizon is an honest trail restored into
// another cluster (pg_dump), whose transaction ids start lower and will
// one day run through the old ones again, when a txid horizon would cover
// old events a second time. That trail is not sealed until the new ids
// pass the old horizon; Store.SealLag, /metrics and /readyz say so.
func (s *Store) unsealed(ctx context.Context, tx *sqlx.Tx, prev *Checkpoint) ([]seqHash, int64, error) {
	var evs []seqHash
	horizon := prev.Horizon
	if s.engine == SQLite {
		from := prev.Horizon
		var last int64
		if err := tx.GetContext(ctx, &last, selectMaxSeqSQLite); err != nil {
			return nil, 0, err
		}
		if prev.Horizon > last {
			top, err := s.coveredTop(ctx, tx)
			if err != nil {
				return nil, 0, err
			}
			from = top
		}
		if err := tx.SelectContext(ctx, &evs, selectUnsealedSQLite, from, sealBatch); err != nil {
			return nil, 0, err
		}
		if len(evs) > 0 {
			horizon = evs[len(evs)-1].Seq
		}
		return evs, horizon, nil
	}
	var snap struct {
		Xmin int64 `db:"xmin"`
		Xmax int64 `db:"xmax"`
	}
	if err := tx.GetContext(ctx, &snap, selectXmin); err != nil {
		return nil, 0, err
	}
	xmin := snap.Xmin
	if prev.Horizon > snap.Xmax && prev.Check(s.auditPub) != nil && !prev.NamesOtherKey(s.auditPub) {
		top, err := s.coveredTop(ctx, tx)
		if err != nil {
			return nil, 0, err
		}
		if err := tx.SelectContext(ctx, &evs, selectRebasePostgres, top, xmin, prev.Horizon); err != nil {
			return nil, 0, err
		}
		return evs, xmin, nil
	}
	horizon = max(xmin, prev.Horizon)
	var bound int64
	err := tx.GetContext(ctx, &bound, selectBatchBound, prev.Horizon, horizon, sealBatch)
	switch {
	case err == nil:
		horizon = max(bound, prev.Horizon+1)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, 0, err
	}
	if err := tx.SelectContext(ctx, &evs, selectUnsealedPostgres, prev.Horizon, horizon); err != nil {
		return nil, 0, err
	}
	return evs, horizon, nil
}

// newCheckpoint is the unsigned checkpoint after prev covering evs (in seq
// order) up to horizon, sealed at now by a sealer with interval sealMax.
func newCheckpoint(prev *Checkpoint, evs []seqHash, horizon int64, now time.Time, sealMax time.Duration) *Checkpoint {
	c := &Checkpoint{ID: prev.ID + 1, SealedAt: now, EventCount: int64(len(evs)), Horizon: horizon, PrevHash: prev.Hash,
		SealMaxMS: sealMax.Milliseconds()}
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
	return c
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

// CheckpointsAfter returns up to limit checkpoints with ids above id, in
// order: what an anchor directory has not copied yet.
func (s *Store) CheckpointsAfter(ctx context.Context, id int64, limit int) ([]Checkpoint, error) {
	var cps []Checkpoint
	if err := s.db.SelectContext(ctx, &cps, s.rebind(selectCheckpointsAfter), id, limit); err != nil {
		return nil, fmt.Errorf("store.CheckpointsAfter: %w", err)
	}
	return cps, nil
}

// ErrKeySignedBefore: a trail is handed over only to a key that never
// signed it; going back to one would break it under every key.
var ErrKeySignedBefore = errors.New("this key signed the trail before")

// HandOverAudit hands the audit trail over from the key named previous
// (lost, leaked or retired), which signed the newest checkpoint, to this
// store's key: audited (audit.key_replaced); the new key's first checkpoint seals the
// event and vouches for the ones before by hash (VerifyReport.Carried). A
// key that signed any checkpoint already is refused (ErrKeySignedBefore).
// Instances still running with the previous key must be stopped first: they
// would sign on after the new key's checkpoints (see sealTx).
func (s *Store) HandOverAudit(ctx context.Context, previous string, after int64) error {
	next := AuditKeyID(s.auditPub)
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		var signed bool
		if err := tx.GetContext(ctx, &signed, s.rebind(selectKeySigned), next); err != nil {
			return err
		}
		if signed {
			return ErrKeySignedBefore
		}
		return s.appendEvent(ctx, tx, &AuditEvent{Actor: "system:serve", Action: "audit.key_replaced",
			Detail: detailJSON(map[string]any{"previous_key_id": previous, "key_id": next, "after_checkpoint": after})})
	})
	if errors.Is(err, ErrKeySignedBefore) {
		return err
	}
	if err != nil {
		return fmt.Errorf("store.HandOverAudit: %w", err)
	}
	return nil
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
