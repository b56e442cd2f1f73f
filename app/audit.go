package app

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"time"

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
// a SQLite database gets one generated beside it (and the log says where,
// with its public key); PostgreSQL refuses to start, since every instance
// must sign with the same key.
func ResolveAudit(cfg *review.Config, cfgPath, dbURL, keyFile, anchorDir string, sealMax time.Duration, log *slog.Logger) (*Audit, error) {
	k, err := auditkey.Find(keyFile, cfg, cfgPath, dbURL, true)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, fmt.Errorf("serve: %w", auditkey.ErrNone(dbURL))
	}
	if k.Generated {
		log.Warn("generated an audit signing key beside the database; keep a copy outside this machine, or pass --audit-key",
			"file", k.Where, "key_id", auditkey.ID(k.Key), "public_key", auditkey.EncodePub(k.Key.Public().(ed25519.PublicKey)))
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
