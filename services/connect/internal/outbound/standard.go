package outbound

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (standardwebhooks.com): the headers and signature scheme that receivers'
// libraries already verify. The signed content is "<webhook-id>.<webhook-timestamp>.<body>", so
// the id is signed too: a captured delivery cannot be replayed under a fresh id.
const (
	// IDHeader is the message id: the same on every attempt of one message, so receivers
	// drop duplicates.
	IDHeader = "webhook-id"
	// TimestampHeader is the attempt's time in Unix seconds.
	TimestampHeader = "webhook-timestamp"
	// StandardSignatureHeader holds "v1,<base64 HMAC-SHA-256>" per signing key, separated by
	// spaces (two during a secret rotation's overlap).
	StandardSignatureHeader = "webhook-signature"
	// SecretPrefix starts a Standard Webhooks secret: "whsec_" and the base64 of the key.
	SecretPrefix = "whsec_"
)

// secretBytes is the size of a new key: 32 bytes, HMAC-SHA-256's block-size-friendly key.
const secretBytes = 32

// NewSecret returns a new Standard Webhooks secret, "whsec_" and the base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ErrSecretMalformed is a secret that is not "whsec_<base64>" of at least 24 bytes.
var ErrSecretMalformed = errors.New("webhook: malformed whsec_ secret")

// ParseSecret returns the HMAC key of a "whsec_<base64>" secret.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, ErrSecretMalformed
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 24 {
		return nil, ErrSecretMalformed
	}
	return key, nil
}

// SignStandard returns the webhook-signature value for one message under each key: "v1,<sig>"
// values separated by spaces.
func SignStandard(keys [][]byte, id string, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, "v1,"+base64.StdEncoding.EncodeToString(standardMAC(k, id, t, body)))
	}
	return strings.Join(parts, " ")
}

func standardMAC(key []byte, id, t string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifyStandard checks a message as a receiver does: one v1 signature of the header must be
// the HMAC of id, timestamp and body under key (constant time), and the timestamp within
// tolerance of now (DefaultTolerance when not positive). Receivers should use their language's
// Standard Webhooks library; this is for our own tests and tools.
func VerifyStandard(key []byte, id, timestamp, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(key) == 0 || id == "" || header == "" || len(header) > maxSignatureHeader {
		return ErrSignatureMalformed
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || ts < 0 {
		return ErrSignatureMalformed
	}
	want := standardMAC(key, id, timestamp, body)
	matched := false
	for _, part := range strings.Fields(header) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	return checkTimestamp(ts, now, tolerance)
}
