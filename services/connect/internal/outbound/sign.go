package outbound

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery. Receivers read them, so they are part of the API
// (docs/api-decisions.md#crm-delivery, docs/events.md).
const (
	// SignatureHeader carries Sign's value: the timestamp and the HMAC of timestamp and body.
	SignatureHeader = "X-Mnv-Signature"
	// DeliveryIDHeader carries the batch's id, the same on every retry, so that receivers of
	// at-least-once deliveries can drop duplicates.
	DeliveryIDHeader = "X-Mnv-Delivery-Id"
	// AttemptHeader carries the attempt number, 1 for the first try.
	AttemptHeader = "X-Mnv-Delivery-Attempt"
)

// DefaultTolerance is how far a signature's timestamp may be from the receiver's clock when
// Verify is given no tolerance. It absorbs clock skew and slow networks while keeping a
// captured request from being replayed much later.
const DefaultTolerance = 5 * time.Minute

// Errors returned by Verify, so receivers can tell a forged request from a stale one.
var (
	// ErrSignatureMalformed: the header is missing, oversized, or lacks t= or v1=.
	ErrSignatureMalformed = errors.New("webhook: malformed signature header")
	// ErrSignatureMismatch: no v1 signature matches the body with this secret.
	ErrSignatureMismatch = errors.New("webhook: signature does not match")
	// ErrSignatureExpired: the signature is valid but its timestamp is outside the tolerance.
	ErrSignatureExpired = errors.New("webhook: signature timestamp outside tolerance")
)

// maxSignatureHeader bounds the header Verify parses; a real one is under 100 bytes, and a few
// v1 values (during a secret rotation) fit easily.
const maxSignatureHeader = 4096

// Sign returns the SignatureHeader value for body: "t=<unix seconds>,v1=<hex HMAC-SHA-256>"
// where the HMAC, keyed with secret, covers "<unix seconds>." followed by body. Signing the
// timestamp with the body (as Stripe does) binds them, so a receiver that checks the
// timestamp with Verify refuses a captured request replayed later.
func Sign(secret, body []byte, ts time.Time) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(signature(secret, t, body))
}

func signature(secret []byte, t string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a SignatureHeader value as a receiver should: one of its v1 values must be the
// HMAC of its timestamp and body under secret (compared in constant time; several v1 values
// are accepted so a sender can sign with an old and a new secret during a rotation; unknown
// keys are ignored for forward compatibility), and the timestamp must be within tolerance of
// now in either direction (DefaultTolerance when tolerance is not positive: a check that can
// be switched off by a zero value would be). The signature is checked before the timestamp,
// so a forger learns nothing about the clock.
func Verify(secret, body []byte, header string, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return errors.New("webhook: empty signing secret")
	}
	if header == "" || len(header) > maxSignatureHeader {
		return ErrSignatureMalformed
	}
	var (
		t     string
		sigs  [][]byte
		hasTS bool
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrSignatureMalformed
		}
		switch k {
		case "t":
			if hasTS {
				return ErrSignatureMalformed
			}
			hasTS, t = true, v
		case "v1":
			s, err := hex.DecodeString(v)
			if err != nil || len(s) != sha256.Size {
				return ErrSignatureMalformed
			}
			sigs = append(sigs, s)
		}
	}
	if !hasTS || len(sigs) == 0 {
		return ErrSignatureMalformed
	}
	ts, err := strconv.ParseInt(t, 10, 64)
	if err != nil || ts < 0 {
		return ErrSignatureMalformed
	}
	want := signature(secret, t, body)
	matched := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	return checkTimestamp(ts, now, tolerance)
}

// checkTimestamp refuses a signed timestamp (Unix seconds) further than tolerance from now in
// either direction; DefaultTolerance when tolerance is not positive. Both signature schemes
// check it after the signature, so a forger learns nothing about the clock.
func checkTimestamp(ts int64, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureExpired
	}
	return nil
}
