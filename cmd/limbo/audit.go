package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// auditKeyFlag registers --audit-key (env LIMBO_AUDIT_KEY_FILE).
func auditKeyFlag(fs *flag.FlagSet) *string {
	return fs.String("audit-key", envOr("LIMBO_AUDIT_KEY_FILE", ""),
		"file holding the audit signing key (env LIMBO_AUDIT_KEY_FILE; or the key itself in LIMBO_AUDIT_KEY; or audit.key_file in the config)")
}

// configFlag registers --config (env LIMBO_CONFIG).
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", envOr("LIMBO_CONFIG", ""), "configuration file (env LIMBO_CONFIG); see limbo.example.yaml")
}

func cmdAuditKeygen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the new key to this file (mode 0600; never overwritten); without it the key is printed, for LIMBO_AUDIT_KEY or a secret store")
	if err := parse(fs, args); err != nil {
		return err
	}
	k := newAuditKey()
	pub := encodeAuditPub(k.Public().(ed25519.PublicKey))
	if *out == "" {
		fmt.Fprintln(stdout, encodeAuditKey(k))
		fmt.Fprintf(stderr, "limbo: new audit key %s; its public key: %s\n", keyID(k), pub)
		return nil
	}
	if err := writeAuditKeyFile(*out, k); err != nil {
		return err
	}
	fmt.Fprintln(stdout, pub)
	fmt.Fprintf(stderr, "limbo: wrote audit key %s to %s; keep a copy safe: checkpoints signed with it verify only with its public key (above)\n", keyID(k), *out)
	return nil
}

func cmdAuditPubkey(args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlags("audit pubkey", stderr, &s)
	keyFile := auditKeyFlag(fs)
	cfgPath := configFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	k, err := findAuditKey(*keyFile, cfg, *cfgPath, s.DB, false)
	if err != nil {
		return err
	}
	if k == nil {
		return errNoAuditKey(s.DB)
	}
	fmt.Fprintln(stdout, encodeAuditPub(k.key.Public().(ed25519.PublicKey)))
	fmt.Fprintf(stderr, "limbo: audit key %s, from %s\n", keyID(k.key), k.where)
	return nil
}

// optionalDuration is a duration flag that knows whether it was given.
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return errors.New("want a duration such as 2m, or 0 to skip the age check")
	}
	o.d, o.set = d, true
	return nil
}

func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	var s settings
	fs := newFlags("audit verify", stderr, &s)
	keyFile := auditKeyFlag(fs)
	cfgPath := configFlag(fs)
	pubFlag := fs.String("pubkey", "", "the audit public key, as `limbo audit pubkey` prints it (instead of the key itself)")
	anchorDir := fs.String("anchor", "", "an anchor directory (serve --audit-anchor): prove the database still holds every checkpoint in it, and every event they cover")
	exported := fs.String("checkpoint", "", "a checkpoint exported earlier with `limbo audit export`, to check against")
	var maxAge optionalDuration
	fs.Var(&maxAge, "max-age", "how old the newest checkpoint may be before the tail counts as cut off; 0 skips the check, for a stopped server "+
		"(default: twice the sealer interval the checkpoint records; not checked with --anchor or --checkpoint)")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	pub, err := verifyKey(*pubFlag, *keyFile, *cfgPath, s.DB)
	if err != nil {
		return 2, err
	}
	opt := store.VerifyOptions{PublicKey: pub}
	if *anchorDir != "" {
		if opt.Anchors, err = anchor.Read(*anchorDir); err != nil {
			return 2, err
		}
		if len(opt.Anchors) == 0 {
			return 2, fmt.Errorf("audit verify: %s holds no anchored checkpoint", *anchorDir)
		}
	}
	if *exported != "" {
		data, err := os.ReadFile(*exported)
		if err != nil {
			return 2, err
		}
		var c store.Checkpoint
		if err := json.Unmarshal(data, &c); err != nil {
			return 2, fmt.Errorf("audit verify: %s: %w", *exported, err)
		}
		opt.Anchors = append(opt.Anchors, c)
	}
	switch {
	case maxAge.set:
		opt.MaxAge, opt.SkipAge = maxAge.d, maxAge.d == 0
	case len(opt.Anchors) > 0:
		// The anchors prove the trail up to them, whether Limbo runs or not.
		opt.SkipAge = true
	}
	st, err := store.Open(ctx, s.DB, store.Options{})
	if err != nil {
		return 2, err
	}
	defer st.Close()
	rep, err := st.VerifyAudit(ctx, opt)
	if err != nil {
		return 2, err
	}
	if !rep.OK {
		fmt.Fprintf(stderr, "audit chain broken at seq %d: %s\n", rep.BrokenSeq, rep.Problem)
		return 1, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "audit chain holds: %d events, %d checkpoints, %d not yet sealed; signed by key %s",
		rep.Events, rep.Checkpoints, rep.Unsealed, rep.KeyID)
	if rep.Anchors > 0 {
		fmt.Fprintf(&b, "; complete up to anchored checkpoint %d (%d anchors checked)", rep.Anchored, rep.Anchors)
	}
	if rep.MaxAge > 0 {
		fmt.Fprintf(&b, "; newest checkpoint younger than %s", rep.MaxAge)
	} else {
		b.WriteString("; age not checked")
	}
	fmt.Fprintln(stdout, b.String())
	return 0, nil
}

// verifyKey finds the public key to verify with: --pubkey, or the public
// half of the key serve would use (never generated here).
func verifyKey(pubFlag, keyFile, cfgPath, dbURL string) (ed25519.PublicKey, error) {
	if pubFlag != "" {
		if keyFile != "" {
			return nil, errors.New("audit verify: --pubkey and --audit-key name two keys; keep one")
		}
		return decodeAuditPub(pubFlag)
	}
	var cfg *review.Config
	if cfgPath != "" {
		var err error
		if cfg, err = loadConfig(cfgPath); err != nil {
			return nil, err
		}
	}
	k, err := findAuditKey(keyFile, cfg, cfgPath, dbURL, false)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, errNoAuditKey(dbURL)
	}
	return k.key.Public().(ed25519.PublicKey), nil
}

func cmdAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlags("audit export", stderr, &s)
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := store.Open(ctx, s.DB, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := st.LatestCheckpoint(ctx)
	if err != nil {
		return err
	}
	if c == nil {
		return errors.New("audit export: no checkpoint yet")
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}
