// Package webhook signs and verifies webhooks the way Standard Webhooks
// (standardwebhooks.com) does: an HMAC-SHA256 over "id.timestamp.body",
// carried in the webhook-id, webhook-timestamp and webhook-signature headers.
//
// Limbo signs its outbound decision webhooks with it, verifies inbound
// destination webhooks with it, and the sandbox destination signs its job
// completion events with it.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names, as Standard Webhooks spells them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret this package prints; Verify and Sign also
// accept the bare base64 form.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook's timestamp may be from now when the
// caller passes no tolerance: old enough to survive a slow queue, young enough
// that a captured request cannot be replayed for long.
const DefaultTolerance = 5 * time.Minute

// Sentinel errors. Callers map them to answers with errors.Is.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent.
	ErrMissingHeaders = errors.New("webhook: missing signature headers")
	// ErrBadTimestamp: webhook-timestamp is not a whole number of Unix
	// seconds written as Sign writes it (decimal digits, no sign, spaces or
	// leading zeros).
	ErrBadTimestamp = errors.New("webhook: bad timestamp")
	// ErrExpired: the timestamp lies outside the tolerance, in the past or the future.
	ErrExpired = errors.New("webhook: timestamp outside tolerance")
	// ErrNoMatch: no v1 signature matches any of the secrets.
	ErrNoMatch = errors.New("webhook: no matching signature")
	// ErrBadSecret: a secret is not valid base64 (with or without "whsec_").
	ErrBadSecret = errors.New("webhook: bad secret")
)

// ParseSecret decodes a secret: "whsec_" followed by base64 of the key bytes,
// or the base64 alone.
func ParseSecret(secret string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimSpace(secret), SecretPrefix)
	if s == "" {
		return nil, ErrBadSecret
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// Some senders drop the padding.
		if key, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSecret, err)
		}
	}
	if len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// NewSecret returns a fresh random secret of 32 key bytes, in "whsec_" form.
func NewSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// Sign returns the signature header value "v1,<base64 HMAC-SHA256>" over
// msgID + "." + unix seconds + "." + body.
func Sign(secret, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := ParseSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, msgID, ts.Unix(), body)), nil
}

// Headers returns the three Standard Webhooks headers for one delivery.
func Headers(secret, msgID string, ts time.Time, body []byte) (http.Header, error) {
	sig, err := Sign(secret, msgID, ts, body)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, 3)
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return h, nil
}

// Verify checks a delivery and returns its message id. The signature header
// may carry several space-separated signatures (the sender rotating its key)
// and several secrets may be given (the receiver rotating); any v1 signature
// matching any secret passes. Entries of other versions are ignored. The
// timestamp must lie within ±tolerance of now (DefaultTolerance when 0).
//
// Verify says nothing about replays within the tolerance: the caller
// deduplicates by the returned message id.
func Verify(secrets []string, h http.Header, body []byte, now time.Time, tolerance time.Duration) (string, error) {
	msgID, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if msgID == "" || tsText == "" || sigs == "" {
		return "", ErrMissingHeaders
	}
	ts, err := parseTimestamp(tsText)
	if err != nil {
		return "", err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare in whole seconds: time.Unix would overflow on absurd values.
	nowSec, tolSec := now.Unix(), int64(tolerance/time.Second)
	if ts < nowSec-tolSec || ts > nowSec+tolSec {
		return "", ErrExpired
	}
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			return "", fmt.Errorf("secret %d: %w", i, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return "", fmt.Errorf("%w: none configured", ErrBadSecret)
	}
	expected := make([][]byte, len(keys))
	for i, key := range keys {
		expected[i] = mac(key, msgID, ts, body)
	}
	for _, entry := range strings.Fields(sigs) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		for _, want := range expected {
			if hmac.Equal(got, want) {
				return msgID, nil
			}
		}
	}
	return "", ErrNoMatch
}

// parseTimestamp reads webhook-timestamp, whose text the signature covers:
// only the digits Sign writes (strconv.FormatInt of a time after 1970) are
// a timestamp. The MAC is computed over the number written back, so a
// looser read ("+1614265330", "01614265330", " 1614265330 ") let a header
// other than the one signed verify.
func parseTimestamp(text string) (int64, error) {
	if text == "" || len(text) > 1 && text[0] == '0' {
		return 0, ErrBadTimestamp
	}
	for i := range len(text) {
		if text[i] < '0' || text[i] > '9' {
			return 0, ErrBadTimestamp
		}
	}
	ts, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, ErrBadTimestamp // beyond int64
	}
	return ts, nil
}

func mac(key []byte, msgID string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
