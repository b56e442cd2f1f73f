package store

import (
	"crypto/ed25519"
	"errors"
	"iter"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests check verifyChain on rows built in memory: no database.

var verifyT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// trail is an audit trail in memory: events and the checkpoints sealing them.
type trail struct {
	key    ed25519.PrivateKey
	events []*AuditEvent
	cps    []Checkpoint
}

// newTrail has events 1..n, and a checkpoint for each group of seqs in
// seal (seqs must exist), chained and signed; the horizon is the group's
// last seq (SQLite's meaning).
func newTrail(n int, seal ...[]int64) *trail {
	tr := &trail{key: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))}
	for i := 1; i <= n; i++ {
		e := &AuditEvent{Seq: int64(i), At: verifyT0.Add(time.Duration(i) * time.Second), Actor: "alice",
			Tenant: "acme", Action: "test.event", Detail: `{"i":` + strconv.Itoa(i) + `}`}
		e.Hash = EventHash(e)
		tr.events = append(tr.events, e)
	}
	prev := &Checkpoint{}
	for _, seqs := range seal {
		var evs []seqHash
		for _, q := range seqs {
			evs = append(evs, seqHash{Seq: q, Hash: tr.events[q-1].Hash})
		}
		c := newCheckpoint(prev, evs, seqs[len(seqs)-1], verifyT0.Add(time.Minute), DefaultSealMax)
		signCheckpoint(c, tr.key)
		tr.cps = append(tr.cps, *c)
		prev = c
	}
	return tr
}

func (tr *trail) resign(i int) { signCheckpoint(&tr.cps[i], tr.key) }

func (tr *trail) verify(t *testing.T) *VerifyReport {
	t.Helper()
	rep, err := verifyChain(tr.cps, eventsOf(tr.events), tr.opts(), false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (tr *trail) opts() VerifyOptions {
	return VerifyOptions{PublicKey: tr.key.Public().(ed25519.PublicKey), Now: verifyT0.Add(2 * time.Minute)}
}

func eventsOf(es []*AuditEvent) iter.Seq2[*AuditEvent, error] {
	return func(yield func(*AuditEvent, error) bool) {
		for _, e := range es {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func TestVerifyChainIntact(t *testing.T) {
	tr := newTrail(6, []int64{1, 2, 3}, []int64{4, 5})
	rep := tr.verify(t)
	if !rep.OK || rep.Events != 6 || rep.Checkpoints != 2 || rep.Unsealed != 1 || rep.BrokenSeq != 0 || rep.Problem != "" {
		t.Fatalf("intact trail: %+v", rep)
	}
	if rep.MaxAge != 2*DefaultSealMax {
		t.Errorf("MaxAge = %s, want twice the recorded interval", rep.MaxAge)
	}
}

func TestVerifyChainDetects(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tamper  func(tr *trail)
		seq     int64
		problem string
	}{
		{"an edited event", func(tr *trail) { tr.events[1].Detail = `{"i":9}` },
			2, "event 2 does not match its hash"},
		{"an event rewritten with its hash", func(tr *trail) {
			tr.events[3].Actor = "mallory"
			tr.events[3].Hash = EventHash(tr.events[3])
		}, 4, "event 4 differs from what checkpoint 2 sealed"},
		{"a deleted event (a gap)", func(tr *trail) { tr.events = append(tr.events[:1], tr.events[2:]...) },
			2, "sealed event 2 is missing (deleted)"},
		{"the last sealed event deleted", func(tr *trail) { tr.events = append(tr.events[:4], tr.events[5:]...) },
			5, "sealed event 5 is missing (deleted)"},
		{"a broken link", func(tr *trail) {
			tr.cps[1].PrevHash = strings.Repeat("0", 64)
			tr.resign(1)
		}, 4, "checkpoint 2 does not chain to checkpoint 1"},
		{"a checkpoint signed by another key", func(tr *trail) {
			signCheckpoint(&tr.cps[0], ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize))))
		}, 1, "checkpoint 1: it names key"},
		{"a bad signature", func(tr *trail) {
			other := ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize)))
			good := tr.cps[1]
			signCheckpoint(&tr.cps[1], other)
			tr.cps[1].KeyID, tr.cps[1].Hash = good.KeyID, good.Hash
		}, 4, "checkpoint 2: its signature is not key"},
		{"a deleted checkpoint", func(tr *trail) { tr.cps = append(tr.cps[:1], tr.cps[2:]...) },
			4, "checkpoint 2 is missing (deleted): checkpoint 3 follows 1"},
		{"an event slipped into sealed history", func(tr *trail) {
			*tr = *newTrail(6, []int64{1, 2, 4}, []int64{5})
		}, 3, "event 3 was inserted into sealed history"},
		{"a cut tail", func(tr *trail) { tr.events = tr.events[:3]; tr.cps = tr.cps[:1] },
			0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTrail(6, []int64{1, 2, 3}, []int64{4, 5}, []int64{6})
			tt.tamper(tr)
			rep := tr.verify(t)
			if tt.problem == "" {
				// Cutting the tail together with its checkpoints is
				// invisible without anchors or the age check; see below.
				if !rep.OK {
					t.Fatalf("got %+v", rep)
				}
				return
			}
			if rep.OK || rep.BrokenSeq != tt.seq || !strings.Contains(rep.Problem, tt.problem) {
				t.Fatalf("got OK=%v seq %d %q, want seq %d %q", rep.OK, rep.BrokenSeq, rep.Problem, tt.seq, tt.problem)
			}
		})
	}
}

