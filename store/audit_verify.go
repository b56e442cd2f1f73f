package store

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"iter"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// VerifyOptions say what the audit trail is checked against.
type VerifyOptions struct {
	// PublicKey is the key every checkpoint must be signed with (required).
	PublicKey ed25519.PublicKey
	// Anchors are checkpoints kept outside the database: an anchor
	// directory's files, or one exported with `limbo audit export`. The
	// database must hold each one identically, and every event it covers.
	Anchors []Checkpoint
	// Now is when the check runs (zero: the store's clock).
	Now time.Time
	// MaxAge is how old the newest checkpoint, and an event not yet in any
	// checkpoint, may be; older means the tail may have been cut off. Zero:
	// twice the interval the newest checkpoint records (its sealer promised
	// one at least that often).
	MaxAge time.Duration
	// SkipAge turns the age check off: for a database whose server is
	// known to be stopped, or one checked against anchors.
	SkipAge bool
	// Scope is the tenants the reader may see (nil: all). The whole chain
	// is still checked — a break anywhere is a break — but the report
	// counts only these tenants' events, and says where the chain breaks
	// only when that event is one of theirs (review.Scope.List).
	Scope []string

	// about are the events without a tenant of their own that are about
	// Scope's tenants (a console user's, aboutTenants): counted as theirs.
	// VerifyAudit reads them.
	about map[int64]bool
	// beyondTenant are the events of a tenant that audit_event_tenants
	// shows to other tenants too: none should be. VerifyAudit reads them.
	beyondTenant map[int64]bool
}

// VerifyReport is the result of checking the audit trail.
type VerifyReport struct {
	OK          bool  `json:"ok"`
	Events      int64 `json:"events"`
	Checkpoints int64 `json:"checkpoints"`
	// Unsealed counts events newer than the newest checkpoint.
	Unsealed int64 `json:"unsealed"`
	// KeyID names the public key the checkpoints were checked against.
	KeyID string `json:"key_id"`
	// Anchors counts the anchored checkpoints checked; Anchored is the
	// newest one's id: up to it, the trail is proven complete.
	Anchors  int64 `json:"anchors,omitempty"`
	Anchored int64 `json:"anchored,omitempty"`
	// MaxAge is the age limit applied (0: none).
	MaxAge time.Duration `json:"max_age,omitempty"`
	// BrokenSeq is the first sequence number where the trail does not hold
	// (0 only when OK).
	BrokenSeq int64  `json:"broken_seq,omitempty"`
	Problem   string `json:"problem,omitempty"`
	// Scoped: Events and Unsealed count only the reader's tenants'
	// events (VerifyOptions.Scope). Outside: the chain breaks at an event
	// outside them (or at none, such as a checkpoint), so BrokenSeq and
	// Problem are left out; a reader of every tenant sees them.
	Scoped  bool `json:"scoped,omitempty"`
	Outside bool `json:"outside,omitempty"`
	// WrongKey, when the trail holds in every other way but checkpoints
	// intact in content name another key than KeyID, is the key they name
	// (the first such). Their signatures cannot be checked without that
	// key: the check was given the wrong one, which is no proof of
	// tampering. Empty when anything else is broken.
	WrongKey string `json:"wrong_key,omitempty"`
	// Carried counts the checkpoints signed by keys since replaced
	// (RetiredKeys), before the first checkpoint of the key checked with:
	// that one vouches for them by hash (checkChain).
	Carried     int64    `json:"carried,omitempty"`
	RetiredKeys []string `json:"retired_keys,omitempty"`

	// otherKey is the first key an intact checkpoint names instead of
	// KeyID; broken is set by every other problem.
	otherKey string
	broken   bool
}

// failKey records a problem that is only another key: an intact
// checkpoint naming keyID, not the one checked against. The newest such
// key is the one to name (checkpoints come in id order): the key the
// trail is signed with now, which serve needs too.
func (r *VerifyReport) failKey(seq int64, keyID, format string, args ...any) {
	r.otherKey = keyID
	r.record(seq, format, args...)
}

// settle sets WrongKey when another key is the trail's only problem.
func (r *VerifyReport) settle() {
	if !r.OK && !r.broken && r.otherKey != "" {
		r.WrongKey = r.otherKey
	}
}

