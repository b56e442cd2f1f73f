// Package auditkey holds the audit signing keys. Checkpoints are signed with an Ed25519 key that lives
// outside the database, so whoever can write the database cannot forge
// one. A key is one line of text, versioned:
//
//	limbo-audit-key-v1:<base64 of the 32-byte Ed25519 seed>
//
// in a file of mode 0600 (--audit-key FILE, env LIMBO_AUDIT_KEY_FILE, or
// audit.key_file in the config) or in the environment (LIMBO_AUDIT_KEY).
// Its public half prints as limbo-audit-pub-v1:<base64 of 32 bytes>.
package auditkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

const (
	KeyPrefix = "limbo-audit-key-v1:"
	PubPrefix = "limbo-audit-pub-v1:"
)

// Encode is the key's one line of text.
func Encode(k ed25519.PrivateKey) string {
	return KeyPrefix + base64.StdEncoding.EncodeToString(k.Seed())
}

// Decode reads a key's line of text.
func Decode(s string) (ed25519.PrivateKey, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), KeyPrefix)
	if !ok {
		return nil, fmt.Errorf("not a Limbo audit key (want %s…)", KeyPrefix)
	}
	seed, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("a Limbo audit key holds 32 bytes in base64")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// EncodePub is the public key's line of text.
func EncodePub(p ed25519.PublicKey) string {
	return PubPrefix + base64.StdEncoding.EncodeToString(p)
}

// DecodePub reads a public key's line of text.
func DecodePub(s string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), PubPrefix)
	if !ok {
		return nil, fmt.Errorf("not a Limbo audit public key (want %s…, as `limbo audit pubkey` prints)", PubPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("a Limbo audit public key holds 32 bytes in base64")
	}
	return ed25519.PublicKey(b), nil
}

// ReadFile reads a key file, refusing one that others may read: a
// key anyone can read signs anything.
func ReadFile(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit key %s is open to other users (mode %04o): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	k, err := Decode(string(data))
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	return k, nil
}