func TestVerifyChainAnchorsAndAge(t *testing.T) {
	full := newTrail(6, []int64{1, 2, 3}, []int64{4, 5}, []int64{6})
	cut := newTrail(6, []int64{1, 2, 3}, []int64{4, 5}, []int64{6})
	cut.events, cut.cps = cut.events[:3], cut.cps[:1]

	opt := cut.opts()
	opt.Anchors = []Checkpoint{full.cps[1]}
	rep, err := verifyChain(cut.cps, eventsOf(cut.events), opt, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.BrokenSeq != 4 || !strings.Contains(rep.Problem, "checkpoint 2, anchored outside the database, is missing") {
		t.Fatalf("against an anchor: %+v", rep)
	}

	opt = cut.opts()
	opt.Now = verifyT0.Add(time.Hour)
	rep, err = verifyChain(cut.cps, eventsOf(cut.events), opt, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.BrokenSeq != 4 || !strings.Contains(rep.Problem, "the newest checkpoint (1,") {
		t.Fatalf("an old newest checkpoint: %+v", rep)
	}
	opt.SkipAge = true
	if rep, _ := verifyChain(cut.cps, eventsOf(cut.events), opt, false); !rep.OK || rep.MaxAge != 0 {
		t.Fatalf("SkipAge: %+v", rep)
	}
}

func TestVerifyChainByTxID(t *testing.T) {
	// On PostgreSQL the horizon is a transaction id: an uncovered event of
	// an older transaction was slipped in, a newer one is merely unsealed.
	tr := newTrail(3, []int64{1, 2})
	for _, e := range tr.events {
		e.TxID = 100 + e.Seq
	}
	tr.cps[0].Horizon = 104
	tr.resign(0)
	rep, err := verifyChain(tr.cps, eventsOf(tr.events), tr.opts(), true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.BrokenSeq != 3 || !strings.Contains(rep.Problem, "inserted into sealed history") {
		t.Fatalf("txid below the horizon: %+v", rep)
	}
	tr.cps[0].Horizon = 103
	tr.resign(0)
	if rep, _ = verifyChain(tr.cps, eventsOf(tr.events), tr.opts(), true); !rep.OK || rep.Unsealed != 1 {
		t.Fatalf("txid at the horizon: %+v", rep)
	}
}

func TestVerifyChainReadError(t *testing.T) {
	tr := newTrail(3, []int64{1, 2, 3})
	boom := errors.New("read failed")
	events := func(yield func(*AuditEvent, error) bool) {
		if yield(tr.events[0], nil) {
			yield(nil, boom)
		}
	}
	if rep, err := verifyChain(tr.cps, events, tr.opts(), false); !errors.Is(err, boom) || rep != nil {
		t.Fatalf("got %v, %v", rep, err)
	}
}

// TestVerifyChainWrongKey: a trail intact in every way but signed by
// another key is reported as that (WrongKey, the key its checkpoints name),
// not as tampering; with anything else broken too, it is tampering.
func TestVerifyChainWrongKey(t *testing.T) {
	tr := newTrail(6, []int64{1, 2, 3}, []int64{4, 5}, []int64{6})
	signedBy := AuditKeyID(tr.key.Public().(ed25519.PublicKey))
	opt := tr.opts()
	opt.PublicKey = ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize))).Public().(ed25519.PublicKey)
	rep, err := verifyChain(tr.cps, eventsOf(tr.events), opt, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.WrongKey != signedBy || rep.BrokenSeq != 1 || !strings.Contains(rep.Problem, "checkpoint 1: it names key") {
		t.Fatalf("another key's trail: %+v", rep)
	}
	tr.events[4].Detail = `{"i":9}`
	if rep, err = verifyChain(tr.cps, eventsOf(tr.events), opt, false); err != nil || rep.OK || rep.WrongKey != "" {
		t.Fatalf("another key's trail, an event edited: %+v, %v", rep, err)
	}
	// One checkpoint re-signed by another key breaks the chain: tampering.
	tr = newTrail(6, []int64{1, 2, 3}, []int64{4, 5})
	signCheckpoint(&tr.cps[0], ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize))))
	if rep := tr.verify(t); rep.OK || rep.WrongKey != "" {
		t.Fatalf("one checkpoint re-signed: %+v", rep)
	}
}

