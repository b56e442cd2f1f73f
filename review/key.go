package review

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Key length bounds for caller-supplied idempotency keys.
const (
	MinKeyLen = 16
	MaxKeyLen = 255
)

// KeyPattern is ValidateKey's character rule as a regular expression, for
// the OpenAPI document: printable ASCII without a leading or trailing space.
const KeyPattern = `^[!-~]([ -~]*[!-~])?$`

// DeriveKey is the default idempotency key: SHA-256 over tenant, source_ref,
// action and logical_version. Each field is length-prefixed so that no two
// different tuples can hash the same bytes ("ab"+"c" vs "a"+"bc"). Nothing
// that changes per try (file name, timestamp, random value) goes in, so the
// same intention gets the same key on every retry and a new version a new one.
func DeriveKey(tenant, sourceRef, action, logicalVersion string) string {
	h := sha256.New()
	for _, f := range []string{tenant, sourceRef, action, logicalVersion} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidateKey checks a caller-supplied key: 16–255 printable ASCII
// characters (0x20–0x7E), with no leading or trailing space, since keys travel
// in headers where surrounding whitespace is easily lost.
func ValidateKey(key string) error {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key must be %d–%d characters, got %d", ErrInvalid, MinKeyLen, MaxKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: key must be printable ASCII; byte %d is 0x%02x", ErrInvalid, i, c)
		}
	}
	if key[0] == ' ' || key[len(key)-1] == ' ' {
		return fmt.Errorf("%w: key must not start or end with a space", ErrInvalid)
	}
	return nil
}