// WriteFile writes a new key to path, mode 0600, and fsyncs it. It
// never replaces an existing file: a lost key cannot be recovered, and
// every checkpoint signed with it would stop verifying.
func WriteFile(path string, k ed25519.PrivateKey) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("audit key %s already exists; it is never overwritten", path)
	} else if err != nil {
		return fmt.Errorf("audit key: %w", err)
	}
	if _, err := f.WriteString(Encode(k) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("audit key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("audit key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("audit key: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("audit key: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// New makes a fresh key.
func New() ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return k
}

// Key is the signing key in use and where it came from.
type Key struct {
	Key       ed25519.PrivateKey
	Where     string // the file or variable it was read from
	Generated bool   // made just now, to be kept at Where (Write)
}

// Write keeps a generated key at Where, never replacing a file there.
func (k *Key) Write() error { return WriteFile(k.Where, k.Key) }

// BesideDatabase is where serve keeps a generated key for a SQLite
// database: next to its file, "" for PostgreSQL.
func BesideDatabase(dbURL string) string {
	// The file the store opens, not the URL's text: with a query
	// ("?_busy_timeout=5000") or //localhost/ the key would be looked for,
	// and written, somewhere else than beside it.
	path := store.SQLiteFile(dbURL)
	if path == "" {
		return ""
	}
	return path + ".audit-key"
}

// Find resolves the configured audit key: the file named by
// --audit-key (or LIMBO_AUDIT_KEY_FILE), else by audit.key_file in the
// config (relative to the config file); or LIMBO_AUDIT_KEY — not together
// with a file, since two keys would be ambiguous. Failing those, a SQLite
// database's key beside its file. It returns nil, nil when no key is found;
// serve then makes one (Beside).
func Find(flagFile string, cfg *review.Config, cfgPath, dbURL string) (*Key, error) {
	file, env := flagFile, os.Getenv("LIMBO_AUDIT_KEY")
	if file == "" && cfg != nil {
		file = BesideConfig(cfg.Audit.KeyFile, cfgPath)
	}
	switch {
	case file != "" && env != "":
		return nil, fmt.Errorf("audit key: both a key file (%s) and LIMBO_AUDIT_KEY are set; keep one", file)
	case file != "":
		k, err := ReadFile(file)
		if err != nil {
			return nil, err
		}
		return &Key{Key: k, Where: file}, nil
	case env != "":
		k, err := Decode(env)
		if err != nil {
			return nil, fmt.Errorf("LIMBO_AUDIT_KEY: %w", err)
		}
		return &Key{Key: k, Where: "LIMBO_AUDIT_KEY"}, nil
	}
	beside := BesideDatabase(dbURL)
	if beside == "" {
		return nil, nil
	}
	k, err := ReadFile(beside)
	switch {
	case err == nil:
		return &Key{Key: k, Where: beside}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	}
	return nil, err
}

// Beside makes a new key for a SQLite database, to keep beside its file
// (nil for PostgreSQL). It is not written yet: serve writes it (Key.Write)
// only once the database has shown it holds no checkpoint signed by
// another key, so a database moved without its key file is refused, not
// given a second key that breaks its trail.
func Beside(dbURL string) *Key {
	path := BesideDatabase(dbURL)
	if path == "" {
		return nil
	}
	return &Key{Key: New(), Where: path, Generated: true}
}

// ErrNone explains how to give serve or verify a key.
func ErrNone(dbURL string) error {
	if strings.HasPrefix(dbURL, "sqlite:") && BesideDatabase(dbURL) == "" {
		// Not PostgreSQL's advice: the URL names no file to open, which
		// the store says better than a missing key would.
		return fmt.Errorf("no audit key, and %s names no SQLite database file to keep one beside: write sqlite:PATH, such as sqlite:/var/lib/limbo/limbo.db", dbURL)
	}
	if BesideDatabase(dbURL) == "" {
		return errors.New("no audit signing key: instances on one PostgreSQL must share one, so Limbo does not make it up; " +
			"run `limbo audit keygen --out FILE` once and pass --audit-key FILE to every instance " +
			"(or set LIMBO_AUDIT_KEY_FILE, audit.key_file in the config, or LIMBO_AUDIT_KEY)")
	}
	return fmt.Errorf("no audit key: none configured and none beside the database (%s); "+
		"pass --audit-key FILE, or --pubkey KEY as `limbo audit pubkey` prints it", BesideDatabase(dbURL))
}

// BesideConfig resolves a path from the config file: relative to the
// file's directory, so the config means the same from any working directory.
func BesideConfig(path, cfgPath string) string {
	if path == "" || filepath.IsAbs(path) || cfgPath == "" {
		return path
	}
	return filepath.Join(filepath.Dir(cfgPath), path)
}

// ID names a key in messages.
func ID(k ed25519.PrivateKey) string { return store.AuditKeyID(k.Public().(ed25519.PublicKey)) }

// Public finds the public key to verify with: pub as `limbo audit pubkey`
// prints it, or the public half of the key serve would use (never
// generated here).
func Public(pub, keyFile string, cfg *review.Config, cfgPath, dbURL string) (ed25519.PublicKey, error) {
	if pub != "" {
		if keyFile != "" {
			return nil, errors.New("audit verify: --pubkey and --audit-key name two keys; keep one")
		}
		return DecodePub(pub)
	}
	k, err := Find(keyFile, cfg, cfgPath, dbURL)
	if err != nil {
		return nil, err
	}
	if k == nil && BesideDatabase(dbURL) == "" {
		// Not serve's advice (make a key): a new key verifies nothing
		// already sealed.
		return nil, errors.New("no audit key to verify with: pass --pubkey KEY, as `limbo audit pubkey` prints it where the instances' key is, " +
			"or --audit-key FILE, that key (or set LIMBO_AUDIT_KEY_FILE, audit.key_file in the config, or LIMBO_AUDIT_KEY)")
	}
	if k == nil {
		return nil, ErrNone(dbURL)
	}
	return k.Key.Public().(ed25519.PublicKey), nil
}
