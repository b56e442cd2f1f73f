package store_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// otherKey is someone else's signing key: a forger's.
var otherKey = func() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("not limbo's audit key"))
	return ed25519.NewKeyFromSeed(seed[:])
}()

// sealedTrail is a trail written, sealed and anchored: the history of
// auditHistory, then a tail of three events sealed after it.
type sealedTrail struct {
	b         *bundle
	url       string
	anchorDir string
	evs       map[int64]store.AuditEvent
	gap       int64   // an unused seq inside sealed history
	run       []int64 // the seqs of a history checkpoint covering two or more
	history   int64   // the id of the newest checkpoint before the tail
	tail      []int64 // the tail's seqs
	cps       []store.Checkpoint
}

func (tr *sealedTrail) newest() store.Checkpoint { return tr.cps[len(tr.cps)-1] }

// writeSealedTrail builds a sealedTrail on a fresh database and copies its
// checkpoints to an anchor directory with the anchor writer serve runs.
func writeSealedTrail(t *testing.T, e store.Engine) *sealedTrail {
	t.Helper()
	clk := storetest.NewClock(t0)
	url := storetest.URL(t, e)
	s := openOn(t, url, storetest.AuditKey, clk)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := &bundle{ctx: context.Background(), s: s, clk: clk}
	tr := &sealedTrail{b: b, url: url, anchorDir: t.TempDir()}
	tr.gap = auditHistory(t, b)
	tr.run = sealedRun(t, s)
	cps := checkpoints(t, s)
	tr.history = cps[len(cps)-1].ID
	for _, ref := range []string{"doc-tail-1", "doc-tail-2", "doc-tail-3"} {
		b.clk.Advance(time.Second)
		op := b.newOp(t, ref, review.RiskRead, "plain")
		for _, ev := range b.history(t, op.ID) {
			tr.tail = append(tr.tail, ev.Seq)
		}
	}
	assertSealed(t, s)
	tr.evs = events(t, s)
	tr.cps = checkpoints(t, s)
	if tr.newest().ID == tr.history || len(tr.tail) != 3 {
		t.Fatalf("the tail %v is not sealed after checkpoint %d: %+v", tr.tail, tr.history, tr.cps)
	}
	w, err := anchor.NewWriter(tr.anchorDir, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CatchUp(b.ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.VerifyAudit(b.ctx, verifyOpts(readAnchors(t, tr.anchorDir)...)); err != nil || !rep.OK || rep.Anchored != tr.newest().ID {
		t.Fatalf("untouched trail against its anchors = %+v, %v", rep, err)
	}
	return tr
}

// openOn opens a store on url signing with key, on clk.
func openOn(t *testing.T, url string, key ed25519.PrivateKey, clk *storetest.Clock) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.Options{Clock: clk.Now, Rand: fixedRand(0.5), AuditKey: key, MaxConns: storetest.MaxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func readAnchors(t *testing.T, dir string) []store.Checkpoint {
	t.Helper()
	cps, err := anchor.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// TestAuditTamperNamesSeq is the table: each way of cutting or
// forging the trail, checked without an anchor (signatures, and the age of
// the newest checkpoint, as `limbo audit verify` does once the sealer's
// interval has passed) and with the anchor directory alone (no age check),
// must be detected and name the right sequence number.
func TestAuditTamperNamesSeq(t *testing.T) {
	t.Parallel()
	del := func(t *testing.T, s *store.Store, seqs ...int64) {
		for _, seq := range seqs {
			exec(t, s, `DELETE FROM audit_events WHERE seq = ?`, seq)
		}
	}
	forge := func(t *testing.T, tr *sealedTrail, seq, txid int64, like store.AuditEvent) {
		fake := like
		fake.Seq, fake.Action, fake.Detail = seq, "operation.confirmed", `{"reason":"trust me"}`
		fake.Hash = forgeHash(fake)
		exec(t, tr.b.s, `INSERT INTO audit_events (seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, fake.Seq, txid, fake.At, fake.Actor, fake.Tenant, fake.OperationID,
			fake.Action, fake.FromState, fake.ToState, fake.Detail, fake.Hash)
	}
	// unsealedTxid is a txid that looks not yet sealed: 0 on SQLite (where
	// seqs decide), far above the horizon on PostgreSQL, as a late commit's.
	unsealedTxid := func(tr *sealedTrail) int64 {
		if tr.b.s.Engine() == store.Postgres {
			return tr.newest().Horizon + 1<<40
		}
		return 0
	}
	const (
		both       = ""
		anchorOnly = "with anchor" // no anchor cannot tell an emptied database from a new one
		bareOnly   = "without anchor"
	)
	tests := []struct {
		name string
		// only: the one mode that can detect it ("": both). Beyond the
		// newest checkpoint, an anchor proves nothing: only the age of
		// what is there can tell.
		only   string
		tamper func(t *testing.T, tr *sealedTrail) (wantSeq int64)
	}{
		{"edit a content column", both, func(t *testing.T, tr *sealedTrail) int64 {
			exec(t, tr.b.s, `UPDATE audit_events SET to_state = 'confirmed' WHERE seq = ?`, tr.run[1])
			return tr.run[1]
		}},
		{"delete a middle event", both, func(t *testing.T, tr *sealedTrail) int64 {
			del(t, tr.b.s, tr.run[1])
			return tr.run[1]
		}},
		{"delete the newest events", both, func(t *testing.T, tr *sealedTrail) int64 {
			del(t, tr.b.s, tr.tail[1:]...)
			return tr.tail[1]
		}},
		{"delete the newest events and their checkpoints", both, func(t *testing.T, tr *sealedTrail) int64 {
			del(t, tr.b.s, tr.tail...)
			exec(t, tr.b.s, `DELETE FROM audit_checkpoints WHERE id > ?`, tr.history)
			return tr.tail[0]
		}},
		{"delete the newest checkpoint", both, func(t *testing.T, tr *sealedTrail) int64 {
			exec(t, tr.b.s, `DELETE FROM audit_checkpoints WHERE id = ?`, tr.newest().ID)
			return covered(t, tr.newest())[0]
		}},
		{"delete all checkpoints", both, func(t *testing.T, tr *sealedTrail) int64 {
			exec(t, tr.b.s, `DELETE FROM audit_checkpoints`)
			return slices.Min(slices.Collect(maps.Keys(tr.evs)))
		}},
		{"delete all events", both, func(t *testing.T, tr *sealedTrail) int64 {
			exec(t, tr.b.s, `DELETE FROM audit_events`)
			return slices.Min(slices.Collect(maps.Keys(tr.evs)))
		}},
		{"delete all events and all checkpoints", anchorOnly, func(t *testing.T, tr *sealedTrail) int64 {
			exec(t, tr.b.s, `DELETE FROM audit_events`)
			exec(t, tr.b.s, `DELETE FROM audit_checkpoints`)
			return slices.Min(slices.Collect(maps.Keys(tr.evs)))
		}},
		{"swap two seqs", both, func(t *testing.T, tr *sealedTrail) int64 {
			i, j := tr.run[0], tr.run[1]
			exec(t, tr.b.s, `UPDATE audit_events SET seq = ? WHERE seq = ?`, -1, i)
			exec(t, tr.b.s, `UPDATE audit_events SET seq = ? WHERE seq = ?`, i, j)
			exec(t, tr.b.s, `UPDATE audit_events SET seq = ? WHERE seq = ?`, j, -1)
			return i
		}},
		{"insert a forged event with a recomputed hash", both, func(t *testing.T, tr *sealedTrail) int64 {
			neighbour := tr.evs[tr.gap+1]
			forge(t, tr, tr.gap, neighbour.TxID, neighbour)
			return tr.gap
		}},
		{"insert a forged event posing as a late commit", bareOnly, func(t *testing.T, tr *sealedTrail) int64 {
			forge(t, tr, tr.gap, unsealedTxid(tr), tr.evs[tr.gap+1])
			return tr.gap
		}},
		{"append a forged event after the sealed tail", bareOnly, func(t *testing.T, tr *sealedTrail) int64 {
			top := slices.Max(slices.Collect(maps.Keys(tr.evs)))
			forge(t, tr, top+1, unsealedTxid(tr), tr.evs[top])
			return top + 1
		}},
		{"replace the newest checkpoint with one signed by another key", both, func(t *testing.T, tr *sealedTrail) int64 {
			// The forger runs Limbo with a key of their own on the same
			// database and reseals what the deleted checkpoint covered.
			exec(t, tr.b.s, `DELETE FROM audit_checkpoints WHERE id = ?`, tr.newest().ID)
			forger := openOn(t, tr.url, otherKey, tr.b.clk)
			if err := forger.SealAll(tr.b.ctx); err != nil {
				t.Fatal(err)
			}
			if got := checkpoints(t, tr.b.s); len(got) != len(tr.cps) || got[len(got)-1].Seqs != tr.newest().Seqs {
				t.Fatalf("the forger's checkpoints %+v do not replace %+v", got, tr.newest())
			}
			return covered(t, tr.newest())[0]
		}},
	}
	for _, tt := range tests {
		for _, mode := range []string{"without anchor", "with anchor"} {
			if tt.only != both && tt.only != mode {
				continue
			}
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				storetest.Each(t, func(t *testing.T, e store.Engine) {
					tr := writeSealedTrail(t, e)
					want := tt.tamper(t, tr)
					opt := verifyOpts()
					if mode == "with anchor" {
						opt = verifyOpts(readAnchors(t, tr.anchorDir)...)
						opt.SkipAge = true
					} else {
						// Verified once the sealer's interval has passed: a
						// running sealer would have written a newer checkpoint.
						tr.b.clk.Advance(3 * store.DefaultSealMax)
					}
					rep := verify(t, tr.b.s, opt, want)
					t.Logf("%s: %s", mode, rep.Problem)
				})
			})
		}
	}
}

// TestAuditHeartbeat: an idle sealer still writes a signed, empty
// checkpoint once half its interval has passed, recording the interval;
// without an anchor, a newest checkpoint older than twice that is reported
// at the first seq after everything sealed, unless the operator skips the
// age check or sets another limit.
func TestAuditHeartbeat(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		clk := storetest.NewClock(t0)
		s := storetest.Open(t, e, store.Options{Clock: clk.Now, AuditSealMax: 10 * time.Second})
		ctx := context.Background()
		b := &bundle{ctx: ctx, s: s, clk: clk}

		// A fresh trail gets its first checkpoint at once, events or not.
		c, err := s.Seal(ctx)
		if err != nil || c == nil || c.ID != 1 || c.EventCount != 0 || c.SealMaxMS != 10000 || c.Seqs != "" {
			t.Fatalf("first Seal of an empty trail = %+v, %v; want an empty checkpoint 1 recording 10s", c, err)
		}
		b.newOp(t, "doc-1", review.RiskRead, "plain")
		assertSealed(t, s)
		top := int64(len(events(t, s)))
		last := checkpoints(t, s)[1]

		clk.Advance(4 * time.Second)
		if c, err := s.Seal(ctx); err != nil || c != nil {
			t.Fatalf("Seal before half the interval = %+v, %v; want nothing", c, err)
		}
		clk.Advance(time.Second)
		c, err = s.Seal(ctx)
		if err != nil || c == nil || c.ID != last.ID+1 || c.EventCount != 0 || c.PrevHash != last.Hash {
			t.Fatalf("Seal at half the interval = %+v, %v; want an empty checkpoint chained to %d", c, err, last.ID)
		}
		if err := c.Check(storetest.AuditKey.Public().(ed25519.PublicKey)); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		if rep, err := s.VerifyAudit(ctx, verifyOpts()); err != nil || !rep.OK || rep.MaxAge != 20*time.Second {
			t.Fatalf("verify after the heartbeat = %+v, %v; want OK within 20s", rep, err)
		}

		// The sealer stops (or the tail is cut): 21 s later the trail is
		// too old, named at the seq after the newest sealed one.
		clk.Advance(21 * time.Second)
		rep := verify(t, s, verifyOpts(), top+1)
		if rep.MaxAge != 20*time.Second {
			t.Errorf("max age %s, want twice the recorded interval", rep.MaxAge)
		}
		opt := verifyOpts()
		opt.SkipAge = true
		if rep, err := s.VerifyAudit(ctx, opt); err != nil || !rep.OK {
			t.Errorf("verify with the age check skipped = %+v, %v; want OK", rep, err)
		}
		opt = verifyOpts()
		opt.MaxAge = time.Minute
		if rep, err := s.VerifyAudit(ctx, opt); err != nil || !rep.OK {
			t.Errorf("verify allowing a minute = %+v, %v; want OK", rep, err)
		}

		// An event nobody sealed, older than allowed: its checkpoint is gone.
		op := b.newOp(t, "doc-2", review.RiskRead, "plain")
		seq := b.history(t, op.ID)[0].Seq
		clk.Advance(time.Minute)
		opt = verifyOpts()
		opt.MaxAge = 30 * time.Second
		verify(t, s, opt, seq)
	})
}

// TestAuditSignature: a store without a key cannot seal; a checkpoint
// signed by another key, or checked against another key, is refused at its
// first seq; a checkpoint whose key id was swapped breaks its signature.
func TestAuditSignature(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		url := storetest.URL(t, e)
		keyless, err := store.Open(ctx, url, store.Options{MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		defer keyless.Close()
		if err := keyless.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := keyless.Seal(ctx); err == nil {
			t.Fatal("a store without a signing key sealed")
		}
		if _, err := keyless.VerifyAudit(ctx, store.VerifyOptions{}); err == nil {
			t.Fatal("VerifyAudit without a public key answered")
		}

		tr := writeSealedTrail(t, e)
		// Checked against another key: the first checkpoint is named.
		opt := verifyOpts()
		opt.PublicKey = otherKey.Public().(ed25519.PublicKey)
		verify(t, tr.b.s, opt, 1)

		// A middle checkpoint claiming the forger's key id: the key id is
		// hashed and signed, so the swap shows.
		i := len(tr.cps) - 2
		exec(t, tr.b.s, `UPDATE audit_checkpoints SET key_id = ? WHERE id = ?`,
			store.AuditKeyID(otherKey.Public().(ed25519.PublicKey)), tr.cps[i].ID)
		rep := verify(t, tr.b.s, verifyOpts(), firstOf(t, tr.cps, i))
		t.Logf("swapped key id: %s", rep.Problem)
	})
}

// firstOf is the seq verification names for checkpoint i of cps: its first
// covered seq, or for a heartbeat the first after those before it.
func firstOf(t *testing.T, cps []store.Checkpoint, i int) int64 {
	t.Helper()
	if seqs := covered(t, cps[i]); len(seqs) > 0 {
		return seqs[0]
	}
	var top int64
	for _, c := range cps[:i] {
		for _, s := range covered(t, c) {
			top = max(top, s)
		}
	}
	return top + 1
}
