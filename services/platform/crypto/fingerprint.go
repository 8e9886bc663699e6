// Package crypto holds the primitives every service uses for secrets and personal data: keyed
// fingerprints of credentials, random tokens, and the AEAD keyring for data at rest.
package crypto

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// MinPepperLen is the shortest pepper accepted: 32 bytes, the HMAC-SHA-256 block strength.
const MinPepperLen = 32

// Fingerprinter computes keyed fingerprints of secrets (API keys, client secrets, SDK tokens).
// Only fingerprints are stored: a stolen database without the pepper cannot be used to check
// guesses offline, and the high-entropy tokens make a plain lookup by fingerprint safe.
type Fingerprinter struct {
	pepper []byte
}

// NewFingerprinter returns a Fingerprinter keyed with pepper.
func NewFingerprinter(pepper string) (*Fingerprinter, error) {
	if len(pepper) < MinPepperLen {
		return nil, errors.New("pepper must be at least 32 bytes")
	}
	return &Fingerprinter{pepper: []byte(pepper)}, nil
}

// Sum returns the fingerprint of secret.
func (f *Fingerprinter) Sum(secret string) []byte {
	m := hmac.New(sha256.New, f.pepper)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// Matches reports, in constant time, whether secret has the fingerprint want.
func (f *Fingerprinter) Matches(secret string, want []byte) bool {
	return hmac.Equal(f.Sum(secret), want)
}