func (r *VerifyReport) fail(seq int64, format string, args ...any) {
	r.broken = true
	r.record(seq, format, args...)
}

func (r *VerifyReport) record(seq int64, format string, args ...any) {
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
	selectCheckpoints = `SELECT ` + checkpointColumns + ` FROM audit_checkpoints ORDER BY id`
	/* Store.VerifyAudit: streamed, so memory stays flat on a long trail. */
	selectAllEvents = `
SELECT seq, txid, at, actor, tenant, operation_id, action, from_state, to_state, detail, hash,
    CASE WHEN tenant = '' THEN (SELECT string_agg(t.tenant, ',' ORDER BY t.tenant) FROM audit_event_tenants t
        WHERE t.seq = audit_events.seq) END AS shown_to
FROM audit_events ORDER BY seq`
	/* Store.VerifyAudit: events of a tenant also shown to others (none should be). */
	selectShownBeyondTenant = `
SELECT DISTINCT t.seq FROM audit_event_tenants t JOIN audit_events e ON e.seq = t.seq WHERE e.tenant <> ''`
	/* Store.VerifyAudit: the reader's events without a tenant of their own
	   (aboutTenants follows). */
	selectEventsAbout = `SELECT seq FROM audit_events WHERE tenant = '' AND `
	/* Store.VerifyAudit: is the break one of the reader's events? (aboutTenants follows) */
	selectEventInScope = `SELECT COUNT(*) FROM audit_events WHERE seq = ? AND `
)

// chain is the checkpoints verification trusts, in id order: the stored
// ones, with a validly signed anchored copy in place of a stored one that
// is missing or differs.
type chain struct {
	cps    []Checkpoint
	ranges [][]seqRange
	// top[i] is the highest seq covered by cps[0..i] (0 if none).
	top []int64
}

// index returns where checkpoint id is in the chain, or where it would go.
func (ch *chain) index(id int64) int {
	return sort.Search(len(ch.cps), func(i int) bool { return ch.cps[i].ID >= id })
}

// firstSeq is the seq to name when checkpoint id is broken or missing: the
// first it covers, or, for a heartbeat or a checkpoint no copy of which is
// left, the first after everything sealed before it.
func (ch *chain) firstSeq(id int64) int64 {
	i := ch.index(id)
	if i < len(ch.cps) && ch.cps[i].ID == id && len(ch.ranges[i]) > 0 {
		return ch.ranges[i][0].lo
	}
	if i == 0 {
		return 1
	}
	return ch.top[i-1] + 1
}

// buildChain merges stored and anchored checkpoints, and checks the anchors:
// each must be signed by pub and held by the database identically.
func buildChain(rep *VerifyReport, stored, anchors []Checkpoint, pub ed25519.PublicKey) *chain {
	byID := make(map[int64]int, len(stored))
	for i := range stored {
		byID[stored[i].ID] = i
	}
	cps := append([]Checkpoint(nil), stored...)
	type anchorProblem struct {
		id  int64
		msg string
	}
	var problems []anchorProblem
	anchors = slices.Clone(anchors) // sorted here, not in the caller's slice
	sort.Slice(anchors, func(i, j int) bool { return anchors[i].ID < anchors[j].ID })
	for i := range anchors {
		a := &anchors[i]
		if i > 0 && anchors[i-1].ID == a.ID {
			if anchors[i-1].Hash != a.Hash {
				problems = append(problems, anchorProblem{a.ID, fmt.Sprintf("two different anchored copies of checkpoint %d", a.ID)})
			}
			continue
		}
		rep.Anchors++
		rep.Anchored = max(rep.Anchored, a.ID)
		// A copy signed by a key since replaced is taken as the stored ones
		// are: checkChain says whether a checkpoint of pub's vouches for it.
		if err := a.Check(pub); err != nil && !namesOtherKey(a, pub) {
			problems = append(problems, anchorProblem{a.ID, fmt.Sprintf("the anchored copy of checkpoint %d is not valid: %v", a.ID, err)})
			continue
		}
		j, ok := byID[a.ID]
		switch {
		case !ok:
			problems = append(problems, anchorProblem{a.ID, fmt.Sprintf("checkpoint %d, anchored outside the database, is missing from it (deleted)", a.ID)})
			cps = append(cps, *a)
		case stored[j].Hash != a.Hash || stored[j].Signature != a.Signature:
			problems = append(problems, anchorProblem{a.ID, fmt.Sprintf("checkpoint %d differs from its anchored copy (rewritten)", a.ID)})
			cps[j] = *a
		}
	}
	sort.Slice(cps, func(i, j int) bool { return cps[i].ID < cps[j].ID })
	ch := &chain{cps: cps, ranges: make([][]seqRange, len(cps)), top: make([]int64, len(cps))}
	var top int64
	for i := range cps {
		rs, _ := parseRanges(cps[i].Seqs) // unreadable: none, named by checkChain
		ch.ranges[i] = rs
		if len(rs) > 0 {
			top = max(top, rs[len(rs)-1].hi)
		}
		ch.top[i] = top
	}
	for _, p := range problems {
		rep.fail(ch.firstSeq(p.id), "%s", p.msg)
	}
	return ch
}

