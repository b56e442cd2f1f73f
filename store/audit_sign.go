package store

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// DefaultSealMax is how often the sealer writes a checkpoint at the least,
// even when no event happened, unless Options.AuditSealMax says otherwise.
const DefaultSealMax = 60 * time.Second

// ErrNoAuditKey: the store was opened without a signing key, so it cannot
// seal (it can still verify with a public key).
var ErrNoAuditKey = errors.New("store: no audit signing key: the store cannot seal the audit trail")

// signingPrefix separates checkpoint signatures from anything else the same
// key might ever sign.
const signingPrefix = "limbo-audit-checkpoint-v1:"

// AuditKeyID is a short fingerprint of an audit public key: the first 16
// hex digits of its SHA-256. Checkpoints carry it so a reader can tell at a
// glance which key signed them.
func AuditKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])[:16]
}

// AuditPublicKey is the public half of the store's signing key (nil when
// the store has none).
func (s *Store) AuditPublicKey() ed25519.PublicKey { return s.auditPub }

// SealMax is the sealer's interval: a checkpoint at least this often.
func (s *Store) SealMax() time.Duration { return s.sealMax }

// sign fills c's key id, hash and signature. The key id is part of the
// hashed content, so it cannot be swapped without breaking the signature.
func (s *Store) sign(c *Checkpoint) error {
	if s.auditKey == nil {
		return ErrNoAuditKey
	}
	signCheckpoint(c, s.auditKey)
	return nil
}

// signCheckpoint fills c's key id, hash and signature with key.
func signCheckpoint(c *Checkpoint, key ed25519.PrivateKey) {
	c.KeyID = AuditKeyID(key.Public().(ed25519.PublicKey))
	c.Hash = checkpointHash(c)
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(signingPrefix+c.Hash)))
}

// NamesOtherKey reports whether c is intact in content (its hash matches)
// and signed, but names another key than pub: a checkpoint of a key the
// trail was handed over from (serve --replace-audit-key), whose signature
// only that key can check. Verification carries such checkpoints over
// when they come before pub's first one (VerifyReport.Carried).
func (c *Checkpoint) NamesOtherKey(pub ed25519.PublicKey) bool { return namesOtherKey(c, pub) }

// Check reports whether c is intact and signed by pub: its hash matches its
// content and its signature is pub's over that hash.
func (c *Checkpoint) Check(pub ed25519.PublicKey) error {
	if checkpointHash(c) != c.Hash {
		return errors.New("its content does not match its hash")
	}
	if c.Signature == "" {
		return errors.New("it is not signed")
	}
	if want := AuditKeyID(pub); c.KeyID != want {
		return fmt.Errorf("it names key %q, not %s", c.KeyID, want)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || !ed25519.Verify(pub, []byte(signingPrefix+c.Hash), sig) {
		return fmt.Errorf("its signature is not key %s's", AuditKeyID(pub))
	}
	return nil
}
