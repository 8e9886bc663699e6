package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mnvhq/mnv/services/platform/config"
)

// The internal callers: the mnv processes that call another's internal methods. Each presents
// its own token (MNV_INTERNAL_TOKEN), so a server knows which one is calling and each rule
// names the callers it admits.
const (
	// CallerGateway is the HTTP edge: the one caller that may speak for a client's network
	// (the client address and the operators' number headers).
	CallerGateway = "gateway"
	// CallerVerification calls accounts (authenticate, debit) and connect (verified numbers).
	CallerVerification = "verification"
	// CallerConnect calls accounts (authenticate, debit); it also talks to the internet.
	CallerConnect = "connect"
	// CallerAccounts calls connect to publish its events (balance, API keys).
	CallerAccounts = "accounts"
)

// MinTokenLength is the shortest internal token a caller may present.
const MinTokenLength = 32

// KnownCallers are the caller names a caller list may use, so that a typo in
// MNV_INTERNAL_CALLERS is an error at start-up rather than a caller refused at run time.
var KnownCallers = []string{CallerGateway, CallerVerification, CallerConnect, CallerAccounts}

// Callers are the internal callers a server accepts: the SHA-256 digests of their tokens, by
// caller name. A server holds digests only, so that no process can present another's token:
// connect, which talks to the internet, must not be able to act as the gateway. A name may have
// several digests, so a caller's token rolls without downtime (add the new digest, roll the
// caller, remove the old one).
type Callers struct {
	entries []callerDigest
}

type callerDigest struct {
	name   string
	digest [sha256.Size]byte
}

// TokenDigest is the digest of an internal token, as MNV_INTERNAL_CALLERS lists it: SHA-256,
// lower-case hex. A fast hash is enough: the tokens are random, 32 characters or more, so there
// is nothing to guess.
func TokenDigest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// CallerEntry is the MNV_INTERNAL_CALLERS entry that admits token as caller name.
func CallerEntry(name, token string) string { return name + ":" + TokenDigest(token) }

// ParseCallers parses MNV_INTERNAL_CALLERS: comma-separated entries name:digest, the digest as
// 64 hex digits (TokenDigest). Names must be KnownCallers; a digest may appear only once, since
// one token for two callers would make either the other.
func ParseCallers(s string) (Callers, error) {
	var c Callers
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, hexDigest, ok := strings.Cut(entry, ":")
		if !ok {
			return Callers{}, fmt.Errorf("entry %d: want name:sha256-hex", i+1)
		}
		if !slices.Contains(KnownCallers, name) {
			return Callers{}, fmt.Errorf("entry %d: unknown caller %q (want one of %s)", i+1, name, strings.Join(KnownCallers, ", "))
		}
		b, err := hex.DecodeString(hexDigest)
		if err != nil || len(b) != sha256.Size {
			return Callers{}, fmt.Errorf("entry %d (%s): the digest must be 64 hex digits (mnvctl keygen internal-token prints it)", i+1, name)
		}
		d := callerDigest{name: name, digest: [sha256.Size]byte(b)}
		for _, e := range c.entries {
			if e.digest == d.digest {
				return Callers{}, fmt.Errorf("entry %d (%s): the same digest as %s's: every caller needs its own token", i+1, name, e.name)
			}
		}
		c.entries = append(c.entries, d)
	}
	return c, nil
}

// With returns a copy of c that also admits token as caller name: for a process that makes the
// tokens itself (the all-in-one) and for tests.
func (c Callers) With(name, token string) Callers {
	return Callers{entries: append(slices.Clone(c.entries), callerDigest{name: name, digest: sha256.Sum256([]byte(token))})}
}

// Empty reports whether c admits nobody.
func (c Callers) Empty() bool { return len(c.entries) == 0 }

// Accepts reports whether token is one of c's callers' tokens.
func (c Callers) Accepts(token string) bool {
	_, ok := c.caller(sha256.Sum256([]byte(token)))
	return ok
}

// Name returns the name of the caller whose token this is (compared as Accepts does): for a
// service's HTTP listener, where a token comes in a header rather than gRPC metadata.
func (c Callers) Name(token string) (string, bool) {
	return c.caller(sha256.Sum256([]byte(token)))
}

// String is c in the MNV_INTERNAL_CALLERS form.
func (c Callers) String() string {
	parts := make([]string, len(c.entries))
	for i, e := range c.entries {
		parts[i] = e.name + ":" + hex.EncodeToString(e.digest[:])
	}
	return strings.Join(parts, ",")
}

// caller returns the name whose digest is d. Every entry is compared, in constant time, so the
// time taken says nothing about which entry matched or how much of it.
func (c Callers) caller(d [sha256.Size]byte) (string, bool) {
	name, found := "", false
	for _, e := range c.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			name, found = e.name, true
		}
	}
	return name, found
}

// HTTPCallerHeader carries a caller's internal token on a request the gateway proxies to a
// service's HTTP listener (verification's CAMARA facade): the request's own Authorization
// header belongs to the client.
const HTTPCallerHeader = "X-Mnv-Caller-Token"

type callerKey struct{}

// Caller returns the internal caller whose token the call carried, whatever its method's rule:
// only the gateway may speak for a client's network (the client address and number headers it
// resolved), so a service believes that metadata only when this is CallerGateway.
func Caller(ctx context.Context) (name string, ok bool) {
	name, ok = ctx.Value(callerKey{}).(string)
	return name, ok
}

// LoadCallers reads MNV_INTERNAL_CALLERS, which every server requires: each has internal
// methods, and a server that admits no caller would refuse them all at run time instead.
func LoadCallers(env *config.Env) (Callers, error) {
	c, err := ParseCallers(env.String("MNV_INTERNAL_CALLERS", ""))
	switch {
	case err != nil:
		return Callers{}, fmt.Errorf("MNV_INTERNAL_CALLERS: %w", err)
	case c.Empty():
		return Callers{}, errors.New("MNV_INTERNAL_CALLERS: required (name:sha256-hex of each caller's token, comma-separated; mnvctl keygen internal-token prints one)")
	}
	return c, nil
}