// checkChain checks each checkpoint on its own (signature, counts) and the
// links between them (ids without gaps, each hashing the previous one).
//
// Keys: from the first checkpoint signed by pub (the handover) on, every
// checkpoint must be pub's. One before it naming another key was signed by
// a key since replaced (serve --replace-audit-key): its signature cannot be
// checked here, but the handover checkpoint chains to it by hash, so pub
// vouches for it as it was at the handover: it is carried over (its content
// must still match its hash). A trail no checkpoint of which is pub's was
// checked with the wrong key (WrongKey).
func checkChain(rep *VerifyReport, ch *chain, pub ed25519.PublicKey) {
	id := AuditKeyID(pub)
	handover := slices.IndexFunc(ch.cps, func(c Checkpoint) bool { return c.KeyID == id })
	for i := range ch.cps {
		c := &ch.cps[i]
		first := ch.firstSeq(c.ID)
		want := int64(1)
		if i > 0 {
			want = ch.cps[i-1].ID + 1
		}
		switch {
		case c.ID != want:
			// Named at the first seq after what the checkpoints before
			// the gap cover: where the missing one would have begun.
			rep.fail(ch.firstSeq(want), "checkpoint %d is missing (deleted): checkpoint %d follows %d", want, c.ID, want-1)
		case i > 0 && c.PrevHash != ch.cps[i-1].Hash && ch.cps[i-1].KeyID != id:
			// The one before names another key: the rewritten one is
			// likelier it (re-signed with a key of the forger's) than
			// this, which the key checked with signed.
			p := &ch.cps[i-1]
			rep.fail(ch.firstSeq(p.ID), "checkpoint %d: it names key %s and is not the one checkpoint %d chains to (rewritten or re-signed)",
				p.ID, p.KeyID, c.ID)
		case i > 0 && c.PrevHash != ch.cps[i-1].Hash, i == 0 && c.PrevHash != "":
			rep.fail(first, "checkpoint %d does not chain to checkpoint %d", c.ID, c.ID-1)
		}
		switch err := c.Check(pub); {
		case err == nil:
		case namesOtherKey(c, pub) && i < handover:
			rep.Carried++
			if !slices.Contains(rep.RetiredKeys, c.KeyID) {
				rep.RetiredKeys = append(rep.RetiredKeys, c.KeyID)
			}
		case namesOtherKey(c, pub) && handover < 0:
			rep.failKey(first, c.KeyID, "checkpoint %d: %v", c.ID, err)
		case namesOtherKey(c, pub):
			rep.fail(first, "checkpoint %d: %v, after checkpoint %d signed with key %s: if the trail was handed over to key %s "+
				"(serve --replace-audit-key), verify with that key; otherwise it was re-signed", c.ID, err, ch.cps[handover].ID, id, c.KeyID)
		default:
			rep.fail(first, "checkpoint %d: %v", c.ID, err)
		}
		if _, err := parseRanges(c.Seqs); err != nil {
			rep.fail(first, "checkpoint %d: %v", c.ID, err)
		}
		var n int64
		for _, r := range ch.ranges[i] {
			n += r.hi - r.lo + 1
		}
		if n != c.EventCount || int64(len(c.EventHashes)) != 16*n {
			rep.fail(first, "checkpoint %d lists %d events but counts %d", c.ID, n, c.EventCount)
		}
	}
}

