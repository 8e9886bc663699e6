// Package idemkey holds what the gateway and the services share of the Idempotency-Key header
// (docs/api-decisions.md#idempotency):
// its gRPC metadata names and its grammar. It lives apart from idempotency, which keeps the keys
// in PostgreSQL, so the gateway (and the API reference it serves) uses them without linking a
// database driver.
package idemkey

const (
	// MD carries the request's Idempotency-Key.
	MD = "idempotency-key"
	// MDReplayed marks an answer replayed from an earlier request: the Idempotent-Replayed
	// header.
	MDReplayed = "idempotent-replayed"
)

// MaxLen is the longest key, in bytes (which, every byte being ASCII, are characters).
const MaxLen = 255

// Pattern is Valid as a regular expression (ECMA-262 and Go's RE2 read it alike), for the API
// reference: 1 to 255 visible ASCII characters, U+0021 to U+007E. No space: a key is a token,
// like the credentials, and a space (or a tab) in one is a client's mistake, not part of its
// key; HTTP trims them at the ends anyway.
const Pattern = `^[!-~]{1,255}$`

// Rule says Pattern in words, for errors and the reference.
const Rule = "1 to 255 visible ASCII characters (letters, digits and punctuation; no spaces)"

// Valid reports whether k is a well-formed key.
func Valid(k string) bool {
	if k == "" || len(k) > MaxLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '!' || k[i] > '~' {
			return false
		}
	}
	return true
}
