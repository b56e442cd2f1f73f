package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/store"
)

// auditKeyFlag registers --audit-key (env LIMBO_AUDIT_KEY_FILE).
func auditKeyFlag(fs *flags) *string {
	f := fs.String("audit-key", "", "file holding the audit signing key (or the key itself in LIMBO_AUDIT_KEY; or audit.key_file in the config)")
	fs.bindEnv("audit-key", "LIMBO_AUDIT_KEY_FILE")
	return f
}

// configFlag registers --config (env LIMBO_CONFIG).
func configFlag(fs *flags) *string {
	f := fs.String("config", "", "configuration file; see limbo.example.yaml")
	fs.bindEnv("config", "LIMBO_CONFIG")
	return f
}

func cmdAuditKeygen(args []string, std stdio) error {
	stdout, stderr := std.out, std.err
	fs := newFlagSet("audit keygen", std)
	out := fs.String("out", "", "write the new key to this file (mode 0600; never overwritten); without it the key is printed, for LIMBO_AUDIT_KEY or a secret store")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	k := auditkey.New()
	pub := auditkey.EncodePub(k.Public().(ed25519.PublicKey))
	if *out == "" {
		fmt.Fprintln(stdout, auditkey.Encode(k))
		fmt.Fprintf(stderr, "limbo: new audit key %s; its public key: %s\n", auditkey.ID(k), pub)
		return nil
	}
	if err := auditkey.WriteFile(*out, k); err != nil {
		return err
	}
	fmt.Fprintln(stdout, pub)
	fmt.Fprintf(stderr, "limbo: wrote audit key %s to %s; keep a copy safe: checkpoints signed with it verify only with its public key (above)\n", auditkey.ID(k), *out)
	return nil
}

func cmdAuditPubkey(args []string, std stdio) error {
	stdout, stderr := std.out, std.err
	var s settings
	fs := newFlags("audit pubkey", std, &s)
	keyFile := auditKeyFlag(fs)
	cfgPath := configFlag(fs)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	k, err := auditkey.Find(*keyFile, cfg, *cfgPath, s.DB)
	if err != nil {
		return err
	}
	if k == nil {
		return auditkey.ErrNone(s.DB)
	}
	fmt.Fprintln(stdout, auditkey.EncodePub(k.Key.Public().(ed25519.PublicKey)))
	fmt.Fprintf(stderr, "limbo: audit key %s, from %s\n", auditkey.ID(k.Key), k.Where)
	return nil
}

func cmdAuditVerify(ctx context.Context, args []string, std stdio) (int, error) {
	stdout, stderr := std.out, std.err
	var s settings
	fs := newFlags("audit verify", std, &s)
	keyFile := auditKeyFlag(fs)
	cfgPath := configFlag(fs)
	pubFlag := fs.String("pubkey", "", "the audit public `key`, as \"limbo audit pubkey\" prints it (instead of the key itself)")
	anchorDir := fs.String("anchor", "", "an anchor directory (serve --audit-anchor): prove the database still holds every checkpoint in it, and every event they cover")
	exported := fs.String("checkpoint", "", "a checkpoint `file` exported earlier with \"limbo audit export\", to check against")
	maxAge := fs.Duration("max-age", 0, "how old the newest checkpoint may be before the tail counts as cut off; 0 skips the check, for a stopped server "+
		"(default: twice the sealer interval the checkpoint records; not checked with --anchor or --checkpoint)")
	if help, err := fs.parse(args); err != nil {
		return 2, err
	} else if help {
		return 0, nil
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return 2, err
	}
	// The database first: a mistyped path is "no Limbo database there",
	// not "no audit key beside it".
	st, err := openStore(ctx, s, store.Options{})
	if err != nil {
		return 2, err
	}
	defer st.Close()
	pub, err := auditkey.Public(*pubFlag, *keyFile, cfg, *cfgPath, s.DB)
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
		c, err := anchor.ReadExported(*exported)
		if err != nil {
			return 2, err
		}
		opt.Anchors = append(opt.Anchors, c)
	}
	switch {
	case flagSet(fs, "max-age"):
		if *maxAge < 0 {
			return 2, errors.New("audit verify: --max-age wants a duration such as 2m, or 0 to skip the age check")
		}
		opt.MaxAge, opt.SkipAge = *maxAge, *maxAge == 0
	case len(opt.Anchors) > 0:
		// The anchors prove the trail up to them, whether Limbo runs or not.
		opt.SkipAge = true
	}
	rep, err := st.VerifyAudit(ctx, opt)
	if err != nil {
		return 2, err
	}
	if rep.WrongKey != "" {
		// Not tampering as far as can be told without that key: the
		// checkpoints are intact, and name it.
		return 2, fmt.Errorf("audit verify: wrong key: the trail holds checkpoints signed by key %s, not %s (%s); "+
			"verify with the key that signed them: --audit-key FILE (or LIMBO_AUDIT_KEY_FILE, LIMBO_AUDIT_KEY), or --pubkey as `limbo audit pubkey` prints it. "+
			"If no key of yours is %s, the trail was signed again by someone else", rep.WrongKey, rep.KeyID, rep.Problem, rep.WrongKey)
	}
	if !rep.OK {
		fmt.Fprintln(stderr, rep)
		return 1, nil
	}
	fmt.Fprintln(stdout, rep)
	return 0, nil
}

// flagSet reports whether the command line gave flag name.
func flagSet(fs *flags, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func cmdAuditExport(ctx context.Context, args []string, std stdio) error {
	stdout := std.out
	var s settings
	fs := newFlags("audit export", std, &s)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	st, err := openStore(ctx, s, store.Options{})
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