// VerifyAudit checks every event's hash, the chain of signed checkpoints,
// that every sealed event is still there, unchanged, with nothing slipped
// in between, and — against opt.Anchors — that the database still holds
// every checkpoint kept outside it. Unless opt.SkipAge, a newest checkpoint
// or an unsealed event older than the sealer's interval allows is reported
// too: the tail may have been removed. It names the first broken sequence
// number. The store reads the rows; verifyChain judges them.
func (s *Store) VerifyAudit(ctx context.Context, opt VerifyOptions) (*VerifyReport, error) {
	if len(opt.PublicKey) != ed25519.PublicKeySize {
		return nil, errors.New("store.VerifyAudit: the audit public key is required")
	}
	var stored []Checkpoint
	if err := s.db.SelectContext(ctx, &stored, selectCheckpoints); err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	if opt.Now.IsZero() {
		opt.Now = s.now()
	}
	if opt.Scope != nil {
		about, args := aboutTenants("", opt.Scope)
		var seqs []int64
		if err := s.db.SelectContext(ctx, &seqs, s.rebind(selectEventsAbout+about), args...); err != nil {
			return nil, fmt.Errorf("store.VerifyAudit: %w", err)
		}
		opt.about = map[int64]bool{}
		for _, seq := range seqs {
			opt.about[seq] = true
		}
	}
	var beyond []int64
	if err := s.db.SelectContext(ctx, &beyond, selectShownBeyondTenant); err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	opt.beyondTenant = map[int64]bool{}
	for _, seq := range beyond {
		opt.beyondTenant[seq] = true
	}
	rows, err := s.db.QueryxContext(ctx, selectAllEvents)
	if err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	defer rows.Close()
	rep, err := verifyChain(stored, scanEvents(rows), opt, s.engine == Postgres)
	if err != nil {
		return nil, fmt.Errorf("store.VerifyAudit: %w", err)
	}
	if opt.Scope != nil && !rep.OK {
		about, args := aboutTenants("", opt.Scope)
		var theirs int
		err := s.db.GetContext(ctx, &theirs, s.rebind(selectEventInScope+about), append([]any{rep.BrokenSeq}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("store.VerifyAudit: %w", err)
		}
		if theirs == 0 {
			rep.Outside, rep.BrokenSeq, rep.Problem = true, 0, ""
		}
	}
	return rep, nil
}

// scanEvents yields the audit events rows holds, one at a time, then any
// error reading them.
func scanEvents(rows *sqlx.Rows) iter.Seq2[*AuditEvent, error] {
	return func(yield func(*AuditEvent, error) bool) {
		for rows.Next() {
			var e AuditEvent
			if err := rows.StructScan(&e); err != nil {
				yield(nil, err)
				return
			}
			if !yield(&e, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// verifyChain checks the audit trail: the stored checkpoints (with
// opt.Anchors), and the events in seq order, streamed so memory stays flat
// on a long trail. It touches no database; the only error it returns is one
// events yields. opt.Now must be set. byTxID says the checkpoints' horizons
// are transaction ids (PostgreSQL), not seqs (SQLite).
func verifyChain(stored []Checkpoint, events iter.Seq2[*AuditEvent, error], opt VerifyOptions, byTxID bool) (*VerifyReport, error) {
	rep := &VerifyReport{OK: true, KeyID: AuditKeyID(opt.PublicKey), Checkpoints: int64(len(stored)), Scoped: opt.Scope != nil}
	ch := buildChain(rep, stored, opt.Anchors, opt.PublicKey)
	checkChain(rep, ch, opt.PublicKey)
	v := newVerifier(rep, ch, opt, byTxID)
	for e, err := range events {
		if err != nil {
			return nil, err
		}
		v.event(e)
	}
	v.finish()
	rep.settle()
	return rep, nil
}

// namesOtherKey reports whether c is intact in content and signed, but
// names another key than pub: whether its signature holds needs that key.
func namesOtherKey(c *Checkpoint, pub ed25519.PublicKey) bool {
	return checkpointHash(c) == c.Hash && c.Signature != "" && c.KeyID != AuditKeyID(pub)
}

// verifier walks the events, in seq order, along the seq ranges the chain's
// checkpoints cover.
type verifier struct {
	rep    *VerifyReport
	ch     *chain
	now    time.Time
	byTxID bool
	// ranges are every checkpoint's seq ranges, sorted; ranges[ip] is the
	// one the walk is in, expect the next seq it must hold.
	ranges  []covered
	ip      int
	expect  int64
	digests []hash.Hash
	// horizon is the newest checkpoint's: an uncovered event below it was
	// slipped into sealed history.
	horizon       int64
	firstUnsealed int64
	// scope is the tenants whose events the report counts (nil: all),
	// with about, theirs without a tenant of their own.
	scope        []string
	about        map[int64]bool
	beyondTenant map[int64]bool
}

// counts says whether the report counts e: one of the reader's tenants'.
func (v *verifier) counts(e *AuditEvent) bool {
	return v.scope == nil || slices.Contains(v.scope, e.Tenant) || v.about[e.Seq]
}

func newVerifier(rep *VerifyReport, ch *chain, opt VerifyOptions, byTxID bool) *verifier {
	cps := ch.cps
	if !opt.SkipAge {
		rep.MaxAge = opt.MaxAge
		if rep.MaxAge <= 0 {
			interval := DefaultSealMax
			if len(cps) > 0 && cps[len(cps)-1].SealMaxMS > 0 {
				interval = time.Duration(cps[len(cps)-1].SealMaxMS) * time.Millisecond
			}
			rep.MaxAge = 2 * interval
		}
	}
	v := &verifier{rep: rep, ch: ch, now: opt.Now, byTxID: byTxID, digests: make([]hash.Hash, len(cps)), scope: opt.Scope, about: opt.about,
		beyondTenant: opt.beyondTenant}
	for i := range cps {
		var off int64
		for _, r := range ch.ranges[i] {
			v.ranges = append(v.ranges, covered{seqRange: r, cp: i, offset: off})
			off += r.hi - r.lo + 1
		}
		v.digests[i] = sha256.New()
	}
	sort.Slice(v.ranges, func(i, j int) bool { return v.ranges[i].lo < v.ranges[j].lo })
	for i := 1; i < len(v.ranges); i++ {
		if v.ranges[i].lo <= v.ranges[i-1].hi {
			rep.fail(v.ranges[i].lo, "seq %d is covered by two checkpoints", v.ranges[i].lo)
		}
	}
	if len(cps) > 0 {
		v.horizon = cps[len(cps)-1].Horizon
	}
	if len(v.ranges) > 0 {
		v.expect = v.ranges[0].lo
	}
	return v
}

func (v *verifier) tooOld(t time.Time) bool {
	return v.rep.MaxAge > 0 && t.Before(v.now.Add(-v.rep.MaxAge))
}

// closeRange leaves the current range: any seq of it not seen is missing.
func (v *verifier) closeRange() {
	if v.expect <= v.ranges[v.ip].hi {
		v.rep.fail(v.expect, "sealed event %d is missing (deleted)", v.expect)
	}
	v.ip++
	if v.ip < len(v.ranges) {
		v.expect = v.ranges[v.ip].lo
	}
}

// event checks the next event: its own hash, then against the checkpoint
// covering it or, if none does, as sealed history or the unsealed tail.
func (v *verifier) event(e *AuditEvent) {
	rep := v.rep
	if v.counts(e) {
		rep.Events++
	}
	if EventHash(e) != e.Hash {
		rep.fail(e.Seq, "event %d does not match its hash (edited or moved)", e.Seq)
	}
	v.shownTo(e)
	for v.ip < len(v.ranges) && v.ranges[v.ip].hi < e.Seq {
		v.closeRange()
	}
	if v.ip < len(v.ranges) && v.ranges[v.ip].lo <= e.Seq {
		r := v.ranges[v.ip]
		if v.expect < e.Seq {
			rep.fail(v.expect, "sealed event %d is missing (deleted)", v.expect)
		}
		cp := &v.ch.cps[r.cp]
		at := 16 * (r.offset + e.Seq - r.lo)
		if at+16 <= int64(len(cp.EventHashes)) && cp.EventHashes[at:at+16] != shortHash(e.Hash) {
			rep.fail(e.Seq, "event %d differs from what checkpoint %d sealed", e.Seq, cp.ID)
		}
		digestAdd(v.digests[r.cp], e.Seq, e.Hash)
		v.expect = e.Seq + 1
		return
	}
	// Not covered by any checkpoint: either newer than the last seal, or
	// slipped into sealed history.
	sealed := e.Seq <= v.horizon
	if v.byTxID {
		sealed = e.TxID < v.horizon
	}
	switch {
	case sealed:
		rep.fail(e.Seq, "event %d was inserted into sealed history", e.Seq)
	case v.tooOld(e.At):
		rep.fail(e.Seq, "event %d (at %s) is older than %s and in no checkpoint: its checkpoint was removed, or the sealer has stopped",
			e.Seq, e.At.Format(time.RFC3339), rep.MaxAge)
		fallthrough
	default:
		if v.counts(e) {
			rep.Unsealed++
		}
		if v.firstUnsealed == 0 {
			v.firstUnsealed = e.Seq
		}
	}
}

// shownTo checks who e is shown to beyond its own tenant
// (audit_event_tenants) against what its detail says, under its hash
// (appendUserEvent): a tenant struck off hides the event from that
// tenant's managers, one added shows it to another tenant's. An event
// about a user written before the detail said so cannot be checked; any
// other event shown to tenants is tampered with (userEventActions).
func (v *verifier) shownTo(e *AuditEvent) {
	listed := ""
	if e.ShownTo != nil {
		// In Go's order, as the detail's: the database's collation
		// (ICU on some servers) may sort them otherwise.
		ts := strings.Split(*e.ShownTo, ",")
		slices.Sort(ts)
		listed = strings.Join(ts, ",")
	}
	switch said, ok := shownTo(e.Detail); {
	case v.beyondTenant[e.Seq]:
		v.rep.fail(e.Seq, "event %d, of tenant %s, is shown to other tenants too (audit_event_tenants)", e.Seq, e.Tenant)
	case e.ShownTo != nil && !userEventActions[e.Action]:
		v.rep.fail(e.Seq, "event %d (%s) is not about a user, yet is shown to tenants [%s] (audit_event_tenants)", e.Seq, e.Action, listed)
	case ok && e.Tenant == "" && said != listed:
		v.rep.fail(e.Seq, "event %d is shown to other tenants than it names: [%s], not [%s] (audit_event_tenants)", e.Seq, listed, said)
	}
}

// finish checks what the events left: sealed seqs never seen, each
// checkpoint's digest, and the newest checkpoint's age.
func (v *verifier) finish() {
	rep, ch, cps := v.rep, v.ch, v.ch.cps
	for v.ip < len(v.ranges) {
		v.closeRange()
	}
	for i := range cps {
		if hex.EncodeToString(v.digests[i].Sum(nil)) != cps[i].EventsDigest {
			first, last := ch.firstSeq(cps[i].ID), ch.top[i]
			if !rep.OK && rep.BrokenSeq >= first && rep.BrokenSeq <= last {
				continue // an event of this checkpoint is already named
			}
			rep.fail(first, "events of checkpoint %d do not match its digest", cps[i].ID)
		}
	}
	if n := len(cps); n > 0 && v.tooOld(cps[n-1].SealedAt) {
		// The sealer writes a checkpoint at least every interval; a newest
		// one this old means later ones (and their events) may be gone.
		seq := v.firstUnsealed
		if seq == 0 {
			seq = ch.top[n-1] + 1
		}
		rep.fail(seq, "the newest checkpoint (%d, sealed %s) is older than %s: the tail after it may have been removed, or Limbo is not running: verify against --anchor",
			cps[n-1].ID, cps[n-1].SealedAt.Format(time.RFC3339), rep.MaxAge)
	}
}