// keyedTrail is newTrail with checkpoint i signed by keys[i].
func keyedTrail(n int, keys []ed25519.PrivateKey, seal ...[]int64) *trail {
	tr := newTrail(n, seal...)
	prev := &Checkpoint{}
	for i := range tr.cps {
		var evs []seqHash
		for _, q := range seal[i] {
			evs = append(evs, seqHash{Seq: q, Hash: tr.events[q-1].Hash})
		}
		c := newCheckpoint(prev, evs, seal[i][len(seal[i])-1], verifyT0.Add(time.Minute), DefaultSealMax)
		signCheckpoint(c, keys[i])
		tr.cps[i] = *c
		prev = c
	}
	return tr
}

// TestVerifyChainReplacedKey: a trail whose key was replaced (serve
// --replace-audit-key) holds when checked with the new key: the checkpoints
// before the new key's first are carried over, vouched for by hash. Checked
// with the old key, the new key's checkpoints break it (exit 1, not "wrong
// key": some checkpoints are the old key's); a trail going back to the old
// key after the handover is broken.
func TestVerifyChainReplacedKey(t *testing.T) {
	a := ed25519.NewKeyFromSeed([]byte(strings.Repeat("a", ed25519.SeedSize)))
	b := ed25519.NewKeyFromSeed([]byte(strings.Repeat("b", ed25519.SeedSize)))
	pubOf := func(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
	check := func(tr *trail, k ed25519.PrivateKey) *VerifyReport {
		opt := tr.opts()
		opt.PublicKey = pubOf(k)
		rep, err := verifyChain(tr.cps, eventsOf(tr.events), opt, false)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	seals := [][]int64{{1, 2}, {3, 4}, {5, 6}}
	tr := keyedTrail(6, []ed25519.PrivateKey{a, a, b}, seals...)
	if rep := check(tr, b); !rep.OK || rep.Carried != 2 || !slices.Equal(rep.RetiredKeys, []string{AuditKeyID(pubOf(a))}) {
		t.Errorf("replaced key, checked with the new one: %+v", rep)
	}
	if rep := check(tr, a); rep.OK || rep.WrongKey != "" || rep.BrokenSeq != 5 || !strings.Contains(rep.Problem, "handed over to key "+AuditKeyID(pubOf(b))) {
		t.Errorf("replaced key, checked with the old one: %+v; want broken at seq 5, not a wrong key", rep)
	}
	// Checked with a key that signed nothing, the key named is the newest:
	// the one the trail is signed with now.
	c := ed25519.NewKeyFromSeed([]byte(strings.Repeat("c", ed25519.SeedSize)))
	if rep := check(tr, c); rep.OK || rep.WrongKey != AuditKeyID(pubOf(b)) {
		t.Errorf("replaced key, checked with a third: %+v; want the newest key named", rep)
	}
	// Carried over, a checkpoint must still match its hash.
	tr.cps[0].EventCount = 3
	if rep := check(tr, b); rep.OK || rep.BrokenSeq != 1 {
		t.Errorf("a carried checkpoint edited: %+v", rep)
	}
	back := keyedTrail(6, []ed25519.PrivateKey{a, b, a}, seals...)
	if rep := check(back, b); rep.OK || rep.BrokenSeq != 5 || !strings.Contains(rep.Problem, "verify with that key; otherwise it was re-signed") {
		t.Errorf("back to the old key after the handover: %+v", rep)
	}
	// An event of a carried checkpoint edited is still found.
	tr = keyedTrail(6, []ed25519.PrivateKey{a, a, b}, seals...)
	tr.events[1].Detail = `{"i":9}`
	if rep := check(tr, b); rep.OK || rep.BrokenSeq != 2 {
		t.Errorf("an event under a carried checkpoint edited: %+v", rep)
	}
}
