package crypto

import (
	"crypto/rand"
	"fmt"
	"strings"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// TokenChars is the number of random base62 characters in every credential we issue:
// 40 characters carry about 238 bits.
const TokenChars = 40

// HintLen is the number of trailing characters of a credential kept to tell credentials apart.
const HintLen = 4

// NewToken returns prefix followed by TokenChars random base62 characters.
func NewToken(prefix string) string {
	var b strings.Builder
	b.Grow(len(prefix) + TokenChars)
	b.WriteString(prefix)
	buf := make([]byte, 64)
	for b.Len() < len(prefix)+TokenChars {
		if _, err := rand.Read(buf); err != nil {
			// crypto/rand never fails on supported platforms (it panics itself since Go 1.24).
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		for _, c := range buf {
			// Rejection sampling: 62*4 = 248 keeps every character equally likely.
			if c < 248 && b.Len() < len(prefix)+TokenChars {
				b.WriteByte(base62[c%62])
			}
		}
	}
	return b.String()
}

// Hint returns the last HintLen characters of token.
func Hint(token string) string {
	if len(token) <= HintLen {
		return token
	}
	return token[len(token)-HintLen:]
}

// WellFormed reports whether s is prefix followed by 32 to 128 base62 characters: the shape of
// every credential we issue (and of longer ones we may issue later). Anything else is rejected
// before a database is asked.
func WellFormed(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) < 32 || len(rest) > 128 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}
