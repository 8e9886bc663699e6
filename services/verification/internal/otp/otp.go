// Package otp makes and checks one-time codes to OWASP ASVS 5.0 V6.6
// (docs/architecture.md#verification-workflows): digits from crypto/rand without modulo bias,
// kept only as a keyed hash bound to what the code is for, compared in constant time, short-lived,
// a bounded number of attempts, and resends held to a cooldown and a cap.
//
// A Code prints as "[code]" however it is printed (fmt, JSON, zap's reflection, slog), so a code
// that strays into a log line, an answer or an event says nothing; only Digits gives the digits,
// for the one place that needs them: the message handed to the SMS provider.
package otp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

// MinLength and MaxLength bound a code's length (the policy's codeLength).
const (
	MinLength = 4
	MaxLength = 10
)

// Purpose is what the hash key is derived for from the service's data keys.
const Purpose = "mnv.otp.v1"

const redacted = "[code]"

// Code is a one-time code, made by Generate or typed by a user (Parse). Its zero value is the
// empty code, which matches nothing.
type Code struct{ digits string }

// Generate returns a fresh code of n digits (MinLength to MaxLength). Each digit string is
// equally likely: the value is drawn uniformly below 10^n by rand.Int (rejection sampling, no
// modulo bias) and zero-padded.
func Generate(n int) (Code, error) {
	if n < MinLength || n > MaxLength {
		return Code{}, fmt.Errorf("otp: length %d outside %d-%d", n, MinLength, MaxLength)
	}
	max := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
	v, err := rand.Int(rand.Reader, max)
	if err != nil {
		return Code{}, fmt.Errorf("otp: %w", err)
	}
	return Code{digits: fmt.Sprintf("%0*s", n, v.String())}, nil
}

// Parse takes a code as a user typed it. Anything is accepted: a code that is not digits, or
// not the expected length, simply never matches, and counts as an attempt like any wrong code
// (a separate error would tell a guesser the length for free).
func Parse(s string) Code { return Code{digits: s} }

// Digits is the code itself. Call it only to hand the code to the channel that delivers it.
func (c Code) Digits() string { return c.digits }

// String, GoString, Format, MarshalJSON, MarshalText and LogValue keep the digits out of
// everything that prints a value.
func (c Code) String() string               { return redacted }
func (c Code) GoString() string             { return redacted }
func (c Code) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte(redacted)) }
func (c Code) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (c Code) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (c Code) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (c Code) IsZero() bool                 { return c.digits == "" }
func (c *Code) UnmarshalJSON(b []byte) error {
	return errors.New("otp: a code is never decoded from JSON")
}
func (c *Code) UnmarshalText(b []byte) error {
	return errors.New("otp: a code is never decoded from text")
}
func (c Code) equalLen(n int) bool { return len(c.digits) == n }
func (c Code) isDigits() bool      { return isDigits(c.digits) }
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Binding is what a code is for: its hash is bound to all of it, so a hash copied to another
// workflow, step or number never matches.
type Binding struct {
	WorkflowID string
	StepID     string
	Number     string // E.164
}

// Hasher keys codes' hashes with keys derived from the service's data keys
// (crypto.Keyring.Derive(Purpose)), never the sealing keys themselves.
type Hasher struct{ keys crypto.DerivedKeys }

// NewHasher returns the Hasher of a keyring.
func NewHasher(k *crypto.Keyring) *Hasher { return &Hasher{keys: k.Derive(Purpose)} }

// Sum is the code's keyed hash under the current key, and that key's id (kept beside the hash,
// so a code made before a key rotation still checks after it).
func (h *Hasher) Sum(c Code, b Binding) (keyID string, sum []byte) {
	return h.keys.Current, mac(h.keys.Keys[h.keys.Current], c, b)
}

