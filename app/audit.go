package app

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// Audit is how a server signs and anchors the audit trail.
type Audit struct {
	Key       *auditkey.Key
	AnchorDir string
	SealMax   time.Duration
}

// ResolveAudit settles the audit settings: flags (keyFile, anchorDir,
// sealMax) first, then the configuration file at cfgPath. Without a key,
// a SQLite database gets a new one, which Keep writes beside it once New
// has checked the trail is not another key's; PostgreSQL refuses to
// start, since every instance must sign with the same key.
func ResolveAudit(cfg *review.Config, cfgPath, dbURL, keyFile, anchorDir string, sealMax time.Duration) (*Audit, error) {
	k, err := auditkey.Find(keyFile, cfg, cfgPath, dbURL)
	if err != nil {
		return nil, err
	}
	if k == nil {
		k = auditkey.Beside(dbURL)
	}
	if k == nil {
		return nil, fmt.Errorf("serve: %w", auditkey.ErrNone(dbURL))
	}
	a := &Audit{Key: k, AnchorDir: anchorDir, SealMax: sealMax}
	if a.AnchorDir == "" {
		a.AnchorDir = auditkey.BesideConfig(cfg.Audit.AnchorDir, cfgPath)
	}
	if a.SealMax == 0 {
		a.SealMax = cfg.Audit.SealMax
	}
	if a.SealMax == 0 {
		a.SealMax = store.DefaultSealMax
	}
	if a.SealMax < review.MinSealMax {
		return nil, fmt.Errorf("serve: --audit-seal-max must be at least %s", review.MinSealMax)
	}
	return a, nil
}

// From says where the key came from, for Config.AuditKeyFrom.
func (a *Audit) From() string {
	if a.Key.Generated {
		return "a new key: none was configured, and none was beside the database at " + a.Key.Where
	}
	return a.Key.Where
}

// Keep writes a key generated for a SQLite database beside it (and the log
// says where, with its public key). Serve calls it after New, which has
// refused a database whose trail another key signed, and before Start,
// whose sealer signs with it.
func (a *Audit) Keep(log *slog.Logger) error {
	if !a.Key.Generated {
		return nil
	}
	if err := a.Key.Write(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Warn("generated an audit signing key beside the database; keep a copy outside this machine, or pass --audit-key",
		"file", a.Key.Where, "key_id", auditkey.ID(a.Key.Key), "public_key", auditkey.EncodePub(a.Key.Key.Public().(ed25519.PublicKey)))
	return nil
}

// ErrWrongAuditKey: the key a server would sign with is not the one that
// signed the audit trail so far.
var ErrWrongAuditKey = errors.New("wrong audit key")

// checkAuditKey refuses to sign with another key than the one the newest
// checkpoint names (a database moved without its key file, a typo in
// --audit-key): the new checkpoints would chain to the old ones under a
// key nobody meant. With replace it hands the trail over instead, audited.
func checkAuditKey(ctx context.Context, st *store.Store, key ed25519.PrivateKey, from string, replace bool, anchorDir string, log *slog.Logger) error {
	if key == nil {
		return nil
	}
	c, err := st.LatestCheckpoint(ctx)
	if err != nil || c == nil {
		return err
	}
	id := auditkey.ID(key)
	if c.KeyID == id {
		return nil
	}
	if replace {
		// The way out when the key that signed the trail is lost or must
		// be retired: asked for by name, and audited before the first
		// checkpoint of the new key seals the event.
		err := anchoredBy(anchorDir, id)
		if err == nil {
			err = st.HandOverAudit(ctx, c.KeyID, c.ID)
		}
		if errors.Is(err, store.ErrKeySignedBefore) {
			return fmt.Errorf("%w: key %s signed checkpoints of this trail before key %s's (the newest, %d); a trail is handed over "+
				"only to a key that never signed it. If no key of yours is %s, the newest checkpoints were rewritten: that is "+
				"tampering (limbo audit verify says where), not a lost key", ErrWrongAuditKey, id, c.KeyID, c.ID, c.KeyID)
		}
		if err != nil {
			return err
		}
		log.Warn("the audit key is replaced: checkpoints from now on are signed with the new key; audit verify with it carries the earlier ones over",
			"previous_key_id", c.KeyID, "key_id", id)
		return nil
	}
	if from == "" {
		from = "as configured"
	}
	return fmt.Errorf("%w: the database's audit trail is signed by key %s (its newest checkpoint, %d, names it), "+
		"but this server would sign with key %s (%s); its checkpoints would break the trail for both keys. "+
		"Start it with the key file that signed the trail: --audit-key FILE (or LIMBO_AUDIT_KEY_FILE, audit.key_file, "+
		"or the key itself in LIMBO_AUDIT_KEY); `limbo audit pubkey --audit-key FILE` names a file's key. "+
		"If key %[2]s is one you held and lost (or must retire), --replace-audit-key hands the trail over to this key, audited; "+
		"stop the instances signing with %[2]s first. If you never held %[2]s, do not: the trail was re-signed by someone else",
		ErrWrongAuditKey, c.KeyID, c.ID, id, from)
}

// anchoredBy refuses a handover to key id when the anchor directory holds a
// checkpoint it signed: the key signed the trail before, and the database,
// whose checkpoints now name another, was rewritten (the rows are gone, the
// anchors are not).
func anchoredBy(dir, id string) error {
	if dir == "" {
		return nil
	}
	anchors, err := anchor.Read(dir)
	if err != nil {
		return err
	}
	for _, a := range anchors {
		if a.KeyID == id {
			return store.ErrKeySignedBefore
		}
	}
	return nil
}
