// Package seal makes and opens the sealed number blob (docs/api-decisions.md#verification): the
// encryptedMobileNumber an SDK session returns and a verification opens.
//
// A blob is the base64url encoding, without padding, of a [crypto.Keyring] ciphertext
// (AES-256-GCM, the key id inside, see Keyring.Seal) of the claims, with the associated data
// "mnv.verification.blob.v1". The associated data keeps a blob apart from every other
// ciphertext the same keyring seals (contact details, idempotency answers): none of them opens
// as a blob, and a blob opens as nothing else.
//
// # Payload, version 1
//
// The plaintext is compact binary, all integers big-endian:
//
//	version     1 byte, 0x01
//	number      1-byte length, then that many bytes (E.164)
//	client id   1-byte length, then that many bytes
//	session id  1-byte length, then that many bytes
//	operator id 1-byte length, then that many bytes
//	issued at   8 bytes, Unix time in milliseconds
//	expires at  8 bytes, Unix time in milliseconds
//
// and nothing after. There is one encoding per set of claims. A later layout gets a new
// version byte; [Sealer.Open] refuses versions it does not know.
package seal

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Claims are what a blob carries: a number the network identified for an SDK session.
type Claims struct {
	// Number is the mobile number in E.164 (normalised, see platform/phone); empty when the
	// network identified no number (the session can then only be verified as UNDETERMINED).
	Number string
	// ClientID is the client the session belongs to.
	ClientID string
	// SessionID is the SDK session that captured the number.
	SessionID string
	// OperatorID is the operator whose network identified the number; empty when none was.
	OperatorID string
	// IssuedAt is when the blob was made; kept to the millisecond.
	IssuedAt time.Time
	// ExpiresAt is when the blob stops being usable (by default 300 s after IssuedAt);
	// kept to the millisecond.
	ExpiresAt time.Time
}

// ErrInvalid is the one error [Sealer.Open] returns: the blob is not base64url, is too long,
// does not open with this keyring, is not a blob (other associated data), or holds a payload of
// an unknown version, malformed, or with missing or bad fields. It says nothing more, on
// purpose. The API answers it with 400 INVALID_ARGUMENT on encryptedMobileNumber.
var ErrInvalid = errors.New("invalid sealed number")

// MaxLen is the longest blob [Sealer.Open] considers, in characters; longer input is refused
// before it is decoded. Blobs made by [Sealer.Seal] are well below it (at most about 1,500
// characters with every field at its limit).
const MaxLen = 2048

// MaxFieldLen is the longest Number, ClientID, SessionID or OperatorID a blob can carry, in
// bytes.
const MaxFieldLen = 255

const (
	// ad is the associated data of every blob.
	ad = "mnv.verification.blob.v1"
	// payloadV1 is the version byte of the payload layout described in the package comment.
	payloadV1 = 1
	// maxMillis is 9999-12-31T23:59:59.999Z: later times are refused, so every accepted time
	// round-trips through time.UnixMilli.
	maxMillis = 253402300799999
)

var b64 = base64.RawURLEncoding.Strict()

// Sealer seals and opens blobs with a keyring. It is safe for concurrent use.
type Sealer struct {
	k *crypto.Keyring
}

// NewSealer returns a Sealer that seals with k's current key and opens with any key of k, so a
// blob made before a key rotation still opens while the old key stays in the keyring. It
// panics if k is nil.
func NewSealer(k *crypto.Keyring) *Sealer {
	if k == nil {
		panic("seal: nil keyring")
	}
	return &Sealer{k: k}
}

// Seal validates c and returns its blob: base64url without padding, safe in JSON and URLs.
// Two blobs of the same claims differ (a fresh nonce each time).
//
// The claims must have: Number in E.164 shape (a '+', then 7 to 15 digits, the first not 0; full
// validation is the caller's, with platform/phone), non-empty ClientID, SessionID and OperatorID
// of valid UTF-8 and at most [MaxFieldLen] bytes, IssuedAt after 1970-01-01, and ExpiresAt after
// IssuedAt and no later than year 9999, compared at millisecond precision. Times are truncated
// to the millisecond. An error says which rule failed, never the number.
func (s *Sealer) Seal(c Claims) (string, error) {
	if err := validate(c); err != nil {
		return "", err
	}
	blob := b64.EncodeToString(s.k.Seal(encodePayload(c), []byte(ad)))
	if len(blob) > MaxLen { // unreachable with the field limits and 32-byte key ids
		return "", errors.New("seal: blob longer than MaxLen")
	}
	return blob, nil
}

