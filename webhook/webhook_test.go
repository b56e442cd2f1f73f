package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The published Standard Webhooks test vector.
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = 1614265330
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var vecTime = time.Unix(vecTS, 0)

func vecHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, vecID)
	h.Set(HeaderTimestamp, strconv.Itoa(vecTS))
	h.Set(HeaderSignature, sig)
	return h
}

func TestSignVector(t *testing.T) {
	t.Parallel()
	got, err := Sign(vecSecret, vecID, vecTime, []byte(vecBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != vecSig {
		t.Errorf("Sign = %q, want %q", got, vecSig)
	}
	// The bare base64 form is the same key.
	bare, err := Sign(vecSecret[len(SecretPrefix):], vecID, vecTime, []byte(vecBody))
	if err != nil || bare != vecSig {
		t.Errorf("Sign without prefix = %q, %v", bare, err)
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	h, err := Headers(vecSecret, vecID, vecTime, []byte(vecBody))
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("Webhook-Id") != vecID || h.Get("Webhook-Timestamp") != "1614265330" || h.Get("Webhook-Signature") != vecSig {
		t.Errorf("headers = %v", h)
	}
	id, err := Verify([]string{vecSecret}, h, []byte(vecBody), vecTime, 0)
	if err != nil || id != vecID {
		t.Errorf("Verify(Headers(...)) = %q, %v", id, err)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	other, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	otherSig, err := Sign(other, vecID, vecTime, []byte(vecBody))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		secrets []string
		h       http.Header
		body    string
		now     time.Time
		tol     time.Duration
		want    error
	}{
		{name: "vector", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime},
		{name: "vector at the edge of tolerance", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime.Add(5 * time.Minute)},
		{name: "wrong secret", secrets: []string{other}, h: vecHeaders(vecSig), body: vecBody, now: vecTime, want: ErrNoMatch},
		{name: "tampered body", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: `{"test": 2432232315}`, now: vecTime, want: ErrNoMatch},
		{name: "expired", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime.Add(6 * time.Minute), want: ErrExpired},
		{name: "future", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime.Add(-6 * time.Minute), want: ErrExpired},
		{name: "custom tolerance", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime.Add(6 * time.Minute), tol: 10 * time.Minute},
		{name: "custom tolerance exceeded", secrets: []string{vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime.Add(11 * time.Minute), tol: 10 * time.Minute, want: ErrExpired},
		{name: "missing headers", secrets: []string{vecSecret}, h: http.Header{}, body: vecBody, now: vecTime, want: ErrMissingHeaders},
		{name: "missing signature", secrets: []string{vecSecret}, h: func() http.Header { h := vecHeaders(vecSig); h.Del(HeaderSignature); return h }(), body: vecBody, now: vecTime, want: ErrMissingHeaders},
		{name: "missing id", secrets: []string{vecSecret}, h: func() http.Header { h := vecHeaders(vecSig); h.Del(HeaderID); return h }(), body: vecBody, now: vecTime, want: ErrMissingHeaders},
		{name: "bad timestamp", secrets: []string{vecSecret}, h: func() http.Header { h := vecHeaders(vecSig); h.Set(HeaderTimestamp, "yesterday"); return h }(), body: vecBody, now: vecTime, want: ErrBadTimestamp},
		{name: "garbage signature", secrets: []string{vecSecret}, h: vecHeaders("v1,!!!not-base64!!!"), body: vecBody, now: vecTime, want: ErrNoMatch},
		{name: "no comma", secrets: []string{vecSecret}, h: vecHeaders("g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), body: vecBody, now: vecTime, want: ErrNoMatch},
		{name: "other version ignored", secrets: []string{vecSecret}, h: vecHeaders("v2," + vecSig[3:]), body: vecBody, now: vecTime, want: ErrNoMatch},
		{name: "several signatures, one valid", secrets: []string{vecSecret}, h: vecHeaders("v1,Zm9v " + otherSig + " v1a,xyz " + vecSig), body: vecBody, now: vecTime},
		{name: "several secrets, one valid", secrets: []string{other, vecSecret}, h: vecHeaders(vecSig), body: vecBody, now: vecTime},
		{name: "rotated sender, old receiver secret", secrets: []string{other}, h: vecHeaders(vecSig + " " + otherSig), body: vecBody, now: vecTime},
		{name: "no secrets", secrets: nil, h: vecHeaders(vecSig), body: vecBody, now: vecTime, want: ErrBadSecret},
		{name: "bad secret", secrets: []string{"whsec_%%%"}, h: vecHeaders(vecSig), body: vecBody, now: vecTime, want: ErrBadSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := Verify(tt.secrets, tt.h, []byte(tt.body), tt.now, tt.tol)
			if tt.want == nil {
				if err != nil || id != vecID {
					t.Errorf("Verify = %q, %v; want %q, nil", id, err, vecID)
				}
				return
			}
			if !errors.Is(err, tt.want) || id != "" {
				t.Errorf("Verify = %q, %v; want error %v", id, err, tt.want)
			}
		})
	}
}

// TestVerifyTimestampText: the signature covers webhook-timestamp as sent,
// so only the text Sign writes — decimal digits, no sign, spaces or
// leading zeros — is read. Before, "+1614265330" or " 1614265330 "
// verified with the signature of "1614265330": a header other than the one
// signed passed.
func TestVerifyTimestampText(t *testing.T) {
	t.Parallel()
	for _, ts := range []string{"+1614265330", "01614265330", "001614265330", " 1614265330", "1614265330 ", " 1614265330 ",
		"\t1614265330", "1614265330\n", "1_614_265_330", "1614265330.0", "1.61426533e9", "0x6037d9f2", "-1614265330", "-0",
		"１６１４２６５３３０", "99999999999999999999"} {
		h := vecHeaders(vecSig)
		h[http.CanonicalHeaderKey(HeaderTimestamp)] = []string{ts}
		if id, err := Verify([]string{vecSecret}, h, []byte(vecBody), vecTime, 0); !errors.Is(err, ErrBadTimestamp) {
			t.Errorf("webhook-timestamp %q: Verify = %q, %v; want ErrBadTimestamp", ts, id, err)
		}
	}
	// "0" is a number as written (and long expired).
	h := vecHeaders(vecSig)
	h.Set(HeaderTimestamp, "0")
	if _, err := Verify([]string{vecSecret}, h, []byte(vecBody), vecTime, 0); !errors.Is(err, ErrExpired) {
		t.Errorf("webhook-timestamp \"0\": %v, want ErrExpired", err)
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "whsec_", "whsec_***", "not base64!"} {
		if _, err := ParseSecret(s); !errors.Is(err, ErrBadSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrBadSecret", s, err)
		}
	}
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseSecret(s)
	if err != nil || len(key) != 32 {
		t.Errorf("ParseSecret(NewSecret()) = %d bytes, %v", len(key), err)
	}
	if _, err := Sign("***", vecID, vecTime, nil); !errors.Is(err, ErrBadSecret) {
		t.Errorf("Sign with a bad secret = %v", err)
	}
}

// FuzzVerify checks that Verify never panics and never accepts a signature
// that is not the real HMAC of what it was given.
func FuzzVerify(f *testing.F) {
	f.Add(vecID, "1614265330", vecSig, []byte(vecBody))
	f.Add("", "", "", []byte(nil))
	f.Add(vecID, "-9223372036854775808", vecSig, []byte(vecBody))
	f.Add(vecID, "9223372036854775807", "v1,", []byte("{}"))
	f.Add("a.b.c", "+1614265330", "v1,=== v1 v1,, ,", []byte("x"))
	f.Add(vecID, "+1614265330", vecSig, []byte(vecBody))
	f.Add(vecID, " 01614265330 ", vecSig, []byte(vecBody))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		got, err := Verify([]string{vecSecret}, h, body, vecTime, 0)
		if err != nil {
			return
		}
		if got != h.Get(HeaderID) {
			t.Fatalf("Verify returned id %q for header %q", got, h.Get(HeaderID))
		}
		n, perr := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
		if perr != nil || strconv.FormatInt(n, 10) != h.Get(HeaderTimestamp) {
			t.Fatalf("accepted timestamp %q, which is not the text Sign writes", h.Get(HeaderTimestamp))
		}
		want, _ := Sign(vecSecret, got, time.Unix(n, 0), body)
		wantMAC, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(want, "v1,"))
		for _, entry := range strings.Fields(h.Get(HeaderSignature)) {
			if enc, ok := strings.CutPrefix(entry, "v1,"); ok {
				if mac, err := base64.StdEncoding.DecodeString(enc); err == nil && bytes.Equal(mac, wantMAC) {
					return
				}
			}
		}
		t.Fatalf("accepted %q, real signature is %q", sig, want)
	})
}