// Matches reports, in constant time, whether c is the code hashed as sum under keyID for b.
// An empty code, or a key no longer held, matches nothing.
func (h *Hasher) Matches(c Code, b Binding, keyID string, sum []byte) bool {
	key, ok := h.keys.Keys[keyID]
	if !ok {
		key = h.keys.Keys[h.keys.Current] // same work either way
	}
	got := mac(key, c, b)
	return hmac.Equal(got, sum) && ok && !c.IsZero()
}

// mac is HMAC-SHA-256 over the binding and the code, each length-prefixed so no two different
// (binding, code) pairs give the same input.
func mac(key []byte, c Code, b Binding) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"mnv.otp.v1", b.WorkflowID, b.StepID, b.Number, c.digits} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		m.Write(n[:])
		m.Write([]byte(part))
	}
	return m.Sum(nil)
}

// Rules are a code's limits, from the policy.
type Rules struct {
	Length         int
	TTL            time.Duration
	MaxAttempts    int
	ResendCooldown time.Duration
	MaxResends     int
}

// State is where a workflow's code stands: when the code in play was issued and expires, the
// wrong attempts so far (across resends: a resend never resets them, or each resend would buy
// MaxAttempts more guesses) and the resends made.
type State struct {
	IssuedAt  time.Time
	ExpiresAt time.Time
	Attempts  int
	Resends   int
}

// Outcome is what a check of a code decides.
type Outcome int

// Outcomes of a check.
const (
	// Matched: the code is right and in time; the caller marks it used in the same transaction.
	Matched Outcome = iota + 1
	// Mismatch: a wrong code, attempts left.
	Mismatch
	// Exhausted: a wrong code that used the last attempt; the workflow fails.
	Exhausted
	// Expired: the code's lifetime is over; no attempt is counted.
	Expired
)

// Decide decides a check from whether the code matched (Hasher.Matches, computed before, so
// a right and a wrong code cost the same) and the state it was checked in; it answers the
// attempts after it. An expired code is expired whatever was typed.
func (r Rules) Decide(st State, matched bool, now time.Time) (Outcome, int) {
	switch {
	case !now.Before(st.ExpiresAt):
		return Expired, st.Attempts
	case st.Attempts >= r.MaxAttempts:
		return Exhausted, st.Attempts
	case matched:
		return Matched, st.Attempts
	case st.Attempts+1 >= r.MaxAttempts:
		return Exhausted, st.Attempts + 1
	default:
		return Mismatch, st.Attempts + 1
	}
}

// AttemptsLeft is how many more codes may be tried.
func (r Rules) AttemptsLeft(st State) int { return max(0, r.MaxAttempts-st.Attempts) }

// ErrResendCap is a resend past MaxResends.
var ErrResendCap = errors.New("otp: no resends left")

// CooldownError is a resend before the cooldown ended; RetryAfter is how long is left.
type CooldownError struct{ RetryAfter time.Duration }

func (e *CooldownError) Error() string {
	return fmt.Sprintf("otp: resend allowed in %s", e.RetryAfter.Round(time.Second))
}

// MayResend says whether a new code may be sent now: nil, ErrResendCap or a *CooldownError.
func (r Rules) MayResend(st State, now time.Time) error {
	if st.Resends >= r.MaxResends {
		return ErrResendCap
	}
	if next := st.IssuedAt.Add(r.ResendCooldown); now.Before(next) {
		return &CooldownError{RetryAfter: next.Sub(now)}
	}
	return nil
}

// ResendAt is when the next resend is allowed, zero when none is left.
func (r Rules) ResendAt(st State) time.Time {
	if st.Resends >= r.MaxResends {
		return time.Time{}
	}
	return st.IssuedAt.Add(r.ResendCooldown)
}

// WellFormed says whether c could be a code of these rules (digits, the right length): for
// metrics and tests; a check treats a malformed code as a wrong one.
func (r Rules) WellFormed(c Code) bool { return c.equalLen(r.Length) && c.isDigits() }