// Open returns the claims of a blob made by [Sealer.Seal] with a key of this keyring, or
// [ErrInvalid]. Times come back in UTC, at millisecond precision.
//
// Open checks that the blob is authentic and well formed, nothing else. In particular it does
// not check ExpiresAt against the clock, nor ClientID against the caller: an expired blob is a
// verification with status EXPIRED (not an error), and a blob of another client is 400
// INVALID_ARGUMENT like a blob that does not open. The caller must make both checks, and the
// single-use check on SessionID.
//
// Only base64url without padding is accepted: standard base64 ('+', '/'), '=' padding,
// whitespace and line breaks are refused rather than tolerated, so each blob has exactly one
// spelling.
func (s *Sealer) Open(blob string) (Claims, error) {
	if len(blob) == 0 || len(blob) > MaxLen {
		return Claims{}, ErrInvalid
	}
	for i := 0; i < len(blob); i++ {
		if !isURLAlphabet(blob[i]) {
			return Claims{}, ErrInvalid
		}
	}
	raw, err := b64.DecodeString(blob)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	payload, err := s.k.Open(raw, []byte(ad))
	if err != nil {
		return Claims{}, ErrInvalid
	}
	c, ok := decodePayload(payload)
	if !ok || validate(c) != nil {
		return Claims{}, ErrInvalid
	}
	return c, nil
}

func isURLAlphabet(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_'
}

// validate applies the rules of Seal. Open applies them too, so whatever Open returns can be
// sealed again.
func validate(c Claims) error {
	if c.Number != "" && !phone.IsE164Shape(c.Number) {
		return errors.New("seal: Number is not E.164")
	}
	for _, f := range []struct {
		name, v  string
		optional bool
	}{
		{"ClientID", c.ClientID, false}, {"SessionID", c.SessionID, false}, {"OperatorID", c.OperatorID, true},
	} {
		switch {
		case f.v == "" && !f.optional:
			return errors.New("seal: " + f.name + " is empty")
		case len(f.v) > MaxFieldLen:
			return errors.New("seal: " + f.name + " is longer than 255 bytes")
		case !utf8.ValidString(f.v):
			return errors.New("seal: " + f.name + " is not valid UTF-8")
		}
	}
	issued, expires := c.IssuedAt.UnixMilli(), c.ExpiresAt.UnixMilli()
	switch {
	case c.IssuedAt.IsZero() || issued <= 0:
		return errors.New("seal: IssuedAt is not after 1970")
	case expires <= issued:
		return errors.New("seal: ExpiresAt is not after IssuedAt")
	case expires > maxMillis:
		return errors.New("seal: ExpiresAt is after year 9999")
	}
	return nil
}

// encodePayload writes the version 1 layout. c must be valid.
func encodePayload(c Claims) []byte {
	out := make([]byte, 0, 1+4+len(c.Number)+len(c.ClientID)+len(c.SessionID)+len(c.OperatorID)+16)
	out = append(out, payloadV1)
	for _, f := range []string{c.Number, c.ClientID, c.SessionID, c.OperatorID} {
		out = append(out, byte(len(f)))
		out = append(out, f...)
	}
	out = binary.BigEndian.AppendUint64(out, uint64(c.IssuedAt.UnixMilli()))
	out = binary.BigEndian.AppendUint64(out, uint64(c.ExpiresAt.UnixMilli()))
	return out
}

// decodePayload reads the version 1 layout. It checks the structure only; validate checks the
// values.
func decodePayload(p []byte) (Claims, bool) {
	if len(p) < 1 || p[0] != payloadV1 {
		return Claims{}, false
	}
	p = p[1:]
	var fields [4]string
	for i := range fields {
		if len(p) < 1 || len(p) < 1+int(p[0]) {
			return Claims{}, false
		}
		n := int(p[0])
		fields[i] = string(p[1 : 1+n])
		p = p[1+n:]
	}
	if len(p) != 16 {
		return Claims{}, false
	}
	issued, expires := binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])
	if issued > maxMillis || expires > maxMillis {
		return Claims{}, false
	}
	return Claims{
		Number:     fields[0],
		ClientID:   fields[1],
		SessionID:  fields[2],
		OperatorID: fields[3],
		IssuedAt:   time.UnixMilli(int64(issued)).UTC(),
		ExpiresAt:  time.UnixMilli(int64(expires)).UTC(),
	}, true
}

// Session secrets: what a NETWORK_API session keeps of its OAuth flow (the PKCE verifier while
// the authorization is pending, then the operator's access token), sealed with the same keyring
// and bound to the kind of secret and the session's row, so one never opens as another, nor as
// another session's.
const (
	SecretPKCEVerifier = "pkce"
	SecretAccessToken  = "token"
)

func secretAD(kind, sessionID string) []byte {
	return []byte("mnv.verification.session." + kind + ".v1:" + sessionID)
}

// SealSecret seals a session secret of kind for the session sessionID.
func (s *Sealer) SealSecret(kind, sessionID string, plain []byte) []byte {
	return s.k.Seal(plain, secretAD(kind, sessionID))
}

// OpenSecret opens what SealSecret sealed for the same kind and session.
func (s *Sealer) OpenSecret(kind, sessionID string, sealed []byte) ([]byte, error) {
	return s.k.Open(sealed, secretAD(kind, sessionID))
}
